"""A bench check's one line of why: the result first, the machine's conditions in one short
clause, bounded; each unit's detail stays in the check's findings and tables.

The saved checks are built from chosen values (`benchsim.saved_check`); the machine's state of
each unit is what `qualify.bench.machine` and `gputelemetry` record, written by the test: other
processes taking CPU, a GPU co-tenant that came, a throttled GPU cannot be ordered on this
machine, so recorded states stand in for them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchsim import saved_check, steady

from qualify.bench import check as bench
from qualify.bench import conditions, tables
from qualify.bench.judge import SLOWER
from qualify.bench.why import MAX_WHY
from qualify.core.runstore import read_json, write_json
from qualify.core.verdicts import Verdict
from qualify.records.bench import BenchUnit

#: What `machine.foreign_load` records of a unit that shared the CPU with a compiler.
BUSY = {
    "foreign_cores": 0.93,
    "load_1m": 3.2,
    "top": ["4242:cc1plus 0.61 cores", "977:python3 0.22 cores", "12:kworker/u8:3 0.05 cores"],
}


def unit_flags(unit: dict[str, Any]) -> list[str]:
    """`conditions.unit_flags` of a unit as saved (one that ran, unless it says)."""
    return conditions.unit_flags(BenchUnit.model_validate({"ok": True, **unit}))


def disturb(folder: Path, busy: int, co_tenant: int = 0, every: int = 3) -> list[dict[str, Any]]:
    """Mark `busy` pair units (one in `every`) as run beside other processes' CPU and
    `co_tenant` units (from the second on, every fifth) with a GPU co-tenant that came; the units."""
    schedule = read_json(folder / "schedule.json")
    schedule.pop("schema_version", None)
    pair_units = [u for u in schedule["units"] if u["phase"] == "pair"]
    for unit in pair_units[::every][:busy]:
        unit["host"] = dict(BUSY)
    for unit in pair_units[1::5][:co_tenant]:
        unit["env_notes"] = [
            "GPU co-tenant after the unit: 5151:llama-server",
            "GPU co-tenant before the unit: 5151:llama-server",
        ]
    write_json(folder / "schedule.json", schedule)
    return list(schedule["units"])


def test_the_result_comes_first_and_the_machine_s_conditions_in_one_clause(tmp_path: Path) -> None:
    """Before, the why began with every flagged unit and the processes beside it (about 1 100
    characters for 7 units here) and gave the result after it only as counts ("2 NO CHANGE"),
    without a ratio or an interval."""
    data = {"tps": steady(12, 100, 100, 0.01), "tg": steady(12, 50, 50, 0.01, seed=2)}
    saved = saved_check(tmp_path, data, looks=[12])
    units = disturb(tmp_path, busy=7)
    judged = bench.judge(saved)
    assert judged.verdict is Verdict.WARN
    why = judged.reason
    assert len(why) <= MAX_WHY, len(why)
    # The result first: every test with its finding, R and interval, before any word of the machine.
    position = 0
    for label, fact in judged.facts.tests.items():
        said = f"{label} {fact.finding}, R = {fact.ratio:.4f} [{fact.low:.4f}, {fact.high:.4f}]"
        assert why.find(said) >= position, (said, why)
        position = why.find(said)
    assert why.startswith(tuple(judged.facts.tests))
    # One clause, counted from the units as the judge flagged them, after the result.
    flagged = sum(1 for u in units if u["phase"] == "pair" and unit_flags(u))
    pair_units = sum(1 for u in units if u["phase"] == "pair")
    clause = f"CPU taken by other processes during {flagged} of {pair_units} units"
    assert why.find(clause) > position, why
    # No unit's detail in the why; all of it in the findings and the machine's table.
    assert "cc1plus" not in why and "unit 2 (pair" not in why
    (warn,) = [f for f in judged.findings if f.verdict is Verdict.WARN]
    assert warn.message.count("cc1plus") == conditions.LISTED_UNITS < flagged  # the first few, then a count
    table = next(t for t in judged.tables if t.title.startswith("Machine state"))
    assert sum("cc1plus" in str(row[-1]) for row in table.rows) == flagged


def test_a_gpu_co_tenant_makes_the_why_say_invalid_after_the_result(tmp_path: Path) -> None:
    """Before, the why of a check made ERROR by co-tenants began "candidate: INVALID:
    environment changed during unit 3 …: GPU co-tenant … (+5 more)", the result after it."""
    saved = saved_check(tmp_path, {"tps": steady(12, 100, 100, 0.01)}, looks=[12])
    units = disturb(tmp_path, busy=7, co_tenant=3)
    judged = bench.judge(saved)
    assert judged.verdict is Verdict.ERROR
    fact = judged.facts.tests["tps"]
    assert judged.reason.startswith(f"tps {fact.finding}, R = {fact.ratio:.4f}")
    came = sum(1 for u in units if u.get("env_notes"))
    ran = sum(1 for u in units if u["phase"] in ("pair", "warmup"))
    assert f"INVALID: a GPU co-tenant came or went during {came} of {ran} units" in judged.reason
    assert "5151" not in judged.reason and len(judged.reason) <= MAX_WHY
    assert sum("co-tenant" in f.message for f in judged.findings) == 2 * came  # each unit's note kept


def test_many_tests_a_long_stop_reason_and_a_busy_machine_stay_bounded_deciding_test_first(
    tmp_path: Path,
) -> None:
    """Eight tests, one of them a regression, a stop reason naming tests, 12 flagged units: the
    why holds the regression first with its interval, counts the tests it has no room for,
    says the machine was busy and stays within its bound. Before, it gave the regression alone,
    the other tests as counts, no word of the busy machine, and the whole stop reason."""
    data = {f"t{i}": steady(12, 100, 100, 0.01, seed=i) for i in range(7)}
    data["slow"] = steady(12, 100, 85, 0.005, seed=9)
    saved = saved_check(tmp_path, data, looks=[12])
    disturb(tmp_path, busy=12, every=2)
    schedule = read_json(tmp_path / "schedule.json")
    schedule.pop("schema_version", None)
    schedule["stop_reason"] = "the planned maximum ran; 9 test(s) still inconclusive: " + ", ".join(
        f"member-{i}: pp{i}" for i in range(9)
    )
    write_json(tmp_path / "schedule.json", schedule)
    judged = bench.judge(saved)
    assert judged.verdict is Verdict.FAIL
    slow = judged.facts.tests["slow"]
    assert slow.finding == SLOWER and slow.regression
    assert judged.reason.startswith(f"slow SLOWER (a regression beyond 3.0%), R = {slow.ratio:.4f}")
    assert len(judged.reason) <= MAX_WHY, len(judged.reason)
    named = [label for label in data if f"{label} " in judged.reason.split(" — ")[0]]
    assert f"+{len(data) - len(named)} more: {len(data) - len(named)} NO CHANGE" in judged.reason
    assert "CPU taken by other processes during 12 of 24 units" in judged.reason


def test_the_why_reads_its_figures_from_the_table(tmp_path: Path) -> None:
    """The why and the results table say one thing: the interval in the why is the table's."""
    saved = saved_check(tmp_path, {"tps": steady(12, 100, 104, 0.01)}, looks=[12])
    judged = bench.judge(saved)
    row = judged.tables[0].rows[0]
    assert f"[{row[4]}]" in judged.reason
    low, high = (float(v) for v in str(row[4]).split(", "))
    assert math.isclose(low, judged.facts.tests["tps"].low, rel_tol=1e-4)
    assert math.isclose(high, judged.facts.tests["tps"].high, rel_tol=1e-4)
    assert judged.tables[0].columns[4] == tables.INTERVAL_COLUMN


def test_a_busy_shared_host_gives_findings_of_a_few_lines(tmp_path: Path) -> None:
    """Before, one finding listed every flagged unit with the processes beside it, and another
    every process holding a GPU (`pid:command`, 300 on a shared desktop here): about one and a
    half screens of the report. Now the first few of each, then how many more; schedule.json
    keeps them all."""
    saved = saved_check(tmp_path, {"tps": steady(12, 100, 100, 0.01)}, looks=[12])
    disturb(tmp_path, busy=12, every=2)
    schedule = read_json(tmp_path / "schedule.json")
    schedule.pop("schema_version", None)
    holders = [f"{4000 + n}:kworker-gpu-{n}" for n in range(300)]
    schedule["baseline_env"] = {"gpu_processes": holders}
    write_json(tmp_path / "schedule.json", schedule)
    judged = bench.judge(saved)
    [held] = [f.message for f in judged.findings if f.message.startswith("other processes held the GPU")]
    assert held == (
        "other processes held the GPU throughout: "
        + ", ".join(holders[: bench.LISTED_PROCESSES])
        + " and 295 more"
    )
    [loaded] = [f.message for f in judged.findings if "under other processes' load" in f.message]
    assert loaded.startswith("12 of 24 units ran throttled or under other processes' load")
    assert loaded.count("unit ") == conditions.LISTED_UNITS
    assert loaded.endswith("; and 9 more (the machine-state table lists each)")
    assert len(loaded) < 600 and len(held) < 300


def test_the_results_table_says_which_way_its_delta_points(tmp_path: Path) -> None:
    """Before, Δ = R − 1 stood alone beside the two medians ("1.60 → 1.62 GFLOP/s", "−1.09 %"):
    the paired estimate can point the other way from the medians, and its sign means the
    opposite for a time than for a throughput. Now it says faster or slower."""
    saved = saved_check(tmp_path, {"tps": steady(12, 100, 106, 0.005)}, looks=[12])
    judged = bench.judge(saved)
    row = judged.tables[0].rows[0]
    assert str(row[3]).startswith("+") and str(row[3]).endswith("% faster"), row
    assert "faster or slower said beside it" in judged.tables[0].title
    assert tables._direction(0.98, True) == " slower" and tables._direction(0.98, False) == " faster"
    assert tables._direction(1.0, True) == ""


def test_the_machine_state_table_leaves_out_what_was_never_read(tmp_path: Path) -> None:
    """Before, an engine on the CPU (no GPU telemetry) got five GPU columns of "—" in every row.
    Now a column nothing was read for is left out; one read for any unit stays."""
    saved = saved_check(tmp_path, {"tps": steady(12, 100, 100, 0.01)}, looks=[12])
    disturb(tmp_path, busy=3)
    table = next(t for t in bench.judge(saved).tables if t.title.startswith("Machine state"))
    assert table.title.endswith("(GPU telemetry not recorded)")
    assert list(table.columns) == ["#", "pair", "role", "load 1 min", "other CPU, cores", "flag"]
    assert all(len(row) == len(table.columns) for row in table.rows)

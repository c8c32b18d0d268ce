"""Running a bench check's units: warm-up, ABBA pairs, planned looks, a time budget.

With more than one candidate role (a run set measures its members' bench once), each block
runs pinned and every candidate in a Williams order (`qualify.core.designs`), and the schedule
goes on while any candidate has a test undecided.

Every unit is one run of the check's command for one role; the units of a block run one after
another, or, with `together`, at the same time on one CPU (`qualify.bench.together`), the
machine then read around the block. Its output is kept under
`<role>/units/`, its values go to `<role>/samples.parquet`, and the schedule (units in run
order with timestamps, outcome and the machine's state before and after) to `schedule.json`.
While a unit runs, the GPU's clocks, power, temperature and throttle reasons are sampled
(`qualify.bench.gputelemetry`: `gpu` on the unit) and the CPU other processes took is counted
(`qualify.bench.machine`: `host`); where no GPU telemetry answers, the schedule says so once
(`gpu_telemetry`) and the units carry no `gpu`.
What costs time between units is kept small, since it runs on the schedule's clock: the
machine is read once between two units (that state is the one unit's "after" and the next
one's "before"), each unit is appended to `units.jsonl` as it ends, and `schedule.json`, the
samples and the roles' measurements are written at every look and when the schedule stops,
however it stops (an interrupt included).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from qualify.bench import conditions, gputelemetry, machine, serverblocks, together
from qualify.bench.data import (
    SERVERS,
    UnitOutputInvalid,
    UnitTest,
    read_llama_bench,
    read_metrics_unit,
    tests_differ,
)
from qualify.bench.design import block_order, candidate_view, complete_pairs
from qualify.bench.judge import INCONCLUSIVE, evaluate, series_from, unit_center
from qualify.bench.kind import KIND
from qualify.bench.params import BenchParams
from qualify.core import process
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.progress import Progress
from qualify.core.runstore import now_iso, write_json, write_parquet
from qualify.records.bench import (
    BenchMeasurement,
    BenchSchedule,
    BenchUnit,
    HostLoad,
    MachineState,
    StoppingRule,
    Telemetry,
)
from qualify.stats import abtests

DEFAULT_MARGIN = KIND.limit_defaults()["speed_margin"]


class Schedule:
    """The state of one bench check's measurement while it runs."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.params = BenchParams.of(ctx.spec)
        #: pinned first, then the candidate roles (one in a run, a set's members in a set).
        self.roles = ("pinned", *(r for r in ctx.roles if r not in ("pinned", "reference")))
        self.units: list[BenchUnit] = []
        self.values: dict[int, dict[str, tuple[float, ...]]] = {}
        self.kinds: dict[str, tuple[str, bool]] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {role: [] for role in self.roles}
        self.configs: dict[str, dict[str, dict[str, Any]]] = {role: {} for role in self.roles}
        self.engine: dict[str, dict[str, Any]] = {role: {} for role in self.roles}
        self.gpu_source, why = gputelemetry.probe()
        self.telemetry = (
            Telemetry(source=self.gpu_source.name, described=self.gpu_source.described)
            if self.gpu_source
            else Telemetry(source=None, reason=why)
        )
        if self.gpu_source is None:
            ctx.echo(f"bench: GPU telemetry {why}")
        self.baseline = machine.snapshot()
        #: The machine's state since the last unit ended: the next unit's "before".
        self.between = self.baseline
        self.between_procs = machine.process_times()
        #: When the schedule looks at its tests and stops (`make_stopping_rule`); None until the
        #: first unit has said which tests there are.
        self.stopping_rule: StoppingRule | None = None
        self.stop_reason = ""
        self.started_at = now_iso()
        # The schedule's own wall time: in a run set it is all the time its members' bench took
        # (each member's check only reads this measurement), so it is saved with it.
        self.clock = time.monotonic()
        #: How a block's units ran at the same time (`together`); None while they run in turn.
        self.together: str | None = None

    def run_unit(self, role: str, phase: str, pair: int | None) -> bool:
        """Run one unit; False when it crashed, timed out, or its output was unreadable."""
        return self.run_units([role], phase, pair)

    def run_units(self, roles: Sequence[str], phase: str, pair: int | None) -> bool:
        """Run one unit per role of `roles` at the same time (with `together`, on one CPU; one
        role: a unit alone); False when any crashed, timed out, or its output was unreadable.
        The machine is read around them all: every unit of the block shares that state."""
        first = len(self.units)
        before, procs_before = self.between, self.between_procs
        sampler = gputelemetry.UnitSampler(self.gpu_source)
        sampler.start()
        try:
            if len(roles) == 1:
                done = [self._measure(roles[0], first, phase, pair, [])]
            else:
                # Each gets a share of the one CPU: its time limit grows by as many shares.
                prefix, self.together = together.prefix()
                n = len(roles)
                done = together.at_once(
                    lambda i: self._measure(roles[i], first + i, phase, pair, prefix, n), n
                )
        finally:
            gpu = sampler.stop()
        after = self.between = machine.snapshot()
        self.between_procs = machine.process_times()
        host = machine.foreign_load(before, after, procs_before, self.between_procs)
        for (entry, tests), role in zip(done, roles, strict=True):
            where = f"unit {entry['index']} ({role}, pair {pair})"
            self.record(entry, tests, (before, after), host, gpu, where)
        return all(unit.ok for unit in self.units[first:])

    def _measure(
        self, role: str, index: int, phase: str, pair: int | None, prefix: Sequence[str], shares: int = 1
    ) -> tuple[dict[str, Any], list[UnitTest]]:
        """Run the unit numbered `index` for `role` (its command behind `prefix`): what the
        schedule records of it, and its tests (none when it failed)."""
        ctx = self.ctx
        units_dir = ctx.role_dir(role) / "units"
        units_dir.mkdir(exist_ok=True)
        out_file = units_dir / f"{index:03d}.out"
        entry: dict[str, Any] = {"index": index, "role": role, "phase": phase, "pair": pair}
        entry["output"] = str(out_file.relative_to(ctx.folder))
        tests: list[UnitTest] = []
        try:
            argv = [*prefix, *ctx.argv(self.params.run, role, out_file=str(out_file))]
            llama = self.params.format == "llama-bench"
            done = process.run(
                argv,
                log=ctx.log(role, "units"),
                env=ctx.env(role),
                cwd=ctx.role_dir(role),
                timeout_s=None if ctx.spec.timeout_s is None else ctx.spec.timeout_s * shares,
                echo=ctx.echo,
                separate_stdout=llama,
            )
            if llama:
                out_file.write_text(done.stdout or "", encoding="utf-8")
            entry.update(
                started_at=done.started_at,
                duration_s=round(done.duration_s, 3),
                outcome=done.describe(),
                ok=done.ok,
                output_tail=list(done.output_tail[-8:]),
            )
            if done.ok:
                if llama:
                    tests = read_llama_bench(out_file.read_text(encoding="utf-8"), str(out_file))
                else:
                    tests = read_metrics_unit(out_file)
                if not tests:
                    entry.update(ok=False, outcome="exit code 0 but no test results in its output")
                elif self.kinds and (changed := tests_differ(tests, set(self.kinds))) is not None:
                    # The pairs and Holm levels were planned for the first unit's tests; a unit
                    # with other tests would leave them short of their level.
                    entry.update(ok=False, outcome=f"its tests differ from the first unit's ({changed})")
        except UnitOutputInvalid as exc:
            entry.update(ok=False, outcome=f"unreadable output: {exc}")
        except QualifyError as exc:
            entry.update(ok=False, error={"message": exc.message, "hint": exc.hint})
        return entry, tests

    def record(
        self,
        entry: dict[str, Any],
        tests: list[UnitTest],
        around: tuple[MachineState, MachineState],
        host: HostLoad,
        gpu: dict[str, Any] | None,
        where: str,
    ) -> None:
        """Add a finished unit: the machine's state `around` it, its host load and GPU
        telemetry, its tests and their configuration; kept, saved to units.jsonl, and its
        conditions echoed (as `where`) when a reviewer should weigh them."""
        before, after = around
        entry.update(
            env_before=before, env_after=after, env_notes=machine.changes(before, after, self.baseline)
        )
        entry["host"] = host
        if gpu is not None:
            entry["gpu"] = gpu
        entry["tests"] = [t.label for t in tests]
        # Every unit's configuration is kept: a field that changes later must not go unseen.
        entry["configs"] = {t.label: t.config for t in tests}
        unit = BenchUnit.model_validate(entry)
        if unit.phase == "pair" and (flags := conditions.unit_flags(unit)):
            self.ctx.echo(f"{where}: {'; '.join(flags)}")
        self.units.append(unit)
        if unit.ok:
            self.keep(unit.index, unit.role, unit.phase, unit.pair, tests)
        self.log_unit(unit)

    def log_unit(self, unit: BenchUnit) -> None:
        """One line per unit as it ends: what ran, should the run die before the next save."""
        with (self.ctx.folder / "units.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(unit.to_json(), default=str) + "\n")

    def keep(self, index: int, role: str, phase: str, pair: int | None, tests: list[UnitTest]) -> None:
        for test in tests:
            self.kinds.setdefault(test.label, (test.unit, test.higher_is_better))
            self.configs[role].setdefault(test.label, test.config)
            self.engine[role].update(test.engine)
            if phase != "pair":
                continue  # warm-up values are thrown away (kept only in the unit's output file)
            # Every repetition is saved; the first `discard_reps` of each unit are left out of
            # the analysis (a GPU's first repetition can run at its idle clock).
            self.values.setdefault(index, {})[test.label] = test.values[self.params.discard_reps :]
            for rep, value in enumerate(test.values):
                self.rows[role].append(
                    {
                        "unit": index,
                        "pair": pair,
                        "test": test.label,
                        "rep": rep,
                        "value": value,
                        "ns": test.ns[rep] if rep < len(test.ns) else None,
                        "unit_name": test.unit,
                        "higher_is_better": test.higher_is_better,
                    }
                )

    def make_stopping_rule(self) -> StoppingRule:
        """The group-sequential design: the pairs at which to look, the first Holm level and the
        pairs it needs, the family-wise alpha, the maximum pairs, the time budget and the margin.
        Saved in schedule.json under its original key, "plan"."""
        alpha, looks = float(self.params.alpha), self.params.looks
        tests = len(self.kinds)
        level = abtests.first_holm_level(alpha, tests, looks)
        computed = abtests.min_pairs(level)
        first = max(computed, self.params.min_pairs or 0)
        return StoppingRule(
            alpha=alpha,
            looks=list(abtests.planned_looks(first, self.params.max_pairs, looks)),
            tests=tests,
            first_level=level,
            computed_min_pairs=computed,
            max_pairs=self.params.max_pairs,
            budget_s=self.params.budget_s,
            margin=self.ctx.spec.limits.get("speed_margin", DEFAULT_MARGIN),
        )

    def pairs_done(self) -> int:
        return complete_pairs(self.units, self.roles)

    def open_tests(self) -> list[str]:
        """Tests still INCONCLUSIVE for some candidate at the current pairs ("role: test")."""
        rule = self.stopping_rule
        assert rule is not None
        found = []
        for role in self.roles[1:]:
            center = unit_center(self.params.format, self.params.together)
            series = series_from(candidate_view(self.units, role), self.values, self.kinds, center)
            assert rule.margin is not None  # a rule this schedule made holds its margin
            outcomes = evaluate(series, rule.looks, rule.alpha, rule.margin, self.params.gate)
            prefix = f"{role}: " if len(self.roles) > 2 else ""
            found += [prefix + o.label for o in outcomes if o.finding == INCONCLUSIVE]
        return found

    def save(self) -> None:
        ctx = self.ctx
        document = BenchSchedule(
            started_at=self.started_at,
            duration_s=round(time.monotonic() - self.clock, 3),
            plan=self.stopping_rule,  # the key every saved schedule holds
            stop_reason=self.stop_reason,
            pairs=self.pairs_done(),
            roles=list(self.roles),
            design=("ABBA" if len(self.roles) == 2 else f"Williams, {len(self.roles)} roles")
            + (f", {self.together}" if self.together else ""),
            baseline_env=self.baseline,
            gpu_telemetry=self.telemetry,
            units=self.units,
        )
        write_json(ctx.folder / "schedule.json", document.to_json())
        for role in self.roles:
            write_parquet(ctx.role_dir(role) / "samples.parquet", _frame(self.rows[role]))
            measured = BenchMeasurement(
                role=role, arm=ctx.arms[role].arm.name, configs=self.configs[role], engine=self.engine[role]
            )
            ctx.save(role, measured.to_json())


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    columns = ["unit", "pair", "test", "rep", "value", "ns", "unit_name", "higher_is_better"]
    return pd.DataFrame(rows, columns=columns)


def run_schedule(ctx: CheckContext) -> None:
    """Warm-up, then blocks (ABBA pairs for one candidate) until every test of every candidate
    is decided at a planned look, the planned maximum is reached, the time budget would be
    exceeded, or a unit crashes."""
    schedule = Schedule(ctx)
    if "pinned" not in ctx.roles or len(schedule.roles) < 2 or "reference" in ctx.roles:
        schedule.stop_reason = f"a bench check compares pinned and candidate; roles {list(ctx.roles)}"
        hint = 'use roles = ["pinned", "candidate"]'
        error = {"message": schedule.stop_reason, "hint": hint}
        schedule.units.append(
            BenchUnit.model_validate(
                {"index": 0, "role": "pinned", "phase": "setup", "pair": None, "ok": False, "error": error}
            )
        )
        schedule.save()
        return
    try:
        if _warm_up(schedule):
            _pairs(schedule)
    finally:
        schedule.save()


def _warm_up(schedule: Schedule) -> bool:
    """One thrown-away unit per role (when the plan asks); False when one failed."""
    if not schedule.params.warmup:
        return True
    if schedule.params.format == SERVERS:
        if not serverblocks.run_block(schedule, schedule.roles, "warmup", None):
            schedule.stop_reason = "the warm-up block failed"
            return False
        return True
    if schedule.params.together:
        schedule.ctx.advance(Progress("block"))
        if not schedule.run_units(schedule.roles, "warmup", None):
            failed = [u.role for u in schedule.units if not u.ok]
            schedule.stop_reason = f"the {failed[0]} warm-up unit failed"
            return False
        return True
    for role in schedule.roles:
        schedule.ctx.advance(Progress(role))
        if not schedule.run_unit(role, "warmup", None):
            schedule.stop_reason = f"the {role} warm-up unit failed"
            return False
    return True


# How a schedule's stop reason begins when its last look left tests undecided; a member of a run
# set reads it to tell whether the tests still open were its own.
PLANNED_MAXIMUM = "the planned maximum ran"


def _pairs(schedule: Schedule) -> None:
    """Blocks of units until a stop rule holds; the stop reason is left on `schedule`."""
    ctx = schedule.ctx
    budget = schedule.params.budget_s
    started = time.monotonic()
    pair, look = 0, 0
    while True:
        if schedule.stopping_rule is None and schedule.kinds:
            schedule.stopping_rule = schedule.make_stopping_rule()
        planned = schedule.stopping_rule.looks if schedule.stopping_rule else [1]
        if schedule.stopping_rule is not None and pair >= planned[look]:
            schedule.save()
            open_tests = schedule.open_tests()
            if not open_tests:
                schedule.stop_reason = f"every test decided at look {look + 1} of {len(planned)}"
                break
            look += 1
            if look >= len(planned):
                schedule.stop_reason = (
                    f"{PLANNED_MAXIMUM}; {len(open_tests)} test(s) still inconclusive: "
                    + ", ".join(open_tests)
                )
                break
            ctx.echo(
                f"look {look}: {len(open_tests)} test(s) inconclusive, going on to {planned[look]} pairs"
            )
            continue
        durations = [u.duration_s or 0.0 for u in schedule.units if u.phase == "pair"]
        # A unit of llama-bench is one role's turn; a block of servers, or of units together,
        # holds every role at once.
        blocks = schedule.params.format == SERVERS or schedule.params.together
        turns = 1 if blocks else len(schedule.roles)
        per_pair = turns * sum(durations) / len(durations) if durations else 0.0
        if budget is not None and pair and time.monotonic() - started + per_pair > float(budget):
            schedule.stop_reason = f"the time budget of {float(budget):g} s would be exceeded"
            break
        pair += 1
        crashed = None
        # Pairs planned so far: the current look's (unknown before the first unit's tests).
        planned_now = planned[look] if schedule.stopping_rule else None
        order = block_order(schedule.roles, pair)
        if blocks:
            ctx.advance(Progress("block", pair - 1, planned_now, "pairs"))
            if schedule.params.format == SERVERS:
                ran = serverblocks.run_block(schedule, order, "pair", pair)
            else:
                ran = schedule.run_units(order, "pair", pair)
            if not ran:
                failed = [u for u in schedule.units if u.pair == pair and not u.ok]
                crashed = failed[0].role if failed else "server"
        for role in () if blocks else order:
            ctx.advance(Progress(role, pair - 1, planned_now, "pairs"))
            if not schedule.run_unit(role, "pair", pair):
                crashed = role
                break
        if crashed:
            schedule.stop_reason = f"a {crashed} unit failed in pair {pair}"
            break
        if schedule.stopping_rule is None and not schedule.kinds:
            schedule.stop_reason = "no unit reported any test"
            break

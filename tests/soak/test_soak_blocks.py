"""Interleaving a soak's roles in ABBA blocks (`block_s`): the order, and a real interleaved soak
against the deliberately leaking stand-in (tests/soak/broken_chat_server.py: a real engine
cannot be made to leak on demand; pinned runs the same program without the fault).

The point of blocks is that each server stays up across its blocks, so a leak keeps adding up
while the other role is loaded; the tests check exactly that, and that the schedule, the
compaction offsets and the role clocks are the same for both roles."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest
from soakrig import cmdline, run_soak, soak_spec

from qualify.core.errors import QualifyError
from qualify.core.verdicts import Verdict
from qualify.soak import check as soak
from qualify.soak import kind
from qualify.soak.blocks import plan_blocks

#: Its heavy tests run with nothing heavy beside them (tests/tiers.py): a soak judges its
#: servers' latencies over time. The stand-in servers mostly wait, so several such tests run at
#: once.
pytestmark = pytest.mark.quiet

HELPER = Path(__file__).resolve().parent / "broken_chat_server.py"
SERVER = f"{sys.executable} {HELPER} {{port}} {{fault}}"
# A 16 MiB budget that the stand-in's leak (2 MiB a request) passes; latency drift left loose.
LEAK_LIMITS = {"max_rss_growth_mib": 16.0, "leak_margin": 0.0, "max_ttft_drift_ms": 1000.0,
               "max_tpot_drift_ms": 1000.0, "drift_margin": 0.0}  # fmt: skip


def test_blocks_alternate_abba_and_cover_each_roles_duration() -> None:
    blocks = plan_blocks(("pinned", "candidate"), 100, 30)
    assert [(b.role, b.index) for b in blocks] == [
        ("pinned", 0), ("candidate", 0), ("candidate", 1), ("pinned", 1),
        ("pinned", 2), ("candidate", 2), ("candidate", 3), ("pinned", 3),
    ]  # fmt: skip
    for role in ("pinned", "candidate"):
        spans = [(b.start_s, b.end_s) for b in blocks if b.role == role]
        assert spans == [(0, 30), (30, 60), (60, 90), (90, 100)]  # the last one is shorter
        assert {b.count for b in blocks if b.role == role} == {4}


@pytest.mark.parametrize("block_s", [0, 100, 250, -5])
def test_without_blocks_the_roles_run_one_after_the_other(block_s: float) -> None:
    blocks = plan_blocks(("pinned", "candidate"), 100, block_s)
    assert [(b.role, b.index, b.count, b.start_s, b.end_s) for b in blocks] == [
        ("pinned", 0, 1, 0, 100),
        ("candidate", 0, 1, 0, 100),
    ]


def test_a_block_holds_its_own_span_only() -> None:
    first, *_ = plan_blocks(("pinned", "candidate"), 20, 10)
    assert first.contains(0) and first.contains(9.99) and not first.contains(10)


@pytest.mark.slow
def test_an_interleaved_soak_keeps_each_server_up_and_a_leak_adds_up(tmp_path: Path) -> None:
    """12 s per role in 4 blocks of 3 s (P C C P P C C P); the candidate keeps 2 MiB per request
    at 4 requests/s. Its anonymous memory must keep growing across its blocks (the server is
    never restarted), and the leak rule must FAIL against a 16 MiB budget, as it does when the
    roles run one after the other (tests/soak/test_soak.py)."""
    judgement, saved = run_soak(
        tmp_path,
        {"pinned": (None, {"fault": []}), "candidate": (None, {"fault": ["--leak-kib", "2048"]})},
        {"server": SERVER, "duration_s": 12, "block_s": 3, "warmup_s": 2, "sample_s": 0.1, "window_s": 0.5,
         "rate": 4, "concurrency": 2, "stall_s": 3, "max_tokens": 8, "grace_s": 5, "compact_every_s": 2,
         "compact_path": str(tmp_path / "compact_memory")},
        LEAK_LIMITS,
    )  # fmt: skip
    assert judgement.verdict is Verdict.FAIL, judgement.reason
    [leak] = [f for f in judgement.findings if f.verdict is Verdict.FAIL]
    assert leak.role == "candidate" and leak.message.startswith("leak: server anonymous memory")

    measured = {role: saved.measurement(role) for role in ("pinned", "candidate")}
    walls = []
    for role, m in measured.items():
        assert m is not None and m["schedule"] == "interleaved"
        assert [(b["block"], b["start_s"], b["end_s"]) for b in m["blocks"]] == [
            (0, 0, 3), (1, 3, 6), (2, 6, 9), (3, 9, 12),
        ]  # fmt: skip
        walls += [(b["wall_start_s"], b["wall_end_s"], role, b["block"]) for b in m["blocks"]]
        # One server per role for the whole soak: started once, alive at the end.
        log = (saved.folder / "logs" / f"{role}-server.log").read_text()
        assert log.count("# server stopped") == 1 and m["server"]["alive_at_end"] is True
    walls.sort()
    assert [(role, block) for _s, _e, role, block in walls] == [
        ("pinned", 0), ("candidate", 0), ("candidate", 1), ("pinned", 1),
        ("pinned", 2), ("candidate", 2), ("candidate", 3), ("pinned", 3),
    ]  # fmt: skip
    assert all(end <= nxt for (_s, end, _r, _b), (nxt, *_) in pairwise(walls))

    requests = {r: pd.read_parquet(saved.role_dir(r) / "requests.parquet") for r in measured}
    assert list(requests["pinned"]["index"]) == list(requests["candidate"]["index"])  # one schedule
    assert (requests["candidate"]["status"] == "ok").all() and len(requests["candidate"]) > 30
    for role in measured:
        frame = requests[role]
        assert ((frame["scheduled_s"] // 3).astype(int) == frame["block"]).all()

    telemetry = pd.read_parquet(saved.role_dir("candidate") / "telemetry.parquet")
    assert telemetry["t_s"].is_monotonic_increasing and set(telemetry["block"]) == {0, 1, 2, 3}
    # Each block starts where the previous one left off: the leak adds up (no restart).
    mib = telemetry.groupby("block")["anon_bytes"].agg(["first", "last"]) / 1024**2
    assert (mib["first"].iloc[1:].to_numpy() >= mib["last"].iloc[:-1].to_numpy() - 1).all()
    assert mib["last"].iloc[-1] - mib["first"].iloc[0] > 50

    compaction = judgement.facts.compaction
    assert compaction["pinned"].planned == compaction["candidate"].planned == [2, 4, 6, 8, 10]
    assert [e.t_s // 1 for e in compaction["candidate"].events] == [2, 4, 6, 8, 10]
    assert any("ABBA blocks of" in note for note in judgement.facts.limits_of_evidence)
    [order] = [t for t in judgement.tables if t.title.startswith("Order of the soak")]
    assert [(row[1], row[2]) for row in order.rows] == [(r, b + 1) for _s, _e, r, b in walls]

    # A driver line goes to the role whose block was running, unless it names the other
    # server's process (both are up): planted lines in the form of amdgpu's page-fault report.
    def fault(pid: int) -> str:
        return (f"amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 "
                f"pasid:32785, for process llama-server pid {pid} thread llama-server pid {pid})")  # fmt: skip

    pinned_pid = measured["pinned"]["server"]["pids"][0]
    candidate_pid = measured["candidate"]["server"]["pids"][0]
    with (saved.role_dir("candidate") / "kernel.log").open("a") as log:
        log.write(fault(pinned_pid) + "\n")  # written during a candidate block, names pinned
    with (saved.role_dir("pinned") / "kernel.log").open("a") as log:
        log.write(fault(4_000_000) + "\n")  # names no process of this soak: stays with pinned
    again = soak.judge(saved)
    faults = {(f.role, f.verdict) for f in again.findings if "page fault" in f.message}
    assert faults == {("pinned", Verdict.ERROR)}
    assert sum("page fault" in f.message for f in again.findings) == 2
    [table] = [t for t in again.tables if t.title.startswith("Kernel-log")]
    assert sorted(row[0] for row in table.rows) == [
        "pinned",
        "pinned (names its process; written during candidate's block)",
    ]
    with (saved.role_dir("pinned") / "kernel.log").open("a") as log:
        log.write(fault(candidate_pid) + "\n")
    moved = [f for f in soak.judge(saved).findings if str(candidate_pid) in f.message]
    assert [(f.role, f.verdict) for f in moved] == [("candidate", Verdict.FAIL)]


@pytest.mark.slow
def test_a_concurrent_soak_loads_every_role_at_once_and_a_leak_still_fails(tmp_path: Path) -> None:
    """`concurrent`: both roles loaded for the same 12 s of wall time from their own threads (the
    leaking stand-in as candidate, 2 MiB kept per request at 4 requests/s): the leak rule FAILs
    the candidate as it does interleaved, the soak takes one duration rather than two, and a
    driver line both roles' watchers saved counts once, for the role it names, or for every
    role when it names none."""
    started = time.monotonic()
    judgement, saved = run_soak(
        tmp_path,
        {"pinned": (None, {"fault": []}), "candidate": (None, {"fault": ["--leak-kib", "2048"]})},
        {"server": SERVER, "duration_s": 12, "concurrent": True, "warmup_s": 2, "sample_s": 0.1,
         "window_s": 0.5, "rate": 4, "concurrency": 2, "stall_s": 3, "max_tokens": 8, "grace_s": 5,
         "compact_every_s": 2, "compact_path": str(tmp_path / "compact_memory")},
        LEAK_LIMITS,
    )  # fmt: skip
    took = time.monotonic() - started
    assert judgement.verdict is Verdict.FAIL, judgement.reason
    [leak] = [f for f in judgement.findings if f.verdict is Verdict.FAIL]
    assert leak.role == "candidate" and leak.message.startswith("leak: server anonymous memory")

    measured = {role: saved.measurement(role) for role in ("pinned", "candidate")}
    spans = []
    for role, m in measured.items():
        assert m is not None and m["schedule"] == "concurrent" and m["server"]["alive_at_end"] is True
        [block] = m["blocks"]
        assert (block["start_s"], block["end_s"]) == (0, 12)
        spans.append((block["wall_start_s"], block["wall_end_s"]))
        frame = pd.read_parquet(saved.role_dir(role) / "requests.parquet")
        assert (frame["status"] == "ok").all() and len(frame) > 30
    # The two roles' loads overlap almost wholly, and the soak took about one duration, not two.
    (s1, e1), (s2, e2) = spans
    assert min(e1, e2) - max(s1, s2) > 11
    assert took < 2 * 12
    assert any("loaded at once" in note for note in judgement.facts.limits_of_evidence)
    assert not [t for t in judgement.tables if t.title.startswith("Order of the soak")]

    def fault(pid: int | None) -> str:
        who = f", for process llama-server pid {pid} thread llama-server pid {pid})" if pid else ")"
        return f"amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32785{who}"

    candidate_pid = measured["candidate"]["server"]["pids"][0]
    for role in measured:  # both watchers read the one kernel log
        with (saved.role_dir(role) / "kernel.log").open("a") as log:
            log.write(fault(candidate_pid) + "\n" + fault(None) + "\n")
    faults = sorted(
        (f.role, f.verdict.name, str(candidate_pid) in f.message)
        for f in soak.judge(saved).findings
        if "page fault" in f.message
    )
    assert faults == [("candidate", "FAIL", False), ("candidate", "FAIL", True), ("pinned", "ERROR", False)]


@pytest.mark.slow
def test_an_interrupted_concurrent_soak_stops_its_servers_at_once(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT, as SIGTERM is for `qualify run`) six seconds into a concurrent soak planned
    for 120 s: the process ends within seconds, not when the roles' loads would have, and none
    of its servers outlives it."""
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from soakrig import cmdline, run_soak
run_soak(__import__("pathlib").Path({str(tmp_path)!r}),
    {{"pinned": (None, {{"fault": []}}), "candidate": (None, {{"fault": []}})}},
    {{"server": {SERVER!r}, "duration_s": 120, "concurrent": True, "warmup_s": 2, "sample_s": 0.5,
     "window_s": 2, "rate": 2, "concurrency": 2, "stall_s": 30, "max_tokens": 8, "grace_s": 5,
     "compact_every_s": 0}},
    {{"max_rss_growth_mib": 16.0}})
"""
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2])
    logs = tmp_path / "soak" / "logs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(logs.glob("*-server.log"))) < 2:
        time.sleep(0.2)
    time.sleep(6)
    stopped = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=60) != 0
    finally:
        proc.kill()  # not left behind when the assertion fails
    assert time.monotonic() - stopped < 20
    # This soak's servers by their ports (the first line of each server log is its command).
    started = [log.read_text().splitlines()[0].split()[-2] for log in logs.glob("*-server.log")]
    assert len(started) == 2
    servers = [
        p for p in Path("/proc").iterdir()
        if p.name.isdigit() and any(f"{HELPER} {port}" in cmdline(p) for port in started)
    ]  # fmt: skip
    assert servers == []
    for log in logs.glob("*-server.log"):
        assert "# server stopped" in log.read_text()


def test_concurrent_and_blocks_together_are_refused() -> None:
    spec = soak_spec({"server": SERVER, "concurrent": True, "block_s": 30}, {"max_rss_growth_mib": 8.0}, ())
    assert "both concurrent and block_s" in (kind.KIND.invalid(spec) or "")
    assert (
        kind.KIND.invalid(soak_spec({"server": SERVER, "concurrent": True}, {"max_rss_growth_mib": 8.0}, ()))
        is None
    )


def test_a_negative_block_length_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    with pytest.raises(QualifyError, match="block_s = -5 is negative") as caught:
        run_soak(tmp_path, {"pinned": (None, {"fault": []})}, {"server": SERVER, "block_s": -5}, {})
    assert caught.value.hint is not None and "0 to run the roles one after the other" in caught.value.hint
    assert not (tmp_path / "soak" / "logs").exists()


def test_three_roles_take_turns_in_williams_rounds() -> None:
    blocks = plan_blocks(("pinned", "a", "b"), 20, 10)
    # The second row begins with the role the first ended with (chained rows, see core.designs).
    assert [b.role for b in blocks] == ["pinned", "a", "b", "b", "pinned", "a"]
    for role in ("pinned", "a", "b"):
        assert [(b.start_s, b.end_s) for b in blocks if b.role == role] == [(0, 10), (10, 20)]


@pytest.mark.slow
def test_a_run_set_soaks_pinned_once_beside_every_member(project, tmp_path: Path) -> None:
    """Two candidates in one run (9 s each in 3 blocks: the soak's alpha is split over the two,
    so its trend tests need more windows): pinned's server soaks once, in Williams rounds with both
    members' servers (the leaking stand-in is the "leaky" arm); each member is judged on
    pinned's and its own data, and only the leaking one fails."""
    from conftest import qualify_proc

    limits = "{ max_rss_growth_mib = 16.0, leak_margin = 0.0, max_ttft_drift_ms = 1000.0, max_tpot_drift_ms = 1000.0, drift_margin = 0.0 }"
    p = project(
        '[arms.pinned]\ninstallable = ".#a"\nvars = { fault = [] }\n'
        '[arms.cand]\ninstallable = ".#b"\nvars = { fault = [] }\n'
        '[arms.leaky]\ninstallable = ".#c"\nvars = { fault = ["--leak-kib", "2048"] }\n'
    )
    p.stage(
        "50-soak.toml",
        f"""
        [[check]]
        kind = "soak"
        name = "soak"
        server = "{SERVER}"
        duration_s = 9
        block_s = 3
        warmup_s = 1
        sample_s = 0.1
        window_s = 0.5
        rate = 4
        concurrency = 2
        stall_s = 3
        max_tokens = 8
        grace_s = 3
        compact_every_s = 2
        compact_path = "{tmp_path / "compact_memory"}"
        limits = {limits}
        """,
    )
    done = qualify_proc("run", "--candidate", "cand", "--candidate", "leaky", "--project", str(p.root))
    assert done.returncode in (1, 3), done.stdout[-3000:]
    [run] = p.run_dirs()
    joint = run / "50-soak" / "soak"
    assert sorted(d.name for d in joint.iterdir() if d.is_dir() and d.name != "logs") == [
        "cand",
        "leaky",
        "pinned",
    ]
    assert (joint / "logs" / "pinned-server.log").read_text().count("# server stopped") == 1
    import json

    results = {
        m: json.loads((run / m / "50-soak" / "soak" / "result.json").read_text()) for m in ("cand", "leaky")
    }
    assert results["leaky"]["verdict"] == "FAIL", results["leaky"]["reason"]
    assert results["cand"]["verdict"] != "FAIL", results["cand"]["reason"]
    for m in ("cand", "leaky"):
        view = run / m / "50-soak" / "soak"
        assert (view / "workload.json").is_file() and (view / "logs" / "candidate-server.log").is_file()
        assert json.loads((view / "pinned" / "measurement.json").read_text())["measured_as"] == "pinned"

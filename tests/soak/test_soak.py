"""The soak check end to end against deliberately broken peers (tests/soak/broken_chat_server.py):
a server that leaks memory per request must fail the leak rule, one that stalls mid-stream must
trip the watchdog; a soak too short to decide drift is INCONCLUSIVE; a healthy soak whose
memory pressure could not be applied is WARN at best. The stand-in is used because a real
engine cannot be made to leak or hang on demand; the pinned role runs the same program without
the fault, so the fault is the only difference between the roles."""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from soakrig import cmdline, run_soak

from qualify.core.errors import ConfigError
from qualify.core.groups import group_alive
from qualify.core.verdicts import Verdict
from qualify.pipeline.plan import load_plan
from qualify.soak import check as soak
from qualify.soak.telemetry import Sampler

#: Its heavy tests run with nothing heavy beside them (tests/tiers.py): a soak judges its
#: servers' latencies over time. The stand-in servers mostly wait, so several such tests run at
#: once.
pytestmark = pytest.mark.quiet

HELPER = Path(__file__).resolve().parent / "broken_chat_server.py"
SERVER = f"{sys.executable} {HELPER} {{port}} {{fault}}"
# 28 windows of 0.5 s after a 2 s warm-up: enough for Mann–Kendall, corrected for the
# autocorrelation of the windows and held to its Holm level among the series, to decide.
SHORT_SOAK = {"server": SERVER, "duration_s": 16, "warmup_s": 2, "sample_s": 0.1, "window_s": 0.5,
              "rate": 4, "concurrency": 2, "stall_s": 3, "max_tokens": 8}  # fmt: skip
LIMITS = {"max_rss_growth_mib": 16.0, "leak_margin": 0.0, "max_ttft_drift_ms": 1000.0,
          "max_tpot_drift_ms": 1000.0, "drift_margin": 0.0}  # fmt: skip


def arms(candidate_fault: list[str]) -> dict[str, tuple[str | None, dict[str, object]]]:
    return {"pinned": (None, {"fault": []}), "candidate": (None, {"fault": candidate_fault})}


def no_server_left(saved_folder: Path) -> None:
    """Every role's server (its process group) is gone once the check returns."""
    for role in ("pinned", "candidate"):
        log = saved_folder / "logs" / f"{role}-server.log"
        assert log.is_file() and "# server stopped" in log.read_text()


@pytest.mark.slow
def test_a_leaking_server_fails_the_leak_rule(tmp_path: Path) -> None:
    """2 MiB kept per request at 4 requests/s: about 80 MiB over the 10 s after warm-up, against
    a budget of 16 MiB over those 10 s (and a pinned slope near 0)."""
    judgement, saved = run_soak(
        tmp_path,
        arms(["--leak-kib", "2048"]),
        {**SHORT_SOAK, "compact_every_s": 3, "compact_path": str(tmp_path / "compact_memory")},
        LIMITS,
    )
    assert judgement.verdict is Verdict.FAIL, judgement.reason
    [leak] = [f for f in judgement.findings if f.verdict is Verdict.FAIL]
    assert leak.role == "candidate" and leak.message.startswith("leak: server anonymous memory")
    rss = {t.role: t for t in judgement.facts.trends if t.series == "anon_mib"}
    # The leak accumulates per request: its windows are a random walk with drift, which the
    # test on the increments decides.
    assert rss["candidate"].increments_p_value < 0.01 and rss["candidate"].growth_low > 16
    assert rss["candidate"].slope_per_h > rss["pinned"].slope_per_h
    assert rss["candidate"].finding == "leak"
    # Every request went through on both roles; compaction ran on one schedule for both.
    for role in ("pinned", "candidate"):
        summary = judgement.facts.requests[role]
        assert summary.sent == summary.ok > 20
        telemetry = pd.read_parquet(saved.role_dir(role) / "telemetry.parquet")
        assert {"t_s", "rss_bytes", "pss_bytes", "anon_bytes"} <= set(telemetry.columns)
        assert len(telemetry) >= 40
    compaction = judgement.facts.compaction
    assert compaction["pinned"].planned == compaction["candidate"].planned == [2.0, 5.0, 8.0, 11.0, 14.0]
    assert compaction["candidate"].permitted is True and len(compaction["candidate"].events) == 5
    assert (tmp_path / "compact_memory").read_text() == "1\n"
    charts = {c.title: c for c in judgement.charts}
    assert len(charts["Server RSS during the soak"].marks) == 6  # 5 compactions + the warm-up's end
    no_server_left(saved.folder)


@pytest.mark.slow
def test_a_stalled_stream_trips_the_watchdog(tmp_path: Path) -> None:
    """The candidate's 5th request sends one token and then nothing: after stall_s = 3 s the
    watchdog cancels it, the load stops, and the check fails naming the request."""
    started = time.monotonic()
    judgement, saved = run_soak(
        tmp_path, arms(["--stall-at", "4"]), {**SHORT_SOAK, "duration_s": 6, "compact_every_s": 0}, LIMITS
    )
    assert judgement.verdict is Verdict.FAIL
    [stall] = [f for f in judgement.findings if f.verdict is Verdict.FAIL and "stalled" in f.message]
    assert (
        stall.role == "candidate" and "request 4" in stall.message and "no stream progress" in stall.message
    )
    measurement = saved.measurement("candidate")
    assert measurement is not None and measurement["stop_reason"] == "stall"
    assert judgement.facts.requests["pinned"].stalled == 0
    assert time.monotonic() - started < 40  # the hung request did not hold the soak up
    no_server_left(saved.folder)


@pytest.mark.slow
def test_a_soak_too_short_to_decide_drift_is_inconclusive(tmp_path: Path) -> None:
    """About 8 windows after the warm-up cannot reach alpha = 0.01 split over the series (Holm) and
    the two trend tests: INCONCLUSIVE, not PASS. How many windows the levels' test needs depends
    on the series' own autocorrelation, so the reason is checked for what it must say: the soak
    had fewer windows than the tests need."""
    judgement, _ = run_soak(
        tmp_path, arms([]), {**SHORT_SOAK, "duration_s": 5, "warmup_s": 1, "compact_every_s": 0}, LIMITS
    )
    assert judgement.verdict is Verdict.INCONCLUSIVE, judgement.reason
    assert "too short to decide drift" in judgement.reason
    short = re.search(r"has (\d+) windows: the trend tests need (\d+) ", judgement.reason)
    assert short is not None, judgement.reason
    assert int(short[1]) < int(short[2]), judgement.reason


@pytest.mark.slow
def test_without_memory_pressure_a_healthy_soak_is_warn_at_best(tmp_path: Path) -> None:
    """compact_memory cannot be written (here: a path that does not exist): the soak still runs,
    and the check is WARN, saying so in its findings and its limits of evidence. A kernel-log line
    saved for the candidate then turns the re-judged result into FAIL with the line."""
    unwritable = tmp_path / "no-such-dir" / "compact_memory"
    judgement, saved = run_soak(
        tmp_path, arms([]), {**SHORT_SOAK, "compact_every_s": 2, "compact_path": str(unwritable)},
        LIMITS,
    )  # fmt: skip
    assert judgement.verdict is Verdict.WARN, judgement.reason
    assert judgement.reason.startswith("pinned: memory pressure was not applied")
    assert any("not applied" in note for note in judgement.facts.limits_of_evidence)
    assert {f.verdict for f in judgement.findings} == {Verdict.WARN}

    line = "amdgpu 0000:c4:00.0: MES failed to respond to msg=REMOVE_QUEUE"  # lemonade-sdk/llamacpp-rocm#122
    with (saved.role_dir("candidate") / "kernel.log").open("a") as log:
        log.write(line + "\n")
    again = soak.judge(saved)
    assert again.verdict is Verdict.FAIL
    assert (
        again.reason
        == f"candidate: MES failure: {line} (ROCm/legacy-rocm-build#5724, #6273, #2196; freebsd/drm-kmod#387)"
    )
    assert [t.title for t in again.tables][-1] == "Kernel-log and server-log matches"


def test_a_server_that_cannot_start_is_the_candidates_failure(tmp_path: Path) -> None:
    """The candidate's server exits at once (a bad flag): FAIL with its output; pinned soaked."""
    judgement, _ = run_soak(
        tmp_path,
        {"pinned": (None, {"fault": []}), "candidate": (None, {"fault": ["--no-such-flag"]})},
        {**SHORT_SOAK, "duration_s": 1, "warmup_s": 0, "compact_every_s": 0, "ready_timeout_s": 20},
        LIMITS,
    )
    assert judgement.verdict is Verdict.FAIL
    assert judgement.reason.startswith("candidate: server never became ready")


def test_no_soak_process_is_left_behind() -> None:
    """After the tests above, no stand-in server of this module is still running."""
    leftovers = [
        p for p in Path("/proc").iterdir()
        if p.name.isdigit() and str(HELPER) in cmdline(p) and group_alive(int(p.name))
    ]  # fmt: skip
    assert leftovers == []
    assert shutil.which(sys.executable)


@pytest.mark.slow
def test_a_leaking_candidate_alone_fails_on_its_budget(tmp_path: Path) -> None:
    """roles = ["candidate"]: no pinned to compare with, so the leak is judged against the
    budget alone (2 MiB per request against 16 MiB over the soak)."""
    judgement, saved = run_soak(
        tmp_path,
        {"candidate": (None, {"fault": ["--leak-kib", "2048"]})},
        {**SHORT_SOAK, "compact_every_s": 0},
        LIMITS,
    )
    assert judgement.verdict is Verdict.FAIL, judgement.reason
    assert any(f.message.startswith("leak: server anonymous memory") for f in judgement.findings)
    assert "anon_mib against its budget" in judgement.judged


def test_memory_that_cannot_be_read_is_missing_not_zero(tmp_path: Path) -> None:
    """A process group with no process left: the sample has no memory figures rather than 0."""
    sampler = Sampler(2**22 - 7, time.monotonic(), 1.0, tmp_path / "t.parquet")
    row = sampler.sample()
    assert row["rss_bytes"] is None and row["anon_bytes"] is None and row["pss_bytes"] is None


def test_a_soak_without_a_budget_is_refused(tmp_path: Path) -> None:
    """Every series is judged against a budget: with none, nothing could ever be a leak."""
    (tmp_path / "50-soak.toml").write_text(
        '[[check]]\nkind = "soak"\nserver = "x"\nlimits = { leak_margin = 1 }\n'
    )
    with pytest.raises(ConfigError, match="no budget"):
        load_plan(tmp_path)

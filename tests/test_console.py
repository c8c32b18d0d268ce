"""What a run shows while it works: on a terminal a live display (stage, check, role, the
check's counts or time left, elapsed, the newest status line); off one the plain lines and the
heartbeat; and a display that fails never stops the run.

The terminal is a rich Console forced to act as one, writing into a StringIO: what it shows is
read back with the control sequences taken out.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from conftest import Project, command_stage
from rich.console import Console

from qualify.checks.base import Judgement
from qualify.console import ConsoleEvents, LiveView, clock, plain
from qualify.core.progress import Progress
from qualify.core.verdicts import Verdict
from qualify.pipeline.plan import StageSpec
from qualify.pipeline.runner import RunRequest, execute

STYLE = re.compile(r"\x1b\[[0-9;]*m")  # colours and weights: text goes on
MOVES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")  # cursor moves and erasures: a new frame
STAGE = StageSpec(name="build", folder="10-build", file=Path("10-build.toml"), checks=())


def shown(out: StringIO) -> str:
    return MOVES.sub("\n", STYLE.sub("", out.getvalue()))


def terminal(out: StringIO) -> Console:
    return Console(file=out, force_terminal=True, width=160)


def test_a_terminal_shows_stage_check_role_counts_and_elapsed() -> None:
    out = StringIO()
    events = ConsoleEvents(terminal(out))
    events.stage_start(STAGE, "")
    events.check_start("build", "arms")
    events.advance(Progress("candidate", 12, 40, "derivations", failed=1))
    events.progress("candidate: engine-1.0> compiling engine.c")
    text = shown(out)
    assert "build › arms" in text
    assert "candidate 12/40 derivations, 1 failed" in text  # a failed derivation says failed
    assert "engine-1.0> compiling engine.c" in text
    assert re.search(r"arms .*0:0\d \(stage 0:0\d\)", text)  # the check's elapsed, the stage's
    events.advance(Progress("pinned", left_s=754))  # a soak's time left
    assert re.search(r"pinned about 12:3\d left", shown(out))
    events.advance(Progress("candidate", 3, 8, "pairs"))
    assert "candidate 3/8 pairs" in shown(out)
    events.stage_end(STAGE, "FAIL", "candidate failed to build")
    assert "build: FAIL  candidate failed to build" in shown(out)
    events.close()


def test_a_count_past_the_plan_shows_what_was_done() -> None:
    # nix may build a derivation its dry run did not list: the count never reads 41/40.
    assert Progress("candidate", 41, 40, "derivations").counts() == "41/41 derivations"
    assert Progress("candidate", 2, None, "pairs").counts() == "2 pairs"
    assert Progress("candidate").counts() == ""
    assert clock(65) == "1:05" and clock(3723) == "1:02:03" and clock(-3) == "0:00"


def test_a_run_on_a_terminal_shows_the_live_display(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "sleep 1"))
    out = StringIO()
    execute(RunRequest(project=p.root, candidates=("cand",)), ConsoleEvents(terminal(out)))
    text = shown(out)
    assert "compile › compile-check" in text
    assert "compile: PASS" in text  # the plain lines still come, above the display


def test_off_a_terminal_nothing_live_and_the_heartbeat_says_what_the_check_told() -> None:
    out = StringIO()
    events = ConsoleEvents(Console(file=out, width=200), heartbeat_s=0.2)
    events.stage_start(STAGE, "")
    events.check_start("build", "arms")
    events.progress("candidate: a status line")  # transient: not in a log
    events.advance(Progress("candidate", left_s=600))
    time.sleep(0.7)
    events.close()
    lines = out.getvalue().splitlines()
    beats = [line for line in lines if "still running" in line]
    assert beats and all("build still running" in line and "s so far" in line for line in beats)
    assert re.search(r"candidate about (600|599) s left: candidate: a status line", beats[0])
    assert not any("›" in line or "\x1b" in line for line in lines)
    count = len(beats)
    time.sleep(0.5)
    assert len([line for line in out.getvalue().splitlines() if "still running" in line]) == count


def test_a_failing_display_is_logged_once_and_never_stops_the_run(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: LiveView) -> None:
        raise RuntimeError("a rendering bug")

    monkeypatch.setattr(LiveView, "render", broken)
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "sleep 0.5"))
    p.stage("30-numerics.toml", command_stage("numerics", "true"))
    out = StringIO()
    with caplog.at_level(logging.WARNING, logger="qualify.console"):
        outcome = execute(RunRequest(project=p.root, candidates=("cand",)), ConsoleEvents(terminal(out)))
    assert outcome.verdict is not None  # the run went on to its verdict
    assert "compile: PASS" in shown(out) and "numerics: PASS" in shown(out)
    failures = [r for r in caplog.records if "live progress display failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_a_display_that_cannot_start_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from rich.live import Live

    def refuse(self: Live, refresh: bool = False) -> None:
        raise OSError("no terminal after all")

    monkeypatch.setattr(Live, "start", refuse)
    out = StringIO()
    events = ConsoleEvents(terminal(out))
    with caplog.at_level(logging.WARNING, logger="qualify.console"):
        for _ in range(2):
            events.stage_start(STAGE, "")
            events.check_start("build", "arms")
            events.advance(Progress("candidate", 1, 2, "derivations"))
            events.progress("candidate: working")
            events.stage_end(STAGE, "PASS", "built")
        events.close()
    assert len([r for r in caplog.records if "live progress display failed" in r.getMessage()]) == 1
    assert shown(out).count("build: PASS  built") == 2


HOSTILE = (
    "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m \x9b2Kdone\r\n"
    "::add-mask::secret\n   ::error file=x::forged\n##[warning]old form\n"
)


def test_outside_text_cannot_move_the_cursor_or_begin_a_workflow_command() -> None:
    """Before, echoed engine output reached the terminal and the CI log raw: ESC sequences
    retitled and cleared the terminal, and a line could become `::add-mask::` or `::error::`."""
    out = StringIO()
    events = ConsoleEvents(Console(file=out, width=200))
    events.stage_start(STAGE, "")
    for line in HOSTILE.splitlines():
        events.echo(line)
    events.check_end("build", "arms", Judgement(Verdict.FAIL, "::error::from a reason \x1b[1A"))
    events.close()
    text = out.getvalue()
    assert not any(c in text for c in "\x1b\x9b\x07\r")
    assert "red done" in text and "secret" in text and "forged" in text and "old form" in text
    for line in text.splitlines():
        assert not line.strip().startswith("::"), line
        assert "##[" not in line, line


def test_plain_keeps_ordinary_text() -> None:
    assert plain("tab\tand :: colons, a::b, 50% [x]\nsecond") == "tab\tand :: colons, a::b, 50% [x]\nsecond"
    assert plain("::set-output name=x::1") == ": :set-output name=x::1"


def test_the_heartbeat_of_a_counted_build_shows_the_count_not_the_compiler_line() -> None:
    """Before: "build still running, 30 s so far, candidate 3/40 derivations: |  ^~~"."""
    out = StringIO()
    events = ConsoleEvents(Console(file=out, width=200), heartbeat_s=0.2)
    events.stage_start(STAGE, "")
    events.check_start("build", "arms")
    events.advance(Progress("candidate", 3, 40, "derivations"))
    events.progress("candidate: llama-cpp> |  ^~~")
    time.sleep(0.7)
    events.close()
    beats = [line for line in out.getvalue().splitlines() if "still running" in line]
    assert beats and all(line.rstrip().endswith("candidate 3/40 derivations") for line in beats), beats
    assert not any("^~~" in line for line in beats)


def test_off_a_terminal_lines_are_whole_and_unpadded(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: rich's default of 80 columns wrapped a CI log's lines and padded table cells."""
    from rich.table import Table

    from qualify.console import open_console

    console = open_console()
    assert not console.is_terminal
    long = "x" * 300
    console.print(long)
    table = Table()
    table.add_column("run")
    table.add_column("why")
    table.add_row("20261201-231455-cand", "w " * 100)
    table.add_row("1", "short")
    console.print(table)
    events = ConsoleEvents(console)
    events.stage_start(STAGE, "")
    events.close()
    console.file.flush()
    lines = capsys.readouterr().out.splitlines()
    assert long in lines
    assert any("20261201-231455-cand" in line and "w w" in line for line in lines)
    assert all(line == line.rstrip() for line in lines)
    assert "── 10-build" in lines and max(len(line) for line in lines) < 400  # no rule 100 000 wide

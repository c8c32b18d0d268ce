"""Each tier's tests and time, for `tests/tiers.py`: its plugin registers `TierClock`, which
prints each tier's line and writes `--tier-times`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import pytest

#: A heavy test with this mark depends on the timing of real processes (a bench that must
#: decide, a run set of the example with its bench and soak, a hostile command racing the run's
#: checks): `make test` runs it after the other heavy tests, in one process, with the machine to
#: itself. The other heavy tests run on two workers.
ALONE = "alone"
#: A heavy test with this mark depends on the timing of real processes too (a soak's latencies),
#: but its processes mostly wait on the clock (a soak of the stand-in chat server takes about a
#: tenth of a core): `make test` runs these last, four at a time, with nothing heavy beside them.
#: Four of them leave the machine nearly as idle as one; one after another they took three
#: minutes, nearly all of it waiting.
QUIET = "quiet"
#: The property a worker's report carries its test's tier in, for the workers' controller.
TIER_PROPERTY = "qualify-tier"


class TierClock:
    """Each tier's tests and time. A tier's time is the wall clock from its first test's start
    to its last test's report (session fixtures count in the first test that uses them: the
    example's build in the rest); on several workers (pytest-xdist) the tests' own seconds,
    summed, are said beside it. In one process a tier's line is written as the next tier starts,
    so that a CI log shows it as a phase of its own, and again with the others at the end. On
    the workers' controller a test's tier comes from its report, where its worker wrote it."""

    LABELS: ClassVar[dict[str, str]] = {
        "check": "check tier (make check)",
        "rest": "the rest",
        ALONE: "the rest measuring time, alone",
        QUIET: "the rest measuring time, quiet, side by side",
    }

    def __init__(self, config: pytest.Config, tier_of: dict[str, str]) -> None:
        self.config = config
        self.tier_of = tier_of  # nodeid -> tier, where this process collected the tests
        self.tests: dict[str, set[str]] = {name: set() for name in self.LABELS}
        self.seconds: dict[str, float] = dict.fromkeys(self.LABELS, 0.0)
        self.span: dict[str, list[float]] = {}

    def _tier(self, report: pytest.TestReport) -> str:
        known = self.tier_of.get(report.nodeid)
        if known is not None:
            return known
        # A worker's report: the tier its worker wrote on it (pytest_runtest_makereport).
        return next((str(v) for k, v in report.user_properties if k == TIER_PROPERTY), "rest")

    @property
    def workers(self) -> int:
        return int(getattr(self.config.option, "numprocesses", 0) or 0)

    def wall(self, name: str) -> float:
        start, end = self.span.get(name, (0.0, 0.0))
        return end - start

    def line(self, name: str) -> str:
        seen = len(self.tests[name])
        count = f"{seen} test" + ("s" if seen != 1 else "")
        on = f" on {self.workers} workers ({self.seconds[name]:.0f} s of tests)" if self.workers > 1 else ""
        return f"::: tests: {self.LABELS[name]}, {count}, took {self.wall(name):.0f} s{on}"

    def _mark(self, name: str) -> None:
        now = time.monotonic()
        self.span.setdefault(name, [now, now])[1] = now

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        name = self.tier_of.get(nodeid)
        if name is None:  # on the workers' controller: the report says
            return
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if not self.tests[name] and terminal is not None:
            for done in (other for other, seen in self.tests.items() if seen and other != name):
                terminal.ensure_newline()
                terminal.write_line(self.line(done))
        self._mark(name)
        self.tests[name].add(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = self._tier(report)
        if report.when == "setup" and name not in self.span:
            self.span[name] = [time.monotonic() - report.duration] * 2
        self.tests[name].add(report.nodeid)
        self.seconds[name] += report.duration
        self._mark(name)

    @pytest.hookimpl(trylast=True)  # after the slowest durations: the last lines a CI log shows
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for name, seen in self.tests.items():
            if seen:
                terminalreporter.write_line(self.line(name))
        path = self.config.getoption("tier_times")
        if path:
            summary = {
                name: {
                    "tests": len(seen),
                    "seconds": round(self.wall(name), 1),
                    "test_seconds": round(self.seconds[name], 1),
                    "workers": max(self.workers, 1),
                }
                for name, seen in self.tests.items()
            }
            Path(path).write_text(json.dumps(summary, indent=1) + "\n")

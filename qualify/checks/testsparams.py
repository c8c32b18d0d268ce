"""The `tests` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's names,
types, defaults and help, and the typed value `measure` and `judge` read them through."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param


@dataclass(frozen=True)
class TestsParams(KindParams):
    """A `tests` check's parameters."""

    #: Not a test class, whatever its name says (pytest collects `Test*` from a test module).
    __test__ = False

    run: str = param(help="the test command template")
    junit: str = param("{out_file}", help="where the command writes JUnit XML")
    copy: str | None = param(None, help="a directory to run the command in, copied first")

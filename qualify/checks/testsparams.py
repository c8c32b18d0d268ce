"""The `tests` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.checks.tests` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams


@dataclass(frozen=True)
class TestsParams(KindParams):
    """A `tests` check's parameters, as `KIND.params` declares them."""

    #: Not a test class, whatever its name says (pytest collects `Test*` from a test module).
    __test__ = False

    run: str
    junit: str = "{out_file}"
    copy: str | None = None

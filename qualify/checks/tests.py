"""`tests`: run a test command per role that writes JUnit XML; compare the results.

Measures: per role, the JUnit XML the command writes (ctest `--output-junit`, pytest
`--junitxml`), copied into the role's folder. With `copy`, the command runs on a writable copy
of that directory made in the role's folder, because test drivers write next to their files
(ctest creates `Testing/`) and the nix store is read-only.

Verdict:
- ERROR: a role could not be run, or the pinned role produced no readable JUnit (no baseline).
- FAIL: the candidate produced no readable JUnit; zero tests were executed in either role
  (a test run that ran nothing proves nothing); or a test the pinned role passes does not pass
  in the candidate (newly failing, listed by name).
- WARN: tests failing in both roles, tests present in one role only, or a non-zero exit while
  the JUnit shows no failure.
- PASS otherwise.

What it cannot prove: only the tests the command runs are compared; a test skipped in both
roles says nothing.
"""

from __future__ import annotations

from qualify.checks.base import CheckKind
from qualify.checks.testsparams import TestsParams

KIND = CheckKind(
    name="tests",
    summary="run a test command per role writing JUnit XML; no test the pinned role passes may fail",
    params=TestsParams.declared(),
    verdict_rules=(
        "FAIL if a test passing in pinned does not pass in the candidate, if either role executed "
        "zero tests, or the candidate wrote no JUnit; WARN for tests failing in both roles; "
        "ERROR if the baseline or the harness failed; PASS otherwise"
    ),
    limits=(),
)

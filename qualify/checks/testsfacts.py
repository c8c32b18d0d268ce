"""What a `tests` check's judge writes beside its verdict: each role's tests by outcome."""

from __future__ import annotations

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


class CaseCounts(Part):
    """A role's test cases by how they ended, as its JUnit XML said."""

    passed: int
    failed: int
    error: int
    skipped: int


class CasesFacts(Evidence):
    counts: dict[str, CaseCounts] = Field(description="per role")

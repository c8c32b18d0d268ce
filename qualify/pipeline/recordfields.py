"""The words the run folder's records are checked against (`qualify.pipeline.recordmodel`):
the verdicts a check or a stage may hold, and what a number is."""

from __future__ import annotations

from typing import Any

from qualify.core.verdicts import StageState, Verdict

#: A check's verdict; a stage's is one of them or BLOCKED (never measured: its gate failed).
VERDICTS = tuple(v.value for v in Verdict)
STAGE_VERDICTS = (*VERDICTS, StageState.BLOCKED.value)


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

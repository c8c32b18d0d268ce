"""How far a check's measurement is, told to the console while it runs (never saved).

A check reports what it knows: the role at work, a count of planned steps (a build's derivations
from nix's dry run, a bench's pairs, the scoring runs of numerics) and how many failed, or the
time left that its plan fixes (a soak's). A terminal shows it live; a CI log gets it in the
heartbeat line.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    role: str | None = None
    done: int | None = None
    total: int | None = None  # None while the plan does not know it yet
    unit: str = ""  # what done and total count: "derivations", "pairs", "runs"
    failed: int = 0  # of the steps done, how many failed
    left_s: float | None = None  # seconds left that the plan knows, from when this was told

    def counts(self) -> str:
        """The count in words ("12/40 derivations, 1 failed"), or "" when nothing is counted."""
        if self.done is None:
            return ""
        total = f"/{max(self.total, self.done)}" if self.total is not None else ""
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{self.done}{total} {self.unit}".rstrip() + failed

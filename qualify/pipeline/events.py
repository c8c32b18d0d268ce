"""What the pipeline tells the console while a run works; the CLI supplies a rich implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qualify.checks.base import Judgement
    from qualify.core.progress import Progress
    from qualify.pipeline.plan import StageSpec


class Events:
    """Every method does nothing here: a caller that shows nothing passes this class as is."""

    def echo(self, line: str) -> None:
        """A plain line worth keeping in a log (a step, a command line)."""

    def stage_start(self, stage: StageSpec, note: str) -> None: ...
    def stage_end(self, stage: StageSpec, outcome: str, reason: str) -> None: ...
    def check_start(self, stage: str, check: str) -> None: ...
    def check_end(self, stage: str, check: str, judgement: Judgement) -> None: ...

    def progress(self, text: str | None) -> None:
        """A transient status line (the newest build log line); None clears it."""

    def advance(self, progress: Progress) -> None:
        """How far the running check is: its role, counts, time left."""

    def close(self) -> None:
        """The stages are over (done, interrupted or failed): nothing more is shown live."""

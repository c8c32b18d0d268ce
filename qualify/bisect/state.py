"""The saved state of a bisect or series: the steps, every probe with its attempt, outcome,
evidence and times, in one JSON file rewritten atomically after each change, so that a search
stopped anywhere resumes from the file without probing again what it already knows.

    {"schema_version": 1, "version": 1, "mode": "bisect", "series": ["gcc-12", "gcc-13", "gcc-14"],
     "retries": 2, "context": {"gate": "numerics"},
     "probes": [{"step": "gcc-14", "attempt": 1, "outcome": "bad", "started": "…",
                 "finished": "…", "evidence": {"run": "0007-…", "gate": "numerics", …}}]}

A probe is saved when it starts and again when it finishes. One that started and never
finished (the process was stopped mid-way) keeps `outcome` and `finished` null: it counts for
nothing, and the step is probed again under the next attempt number, so each attempt's own
files (named by the caller after step and attempt) are never written over.

The file is written and read through its type (`qualify.records.bisect.BisectFile`); once the
bisect answered it holds the answer and a row per step too (`qualify.bisect.report`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qualify.bisect.outcomes import Measured
from qualify.checks.evidence import validated
from qualify.core.errors import UsageError
from qualify.core.plaintext import visible
from qualify.core.runstore import now_iso, write_json
from qualify.core.series import MIN_STEPS
from qualify.core.tomlfile import suggest
from qualify.records.bisect import (
    BisectFile,
    Mode,
    Outcome,
    SavedProbe,
    SearchContext,
    StepEvidence,
)


@dataclass(frozen=True)
class ProbeRecord:
    """One probe of one step: started, and, once it ended, its outcome and evidence."""

    step: int
    attempt: int
    started: str
    outcome: Outcome | None = None
    finished: str | None = None
    evidence: StepEvidence | None = None

    @property
    def done(self) -> bool:
        return self.outcome is not None


@dataclass(frozen=True)
class Step:
    """A step to probe now: where it is in the series, its name, and this probe's attempt."""

    index: int
    name: str
    attempt: int


@dataclass
class BisectState:
    """A bisect's saved state, in memory; every change is written to `path` at once."""

    path: Path
    series: tuple[str, ...]
    mode: Mode
    retries: int
    #: The caller's description of what is searched (the gate, the arms), compared on resume.
    context: Mapping[str, Any] = field(default_factory=dict)
    probes: list[ProbeRecord] = field(default_factory=list)
    #: The position of the probe this process began and has not finished. A probe saved as
    #: started in a state read from its file was interrupted: it is never finished later.
    under_way: int | None = field(default=None, init=False, compare=False)

    @classmethod
    def create(
        cls,
        path: Path,
        series: Sequence[str],
        *,
        mode: Mode,
        retries: int,
        context: Mapping[str, Any] | None = None,
    ) -> BisectState:
        """A new state, saved to `path`; a file already there is never written over."""
        check_series(series)
        if retries < 0:
            raise UsageError(f"retries is 0 or more, not {retries}")
        if path.exists():
            raise UsageError(
                f"{path} already holds a bisect",
                "resume it, or remove the file to start over",
            )
        state = cls(path, tuple(series), mode, retries, as_json(context or {}))
        state.save()
        return state

    def save(self) -> None:
        write_json(self.path, self.document())

    def saved(self) -> BisectFile:
        """The state as its file holds it."""
        return BisectFile(
            mode=self.mode,
            series=list(self.series),
            retries=self.retries,
            context=dict(self.context),
            probes=[
                SavedProbe(
                    step=self.series[p.step],
                    attempt=p.attempt,
                    outcome=p.outcome,
                    started=p.started,
                    finished=p.finished,
                    evidence=p.evidence,
                )
                for p in self.probes
            ],
        )

    def document(self) -> dict[str, Any]:
        return self.saved().to_json()

    def search_context(self) -> SearchContext:
        """The context as `qualify bisect` saved it, checked (a wrong key named with the file)."""
        return validated(SearchContext, dict(self.context), self.path, "context")

    def known(self) -> list[list[Outcome]]:
        """Each step's finished outcomes, in order: what the search reads (an interrupted
        probe is left out)."""
        known: list[list[Outcome]] = [[] for _ in self.series]
        for probe in self.probes:
            if probe.outcome is not None:
                known[probe.step].append(probe.outcome)
        return known

    def index(self, name: str) -> int:
        """The position of the step called `name`; a name outside the series is refused."""
        try:
            return self.series.index(name)
        except ValueError:
            raise UsageError(
                f'{self.path}: no step "{visible(name)}" in the series{suggest(name, self.series)}',
                "the series is " + ", ".join(visible(s) for s in self.series),
            ) from None

    def begin(self, step: int) -> Step:
        """Save that `step` is being probed now, under its next attempt number."""
        if not 0 <= step < len(self.series):
            raise ValueError(f"step {step} is outside the series of {len(self.series)}")
        if self.under_way is not None:
            raise ValueError("a probe is already under way; finish it first")
        attempt = 1 + sum(1 for p in self.probes if p.step == step)
        self.probes.append(ProbeRecord(step, attempt, now_iso()))
        self._save_or_undo(len(self.probes) - 1, None)
        self.under_way = len(self.probes) - 1
        return Step(step, self.series[step], attempt)

    def finish(self, measured: Measured) -> ProbeRecord:
        """Save the outcome and evidence of the probe under way."""
        if self.under_way is None:
            raise ValueError("no probe is under way to finish")
        done = replace(
            self.probes[self.under_way],
            outcome=Outcome(measured.outcome),
            finished=now_iso(),
            evidence=measured.evidence,
        )
        before, self.probes[self.under_way] = self.probes[self.under_way], done
        self._save_or_undo(self.under_way, before)
        self.under_way = None
        return done

    def _save_or_undo(self, position: int, before: ProbeRecord | None) -> None:
        """Save; when the write fails (a full disk), the probe at `position` goes back to
        what the file still holds, so memory never runs ahead of the file."""
        try:
            self.save()
        except BaseException:
            if before is None:
                del self.probes[position]
            else:
                self.probes[position] = before
            raise

    def record(self, name: str, measured: Measured) -> ProbeRecord:
        """Save an outcome known from elsewhere (an end judged by the run that asked for the
        bisect) as a finished probe of the step called `name`."""
        self.begin(self.index(name))
        return self.finish(measured)


def check_series(series: Sequence[str]) -> None:
    """A series to search: at least its two ends, each step named once."""
    if len(series) < MIN_STEPS:
        raise UsageError(
            f"a series has at least {MIN_STEPS} steps, the good end and the bad one; got {len(series)}"
        )
    for name in series:
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"step name {name!r} is empty or not text", "name each step of the series")
    repeated = sorted({n for n in series if series.count(n) > 1})
    if repeated:
        raise UsageError(
            "steps named more than once in the series: " + ", ".join(visible(n) for n in repeated),
            "name each step once",
        )


def as_json(context: Mapping[str, Any]) -> dict[str, Any]:
    """`context` as its file will hold it (tuples as lists, other values as text), so that the
    context of a resume compares equal to the one saved."""
    loaded: dict[str, Any] = json.loads(json.dumps(dict(context), default=str))
    return loaded

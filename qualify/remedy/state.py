"""A remedy's saved state: the run and check it remedies, the variants and source files asked
for, and every unit with its attempt, outcome and times, in one JSON file rewritten atomically
after each change. A remedy stopped anywhere resumes from it: a unit that finished is read
from its folder, one that started and never finished is built again under its next attempt.

    {"version": 1, "run": "20261206-…-rocm72", "check": "20-compile/kernel-resources",
     "variants": {"true16-off": {"installable": ".#remedy-true16-off", "flags": "…"}},
     "sources": ["fattn-tile-instance-dkq112-dv112.cu", …],
     "units": [{"variant": "true16-off", "source_file": "…", "attr": "…", "attempt": 1,
                "started": "…", "finished": "…", "ok": true, "drv": "…", "out": "…",
                "seconds": 41.2, "error": null}]}
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from qualify.checks.evidence import Evidence, Part
from qualify.core.errors import UsageError
from qualify.core.runstore import read_json, write_json

STATE = "remedy.json"


class Variant(Part):
    installable: str
    flags: str = ""


class Unit(Part):
    """One source file built by one variant, in one attempt."""

    variant: str
    source_file: str
    attr: str
    attempt: int = Field(ge=1)
    started: str
    finished: str | None = None
    ok: bool | None = None
    drv: str | None = None
    out: str | None = None
    seconds: float | None = None
    error: str | None = None

    @property
    def folder(self) -> str:
        """Its folder in the remedy's, by variant, source file and attempt."""
        return f"{self.variant}/{self.source_file}/{self.attempt}"


class RemedyFile(Evidence):
    """remedy.json."""

    run: str
    check: str
    variants: dict[str, Variant]
    sources: list[str]
    units: list[Unit] = Field(default_factory=list)

    def last(self, variant: str, source: str) -> Unit | None:
        """The latest attempt at a unit, if any."""
        found = [u for u in self.units if u.variant == variant and u.source_file == source]
        return max(found, key=lambda u: u.attempt) if found else None


def open_state(folder: Path, run: str, check: str) -> RemedyFile:
    """The remedy saved in `folder`, or a new one; a resumed remedy must be of the same run
    and check (another one's units would answer another question)."""
    path = folder / STATE
    if not path.is_file():
        return RemedyFile(run=run, check=check, variants={}, sources=[])
    saved = RemedyFile.load(read_json(path), path)
    if (saved.run, saved.check) != (run, check):
        raise UsageError(
            f"{path} remedies {saved.check} of run {saved.run}, not {check} of {run}",
            "name that run and check, or remove the folder to start over",
        )
    return saved


def save(folder: Path, state: RemedyFile) -> None:
    write_json(folder / STATE, state.to_json())

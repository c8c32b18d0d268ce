"""The files a run's plan is read from — qualify.toml and every stage file — each by its sha256,
and the one digest of them all.

A run records them when it is made (run.json's `plan_files`). A rerun or a resume reads the
plan from the working tree, so it compares the files there with the ones the run recorded: a
stage rerun under other limits than the run's revision had is refused (`preflight.
require_recorded_plan`), or, with --allow-dirty, goes through with the stage recording the plan
it ran under (`PlanStamp`). Bytes are compared, not the plan as read: a file that differs in
any way is named, and the reader of the refusal decides what the change means.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.core import provenance
from qualify.core.config import ProjectConfig
from qualify.pipeline.plan import default_plan_dir

#: How a file of qualify's own plan is named (its path differs from one install to another).
BUILTIN = "<built-in>"


def digest_of(files: Mapping[str, str]) -> str:
    """One sha256 for the files by name and content (the order they are listed in aside)."""
    text = json.dumps(dict(sorted(files.items())), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PlanChange:
    """A file of the plan that differs from the one the run recorded."""

    name: str
    #: "changed", "added" (the run had no such file) or "removed".
    how: str

    def __str__(self) -> str:
        return f"{self.name} {self.how}"


@dataclass(frozen=True)
class PlanFiles:
    """Each file of the plan, by its name relative to the project, with its sha256."""

    files: Mapping[str, str]

    @property
    def digest(self) -> str:
        return digest_of(self.files)

    def as_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "files": dict(sorted(self.files.items()))}

    def changes_from(self, recorded: Mapping[str, str]) -> list[PlanChange]:
        """How these files differ from `recorded`, a file at a time in name order; empty when
        they are the same."""
        out = []
        for name in sorted(set(self.files) | set(recorded)):
            if name not in recorded:
                out.append(PlanChange(name, "added"))
            elif name not in self.files:
                out.append(PlanChange(name, "removed"))
            elif self.files[name] != recorded[name]:
                out.append(PlanChange(name, "changed"))
        return out


def plan_files(config: ProjectConfig) -> PlanFiles:
    """The project's qualify.toml and the stage files its plan is loaded from, as they are now
    (the same files `plan.load_plan` reads: every `*.toml` of the plan's folder)."""
    folder = config.plan_dir if config.plan_dir is not None else default_plan_dir()
    files = {_name(config.path, config, builtin=False): _sha256(config.path)}
    for file in sorted(folder.glob("*.toml")):
        files[_name(file, config, builtin=config.plan_dir is None)] = _sha256(file)
    return PlanFiles(files)


def _name(path: Path, config: ProjectConfig, *, builtin: bool) -> str:
    """A file's name as the records keep it: relative to the project (a moved checkout keeps
    its names), qualify's own plan by its file name alone."""
    if builtin:
        return f"{BUILTIN}/{path.name}"
    return Path(os.path.relpath(path, config.root)).as_posix()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class PlanStamp:
    """What a stage ran under, as its stage.json records it (`ran_under`): the plan's digest,
    the source's revision and whether its tree was dirty, and how the plan differed from the
    one the run recorded (None: the run recorded none to compare with)."""

    plan_digest: str
    revision: str | None
    dirty: bool | None
    plan_changes: tuple[str, ...] | None

    def as_json(self) -> dict[str, Any]:
        changes = list(self.plan_changes) if self.plan_changes is not None else None
        return {
            "plan_digest": self.plan_digest,
            "revision": self.revision,
            "dirty": self.dirty,
            "plan_changes": changes,
        }


def stamp(config: ProjectConfig, now: PlanFiles, recorded: Mapping[str, str] | None) -> PlanStamp:
    """The stamp of the stages this invocation runs: the plan `now`, compared with the files
    the run `recorded`, at the revision the source is at now."""
    git = provenance.git(config.root)
    changes = tuple(str(c) for c in now.changes_from(recorded)) if recorded is not None else None
    return PlanStamp(now.digest, git.get("rev"), git.get("dirty"), changes)

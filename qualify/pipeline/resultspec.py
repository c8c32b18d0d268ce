"""The check a result.json was measured with (`CheckSpec.as_json`, saved under `spec`), as a type
checked when the result is read (`qualify.pipeline.checkrecords`): `--rejudge` and the bisect's
gate judge again from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.pipeline.recordfields import mapping, number, string, wrong


@dataclass(frozen=True)
class SavedSpec:
    """A result's `spec`: the check's name, kind, parameters and limits as it was measured with
    them (a result saved without one: every field empty)."""

    name: str | None = None
    kind: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    env: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    #: The spec as it was read (saved again with what a rejudgement changed).
    document: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return dict(self.document)


def saved_spec(document: Mapping[str, Any], path: Path) -> SavedSpec:
    """`document["spec"]` checked (absent or null: an empty spec); a key of the wrong type is
    refused naming `path` and the key."""
    spec = document.get("spec") or {}
    where = str(path)
    spec = mapping(spec, where, "spec")
    timeout = spec.get("timeout_s")
    if timeout is not None and not number(timeout):
        raise wrong(path, "spec.timeout_s", timeout, "a number of seconds")
    tables = {
        key: mapping(spec.get(key) or {}, where, f"spec.{key}") for key in ("params", "limits", "env", "vars")
    }
    return SavedSpec(
        name=string(spec, "name", path, at="spec."),
        kind=string(spec, "kind", path, at="spec."),
        params=tables["params"],
        limits=tables["limits"],
        timeout_s=timeout,
        env=tables["env"],
        description=string(spec, "description", path, at="spec."),
        vars=tables["vars"],
        document=spec,
    )

"""A check as the plan (and the selected profile) resolve it: the unit saved with each result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qualify.core.recordredaction import redact_env, redact_values


@dataclass(frozen=True)
class CheckSpec:
    """One check of a stage, as the plan (and the selected profile) resolve it."""

    name: str
    kind: str
    params: dict[str, Any]
    limits: dict[str, float]
    roles: tuple[str, ...]
    timeout_s: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""
    #: Check variables: over the project's [vars], under an arm's own vars.
    vars: dict[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Any:
        return self.params.get(name)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            # Saved in run.json, stage.json and result.json: secrets redacted (a template's key).
            "params": redact_values(self.params),
            "limits": self.limits,
            "roles": list(self.roles),
            "timeout_s": self.timeout_s,
            "env": redact_env(self.env),
            "description": self.description,
            "vars": redact_values({k: list(v) if isinstance(v, tuple) else v for k, v in self.vars.items()}),
        }

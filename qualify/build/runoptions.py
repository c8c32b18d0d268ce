"""The run's build options from the command line (`--allow-dirty`, `--override-input`,
`--nix-option`), as a typed value: what a run passes its build check (`CheckContext.options`,
run.json's `options` on a resumed run), checked once where the build reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qualify.core.errors import RunStoreError

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class BuildOptions:
    """Whether a dirty tree may be built, the candidate's input overrides (name, flake ref) and
    the nix settings (name, value) of the command line; secrets in them as run.json saved them."""

    allow_dirty: bool = False
    override_inputs: Pairs = ()
    nix_options: Pairs = ()

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> BuildOptions:
        """The options a run was given; one of the wrong type is refused by name."""
        allow_dirty = options.get("allow_dirty", False)
        if not isinstance(allow_dirty, bool):
            raise _wrong("allow_dirty", allow_dirty, "true or false")
        return cls(allow_dirty, _pairs(options, "override_inputs"), _pairs(options, "nix_options"))


def _pairs(options: Mapping[str, Any], key: str) -> Pairs:
    value = options.get(key, ())
    if not isinstance(value, (list, tuple)) or not all(_pair(v) for v in value):
        raise _wrong(key, value, "a list of [name, value] pairs of strings")
    return tuple((str(name), str(text)) for name, text in value)


def _pair(value: object) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value)


def _wrong(key: str, value: object, wanted: str) -> RunStoreError:
    shown = ascii(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return RunStoreError(
        f"run.json: options.{key}: expected {wanted} (it is {shown})",
        "this run folder was not written by qualify as it is; use the run it came from",
    )

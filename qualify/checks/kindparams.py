"""A kind's plan parameters as a typed value, read by attribute.

Each kind declares its parameters as `Param`s (`qualify.checks.base`), which `qualify plan`
checks and fills with their defaults, and beside them a frozen dataclass of the same names,
types and defaults (`NumericsParams`, `BenchParams`, …; `tests/test_kind_params.py` holds the
two together). `measure` and `judge` build it once from the check's spec, `XParams.of(spec)`,
so a parameter is read as `params.min_chunks`, typed, with the declared default where the spec
leaves it out (a result saved by an older qualify, before the parameter was added), never with
a fallback of its own that could drift from the declaration.

Light on purpose: `qualify plan` checks a kind's plan through it (`CheckKind.invalid`), and the
plan imports no heavy library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, Self, Union, get_args, get_origin, get_type_hints

from qualify.core.errors import RUN_FOLDER_HINT, RunStoreError

if TYPE_CHECKING:
    from qualify.checks.base import SavedCheck
    from qualify.core.checkspec import CheckSpec

#: Said with a saved parameter of the wrong type (a plan's are checked when it loads).
HINT = RUN_FOLDER_HINT

#: What a value of each type is, in the words of a refusal.
_WORDS: dict[object, str] = {
    str: "a string",
    float: "a number",
    int: "a whole number",
    bool: "true or false",
    tuple: "a list of strings",
    dict: "a table",
}


@dataclasses.dataclass(frozen=True)
class KindParams:
    """The base of every kind's parameters type: frozen, built from a spec with `of`."""

    @classmethod
    def of(cls, spec: CheckSpec, where: str | Path | None = None) -> Self:
        """The spec's parameters, each checked against its field's type; a parameter the spec
        leaves out takes its declared default. A parameter the type does not name (a run set's
        `alpha_family`) is left to those who read it. `where` names the file the spec was read
        from in a refusal."""
        place = str(where) if where is not None else f"check {spec.name!r}"
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name in spec.params:
                values[field.name] = _checked(spec.params[field.name], hints[field.name], place, field.name)
            elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise RunStoreError(f"{place}: spec.params.{field.name}: missing", HINT)
        return cls(**values)

    @classmethod
    def of_saved(cls, saved: SavedCheck) -> Self:
        """The parameters a saved check is judged with: its result.json's, with a rejudge's
        `judge_params` taken from the current plan (`qualify.pipeline.rejudge`)."""
        return cls.of(saved.spec, saved.folder / "result.json")


def _checked(value: object, annotation: Any, where: str, name: str) -> Any:
    """`value` as a field of type `annotation` holds it, or a refusal naming the key."""
    args = get_args(annotation)
    optional = get_origin(annotation) in (Union, UnionType) and NoneType in args
    base = next(a for a in args if a is not NoneType) if optional else annotation
    if value is None and optional:
        return None
    origin = get_origin(base) or base
    if origin is bool:
        ok = isinstance(value, bool)
    elif origin is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif origin is float:
        # An integer is a number too (TOML's `30`, a default of 30): kept as it was written.
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif origin is str:
        ok = isinstance(value, str)
    elif origin is tuple:
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        value = tuple(value) if ok else value  # type: ignore[arg-type]
    elif origin is dict:
        ok = isinstance(value, Mapping)
        value = dict(value) if ok else value  # type: ignore[call-overload]
    else:
        # A programming error: a parameters type declares a field of a type no Param has.
        raise TypeError(f"{name}: no parameter is of type {annotation!r}")
    if not ok:
        shown = ascii(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        wanted = _WORDS[origin] + (" or null" if optional else "")
        raise RunStoreError(f"{where}: spec.params.{name}: expected {wanted} (it is {shown})", HINT)
    return value

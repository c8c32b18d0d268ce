"""A kind's plan parameters, declared once: a frozen dataclass whose fields are the parameters.

Each kind declares its parameters as the fields of one type (`NumericsParams`, `BenchParams`,
…), each field's name, type and default the parameter's, and its `param(...)` the rest: the
help, the range a number must lie in, the setting it applies under. Everything else derives
from it: the kind's `Param`s (`declared()`), which `qualify plan` checks and fills with their
defaults and `qualify kinds` and docs/check-kinds.md show; and the value `measure` and `judge`
read, `XParams.of(spec)`, built once from the check's spec, so a parameter is read as
`params.min_chunks`, typed, with the declared default where the spec leaves it out (a result
saved by an older qualify, before the parameter was added), never with a fallback of its own.

A field's type says the parameter's: `str` a string, `int` an integer, `float` a number,
`bool` a boolean, `tuple[str, ...]` a list of strings, `dict[str, Any]` a table, each `| None`
where the default is None. A field without a default is a required parameter.

Light on purpose: `qualify plan` checks a kind's plan through it (`CheckKind.invalid`), and the
plan imports no heavy library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any, Self, Union, get_args, get_origin, get_type_hints

from qualify.checks.base import Param, ParamType
from qualify.core.errors import RUN_FOLDER_HINT, RunStoreError

if TYPE_CHECKING:
    from qualify.checks.base import SavedCheck
    from qualify.core.checkspec import CheckSpec
    from qualify.core.ranges import Range

#: Said with a saved parameter of the wrong type (a plan's are checked when it loads).
HINT = RUN_FOLDER_HINT

#: The parameter type of each field type.
_TYPES: dict[object, ParamType] = {
    str: "string",
    float: "number",
    int: "integer",
    bool: "boolean",
    tuple: "strings",
    dict: "table",
}

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
class _Declared:
    """What a field's `param(...)` says beyond its name, type and default."""

    help: str
    allowed: Range | None
    only_when: tuple[str, str] | None


def param(
    default: Any = dataclasses.MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    help: str,
    allowed: Range | None = None,
    only_when: tuple[str, str] | None = None,
) -> Any:
    """A parameter as a field of a kind's parameters type: its default (none: required; a
    `factory` for a table's), its help, the range a number must lie in, and the setting it means
    something under (`Param.only_when`)."""
    declared = {_DECLARED: _Declared(help, allowed, only_when)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=declared)
    return dataclasses.field(default=default, metadata=declared)


_DECLARED = "qualify.param"


@dataclasses.dataclass(frozen=True)
class KindParams:
    """The base of every kind's parameters type: frozen, built from a spec with `of`; its
    fields, declared with `param`, are the kind's `Param`s (`declared`)."""

    @classmethod
    def declared(cls) -> tuple[Param, ...]:
        """The kind's parameters as the plan, `qualify kinds` and the docs read them, in the
        order of the fields. A list's default is a list there, as a plan writes it."""
        hints = get_type_hints(cls)
        out = []
        for field in dataclasses.fields(cls):
            said = field.metadata.get(_DECLARED)
            if not isinstance(said, _Declared):
                # A programming error: every field of a parameters type is a parameter.
                raise TypeError(f"{cls.__name__}.{field.name} is not declared with param(...)")
            base, _optional = _base(hints[field.name])
            kind = _TYPES.get(get_origin(base) or base)
            if kind is None:
                raise TypeError(f"{cls.__name__}.{field.name}: no parameter is of type {hints[field.name]!r}")
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            default = None if required else _default(field)
            out.append(
                Param(
                    field.name,
                    kind,
                    list(default) if isinstance(default, tuple) else default,
                    required=required,
                    help=said.help,
                    allowed=said.allowed,
                    only_when=said.only_when,
                )
            )
        return tuple(out)

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
                raise RunStoreError(f"{place}: spec.params.{field.name} is missing", HINT)
        return cls(**values)

    @classmethod
    def of_saved(cls, saved: SavedCheck) -> Self:
        """The parameters a saved check is judged with: its result.json's, with a rejudge's
        `judge_params` taken from the current plan (`qualify.pipeline.rejudge`)."""
        return cls.of(saved.spec, saved.folder / "result.json")


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _base(annotation: Any) -> tuple[Any, bool]:
    """The type a field holds, and whether it may be None too."""
    args = get_args(annotation)
    optional = get_origin(annotation) in (Union, UnionType) and NoneType in args
    return (next(a for a in args if a is not NoneType) if optional else annotation), optional


def _checked(value: object, annotation: Any, where: str, name: str) -> Any:
    """`value` as a field of type `annotation` holds it, or a refusal naming the key."""
    base, optional = _base(annotation)
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

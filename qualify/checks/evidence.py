"""A check's evidence as types: what `measure` saves for a role (its measurement) and what
`judge` writes beside its verdict (its facts), each a frozen model with a version.

A kind declares its types (`CheckKind.evidence`), and its readers go through them: its judge
reads a role's measurement with `read` (`SavedCheck.measured`), and a result's facts are loaded
with the result (`CheckResult.evidence`) for the report and the fleet merge. A document is
checked when it is read, never met
half-way through a template: a missing field, one of the wrong type or one the type does not
know is refused naming the file and the key. A document of an older version is brought up to
the current one by the type's migrations first (the file is left as it is); one from a newer
qualify is refused.

Pydantic does the checking: the models are plain declarations, and the same declaration gives
`qualify kinds --json` the fields each kind's facts hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Self, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Tag, ValidationError

from qualify.checks.refusals import MEMBER, refusal
from qualify.core.errors import RUN_FOLDER_HINT, RunStoreError
from qualify.core.runstore import read_json

#: The key that holds a document's version of its type; absent, the document is version 1
#: (what qualify wrote before its evidence had types).
VERSION_KEY = "version"
HINT = RUN_FOLDER_HINT


Migration = Callable[[dict[str, Any]], dict[str, Any]]
M = TypeVar("M", bound=BaseModel)


class Part(BaseModel):
    """A part of an evidence document (a role's summary, one bound, one row): frozen, every field
    declared, no coercion, checked with the document that holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Evidence(BaseModel):
    """One document of a check's evidence: frozen, every field declared, and versioned."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    #: The version this qualify writes.
    VERSION: ClassVar[int] = 1
    #: From each older version to the next: {1: one_to_two, …}.
    MIGRATIONS: ClassVar[Mapping[int, Migration]] = {}

    @classmethod
    def load(cls, document: object, where: str | Path, key: str = "") -> Self:
        """The typed document, migrated to the current version; `where` and `key` (where the
        document sits in its file: "facts") name what was wrong."""
        prefix = f"{key}." if key else ""
        if not isinstance(document, Mapping):
            raise RunStoreError(f"{where}: {key or 'the document'} is not an object", HINT)
        values = {k: v for k, v in document.items() if k not in (VERSION_KEY, "schema_version")}
        version = document.get(VERSION_KEY, 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise RunStoreError(f"{where}: {prefix}{VERSION_KEY} is {version!r}, not a version number", HINT)
        if version > cls.VERSION:
            raise RunStoreError(
                f"{where}: {prefix.rstrip('.') or cls.__name__} is version {version}; this qualify reads "
                f"{cls.__name__} up to version {cls.VERSION}",
                "read it with the qualify that wrote it, or a newer one",
            )
        for step in range(version, cls.VERSION):
            values = cls.MIGRATIONS[step](values)
        return validated(cls, values, where, key)

    def to_json(self) -> dict[str, Any]:
        """The document to save, with its version: the fields a writer set (or a reader read),
        so that an optional part left out stays out and a document reads back as it was."""
        return {VERSION_KEY: self.VERSION, **self.model_dump(mode="json", exclude_unset=True, by_alias=True)}

    @classmethod
    def read(cls, path: Path) -> Self:
        """The typed document of a JSON file qualify wrote (a role's measurement.json)."""
        return cls.load(read_json(path), path)

    @classmethod
    def fields(cls) -> list[dict[str, str]]:
        """Each field, and each field of the parts it holds: its name (`requests{}.sent`: a
        field of every value of the mapping `requests`; `trends[].p_value`: of every item of
        the list `trends`), its type as declared, and what it means."""
        return _fields(cls, "")


def member(name: str) -> Tag:
    """The tag of one member of a tagged union (`Annotated[A, member("a")] | ...` with a
    `Discriminator` that picks it): its errors name the document's keys, not the tag."""
    return Tag(MEMBER + name)


def validated(model: type[M], document: object, where: str | Path, key: str = "") -> M:
    """`document` as `model`, or a RunStoreError naming `where` and the key (under `key`) that
    is missing, of the wrong type, or not one the model knows."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise refusal(exc, where, key) from None


def _fields(model: type[BaseModel], prefix: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for name, field in model.model_fields.items():
        shown = _type_name(field.annotation)
        out.append({"name": prefix + name, "type": shown, "help": field.description or ""})
        for part, marks in _parts(field.annotation, ""):
            out += _fields(part, f"{prefix}{name}{marks}.")
    return out


def _parts(annotation: Any, marks: str) -> list[tuple[type[BaseModel], str]]:
    """The models inside a field's type, each with how it is reached ("[]", "{}")."""
    if get_origin(annotation) is Annotated:
        return _parts(get_args(annotation)[0], marks)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, marks)]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple):
        return [p for a in args for p in _parts(a, marks + "[]")]
    if origin is dict:
        return _parts(args[1], marks + "{}") if len(args) == 2 else []
    return [p for a in args for p in _parts(a, marks)]  # a union: X | None


def _type_name(annotation: Any) -> str:
    """A type as a reader writes it: `dict[str, RequestSummary]`, `float | None`."""
    if annotation is None or annotation is type(None):
        return "None"
    args = get_args(annotation)
    origin = get_origin(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is not None and args:
        if origin in (Union, UnionType):
            return " | ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))

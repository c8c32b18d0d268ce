"""A run folder's record refused in one set of words: what pydantic found wrong in run.json,
stage.json, result.json, a result's tables and charts, a check's evidence or any other file
qualify reads back, said naming the key the way a reader writes it (`checks[0].verdict`,
`charts[0].data.pinned.edges[3]`) and the JSON type it held ("is a string, not a number").

Every reader says it through `refusal` (or `checked`, which validates and refuses): the records
(`qualify.records.model`), the figures (`qualify.checks.figures`) and the evidence
(`qualify.checks.evidence`), so a hand-edited file reads the same whatever record it is in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from qualify.core.errors import RUN_FOLDER_HINT as HINT
from qualify.core.errors import RunStoreError

M = TypeVar("M", bound=BaseModel)

#: A JSON value's type, as a refusal names it.
_JSON_TYPES: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "a list",
    tuple: "a list",
    dict: "an object",
    type(None): "null",
}

#: What each of pydantic's type errors says the field should have held.
EXPECTED = {
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


class Refused(ValueError):
    """A field's own refusal, raised by its validator: its words follow the key ("'MAYBE' is
    not one of ...")."""


def refused(why: str) -> Refused:
    return Refused(why)


def type_name(value: object) -> str:
    """The JSON type of `value` ("a string", "null"); another type by its own name."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


#: How a member of a tagged union is marked in an error's place (`qualify.checks.evidence.member`):
#: pydantic names the member there, and the key named is the document's own path, without it.
MEMBER = "\x00"


def place(loc: Sequence[int | str], under: str = "") -> str:
    """The key at pydantic's `loc`, under `under` ("checks[0]"): `checks[0].verdict`."""
    said = under
    for part in loc:
        if isinstance(part, str) and part.startswith(MEMBER):
            continue
        said += f"[{part}]" if isinstance(part, int) else f"{'.' if said else ''}{part}"
    return said or "the document"


def said(error: Mapping[str, Any]) -> str:
    """What is wrong with the value at the error's key, as the words after the key."""
    kind = error["type"]
    value = error["input"]
    if kind == "value_error" and isinstance(error["ctx"]["error"], Refused):
        return str(error["ctx"]["error"])  # a field's own rule words it itself
    if kind == "missing":
        return "is missing"
    if kind == "extra_forbidden":
        return ": not a field this qualify knows"
    if kind in EXPECTED:
        return f"is {type_name(value)}, not {EXPECTED[kind]}"
    if kind in ("literal_error", "enum"):
        return f"{value!r} is not one of {error['ctx']['expected']}"
    if kind == "greater_than_equal":
        return f"is {value!r}, less than {error['ctx']['ge']}"
    if kind == "value_error":
        return f"is {type_name(value)}, not {error['ctx']['error']}"
    shown = ascii(value)
    return f"is {shown if len(shown) <= 60 else shown[:57] + '...'}: {str(error['msg']).lower()}"


def refused_at(key: str, error: Mapping[str, Any]) -> str:
    """The key and what is wrong with it, as one phrase ("ungated is a string, not true or
    false", "checks[0].weight: not a field this qualify knows")."""
    words = said(error)
    return f"{key}{words}" if words.startswith(":") else f"{key} {words}"


def refusal(
    exc: ValidationError, where: str | Path, key: str = "", model: type[BaseModel] | None = None
) -> RunStoreError:
    """The first thing pydantic found wrong, naming `where` and the key (under `key`):
    "checks[0].verdict 'GOOD' is not one of ...", "spec.limits is a string, not an object".
    With the `model` that was validated, a field left out is said as the records say a required
    field left out (null, not what the field holds) and a word not among its choices names them."""
    first = exc.errors()[0]
    loc = tuple(first["loc"])
    at = place(loc, key)
    if model is not None and first["type"] == "missing":
        return RunStoreError(f"{where}: {at} is null, not {_named(_annotation_at(model, loc))}", HINT)
    if model is not None and first["type"] == "literal_error":
        words = ", ".join(str(w) for w in get_args(_annotation_at(model, loc)))
        return RunStoreError(f"{where}: {at} {first['input']!r} is not one of {words}", HINT)
    return RunStoreError(f"{where}: {refused_at(at, first)}", HINT)


def checked(model: type[M], document: Any, where: str | Path, under: str = "") -> M:
    """`document` as `model`, or a RunStoreError naming `where` and the key that is wrong (under
    `under`: "options")."""
    try:
        return model.model_validate(plain(document))
    except ValidationError as exc:
        raise refusal(exc, where, under, model) from None


def plain(value: Any) -> Any:
    """`value` as JSON holds it: a writer's tuples as lists, every key a string."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


_NAMES: dict[Any, str] = {str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The declared type of the value at `loc` inside `model`."""
    annotation: Any = model
    for step in loc:
        annotation = _not_none(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = annotation.model_fields
            name = next((n for n, f in fields.items() if step in (n, f.alias)), None)
            annotation = fields[name].annotation if name else Any
        else:
            args = get_args(annotation)
            annotation = args[-1] if args else Any
    return _not_none(annotation)


def _not_none(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if type(None) in get_args(annotation) and len(args) == 1 else annotation


def _named(annotation: Any) -> str:
    origin = get_origin(annotation) or annotation
    if origin is list:
        return "a list"
    if origin is dict or (isinstance(origin, type) and issubclass(origin, BaseModel)):
        return "an object"
    if origin is Literal:
        return "one of " + ", ".join(str(w) for w in get_args(annotation))
    return _NAMES.get(origin, "a value")

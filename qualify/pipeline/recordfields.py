"""What the run folder's records share when they are read: each field's shape checked, a
wrong one refused naming the file and the key (`qualify.pipeline.record`,
`qualify.pipeline.checkrecords`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from qualify.checks.refusals import type_name
from qualify.core.errors import RunStoreError
from qualify.core.verdicts import StageState, Verdict

#: A check's verdict; a stage's is one of them or BLOCKED (never measured: its gate failed).
VERDICTS = tuple(v.value for v in Verdict)
STAGE_VERDICTS = (*VERDICTS, StageState.BLOCKED.value)
HINT = "this run folder was not written by qualify as it is; use the run it came from"


def text(value: Any) -> str | None:
    return None if value is None else str(value)


# What the reports read of a record, checked in shape here, once: a field of the wrong type (a
# hand-edited file, an archive from elsewhere) is refused naming the file and the key, never met
# as a TypeError deep inside a template.


def wrong(where: str | Path, key: str, value: Any, expected: str) -> RunStoreError:
    return RunStoreError(f"{where}: {key} is {type_name(value)}, not {expected}", HINT)


def string(document: Mapping[str, Any], key: str, where: str | Path, *, at: str = "") -> str | None:
    """`document[key]`: a string, or None when it is absent or null."""
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise wrong(where, at + key, value, "a string")
    return value


def a_list(value: Any, where: str | Path, key: str, item: Callable[[Any], bool], each: str) -> list[Any]:
    """`value`: a list whose every item is what `item` accepts (`each` says it: "a string")."""
    if not isinstance(value, list):
        raise wrong(where, key, value, "a list")
    for index, one in enumerate(value):
        if not item(one):
            raise wrong(where, f"{key}[{index}]", one, each)
    return value


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def mapping(value: Any, where: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise wrong(where, key, value, "an object")
    return value


def word(value: Any, words: tuple[str, ...], where: str | Path, key: str) -> str:
    if value not in words:
        raise RunStoreError(f"{where}: {key} {value!r} is not one of {', '.join(words)}", HINT)
    return str(value)


def objects(document: Mapping[str, Any], key: str, path: Path) -> tuple[Mapping[str, Any], ...]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise RunStoreError(f"{path}: {key!r} is not a list of objects", HINT)
    return tuple(value)


def seconds(value: Any) -> float | None:
    """A duration: a finite number of seconds, else None (an integer of hundreds of digits has
    no float; it is no duration either)."""
    if not number(value):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None

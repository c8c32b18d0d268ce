"""Reading TOML files with errors that name the file, the key, its line and what was expected.

`tomllib` gives a line only for syntax errors. For a wrong value we find the key's line in the
text ourselves (best effort: table headers, dotted keys, arrays of tables); when it cannot be
found the message still names the file and the full key.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.core.errors import ConfigError

KeyPath = tuple[str | int, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-\".' ]+?)\s*=")


def _split_dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


def locate(text: str, path: KeyPath) -> int | None:
    """Return the 1-based line where `path` is defined in `text`, or None."""
    keys = [p for p in path if isinstance(p, str)]
    indices = [p for p in path if isinstance(p, int)]
    table: list[str] = []
    array_seen: dict[str, int] = {}
    array_index: dict[str, int] = {}
    best: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _split_dotted(header.group(2))
            if header.group(1) == "[[":
                name = ".".join(table)
                array_index[name] = array_seen.get(name, -1) + 1
                array_seen[name] = array_index[name]
            if table == keys and _array_matches(table, indices, array_index):
                best = best or number
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        full = table + _split_dotted(assign.group(1))
        inside = full == keys[: len(full)] and table == keys[: len(table)]
        if inside and _array_matches(table, indices, array_index):
            if full == keys:
                return number
            best = number  # an inline table or array holding the key
    return best


def _array_matches(table: list[str], indices: list[int], seen: dict[str, int]) -> bool:
    if not indices:
        return True
    for depth in range(len(table), 0, -1):
        name = ".".join(table[:depth])
        if name in seen:
            return seen[name] == indices[0]
    return True


def suggest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean "x"?)' when a close name exists, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@dataclass(frozen=True)
class TomlDoc:
    """A parsed TOML file, kept with its text so errors can point at lines."""

    path: Path
    text: str
    data: dict[str, Any]

    def where(self, key: KeyPath) -> str:
        line = locate(self.text, key) if key else None
        place = f"{self.path}:{line}" if line else str(self.path)
        return f"{place}: {dotted(key)}" if key else place

    def error(self, key: KeyPath, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {message}", hint)


def read_toml(path: Path) -> TomlDoc:
    """Parse `path`; a missing file or a syntax error becomes a ConfigError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already carries "(at line N, column M)".
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return TomlDoc(path, text, data)


class Table:
    """A typed view of one TOML table: getters that raise ConfigErrors with the key's line."""

    def __init__(self, doc: TomlDoc, data: Mapping[str, Any], path: KeyPath = ()) -> None:
        self.doc = doc
        self.data = data
        self.path = path

    def key(self, name: str | int) -> KeyPath:
        return (*self.path, name)

    def error(self, name: str | int | None, message: str, hint: str | None = None) -> ConfigError:
        return self.doc.error(self.path if name is None else self.key(name), message, hint)

    def reject_unknown(self, allowed: Iterable[str], what: str = "key") -> None:
        known = sorted(set(allowed))
        for name in self.data:
            if name not in known:
                raise self.error(
                    name,
                    f"unknown {what} {name!r}{suggest(name, known)}",
                    "known keys here: " + ", ".join(known),
                )

    def _typed(self, name: str, kinds: tuple[type, ...], expected: str, default: Any) -> Any:
        if name not in self.data:
            return default
        value = self.data[name]
        # bool is an int in Python; a TOML boolean is never a number here.
        if isinstance(value, bool) and bool not in kinds:
            raise self.error(name, f"expected {expected}, got a boolean")
        if not isinstance(value, kinds):
            raise self.error(name, f"expected {expected}, got {_toml_type(value)}")
        return value

    def string(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        if required and name not in self.data:
            raise self.error(None, f"missing required key {name!r} (a string)")
        value: str | None = self._typed(name, (str,), "a string", default)
        return value

    def number(self, name: str, default: float | None = None) -> float | None:
        value = self._typed(name, (int, float), "a number", default)
        return None if value is None else float(value)

    def boolean(self, name: str, default: bool) -> bool:
        value: bool = self._typed(name, (bool,), "true or false", default)
        return value

    def strings(self, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self._typed(name, (list,), "a list of strings", None)
        if value is None:
            return default
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.doc.error((*self.key(name), index), f"expected a string, got {_toml_type(item)}")
        return tuple(value)

    def table(self, name: str, *, required: bool = False) -> Table:
        if required and name not in self.data:
            raise self.error(None, f"missing required table [{dotted(self.key(name))}]")
        value = self._typed(name, (dict,), "a table", {})
        return Table(self.doc, value, self.key(name))

    def tables(self, name: str) -> list[Table]:
        """An array of tables (`[[name]]`)."""
        value = self._typed(name, (list,), "an array of tables", [])
        out = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.doc.error((*self.key(name), index), "expected a table")
            out.append(Table(self.doc, item, (*self.key(name), index)))
        return out

    def string_map(self, name: str) -> dict[str, str]:
        sub = self.table(name)
        for key, value in sub.data.items():
            if not isinstance(value, str):
                raise sub.error(key, f"expected a string, got {_toml_type(value)}")
        return dict(sub.data)


def _toml_type(value: object) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a float",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)

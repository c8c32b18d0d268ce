"""Reading TOML files with errors that name the file, the key, its line and what was expected.

`tomllib` gives a line only for syntax errors. For a wrong value we find the key's line in the
text ourselves (best effort: table headers, dotted keys, arrays of tables, inline tables); when
it cannot be found the message still names the file and the full key. The lines of every key
are found in one pass over the text, kept with the parsed file, so that a plan of thousands of
checks costs one read, not one per error it might report.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from qualify.core.errors import ConfigError
from qualify.core.ranges import Range

KeyPath = tuple[str | int, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-\".' ]+?)\s*=")


def _split_dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


#: What ends or opens something, outside a string and inside each kind of string.
_OUTSIDE = re.compile(r"\"\"\"|'''|[\"'#\[\]{}]")
_INSIDE = {
    '"': re.compile(r'\\.|"'),
    '"""': re.compile(r'\\.|"""'),
    "'": re.compile("'"),
    "'''": re.compile("'''"),
}


class _Value:
    """Where a value spanning lines ends: open brackets and multi-line strings, so that the
    lines inside a multi-line array or string are never taken for keys or headers."""

    def __init__(self) -> None:
        self.depth = 0
        self.string: str | None = None  # the delimiter of the string being read

    @property
    def open(self) -> bool:
        return self.depth > 0 or self.string is not None

    def feed(self, text: str) -> None:
        at = 0
        while True:
            pattern = _OUTSIDE if self.string is None else _INSIDE[self.string]
            found = pattern.search(text, at)
            if found is None:
                break
            token, at = found.group(), found.end()
            if self.string is not None:
                if token == self.string:
                    self.string = None
            elif token == "#":
                break
            elif token in _INSIDE:
                self.string = token
            elif token in "[{":
                self.depth += 1
            else:
                self.depth = max(self.depth - 1, 0)
        if self.string in ('"', "'"):
            self.string = None  # a one-line string cannot go on to the next line


def _resolve(names: list[str], arrays: Mapping[KeyPath, int]) -> KeyPath:
    """A header's dotted names as a key path: an array of tables on the way stands for its
    last element, as TOML reads `[check.limits]` after `[[check]]`."""
    path: list[str | int] = []
    for name in names:
        path.append(name)
        last = arrays.get(tuple(path))
        if last is not None:
            path.append(last)
    return tuple(path)


def key_lines(text: str) -> dict[KeyPath, int]:
    """The 1-based line where each key path (and each table) of `text` is first defined."""
    lines: dict[KeyPath, int] = {}
    arrays: dict[KeyPath, int] = {}  # an array of tables -> the index of its last element
    table: KeyPath = ()
    value = _Value()
    for number, line in enumerate(text.splitlines(), start=1):
        if value.open:
            value.feed(line)
            continue
        header = _HEADER.match(line)
        if header:
            names = _split_dotted(header.group(2))
            if header.group(1) == "[[":
                array = (*_resolve(names[:-1], arrays), names[-1])
                arrays[array] = arrays.get(array, -1) + 1
                lines.setdefault(array, number)
                table = (*array, arrays[array])
            else:
                table = _resolve(names, arrays)
            for depth in range(1, len(table) + 1):  # `[a.b.c]` defines a and a.b too
                lines.setdefault(table[:depth], number)
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        full = (*table, *_split_dotted(assign.group(1)))
        for depth in range(len(table) + 1, len(full) + 1):
            lines.setdefault(full[:depth], number)
        value.feed(line[assign.end() :])
    return lines


def _line_of(lines: Mapping[KeyPath, int], path: KeyPath) -> int | None:
    # A key not written as such (inside an inline table, or merged from elsewhere) is shown at
    # the nearest table or key holding it.
    for depth in range(len(path), 0, -1):
        found = lines.get(path[:depth])
        if found is not None:
            return found
    return None


def locate(text: str, path: KeyPath) -> int | None:
    """Return the 1-based line where `path` is defined in `text` (or the nearest table or key
    holding it), or None."""
    return _line_of(key_lines(text), path)


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

    @cached_property
    def lines(self) -> dict[KeyPath, int]:
        """Every key's line, found once when the first error needs one."""
        return key_lines(self.text)

    def where(self, key: KeyPath) -> str:
        line = _line_of(self.lines, key) if key else None
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

    def number(
        self, name: str, default: float | None = None, *, allowed: Range | None = None
    ) -> float | None:
        """A finite number, within `allowed` when given; the default is taken as it is."""
        if name not in self.data:
            return default
        value = self._typed(name, (int, float), "a number", None)
        self._check_range(name, value, allowed)
        return float(value)

    def integer(self, name: str, default: int | None = None, *, allowed: Range | None = None) -> int | None:
        """A whole number (`3` or `3.0`), within `allowed` when given."""
        if name not in self.data:
            return default
        value = self._typed(name, (int, float), "a whole number", None)
        if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
            raise self.error(name, f"{name} = {value!r}: expected a whole number")
        self._check_range(name, value, allowed)
        return int(value)

    def _check_range(self, name: str, value: float, allowed: Range | None) -> None:
        if value in (allowed or Range()):
            return
        wanted = (allowed or Range()).words()
        if not math.isfinite(value):
            # NaN compares false with everything and infinity is no limit: neither is a value.
            wanted = "a finite number" + ("" if wanted == "any finite number" else f", {wanted}")
        raise self.error(name, f"{name} = {value!r} is out of range: expected {wanted}")

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

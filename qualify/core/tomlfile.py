"""Reading TOML files with errors that name the file, the key, its line and what was expected.

`tomllib` gives a line only for syntax errors. For a wrong value we find the key's line in the
text ourselves (best effort: table headers, dotted keys, arrays of tables, inline tables); when
it cannot be found the message still names the file and the full key. The lines of every key
are found in one pass over the text, kept with the parsed file, so that a plan of thousands of
checks costs one read, not one per error it might report.

A file is read up to `MAX_BYTES`, and its arrays and tables may nest `MAX_DEPTH` deep: a
deeper file is refused naming where, before anything recursive (the parser itself, a walk over
a table parameter, a JSON copy in run.json) runs out of stack on it.
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

from qualify.core.capped import FileTooLarge, read_capped
from qualify.core.errors import ConfigError
from qualify.core.plaintext import visible
from qualify.core.ranges import Range

KeyPath = tuple[str | int, ...]

#: The largest qualify.toml or stage file read (a plan of thousands of checks is a few MiB).
MAX_BYTES = 64 << 20
#: How deep arrays and tables may nest in one (a table parameter inside a profile: about 8).
MAX_DEPTH = 32

# Possessive (`*+`, `++`): a key or header of a million blanks is read in one pass, never
# backtracked over once per character (quadratic, minutes for a few megabytes).
_HEADER = re.compile(r"^\s*+(\[\[?)\s*+([^\]]++)\]\]?\s*+(#.*)?$")
_ASSIGN = re.compile(r"""^\s*+((?:[A-Za-z0-9_\-. \t]|"(?:[^"\\]|\\.)*+"|'[^']*+')++)=""")


def _split_dotted(text: str) -> list[str]:
    return [_key_part(part.strip()) for part in text.split(".")]


def _key_part(part: str) -> str:
    """A key as TOML reads it: quotes taken off, and a basic string's escapes (`"a\\u202e"`)
    read, so that the key is found under the name the parser gave it."""
    if part.startswith('"') and "\\" in part:
        try:
            return str(tomllib.loads(f"k = {part}")["k"])
        except (tomllib.TOMLDecodeError, RecursionError):
            pass
    return part.strip("\"'")


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
    """`check[2].limits.max_x`; a key's invisible or control characters written as escapes
    (`\\u202e`), so that a message shows them instead of obeying them."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{visible(part)}" if out else visible(part))
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
    """Parse `path`; a missing, unreadable, too large or too deeply nested file or a syntax
    error becomes a ConfigError naming it."""
    try:
        text = read_capped(path, MAX_BYTES, "the file").decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except FileTooLarge as exc:
        raise ConfigError(
            str(exc), "a qualify.toml or stage file is a few kilobytes: is this the right file?"
        ) from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError included
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    too_deep = ConfigError(
        f"{path}: arrays or tables nested more than {MAX_DEPTH} deep",
        f"qualify reads at most {MAX_DEPTH} levels of nested arrays and tables; flatten the value",
    )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already carries "(at line N, column M)".
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        # The parser recurses once per level: hundreds of levels exhaust Python's stack.
        raise too_deep from None
    doc = TomlDoc(path, text, data)
    deep = _too_deep(data)
    if deep is not None:
        raise doc.error(deep, too_deep.message.removeprefix(f"{path}: "), too_deep.hint)
    return doc


def _too_deep(data: dict[str, Any]) -> KeyPath | None:
    """The key path of the first value nested more than MAX_DEPTH deep, or None; walked with a
    stack of its own, so that a deep file cannot exhaust Python's."""
    stack: list[tuple[KeyPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            return path
        if isinstance(value, dict):
            stack.extend(((*path, key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, index), item) for index, item in enumerate(value))
    return None


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

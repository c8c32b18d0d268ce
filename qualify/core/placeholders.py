"""Command templates: split as `shlex.split` splits them first, then fill each token's
placeholders.

A token that is exactly `{name}` and whose value is a list becomes several arguments (or none);
a string value is never split, so a path with spaces stays one argument. `{{` and `}}` are
literal braces.

`split` is `shlex.split` (POSIX rules, no comments) in one regular-expression pass: shlex builds
each token a character at a time, which takes time quadratic in the token's length, minutes for
a variable of a few megabytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from qualify.core.errors import PlaceholderError
from qualify.core.tomlfile import suggest

Value = str | int | float | bool | Sequence[str] | None

#: Placeholders every command template may use, whatever the project defines (filled by
#: `qualify.core.context.CheckContext.values`).
BUILTINS = (
    "out", "bin", "arm", "role", "dir", "out_file", "run_dir", "port", "installable", "devshell", "project",
)  # fmt: skip

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")


# One piece of a word, as POSIX shlex reads it: a run of ordinary characters, a backslash and
# the character it escapes, a single-quoted string (nothing escapes inside it), a double-quoted
# one (a backslash escapes only `"` and `\\` there, and stays before any other character), or the
# blanks between words. A quote never closed, or a backslash at the very end, is what is left.
_PIECE = re.compile(
    r"""(?P<plain>[^ \t\r\n'"\\]+)"""
    r"|\\(?P<escaped>.)"
    r"|'(?P<single>[^']*)'"
    r'|"(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"'
    r"|(?P<blank>[ \t\r\n]+)",
    re.S,
)
_DOUBLE_ESCAPE = re.compile(r'\\([\\"])')


def split(template: str) -> list[str]:
    """`shlex.split(template)`, in time linear in the template's length."""
    words: list[str] = []
    word: list[str] | None = None  # None between words; [] for a word of empty quotes
    at = 0
    while at < len(template):
        piece = _PIECE.match(template, at)
        if piece is None:
            why = "No escaped character" if template[at] == "\\" else "No closing quotation"
            raise PlaceholderError(f"cannot split command template {_shown(template)}: {why}")
        at = piece.end()
        if piece.lastgroup == "blank":
            if word is not None:
                words.append("".join(word))
            word = None
            continue
        if word is None:
            word = []
        kind, text = piece.lastgroup, piece.group(piece.lastgroup or 0)
        word.append(_DOUBLE_ESCAPE.sub(r"\1", text) if kind == "double" else text)
    if word is not None:
        words.append("".join(word))
    return words


def _shown(template: str) -> str:
    """A template as a message quotes it: its start and end, when it is long."""
    return repr(template) if len(template) <= 200 else f"{template[:120]!r} … {template[-40:]!r}"


def _scalar(name: str, value: Value, token: str) -> str:
    if value is None:
        raise PlaceholderError(
            f"placeholder {{{name}}} in {token!r} has no value here",
            _why_missing(name),
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise PlaceholderError(
        f"placeholder {{{name}}} is a list and can only stand alone as a whole argument, not inside {token!r}"
    )


def _why_missing(name: str) -> str | None:
    if name in ("out", "bin"):
        return (
            "the arm's store path is known only after the build stage (a `nix-build` check) "
            "has built it in this run"
        )
    if name == "port":
        return "{port} is given only to checks that start a server"
    return None


def fill_token(token: str, values: Mapping[str, Value]) -> list[str]:
    """Fill one token; a lone list placeholder expands to its items."""
    whole = _FIELD.fullmatch(token)
    if whole and whole.group(1):
        name = whole.group(1)
        value = _lookup(name, values, token)
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        return [_scalar(name, value, token)]

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        if match.group(1) is None:
            raise PlaceholderError(f"unbalanced brace in {token!r}", "write {{ or }} for a literal brace")
        return _scalar(match.group(1), _lookup(match.group(1), values, token), token)

    return [_FIELD.sub(replace, token)]


def _lookup(name: str, values: Mapping[str, Value], token: str) -> Value:
    if name not in values:
        raise PlaceholderError(
            f"unknown placeholder {{{name}}} in {token!r}{suggest(name, values)}",
            "known placeholders: "
            + ", ".join(sorted(values))
            + "; define variables in [vars] or an arm's vars",
        )
    return values[name]


def expand(template: str | Sequence[str], values: Mapping[str, Value]) -> list[str]:
    """Turn a command template (a string, or an already split list) into argv."""
    tokens = split(template) if isinstance(template, str) else list(template)
    argv: list[str] = []
    for token in tokens:
        argv.extend(fill_token(token, values))
    return argv


def placeholders_in(template: str) -> set[str]:
    return {m.group(1) for m in _FIELD.finditer(template) if m.group(1)}


def stray_brace(template: str) -> bool:
    """Whether `template` holds a brace that is neither a placeholder's nor doubled (`{{`, `}}`):
    filling it would be refused, so a kind whose parameter is always a template refuses it when
    the plan is loaded."""
    return any(m.group(0) in ("{", "}") for m in _FIELD.finditer(template))

"""Text from outside made plain before it is shown: no character that changes how the text
around it reads.

What a report, a summary, an annotation or the console shows comes partly from outside: an
arm's or a test's name, a command's output quoted in a finding, a host's name. Three kinds of
character in it could make what a reviewer reads differ from what is there:

- bidirectional controls (U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates,
  U+200E/U+200F/U+061C marks) reorder the characters that follow them on screen, so
  `candidate passed` can be shown for text that says otherwise;
- zero-width characters (U+200B–U+200D, U+2060, U+FEFF, U+180E) make two names that look alike
  different, and hide text inside a word;
- control characters (C0 but tab and line feed, DEL, C1) move a terminal's cursor, retitle it,
  or end a line early in a CI log (and a lone surrogate, which no encoding can write, would
  stop a report from being saved).

`clean` takes all three out; every renderer calls it on what it prints (`qualify.console`,
`qualify.core.markdown`, `qualify.report.render`, `qualify.report.junit`,
`qualify.report.github`). `forbidden` finds the first such character, for names qualify refuses
outright (an arm's name), and `visible` writes such characters as `\\u202e`, for a message that
has to name one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

#: Characters that reorder the text around them when it is shown.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: Characters that take no room: invisible inside a name.
ZERO_WIDTH = "\u180e\u200b\u200c\u200d\u2060\ufeff"

_INVISIBLE = f"[{BIDI}{ZERO_WIDTH}]"
# A terminal's escape sequences, whole (their parameters mean nothing once the ESC is gone):
# CSI (colours, cursor moves, erasures), OSC (titles, hyperlinks, clipboard) ended by BEL or ST
# or by the end of the line, DCS/SOS/PM/APC strings, and the two-character ones.
SEQUENCE = (
    r"\x9b[0-?]*[ -/]*[@-~]?"  # CSI in its one-byte (C1) form
    r"|\x1b(?:\[[0-?]*[ -/]*[@-~]?"
    r"|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|[ -~]?)"
)
# C0 but tab and line feed, DEL, C1; and lone surrogates (a JSON file may hold "\ud800"), which no
# encoding can write: a page holding one could not be saved.
_CONTROL = r"\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff"
_CONTROL_BUT_CR = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff"
_UNSAFE = re.compile(f"{SEQUENCE}|{_INVISIBLE}|[{_CONTROL}]")
_UNSAFE_KEEPING_CR = re.compile(f"{SEQUENCE}|{_INVISIBLE}|[{_CONTROL_BUT_CR}]")
_INVISIBLE_ONLY = re.compile(_INVISIBLE)
_ANY = re.compile(f"{_INVISIBLE}|[{_CONTROL}\\t\\n]")


def clean(text: str, *, controls: bool = True, keep_cr: bool = False) -> str:
    """`text` without bidirectional controls and zero-width characters, and (unless `controls`
    is False, for a format that shows them escaped instead) without a terminal's escape
    sequences and control characters but tab and line feed; `keep_cr` keeps carriage returns
    too, for a format that escapes them."""
    if not controls:
        return _INVISIBLE_ONLY.sub("", text)
    return (_UNSAFE_KEEPING_CR if keep_cr else _UNSAFE).sub("", text)


def clean_tree(value: Any) -> Any:
    """A JSON document (dicts, lists, strings, numbers) with every string `clean`, keys too."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_tree(v) for v in value]
    return value


def forbidden(text: str) -> str | None:
    """The first bidirectional, zero-width or control character of `text` (tab and line feed
    included), or None."""
    found = _ANY.search(text)
    return found.group() if found else None


def describe(char: str) -> str:
    """`U+202E (RIGHT-TO-LEFT OVERRIDE)`: a character named so that a message can show it."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def visible(text: str) -> str:
    """`text` with each bidirectional, zero-width or control character (tab and line feed
    included) written as its escape (`\\u202e`, `\\x1b`), so it can be shown and not obeyed."""
    return _ANY.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

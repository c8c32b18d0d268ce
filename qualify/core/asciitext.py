"""Text for a console that cannot hold every character: qualify's own symbols in ASCII."""

from __future__ import annotations

import codecs
import io
import sys
from contextlib import suppress
from typing import TextIO

#: What qualify writes for a character of its own output that the console's encoding cannot
#: hold (an ASCII console: `LANG=C`, `PYTHONIOENCODING=ascii`); any other such character is `?`.
ASCII_FOR = {
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "›": ">",
    "—": "--",
    "–": "-",
    "−": "-",
    "─": "-",
    "·": ".",
    "…": "...",
    "≤": "<=",
    "≥": ">=",
    "±": "+/-",
    "∓": "-/+",
    "×": "x",
    "Δ": "delta ",
    "δ": "delta",
    "α": "alpha",
    "σ": "sigma",
    "φ": "phi",
    "‖": "||",
    "√": "sqrt",
    "²": "^2",
    "³": "^3",
    "°": " deg",
    "∞": "inf",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "\u00a0": " ",
}
#: The codec error handler `fit_streams` gives stdout and stderr.
SUBSTITUTE = "qualify-substitute"


def _substitute(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_FOR.get(char, "?") for char in text), error.end


def fit_streams(*streams: TextIO) -> None:
    """Let `streams` (stdout and stderr by default) write any text: a character their encoding
    cannot hold (→ on an ASCII console, a lone surrogate from a hand-edited run.json anywhere) is
    written as its ASCII substitute (`ASCII_FOR`) or `?`, never an error that stops the command."""
    codecs.register_error(SUBSTITUTE, _substitute)  # the same function again: no change
    for stream in streams or (sys.stdout, sys.stderr):
        # A stream that is no TextIOWrapper (a test's StringIO) holds any text already. Python
        # gives the C locale's streams `surrogateescape`, which fails on `→` as `strict` does.
        if isinstance(stream, io.TextIOWrapper) and stream.errors in (
            "strict",
            "backslashreplace",
            "surrogateescape",
        ):
            with suppress(OSError, ValueError):
                stream.reconfigure(errors=SUBSTITUTE)

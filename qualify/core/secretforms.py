"""The forms a program may print a secret's value in, for redaction by value
(`qualify.core.redaction.remember`): as it is, percent-encoded, in hex and in base64."""

from __future__ import annotations

import base64
import re
from urllib.parse import quote, quote_plus

#: A value shorter than this is not replaced wherever it appears (it would hit ordinary text).
MIN_KNOWN_LENGTH = 6

_URLSAFE = str.maketrans("+/", "-_")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def escapes_upper(text: str) -> str:
    """`text` with each percent escape's hex digits in upper case (`%2f` → `%2F`): of the same
    length, so a match in it is a match of `text` at the same place, whatever case (even mixed)
    a program wrote its escapes in."""
    return _PERCENT_ESCAPE.sub(lambda m: m.group().upper(), text) if "%" in text else text


def encodings(value: str) -> set[str]:
    """The forms a program may print `value` in: as it is; percent-encoded (`/` kept or not,
    space as `+`); as hex of its UTF-8 bytes (either case); and in
    base64, standard and URL-safe. A base64 stream holding the value at a byte offset of 0, 1
    or 2 (mod 3) holds, whatever surrounds it, the characters made of the value's bits alone:
    those three cores are forms, and the value encoded on its own, padded and not."""
    raw = value.encode("utf-8")
    # Percent-encoded forms as `quote` writes them (upper case): text is matched with its
    # escapes in upper case too (`escapes_upper`).
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value), raw.hex(), raw.hex().upper()}
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
        # A character holds 6 bits: the first ones hold the offset's bytes too, the last one
        # (short of a multiple of 3 bytes) the bytes that follow.
        pieces = {encoded[(8 * offset + 5) // 6 : 8 * (offset + len(raw)) // 6]}
        if offset == 0:
            pieces |= {encoded, encoded.rstrip("=")}
        forms |= pieces | {p.translate(_URLSAFE) for p in pieces}
    return {f for f in forms if len(f) >= MIN_KNOWN_LENGTH}

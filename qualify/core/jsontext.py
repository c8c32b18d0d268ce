"""JSON that comes from outside qualify's process (a run folder's file, an answer of GitHub's
API, the event file of a workflow), parsed with a bound on how deeply it nests.

Python's parser gives up with RecursionError past about a thousand nested arrays or objects,
and whatever walks a document recursively afterwards (pydantic, the renderers, `json.dumps`)
well before that; either would end a command as an internal error. No document qualify reads
nests anywhere near `MAX_DEPTH` (a record holds a plan's values, which TOML nests at most 32
deep), so one that does is refused where it is read: `TooDeep` is a ValueError, which every
reader already turns into its refusal naming the file ("unreadable: nested too deeply").
"""

from __future__ import annotations

import json
from typing import Any

#: The deepest nesting of arrays and objects read: a record's own levels over TOML's 32.
MAX_DEPTH = 100


class TooDeep(ValueError):
    """The document nests arrays or objects deeper than qualify reads."""

    def __init__(self) -> None:
        super().__init__(f"nested too deeply: arrays or objects more than {MAX_DEPTH} levels deep")


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, refused with TooDeep when it nests deeper than MAX_DEPTH (other
    malformed JSON raises ValueError, as `json.loads` does)."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise TooDeep from None
    if depth(document) > MAX_DEPTH:
        raise TooDeep
    return document


def depth(document: Any) -> int:
    """How deeply `document` nests arrays and objects (0 for a number or a string), found
    without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            items: Any = value.values()
        elif isinstance(value, list):
            items = value
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest  # refused whatever is below: no need to walk it
        stack.extend((item, level + 1) for item in items if isinstance(item, (dict, list)))
    return deepest

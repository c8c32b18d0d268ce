"""GitHub Actions' expressions (`${{ … }}`, `if:`), evaluated as the runner evaluates them.

The operators workflows use, with GitHub's rules: `==` and `!=` compare strings ignoring case
and other types as numbers; `&&` and `||` give one of their operands, as JavaScript does; `!`;
parentheses; literals ('string' with '' for a quote, numbers, true, false, null); context paths
(`github.event.pull_request.number`: a missing key is null); the status functions `success()`,
`always()`, `failure()`, `cancelled()`, and `contains`, `startsWith`, `format`, `toJSON`,
`fromJSON`. An `if:` that asks for no status is `success() && (…)`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

STATUS_FUNCTIONS = ("success", "always", "failure", "cancelled")


_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|&&|\|\||!|\(|\)|,)|'(?P<str>(?:[^']|'')*)'|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<name>[A-Za-z_][\w-]*(?:\.[A-Za-z_*][\w-]*)*))"
)


def _truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip() or 0)
        except ValueError:
            return math.nan
    return math.nan


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if type(left) is type(right):
        return bool(left == right)
    return _number(left) == _number(right)


class _Parser:
    """GitHub's expression syntax, as far as workflows commonly use it."""

    def __init__(self, text: str, contexts: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]):
        self.tokens: list[tuple[str, Any]] = []
        at = 0
        while at < len(text.rstrip()):
            match = _TOKEN.match(text, at)
            if not match or match.end() == at:
                raise ValueError(f"cannot read {text[at:]!r} in {text!r}")
            at = match.end()
            if match["op"]:
                self.tokens.append(("op", match["op"]))
            elif match["str"] is not None:
                self.tokens.append(("value", match["str"].replace("''", "'")))
            elif match["num"]:
                number = float(match["num"])
                self.tokens.append(("value", int(number) if number.is_integer() else number))
            else:
                self.tokens.append(("name", match["name"]))
        self.at = 0
        self.contexts, self.functions = contexts, functions

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, op: str) -> bool:
        if self.peek() == ("op", op):
            self.at += 1
            return True
        return False

    def parse(self) -> Any:
        value = self.either()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()}")
        return value

    def either(self) -> Any:
        value = self.both()
        while self.take("||"):
            right = self.both()
            value = value if _truthy(value) else right
        return value

    def both(self) -> Any:
        value = self.negated()
        while self.take("&&"):
            right = self.negated()
            value = right if _truthy(value) else value
        return value

    def negated(self) -> Any:
        if self.take("!"):
            return not _truthy(self.negated())
        return self.compared()

    def compared(self) -> Any:
        value = self.single()
        if self.take("=="):
            return _equal(value, self.single())
        if self.take("!="):
            return not _equal(value, self.single())
        return value

    def single(self) -> Any:
        token = self.peek()
        if token is None:
            raise ValueError("the expression ends too early")
        self.at += 1
        kind, value = token
        if kind == "value":
            return value
        if token == ("op", "("):
            inner = self.either()
            if not self.take(")"):
                raise ValueError("a ( is not closed")
            return inner
        if kind != "name":
            raise ValueError(f"unexpected {value!r}")
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.take("("):
            arguments = []
            while not self.take(")"):
                arguments.append(self.either())
                self.take(",")
            if value not in self.functions:
                raise ValueError(f"no function {value}() here")
            return self.functions[value](*arguments)
        found: Any = self.contexts
        for part in value.split("."):
            found = found.get(part) if isinstance(found, Mapping) else None
        return found


def _functions(status: str) -> dict[str, Callable[..., Any]]:
    return {
        "success": lambda: status == "success",
        "always": lambda: True,
        "failure": lambda: status == "failure",
        "cancelled": lambda: False,
        "contains": lambda where, what: (
            str(what).casefold() in str(where).casefold() if isinstance(where, str) else what in (where or [])
        ),
        "startsWith": lambda text, start: str(text).casefold().startswith(str(start).casefold()),
        "format": lambda text, *values: re.sub(r"\{(\d+)\}", lambda m: text_of(values[int(m[1])]), text),
        "toJSON": lambda value: json.dumps(value, indent=2),
        "fromJSON": json.loads,
    }


def evaluate(expression: str, contexts: Mapping[str, Any], status: str = "success") -> Any:
    """The value of a GitHub expression (without `${{ }}`) in these contexts."""
    return _Parser(expression, contexts, _functions(status)).parse()


def condition(expression: str | bool | None, contexts: Mapping[str, Any], status: str = "success") -> bool:
    """An `if:` as GitHub decides it: `success() && (…)` unless it asks for a status itself."""
    if expression is None:
        return status == "success"
    text = str(expression).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    if not any(re.search(rf"\b{name}\(", text) for name in STATUS_FUNCTIONS):
        text = f"success() && ({text})"
    return _truthy(evaluate(text, contexts, status))


def text_of(value: Any) -> str:
    """A value as `${{ }}` puts it into text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def substitute(text: str, contexts: Mapping[str, Any], status: str = "success") -> str:
    """Every `${{ … }}` of `text` replaced by its value."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: text_of(evaluate(m[1], contexts, status)), text, flags=re.S)

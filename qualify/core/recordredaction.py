"""Secrets redacted from the structured parts of records: a command line argument by argument,
a mapping of values by their names, an environment, nix options, flake references and input
overrides (`qualify.core.redaction` holds the rules they apply)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qualify.core.redaction import REDACTED, hides, redact_text
from qualify.core.secretsources import remember_named

# --- structured records ----------------------------------------------------------------------

#: Flags whose next two arguments are a setting's name and value (nix, and the nix-like).
_OPTION_FLAGS = ("--option", "--extra-option")
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_][\w.-]*)=(?P<value>.*)", re.DOTALL)


def redact_argv(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, known: bool = True
) -> list[str]:
    """A command line as it may be recorded: the value after a secret-named flag
    (`--api-key X`) or nix option (`--option access-tokens X`), a secret-named `NAME=VALUE`
    argument whole, and each argument's text by `redact_text`."""
    if env:
        remember_named(env)
    out: list[str] = []
    args = list(argv)
    for index, arg in enumerate(args):
        before = args[index - 1] if index >= 1 else ""
        option = args[index - 2] if index >= 2 else ""
        if option in _OPTION_FLAGS and hides(before, arg):
            out.append(REDACTED)
            continue
        if (
            before.startswith("-")
            and "=" not in before
            and before not in _OPTION_FLAGS
            and hides(before.lstrip("-"), arg)
            and not arg.startswith("-")
        ):
            out.append(REDACTED)
            continue
        assignment = _ASSIGNMENT.fullmatch(arg)
        if assignment and hides(assignment.group("name"), assignment.group("value")):
            out.append(f"{assignment.group('name')}={REDACTED}")
            continue
        out.append(redact_text(arg, known=known))
    return out


def redact_value(name: str, value: Any, *, known: bool = False) -> Any:
    """A named value as it may be recorded: text under a secret name is `<redacted>`; other
    text by `redact_text`; numbers and booleans as they are; lists and tables item by item.
    Without `known` (a record compared across runs), only the rules by name and form apply."""
    if isinstance(value, Mapping):
        return redact_values(value, known=known)
    if isinstance(value, (list, tuple)):
        return [redact_value(name, v, known=known) for v in value]
    if isinstance(value, str):
        return REDACTED if hides(name, value) else redact_text(value, known=known)
    return value


def redact_values(values: Mapping[str, Any], *, known: bool = False) -> dict[str, Any]:
    """Variables, check parameters, settings or a measurement as they may be recorded (see
    `redact_value`)."""
    return {name: redact_value(name, value, known=known) for name, value in values.items()}


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment as it may be recorded: secret-named variables' values replaced, the
    others' text redacted (a proxy URL's password, an access token in NIX_CONFIG)."""
    return {name: redact_value(name, value) for name, value in env.items()}


def redact_options(pairs: Iterable[Sequence[str]]) -> list[list[str]]:
    """`NAME=VALUE` option pairs (`--nix-option`) as run.json records them: `[name, value]`,
    `["access-tokens", "<redacted>"]`."""
    return [[str(name), redact_value(str(name), str(value))] for name, value in pairs]


def holds_redacted(value: Any) -> bool:
    """Whether a record read back has a redacted value in it (it cannot be used as it is)."""
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, Mapping):
        return any(holds_redacted(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_redacted(v) for v in value)
    return False


def redact_ref(ref: str | None) -> str | None:
    """A flake reference, installable or dev shell as a record keeps it: a URL's password and a
    secret-named query parameter redacted (`git+https://oauth2:<redacted>@host/o/r#pkg`), by
    form only (a record compared across runs)."""
    return None if ref is None else redact_text(ref, known=False)


def redact_overrides(pairs: Iterable[Sequence[str]]) -> list[list[str]]:
    """`--override-input NAME FLAKEREF` pairs as run.json records them: `[name, ref]`, the ref
    by `redact_ref` (an input's name is kept whatever it says)."""
    return [[str(name), redact_text(str(ref), known=False)] for name, ref in pairs]


# --- secrets around a run: URLs, nix's settings, netrc files -----------------------------------

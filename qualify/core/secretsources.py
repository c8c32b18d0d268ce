"""What a run learns of secrets from where it is told of them, beyond its plan's names: the
secret-named values of variables, environments and options (`remember_named`), the access tokens
of nix's settings (nix.conf files and NIX_CONFIG) and the passwords of the netrc files nix and
git would read (`remember_ambient`). Each is remembered by value (`qualify.core.redaction`), so
that it is hidden wherever it is printed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from qualify.core.redaction import hides, remember, url_secrets


def remember_named(values: Mapping[str, Any]) -> None:
    """`remember` the text values held under secret names in `values` (vars, env, options).
    An environment holding NIX_CONFIG (a child's) also makes known what nix will use with it
    (`remember_ambient`)."""
    remember(text for name, value in values.items() for text in _texts(value) if hides(name, text))
    if isinstance(values.get("NIX_CONFIG"), str):
        remember_ambient(values)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


#: A GitLab access token's type before the token (`PAT:glpat-…`, `OAuth2:…`).
_TOKEN_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9]*:(?P<token>.+)")
#: How deep nix.conf's `include` is followed (an include loop must end).
_MAX_INCLUDES = 8


def remember_ambient(env: Mapping[str, str] | None = None, settings: Iterable[Sequence[str]] = ()) -> None:
    """`remember` the secrets nix may use, as `env` (this process's by default) and `settings`
    (a run's `--nix-option`s) point nix at them: the secret settings of nix.conf, NIX_CONFIG
    and `settings` (each `access-tokens` token, and the whole value), the URL credentials in
    any setting, and the passwords of the netrc files nix and git read (every `netrc-file`,
    <NIX_CONF_DIR>/netrc by default, and ~/.netrc). A file this process cannot read is passed
    over (a nix daemon may still read it: what is in it cannot be redacted by value)."""
    env = os.environ if env is None else env
    pairs = [pair for path in _nix_conf_files(env) for pair in _nix_settings(_read(path), path.parent)]
    pairs += _nix_settings(env.get("NIX_CONFIG", ""), None)
    pairs += [(str(name), str(value)) for name, value in settings]
    remember(secret for name, value in pairs for secret in _setting_secrets(name, value))
    netrcs = [Path(value) for name, value in pairs if name.removeprefix("extra-") == "netrc-file" and value]
    netrcs.append(Path(env.get("NIX_CONF_DIR") or "/etc/nix") / "netrc")
    if env.get("HOME"):
        netrcs.append(Path(env["HOME"]) / ".netrc")
    remember(secret for path in netrcs for secret in netrc_passwords(_read(path)))


def _nix_conf_files(env: Mapping[str, str]) -> list[Path]:
    """The nix.conf files nix reads, as nix finds them: the system's, then the user's."""
    files = [Path(env.get("NIX_CONF_DIR") or "/etc/nix") / "nix.conf"]
    if env.get("NIX_USER_CONF_FILES"):
        return files + [Path(p) for p in env["NIX_USER_CONF_FILES"].split(":") if p]
    home = env.get("HOME")
    dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    dirs.append(env.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else ""))
    return files + [Path(d) / "nix" / "nix.conf" for d in dirs if d]


def _nix_settings(text: str, base: Path | None, depth: int = 0) -> list[tuple[str, str]]:
    """`name = value` settings of nix.conf's format (`#` starts a comment anywhere), with the
    files `include` and `!include` name read in their place, relative to `base`."""
    pairs: list[tuple[str, str]] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0] in ("include", "!include"):
            path = Path(words[1]) if base is None else base / words[1]
            if depth < _MAX_INCLUDES:
                pairs += _nix_settings(_read(path), path.parent, depth + 1)
            continue
        name, equals, value = " ".join(words).partition("=")
        if equals and re.fullmatch(r"[\w.-]+", name.strip()):
            pairs.append((name.strip(), value.strip()))
    return pairs


def _setting_secrets(name: str, value: str) -> Iterator[str]:
    """The secrets a nix setting holds: its whole value under a secret name and, for
    `access-tokens`, each `host=token` item's token (also without GitLab's `PAT:` type); a URL's
    credentials under any name (a substituter's password)."""
    if hides(name, value):
        yield value
        if name.endswith("access-tokens"):
            for item in value.split():
                token = item.partition("=")[2]
                yield token
                typed = _TOKEN_TYPE.fullmatch(token)
                if typed:
                    yield typed.group("token")
    yield from url_secrets(value)


def netrc_passwords(text: str) -> list[str]:
    """The passwords a netrc file holds (`password X`, on any line), also without the quotes
    curl allows around one."""
    words = text.split()
    found = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("password", "passwd")]
    return found + [w[1:-1] for w in found if len(w) > 2 and w[0] == w[-1] == '"']


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return ""  # missing, unreadable or not a file: nothing of it can reach a child here

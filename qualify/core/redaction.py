"""Redaction of secrets from everything qualify records: one set of rules for every writer.

A secret reaches qualify in a variable, an environment variable, a nix option or a command
line; it must reach the child that needs it unchanged, and never be written in clear to a run
folder, a log or the console. Redaction keeps the shape of what it hides (`--token=<redacted>`,
`access-tokens=<redacted>`, `https://user:<redacted>@host`), so a record still says what was
passed where.

What counts as secret, by name: a name holding TOKEN, SECRET, PASSWORD, PASSWD, NETRC,
CREDENTIAL, AUTHORIZATION or KEY, or the word PASS, in any case and with any separators
(`hf_token`, `API-KEY`, `db_pass`, `access-tokens`); not a public key
(`trusted-public-keys`), a count of tokens (`max_tokens`) or a tokenizer. A name that says its
value is a file (`netrc-file`, `api-key-file`, nix's `ssh-key`) keeps a value that is an absolute
path: the secret is in the file, which qualify never records (a netrc file nix reads is read
only to redact its passwords by value, below). By form,
wherever text is recorded: a URL's password (`scheme://user:PASSWORD@`), an `Authorization:`
header's credentials, a `Bearer` token, a netrc `password`, and the tokens of the services a
model or a source comes from by their prefix (`hf_`, `ghp_`, `github_pat_`, `glpat-`, `sk-`, ...).
By value: each value a secret-named variable, environment variable or option held in this
process (`remember`), wherever it appears, and the secrets qualify can see around a run
(`remember_urls`, `remember_ambient`): a URL's credentials in the flake, an installable, a dev
shell, an `--override-input` or a nix option; the secret settings of NIX_CONFIG and nix.conf
(each of `access-tokens`' tokens, and the whole value); the passwords of the netrc files nix and
git would read. A child's output gets the value rules and, of the rules by form, only the URL's password: the
others would hit ordinary text.

A number, a boolean or a list of them under a secret-looking name is kept (`max_tokens = 64`
is a count): a secret is text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

REDACTED = "<redacted>"

#: Parts of a name (upper case, separators removed) that make it secret.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "NETRC", "CREDENTIAL", "AUTHORIZATION")
_NOT_SECRET = re.compile(r"(?<!ACCESS)(?<!AUTH)(?<!API)(?<!SECRET)TOKENS|TOKENI[SZ]")
#: A value shorter than this is not replaced wherever it appears (it would hit ordinary text).
MIN_KNOWN_LENGTH = 6

_known: tuple[str, ...] = ()  # longest first: a longer secret may hold a shorter one


@lru_cache(maxsize=4096)  # the same few names, asked for every argument and variable
def is_secret(name: str) -> bool:
    """Whether a variable, option, flag or header of this name holds a secret."""
    words = [w for w in re.split(r"[^A-Z0-9]+", name.upper()) if w]
    # Counts of tokens and tokenizers are not secrets (`max_tokens`, `--tokenizer`); access,
    # auth and API tokens are (nix's `access-tokens`).
    joined = _NOT_SECRET.sub("", "".join(words))
    if any(part in joined for part in _SECRET_PARTS) or "PASS" in words:
        return True
    # KEY, APIKEY, SSHKEYS, but a public key is no secret (nix's trusted-public-keys).
    return bool(re.search(r"(?<!PUBLIC)KEY", joined))


#: Names whose value is where a secret lives, not the secret: the file is never read or saved.
_NAMES_A_FILE = re.compile(r"(?:FILE|FILES|PATH|DIR|SOCK)$|^SSHKEY$")


def hides(name: str, value: str) -> bool:
    """Whether `value`, given under `name`, is a secret to redact: a secret name's value,
    unless the name says the value is a file's path and it is one (`netrc-file=/etc/nix/netrc`,
    nix's `ssh-key=/root/.ssh/id_builder`)."""
    if not is_secret(name):
        return False
    joined = re.sub(r"[^A-Z0-9]", "", name.upper())
    return not (_NAMES_A_FILE.search(joined) and re.fullmatch(r"/[^\s]*", value))


def remember(values: Iterable[str]) -> None:
    """Values to replace wherever text is redacted in this process, from now on: what a
    secret-named variable held, since a template may put it anywhere in a command line."""
    global _known  # noqa: PLW0603  (grows only; read without a lock, replaced whole)
    new = {v for v in values if isinstance(v, str) and len(v) >= MIN_KNOWN_LENGTH and v != REDACTED}
    if not new <= set(_known):
        _known = tuple(sorted(new | set(_known), key=len, reverse=True))


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


# --- rules on free text --------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)(?P<secret>[^\s@/'\"]+)(?=@)")
_AUTH_SCHEME = r"(?:Bearer|Basic|Token|Digest|Negotiate|Bot)"
_AUTHORIZATION = re.compile(
    rf"(?P<head>\b(?:Proxy-)?Authorization\s*:\s*(?:{_AUTH_SCHEME}\s+)?)(?P<secret>[^\s'\"]+)", re.IGNORECASE
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{6,})")
# The three patterns below end before the value (a lookahead holds it), so that a value that
# is no secret (`-c "..."`, a line of `NAME = VALUE`) is searched too: it may hold a secret.
#: A secret-named flag's value: `--api-key X`, `--token=X`, `-password X`.
_FLAG = re.compile(
    r"(?<![\w-])(?P<name>--?[A-Za-z][\w.-]*)(?P<sep>=|\s+)(?=(?P<secret>\"[^\"]*\"|'[^']*'|[^\s'\"]+))"
)
#: `NAME = VALUE` (nix.conf, NIX_CONFIG: to the end of the line).
_SPACED = re.compile(
    r"(?m)(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>[ \t]*=[ \t]+|[ \t]+=[ \t]*)(?=(?P<secret>[^\n]+))"
)
#: `NAME=VALUE` (to a space, `&` or `;`: environment assignments, URL query parameters) and
#: `Name: value` (headers).
_ASSIGN = re.compile(r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>=|:[ \t]*)(?=(?P<secret>[^\s&;'\",]+))")
_NETRC = re.compile(r"(?P<head>\b(?:password|passwd)\s+)(?P<secret>[^\s'\"]+)")
#: Tokens recognisable by their form alone (Hugging Face, GitHub, GitLab, OpenAI-style, Slack, AWS).
_PREFIXED = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|sk-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
)


def _keep_head(match: re.Match[str]) -> str:
    return match.group("head") + REDACTED


def _named(pattern: re.Pattern[str], text: str) -> str:
    """`text` with the value after each secret name that `pattern` finds replaced."""
    parts: list[str] = []
    pos = 0
    for match in pattern.finditer(text):
        name, sep, value = match.group("name"), match.group("sep"), match.group("secret")
        if match.start() < pos or value == REDACTED or not hides(name, value):
            continue
        if value.startswith("-") and sep != "=":
            continue  # the next flag, not a value
        if name.lower() in ("authorization", "proxy-authorization"):
            continue  # its scheme is kept: `_AUTHORIZATION`
        parts += [text[pos : match.end()], REDACTED]
        pos = match.end() + len(value)
    parts.append(text[pos:])
    return "".join(parts)


def redact_text(text: str, env: Mapping[str, str] | None = None, *, known: bool = True) -> str:
    """`text` with every secret the rules above find replaced by `<redacted>`: by name, by form
    and, with `known`, by value (the remembered values and those of `env`'s secret variables).
    A record compared across runs (a spec, a configuration) passes `known=False`: what is
    remembered differs from one process to the next, and its redaction must not."""
    if not text:
        return text
    if env:
        remember_named(env)
    if known:
        text = _by_value(text)
    text = _URL_PASSWORD.sub(_keep_head, text)
    text = _AUTHORIZATION.sub(_keep_head, text)
    text = _BEARER.sub(_keep_head, text)
    text = _NETRC.sub(_keep_head, text)
    for pattern in (_FLAG, _SPACED, _ASSIGN):
        text = _named(pattern, text)
    return _PREFIXED.sub(REDACTED, text)


def redact_known(text: str) -> str:
    """The remembered values replaced, and a URL's password by its form: for a child's own
    output, where the other rules by name and form would also hit ordinary text."""
    return _URL_PASSWORD.sub(_keep_head, _by_value(text))


def _by_value(text: str) -> str:
    for value in _known:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


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

#: A URL's query parameter: `?access_token=X`, `&private_token=X`.
_QUERY = re.compile(r"[?&](?P<name>[\w.-]+)=(?P<value>[^\s&#'\"]+)")
#: A GitLab access token's type before the token (`PAT:glpat-…`, `OAuth2:…`).
_TOKEN_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9]*:(?P<token>.+)")
#: How deep nix.conf's `include` is followed (an include loop must end).
_MAX_INCLUDES = 8


def url_secrets(text: str) -> list[str]:
    """The credentials the URLs in `text` carry: each password, as written and percent-decoded,
    and each secret-named query parameter's value."""
    found: list[str] = []
    for match in _URL_PASSWORD.finditer(text):
        found += [match.group("secret"), unquote(match.group("secret"))]
    for match in _QUERY.finditer(text):
        if hides(match.group("name"), match.group("value")):
            found += [match.group("value"), unquote(match.group("value"))]
    return found


def remember_urls(texts: Iterable[str | None]) -> None:
    """`remember` the URL credentials in `texts` (a flake, installables, `--override-input`
    refs): nix gets them as written, and nix or git may print them bare or re-encoded."""
    remember(secret for text in texts if text for secret in url_secrets(text))


def remember_ambient(env: Mapping[str, str] | None = None, settings: Iterable[tuple[str, str]] = ()) -> None:
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

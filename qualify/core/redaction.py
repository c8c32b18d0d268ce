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
path, or one in the home folder (`~/`) or the project (`{project}/`): the secret is in the file,
which qualify never records (a netrc file nix reads is read only to redact its passwords by
value, below). By form,
wherever text is recorded: a URL's password (`scheme://user:PASSWORD@`), an `Authorization:`
header's credentials, a `Bearer` token, a netrc `password`, and the tokens of the services a
model or a source comes from by their prefix (`hf_`, `ghp_`, `github_pat_`, `glpat-`, `sk-`, ...).
By value: each value a secret-named variable, environment variable or option held in this
process (`remember`), wherever it appears, and the secrets qualify can see around a run
(`remember_urls`, `qualify.core.secretsources.remember_ambient`): a URL's credentials in the
flake, an installable, a dev shell, an `--override-input` or a nix option; the secret settings
of NIX_CONFIG and nix.conf (each of `access-tokens`' tokens, and the whole value); the passwords
of the netrc files nix and git would read. A value is found in every form a program prints one
in: as it is, percent-encoded (`quote`, `quote_plus`, either case of hex digit), in hex (either
case), and in base64 (standard and URL-safe, padded or not, on its own or inside a longer
encoded stream at any of the three byte alignments: there the characters that hold only the
value's bits), and split over consecutive lines (a line ending in the start of a value, the next
line starting with the rest: lines are matched with their line breaks taken out, `Unsplit`).

A child's own output (`redact_known`, `Unsplit`) gets the value rules and the rules by form that
do not hit ordinary text: a URL's password (which is then also known by value, so that the
password printed bare later is found too), an `Authorization:` header, a `Bearer` token that
looks like one, a netrc line's `password`, the services' tokens by prefix. The rules by name
(`--token X`, `NAME=VALUE`) are left out there: they would hit ordinary text.

A number, a boolean or a list of them under a secret-looking name is kept (`max_tokens = 64`
is a count): a secret is text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from urllib.parse import unquote

from qualify.core.secretforms import MIN_KNOWN_LENGTH, encodings, escapes_upper

REDACTED = "<redacted>"

#: Parts of a name (upper case, separators removed) that make it secret.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "NETRC", "CREDENTIAL", "AUTHORIZATION")
_NOT_SECRET = re.compile(r"(?<!ACCESS)(?<!AUTH)(?<!API)(?<!SECRET)TOKENS|TOKENI[SZ]")

_known: tuple[str, ...] = ()  # the values remembered
_forms: tuple[
    str, ...
] = ()  # every form of every value (`qualify.core.secretforms.encodings`), longest first
#: Every proper prefix of a form: where a line may end inside a value split over two lines.
_starts: frozenset[str] = frozenset()
#: Every character a form holds: a line's end that could start a form is a run of these.
_alphabet: frozenset[str] = frozenset()
_remembering = threading.Lock()


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
#: A path such a name may hold and keep: absolute, in the home folder, or in the project (a plan's
#: `secret_key_file = "{project}/.qualify/cache-key.sec"`).
_A_PATH = re.compile(r"(?:/|~/|\{project\}/)[^\s]*")


def hides(name: str, value: str) -> bool:
    """Whether `value`, given under `name`, is a secret to redact: a secret name's value,
    unless the name says the value is a file's path and it is one (`netrc-file=/etc/nix/netrc`,
    nix's `ssh-key=/root/.ssh/id_builder`)."""
    if not is_secret(name):
        return False
    joined = re.sub(r"[^A-Z0-9]", "", name.upper())
    return not (_NAMES_A_FILE.search(joined) and _A_PATH.fullmatch(value))


def remember(values: Iterable[str]) -> None:
    """Values to replace wherever text is redacted in this process, from now on, in every form
    a program may print them in (`qualify.core.secretforms.encodings`): what a secret-named
    variable held, since a template may put it anywhere in a command line."""
    global _known, _forms, _starts, _alphabet  # noqa: PLW0603  (grow only; read without a lock, replaced whole)
    new = {v for v in values if isinstance(v, str) and len(v) >= MIN_KNOWN_LENGTH and v != REDACTED}
    if new <= set(_known):
        return
    # Output pumps learn URL passwords on their own threads: one writer at a time, so that none
    # replaces another's values with a set that lacks them.
    with _remembering:
        forms = set(_forms).union(*(encodings(v) for v in new - set(_known)))
        starts = set(_starts).union(*({f[:i] for i in range(1, len(f))} for f in forms - set(_forms)))
        _known = tuple(sorted(new | set(_known), key=len, reverse=True))
        _alphabet = frozenset("".join(forms))
        _starts = frozenset(starts)
        _forms = tuple(sorted(forms, key=len, reverse=True))


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
_TOKEN_FORMS = (
    r"hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|sk-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
)
_PREFIXED = re.compile(rf"\b(?:{_TOKEN_FORMS})\b")
#: The same tokens in a name, where `_` and `-` join words (`smoke_ghp_…`), but not inside a
#: word (`disk-usage-of-the-workspace` holds no `sk-` token).
_TOKEN_IN_NAME = re.compile(rf"(?<![A-Za-z0-9])(?:{_TOKEN_FORMS})")


def token_in_name(name: str) -> str | None:
    """`name` with the access tokens its form gives away replaced (`smoke_<redacted>`), or None
    when it holds none. A name (an arm's, a check's) is kept in clear in every record and
    report, so one that is a token is refused where it is declared; the refusal shows it so."""
    shown = _TOKEN_IN_NAME.sub(REDACTED, name)
    return shown if shown != name else None


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


def redact_text(text: str, *, known: bool = True) -> str:
    """`text` with every secret the rules above find replaced by `<redacted>`: by name, by form
    and, with `known`, by value (the remembered values: `remember`).
    A record compared across runs (a spec, a configuration) passes `known=False`: what is
    remembered differs from one process to the next, and its redaction must not."""
    if not text:
        return text
    if known:
        text = _by_value(text)
    text = _URL_PASSWORD.sub(_keep_head, text)
    text = _AUTHORIZATION.sub(_keep_head, text)
    text = _BEARER.sub(_keep_head, text)
    text = _NETRC.sub(_keep_head, text)
    for pattern in (_FLAG, _SPACED, _ASSIGN):
        text = _named(pattern, text)
    return _PREFIXED.sub(REDACTED, text)


#: A `Bearer` token in a child's output: one that looks like a token (a digit or a sign in it,
#: or long), so that prose ("Bearer authentication failed") is kept.
_BEARER_TOKEN = re.compile(
    r"(?P<head>\bBearer\s+)(?P<secret>(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-]|[A-Za-z]{20})"
    r"[A-Za-z0-9._~+/=-]{7,}[A-Za-z0-9_~+/=-])"
)
#: A netrc line's password in a child's output (`machine h login u password X`, or `password X`
#: on a line of its own), not the word in a sentence.
_NETRC_LINE = re.compile(
    r"(?im)(?P<head>(?:^[ \t]*|\b(?:machine|default|login|account)\b[^\n]*?\s)(?:password|passwd)[ \t]+)"
    r"(?P<secret>[^\s'\"]+)"
)


def redact_known(text: str) -> str:
    """For a child's own output (or text quoting it: a finding, a reason, an answer of an API):
    the remembered values in every form, also split over lines (`Unsplit`), and the rules by form
    that do not hit ordinary text (see the module's docstring). A URL's password found here is
    remembered, so that the password printed bare later is found too."""
    if not text:
        return text
    unsplit = Unsplit()
    out = [kept for line in text.splitlines(keepends=True) for kept in unsplit.feed(line)]
    return "".join(out + unsplit.close())


def redact_lines(lines: Iterable[str]) -> list[str]:
    """Lines of a child's output (a log's tail) as `redact_known` keeps them, a value split
    over two of them found too."""
    unsplit = Unsplit()
    out = [kept for line in lines for kept in unsplit.feed(line + "\n")]
    return [line.rstrip("\n") for line in out + unsplit.close()]


#: What every output rule by form starts with: a line without any is left as it is, unscanned.
_FORM_HINT = re.compile(r"://|(?i:authorization|passw|bearer)|hf_|gh[pousr]_|github_pat_|glpat-|sk-|xox|AKIA")


def _by_form(line: str) -> str:
    """One line of a child's output with the secrets the output rules find by form replaced."""
    if not _FORM_HINT.search(line):
        return line
    line = _URL_PASSWORD.sub(_keep_head, line)
    line = _AUTHORIZATION.sub(_keep_head, line)
    line = _BEARER_TOKEN.sub(_keep_head, line)
    line = _NETRC_LINE.sub(_keep_head, line)
    return _PREFIXED.sub(REDACTED, line)


def _learn(line: str) -> None:
    """Remember the passwords of the URLs in `line`: a program that printed one in a URL may
    print it bare later (`git` asking for it again, a debug dump of its settings)."""
    if "://" in line:
        remember(url_secrets(line))


class Unsplit:
    """A child's output, line by line, with every remembered value's forms replaced, also where
    one is split over consecutive lines (a terminal's or a logger's wrapping, a program that
    prints a value in pieces), and the output rules by form applied to each line.

    The lines are matched with their line breaks taken out, and each match's characters mapped
    back to the lines they are on. A line whose end could be the start of a value (its last
    characters a proper prefix of a form) is held until the next line shows whether the rest
    follows, or the output ends: a held line reaches the log a line late, never in clear. What
    is held is bounded: the characters after such a start are fewer than the longest form's,
    and at most `MAX_HELD` lines (empty ones) are held."""

    MAX_HELD = 64

    def __init__(self) -> None:
        self._held: list[str] = []  # lines as read, with their line breaks
        self._masked: list[tuple[int, int]] = []  # spans of the held text already matched

    def feed(self, line: str) -> list[str]:
        """Take one line (with its line break); give back the lines now safe to keep."""
        _learn(line)
        self._held.append(line)
        return self._release(final=len(self._held) > self.MAX_HELD)

    def close(self) -> list[str]:
        """The output ended: give back every line still held."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> list[str]:
        bodies = [_body(line) for line in self._held]
        joined = "".join(bodies)
        spans = _merged(self._masked + _matches(joined, _forms))
        cut = len(joined) if final else _open_start(joined)
        out: list[str] = []
        start = 0
        for body, line in zip(bodies, self._held, strict=True):
            end = start + len(body)
            if end > cut:
                break
            masked = _masked_text(body, start, [(a, b) for a, b in spans if a < end and b > start])
            out.append(_by_form(masked) + line[len(body) :])
            start = end
        del self._held[: len(out)]
        # What a match already covers of the lines still held is kept for their release.
        self._masked = [(max(a, start) - start, b - start) for a, b in spans if b > start]
        return out


def _body(line: str) -> str:
    """A line without its line break (`\n`, `\r\n` or `\r`)."""
    return line.rstrip("\r\n")


def _matches(text: str, forms: Sequence[str]) -> list[tuple[int, int]]:
    """Every span of `text` that holds a form, overlaps included (two secrets may share
    characters: both are hidden whole), percent escapes matched in any case."""
    spans: list[tuple[int, int]] = []
    upper = escapes_upper(text)
    views = (text, upper) if upper != text else (text,)
    # Most text holds no form: which forms it holds is asked first, of all at once.
    present = {(form, view) for view in views for form in [f for f in forms if f in view]}
    for form, view in present:
        if view is upper and "%" not in form and upper is not text:
            continue  # found in `text` too
        at = view.find(form)
        while at >= 0:
            spans.append((at, at + len(form)))
            at = view.find(form, at + 1)
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _open_start(text: str) -> int:
    """Where the longest end of `text` that is a proper prefix of a form starts (the text
    from there may be a value that goes on in the next line), or the text's length."""
    starts, alphabet = _starts, _alphabet
    if not starts:
        return len(text)
    # Only a run of characters that forms hold can start one; look no further back than it.
    longest = min(len(text), max((len(f) - 1 for f in _forms[:1]), default=0))
    run = 0
    while run < longest and text[-1 - run] in alphabet:
        run += 1
    upper = escapes_upper(text[-run:]) if run else ""
    for size in range(run, 0, -1):
        if text[-size:] in starts or upper[-size:] in starts:
            return len(text) - size
    return len(text)


def _masked_text(body: str, offset: int, spans: Sequence[tuple[int, int]]) -> str:
    """`body` (at `offset` of the joined text) with each span's part on it replaced; `spans`
    are merged, so each run of hidden characters becomes one `<redacted>`."""
    parts: list[str] = []
    pos = 0
    for first, last in spans:
        a, b = max(first - offset, pos), min(last - offset, len(body))
        if a < b:
            parts += [body[pos:a], REDACTED]
            pos = b
    parts.append(body[pos:])
    return "".join(parts)


def _by_value(text: str) -> str:
    """`text` with every form of every remembered value replaced (each run of hidden
    characters by one `<redacted>`)."""
    spans = _merged(_matches(text, _forms))
    return _masked_text(text, 0, spans) if spans else text


#: A URL's query parameter: `?access_token=X`, `&private_token=X`.
_QUERY = re.compile(r"[?&](?P<name>[\w.-]+)=(?P<value>[^\s&#'\"]+)")


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

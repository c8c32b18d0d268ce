"""`qualify comment`: a Markdown file (the fleet's summary.md) as ONE comment on a pull request,
that same comment edited on every later push.

Through GitHub's REST API for issue comments (a pull request is an issue there): the pull
request's comments are listed page by page, following `Link: rel="next"`; the first one that
carries this key's hidden marker line (`<!-- qualify: KEY -->`) AND was written by the account
qualify posts as is edited (PATCH), else a new one is posted (POST). Any other account's comment
is never edited, not even one holding the marker (a person's that quotes it, another tool's bot
that copied the summary): a token that may write on the pull request may edit them too.

The account qualify posts as is the one GitHub says the token belongs to (`GET /user`: a
personal or a machine account's token), compared by login and id. A workflow's GITHUB_TOKEN,
like any GitHub App's installation token, is refused that question (403): it posts as
`github-actions[bot]`, the login taken then; a GitHub App's token names its own bot with `--as`
(`my-app[bot]`). Should GitHub say another account wrote a comment qualify posted, the command
says which login to pass. Two workflows pass two keys, and keep a comment each.

HTTP goes through the standard library's urllib, not httpx: httpx comes with the stages'
libraries (the `stages` extra), and the job that posts needs none of them, only the core and a
token of `pull-requests: write`.

The token goes out in one header, and only to the API's own origin: a `next` page elsewhere is
refused, redirects are not followed, and plain http is refused except to this machine (the
token would travel in clear). Every message passes through redaction with the token known, so it
is never printed, whatever a server answers.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote, urlsplit

from qualify import __version__
from qualify.core import jsontext
from qualify.core.capped import read_capped
from qualify.core.errors import QualifyError, UsageError
from qualify.core.plaintext import clean
from qualify.core.redaction import REDACTED, redact_known, remember
from qualify.report.prbody import MAX_SUMMARY_BYTES, marker

API_DEFAULT = "https://api.github.com"
#: Pages of 100 comments listed at most (a pull request with more is refused, not half-searched).
MAX_PAGES = 100
MAX_ANSWER_BYTES = 32 << 20
TIMEOUT_S = 30
_PER_PAGE = 100
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_IN_A_WORKFLOW = "in a workflow: env: {name}: ${{{{ github.token }}}}"
#: Who a workflow's GITHUB_TOKEN writes as; GitHub does not answer `GET /user` for it.
ACTIONS_BOT = "github-actions[bot]"


@dataclass(frozen=True)
class Target:
    """Where the comment goes and with what token."""

    api: str  # the API's base URL, without a trailing slash
    repository: str  # owner/name
    number: int  # the pull request's
    token: str
    token_env: str  # the variable the token came from, named in hints

    @property
    def comments(self) -> str:
        return f"{self.api}/repos/{quote(self.repository, safe='/')}/issues/{self.number}/comments"

    def comment(self, comment_id: int) -> str:
        return f"{self.api}/repos/{quote(self.repository, safe='/')}/issues/comments/{comment_id}"


@dataclass(frozen=True)
class Account:
    """The account qualify posts as: its login, and its id where GitHub said it (`GET /user`)."""

    login: str
    id: int | None = None

    def wrote(self, comment: Mapping[str, Any]) -> bool:
        """Whether `comment` (as GitHub lists it) was written by this account. Logins are
        compared as GitHub does, without case; an id, when known, must be the same too (a login
        can be given up and taken by another account)."""
        user = comment.get("user")
        if not isinstance(user, dict) or not isinstance(user.get("login"), str):
            return False  # a deleted account ("ghost"): no one's
        if user["login"].lower() != self.login.lower():
            return False
        return self.id is None or user.get("id") == self.id


@dataclass(frozen=True)
class Posted:
    action: str  # "created", "updated" or "unchanged"
    comment_id: int
    url: str
    cut: bool
    #: Who qualify took itself for, and who GitHub says wrote the comment it posted (None: as
    #: taken, or not said): when they differ, the next run would not find it (`--as`).
    account: str = ""
    author: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "id": self.comment_id,
            "url": self.url,
            "cut": self.cut,
            "account": self.account,
            **({"author": self.author} if self.author is not None else {}),
        }


def target_from_env(environ: Mapping[str, str], *, pr: int | None, token_env: str) -> Target:
    """The API, the repository, the pull request and the token, as a workflow's job has them."""
    token = environ.get(token_env, "").strip()
    if not token:
        raise UsageError(
            f"no token in {token_env}",
            f"set {token_env} to a token that may write on pull requests "
            f"({_IN_A_WORKFLOW.format(name=token_env)}), or name another variable with --token-env",
        )
    remember([token])  # from here on, redacted from whatever qualify prints
    api = (environ.get("GITHUB_API_URL") or API_DEFAULT).rstrip("/")
    _check_api(api)
    repository = environ.get("GITHUB_REPOSITORY", "")
    if not _REPOSITORY.fullmatch(repository):
        raise UsageError(
            f"GITHUB_REPOSITORY {repository!r}: expected owner/name",
            "set GITHUB_REPOSITORY to the repository of the pull request (GitHub Actions sets it)",
        )
    number = pr if pr is not None else _event_number(environ)
    return Target(api, repository, number, token, token_env)


def _check_api(api: str) -> None:
    parts = urlsplit(api)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and _loopback(parts.hostname):
        return
    raise UsageError(
        f"GITHUB_API_URL {api!r}: expected an https:// URL (plain http only to this machine: the "
        "token would travel in clear)",
        f"leave it unset for {API_DEFAULT}; GitHub Actions sets it to the server's API",
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _event_number(environ: Mapping[str, str]) -> int:
    where = environ.get("GITHUB_EVENT_PATH")
    if not where:
        raise UsageError(
            "no pull request number: --pr is not given and GITHUB_EVENT_PATH is not set",
            "pass --pr N, or post from a job of a pull_request event (its event file names the number)",
        )
    try:
        event = jsontext.loads(read_capped(Path(where), MAX_SUMMARY_BYTES, "the event file"))
    except (OSError, ValueError) as exc:  # JSONDecodeError, TooDeep, FileTooLarge, a missing file
        raise UsageError(
            f"{where}: cannot read the event (GITHUB_EVENT_PATH): {exc}", "pass --pr N"
        ) from None
    pull = event.get("pull_request") if isinstance(event, dict) else None
    number = pull.get("number") if isinstance(pull, dict) else None
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        name = environ.get("GITHUB_EVENT_NAME", "this event")
        raise UsageError(
            f"{where}: no pull_request.number in the event of {name} (GITHUB_EVENT_PATH)",
            "pass --pr N, or post from a job of a pull_request event",
        )
    return number


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as it came: following it could carry the token elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Api:
    """GitHub's REST API at `target.api`, with the token, answering JSON or a clear error."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.origin = _origin(target.api)
        self.opener = urllib.request.build_opener(_NoRedirect())

    def call(
        self,
        method: str,
        url: str,
        payload: dict[str, Any] | None = None,
        *,
        unanswered: tuple[int, ...] = (),
    ) -> tuple[Any, Message]:
        """The JSON GitHub answers; an answer of a status in `unanswered` is None, any other
        refusal a QualifyError saying what to do."""
        if _origin(url) != self.origin:
            raise QualifyError(
                self.said(f"{method} {url}: GitHub pointed to another server than {self.target.api}"),
                "the token is sent to GITHUB_API_URL's server only: check GITHUB_API_URL",
            )
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", f"qualify/{__version__}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        request.add_unredirected_header("Authorization", f"Bearer {self.target.token}")
        try:
            with self.opener.open(request, timeout=TIMEOUT_S) as answer:
                raw = answer.read(MAX_ANSWER_BYTES)
                headers = answer.headers
        except urllib.error.HTTPError as exc:
            if exc.code in unanswered:
                exc.close()
                return None, exc.headers
            self.refused(method, url, exc)
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, a dropped line
            reason = getattr(exc, "reason", None) or exc
            raise QualifyError(
                self.said(f"{method} {url}: cannot reach GitHub's API at {self.target.api}: {reason}"),
                "check GITHUB_API_URL and this machine's network (a proxy: HTTPS_PROXY)",
            ) from None
        try:
            return (jsontext.loads(raw) if raw else None), headers
        except jsontext.TooDeep as exc:
            raise QualifyError(
                self.said(f"{method} {url}: the answer is {exc}"), "check GITHUB_API_URL"
            ) from None
        except ValueError:
            raise QualifyError(
                self.said(f"{method} {url}: the answer is not JSON"), "check GITHUB_API_URL"
            ) from None

    def refused(self, method: str, url: str, exc: urllib.error.HTTPError) -> NoReturn:
        code, where = exc.code, f"{method} {url}"
        try:
            said = jsontext.loads(exc.read(1 << 16)).get("message", "")
        except (OSError, ValueError, AttributeError):
            said = ""
        said = f" {clean(str(said))[:300]}" if said else ""
        pr = f"pull request #{self.target.number} of {self.target.repository}"
        name = self.target.token_env
        if code == 401:
            message = f"{where}: GitHub refused the token (401{said})"
            hint = f"set {name} to a valid token ({_IN_A_WORKFLOW.format(name=name)})"
        elif code == 403 and exc.headers.get("X-RateLimit-Remaining") == "0":
            message = f"{where}: GitHub's rate limit for this token is used up (403{said})"
            hint = "post again after the limit resets (X-RateLimit-Reset)"
        elif code == 403:
            message = f"{where}: the token may not comment on {pr} (403{said})"
            hint = (
                "give the job `permissions: pull-requests: write` (a fine-grained token: Pull requests, "
                "read and write); a fork's pull request gets a read-only token"
            )
        elif code == 404:
            message = f"{where}: GitHub knows no {pr}, or the token cannot see it (404{said})"
            hint = "check GITHUB_REPOSITORY and the number (--pr, or the event's pull_request.number)"
        elif 300 <= code < 400:
            message = f"{where}: GitHub answered {code}, a redirect, which is not followed with a token"
            hint = "a renamed repository: set GITHUB_REPOSITORY to its name now"
        else:
            message = f"{where}: GitHub answered {code}{said}"
            hint = "try again later; a 422 says what GitHub refused in the body"
        raise QualifyError(self.said(message), hint)

    def said(self, text: str) -> str:
        """`text` safe to print: the token taken out however it got there."""
        return redact_known(text.replace(self.target.token, REDACTED))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _next_page(headers: Message) -> str | None:
    found = _NEXT.search(headers.get("Link") or "")
    return found.group(1) if found else None


def _is_ours(comment: Any, line: str, account: Account) -> bool:
    if not isinstance(comment, dict) or not account.wrote(comment):
        return False
    body = comment.get("body")
    return isinstance(body, str) and any(text.strip() == line for text in body.splitlines())


def poster(api: _Api, login: str | None = None) -> Account:
    """The account the token posts as: `login` when given (`--as`), else the one GitHub names
    for the token (`GET /user`), else, for a token GitHub does not answer that for (a
    workflow's GITHUB_TOKEN, a GitHub App's), the workflow's bot."""
    if login:
        return Account(login)
    user, _ = api.call("GET", f"{api.target.api}/user", unanswered=(403,))
    if user is None:
        return Account(ACTIONS_BOT)
    if not isinstance(user, dict) or not isinstance(user.get("login"), str):
        raise QualifyError(
            api.said(f"GET {api.target.api}/user: the answer names no account"), "check GITHUB_API_URL"
        )
    found = user.get("id")
    return Account(user["login"], found if isinstance(found, int) and not isinstance(found, bool) else None)


def find_comment(api: _Api, key: str, account: Account) -> dict[str, Any] | None:
    """The first comment of the pull request that is this key's and `account`'s, or None."""
    line = marker(key)
    url: str | None = f"{api.target.comments}?per_page={_PER_PAGE}"
    for _ in range(MAX_PAGES):
        if url is None:
            return None
        page, headers = api.call("GET", url)
        if not isinstance(page, list):
            raise QualifyError(api.said(f"GET {url}: expected a list of comments"), "check GITHUB_API_URL")
        for comment in page:
            if _is_ours(comment, line, account) and isinstance(comment.get("id"), int):
                return dict(comment)
        url = _next_page(headers)
    raise QualifyError(
        f"{api.target.comments}: more than {MAX_PAGES * _PER_PAGE} comments; qualify's was not found "
        f"in the first {MAX_PAGES} pages",
        "post with another --key: a new comment",
    )


def post(target: Target, body: str, *, key: str, cut: bool = False, login: str | None = None) -> Posted:
    """`body` on the pull request: this key's comment of the account qualify posts as
    (`poster`, `login` given with `--as`) edited, or a new one posted."""
    api = _Api(target)
    account = poster(api, login)
    found = find_comment(api, key, account)
    if found is not None and found.get("body") == body:
        return Posted("unchanged", found["id"], str(found.get("html_url", "")), cut, account.login)
    if found is None:
        answer, _ = api.call("POST", target.comments, {"body": body})
        action = "created"
    else:
        answer, _ = api.call("PATCH", target.comment(found["id"]), {"body": body})
        action = "updated"
    if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
        raise QualifyError(api.said(f"{target.comments}: GitHub's answer names no comment"))
    user = answer.get("user")
    author = user.get("login") if isinstance(user, dict) and isinstance(user.get("login"), str) else None
    differs = author is not None and not account.wrote(answer)
    return Posted(
        action, answer["id"], str(answer.get("html_url", "")), cut, account.login, author if differs else None
    )

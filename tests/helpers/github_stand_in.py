"""A stand-in for GitHub's REST API for a pull request's issue comments, on 127.0.0.1.

GitHub cannot be reached from the machines the tests run on, so this plays the part of the API
that `qualify comment` uses, as GitHub documents it: list a pull request's comments (pages,
with a `Link` header whose `next` URL has another shape than the first page's, as GitHub's
`/repositories/ID/...` links do), post one, edit one. A request without the expected
`Authorization: Bearer TOKEN` is answered 401; with `read_only`, every write is answered 403
"Resource not accessible by integration", as GitHub answers a token without
`pull-requests: write`. The token's own account (`account`) is by default the workflow's
bot, `github-actions[bot]`, whose token GitHub does not answer `GET /user` for (403 "Resource
not accessible by integration", as for any GitHub App's token); with `user_endpoint`, `GET /user`
names the account, as for a personal or machine account's token. The token may edit its own
account's comments and any bot's (a token that may write on the pull request may), not a
person's (a 403), so a test sees an attempt to edit either. Pages hold `page_size` comments whatever `per_page` asks, so that a few
comments already make several pages. With `nested`, a listing is answered with arrays nested
that many levels deep (as a broken or hostile server could).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
REPOSITORY_ID = 4242


@dataclass
class Request:
    method: str
    path: str
    authorization: str | None
    body: dict[str, Any] | None


@dataclass
class GitHub:
    """The state of the stand-in: comments by pull request, and every request it answered."""

    repository: str
    token: str
    page_size: int = 100
    read_only: bool = False
    account: dict[str, Any] = field(default_factory=lambda: dict(BOT))
    user_endpoint: bool = False
    nested: int = 0
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _next_id: int = 1000

    def add(self, number: int, body: str, user: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        comment = {
            "id": self._next_id,
            "body": body,
            "user": dict(user),
            "html_url": f"https://github.example/{self.repository}/pull/{number}#issuecomment-{self._next_id}",
        }
        self.comments.setdefault(number, []).append(comment)
        return comment

    def on(self, number: int) -> list[dict[str, Any]]:
        return self.comments.get(number, [])


def person(login: str = "maintainer") -> dict[str, Any]:
    return {"login": login, "id": 7, "type": "User"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, code: int, document: Any, headers: dict[str, str] | None = None) -> None:
        self._answer_raw(code, json.dumps(document).encode(), headers)

    def _answer_raw(self, code: int, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def _handle(self, method: str) -> None:
        github = self.server.github
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        parts = urlsplit(self.path)
        github.requests.append(Request(method, self.path, self.headers.get("Authorization"), body))
        if self.headers.get("Authorization") != f"Bearer {github.token}":
            self._answer(401, {"message": "Bad credentials", "status": "401"})
            return
        owner_repo = re.escape(github.repository)
        listing = re.fullmatch(rf"/repos/{owner_repo}/issues/(\d+)/comments", parts.path) or re.fullmatch(
            rf"/repositories/{REPOSITORY_ID}/issues/(\d+)/comments", parts.path
        )
        editing = re.fullmatch(rf"/repos/{owner_repo}/issues/comments/(\d+)", parts.path)
        if parts.path == "/user" and method == "GET":
            if github.user_endpoint:
                self._answer(
                    200, {**github.account, "html_url": f"https://github.example/{github.account['login']}"}
                )
            else:
                self._answer(403, {"message": "Resource not accessible by integration", "status": "403"})
        elif listing and method == "GET":
            self._list(int(listing.group(1)), parse_qs(parts.query))
        elif listing and method == "POST":
            if github.read_only:
                self._answer(403, {"message": "Resource not accessible by integration", "status": "403"})
                return
            self._answer(201, github.add(int(listing.group(1)), str((body or {})["body"]), github.account))
        elif editing and method == "PATCH":
            self._edit(int(editing.group(1)), str((body or {})["body"]))
        else:
            self._answer(404, {"message": "Not Found", "status": "404"})

    def _list(self, number: int, query: dict[str, list[str]]) -> None:
        github = self.server.github
        if github.nested:
            self._answer_raw(200, b"[" * github.nested + b"]" * github.nested)
            return
        size = min(int(query.get("per_page", ["30"])[0]), github.page_size)
        page = int(query.get("page", ["1"])[0])
        comments = github.on(number)
        last = max(1, -(-len(comments) // size))
        links = []
        if page < last:
            base = f"{github.url}/repositories/{REPOSITORY_ID}/issues/{number}/comments?per_page={size}"
            links = [f'<{base}&page={page + 1}>; rel="next"', f'<{base}&page={last}>; rel="last"']
        headers = {"Link": ", ".join(links)} if links else {}
        self._answer(200, comments[(page - 1) * size : page * size], headers)

    def _edit(self, comment_id: int, body: str) -> None:
        github = self.server.github
        for comments in github.comments.values():
            for comment in comments:
                if comment["id"] != comment_id:
                    continue
                own = comment["user"]["id"] == github.account["id"]
                if github.read_only or not (own or comment["user"]["type"] == "Bot"):
                    self._answer(403, {"message": "Resource not accessible by integration", "status": "403"})
                    return
                comment["body"] = body
                self._answer(200, comment)
                return
        self._answer(404, {"message": "Not Found", "status": "404"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


class _Server(ThreadingHTTPServer):
    github: GitHub


class Serving:
    """`with Serving(github) as api:` the stand-in answers on `api.url` until the block ends."""

    def __init__(self, github: GitHub) -> None:
        self.github = github
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.github = github
        github.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitHub:
        self.thread.start()
        return self.github

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

"""Flake references of an input at one revision, as nix spells them for each kind of source
(docs/bisect.md): `git+file:///x?rev=R`, `github:o/r/R`. A `path:` or tarball reference names
files, not a history, so it cannot take a rev and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

#: Sources whose reference takes a rev as a query parameter (`?rev=R`).
GIT_SCHEMES = ("git+file://", "git+https://", "git+http://", "git+ssh://", "git://")
#: Sources whose reference takes a rev as its third path segment (`github:o/r/R`).
FORGES = ("github:", "gitlab:", "sourcehut:")

WHAT_TAKES_A_REV = (
    "give a git URL (git+file:///path/to/repo, git+https://…), a github:, gitlab: or sourcehut: "
    "reference, or the absolute path of a git checkout"
)


def rev_problem(url: str) -> str | None:
    """Why `url` cannot be given a rev (a sentence), or None when it can."""
    if url.startswith("path:"):
        return "is a path: reference, which names files, not a history, so it cannot take a rev"
    if "#" in url:
        return "holds a `#` fragment: an input's reference names a flake, not one of its outputs"
    base, _, query = url.partition("?")
    keys = {key for key, _ in parse_qsl(query, keep_blank_values=True)}
    if "rev" in keys:
        return "already holds a rev: give the reference without one, the series adds each revision"
    if url.startswith(GIT_SCHEMES) or url.startswith("/"):
        return None
    if url.startswith(FORGES):
        parts = base.split(":", 1)[1].split("/")
        if len(parts) < len(("owner", "repo")) or not all(parts[:2]):
            return "is not OWNER/REPO after its scheme"
        if len(parts) > len(("owner", "repo", "ref")):
            return "has more than OWNER/REPO/REF after its scheme"
        return None
    return "is not a reference qualify can give a rev to"


def at_revision(url: str, rev: str) -> str:
    """`url` (one `rev_problem` passes) at `rev`: a query parameter for git, the third path
    segment for a forge (in place of a branch the URL names), `git+file://` for a path."""
    if url.startswith("/"):
        url = f"git+file://{url}"
    base, sep, query = url.partition("?")
    if url.startswith(FORGES):
        scheme, _, path = base.partition(":")
        owner, repo = path.split("/")[:2]
        return f"{scheme}:{owner}/{repo}/{rev}{sep}{query}"
    return f"{base}?{query}&rev={rev}" if query else f"{base}?rev={rev}"


def local_repository(url: str) -> Path | None:
    """The directory of the git checkout `url` names on this machine, or None when it names
    another machine's (its history cannot be read here)."""
    if url.startswith("/"):
        return Path(url.partition("?")[0])
    if url.startswith("git+file://"):
        return Path(unquote(url.removeprefix("git+file://").partition("?")[0]))
    return None


def unlocked_url(node: Mapping[str, Any]) -> str | None:
    """A flake.lock node's source as a reference without its rev (`git+file:///x`,
    `github:o/r`), or None for one that cannot take a rev (a path, a tarball)."""
    locked = node.get("locked") or {}
    original = node.get("original") or {}
    kind = locked.get("type")
    if kind == "git" and isinstance(locked.get("url"), str):
        url = str(locked["url"])
        # The branch the project follows, when it names one: a rev off the default branch is
        # found there.
        ref = original.get("ref")
        return f"git+{url}" + (f"?ref={ref}" if isinstance(ref, str) and ref else "")
    if kind in ("github", "gitlab", "sourcehut") and locked.get("owner") and locked.get("repo"):
        host = locked.get("host")
        return f"{kind}:{locked['owner']}/{locked['repo']}" + (f"?host={host}" if host else "")
    return None

"""A series of one flake input's revisions, made ready to walk (docs/bisect.md): each step the
candidate arm built with `--override-input INPUT <url at the step's revision>`, against
qualify.toml's pinned arm built as locked.

Everything the file alone cannot tell is checked here, before a folder is made or a step runs:
the input against the project's flake.lock (when it has one), the URL the revisions are of (it
must take a rev), and for `from`/`to` the history between them, read with git from the
input's checkout on this machine. Each error names qualify.toml's key and what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qualify.bisect.flakerefs import (
    WHAT_TAKES_A_REV,
    at_revision,
    local_repository,
    rev_problem,
    unlocked_url,
)
from qualify.bisect.state import Step
from qualify.bisect.steps import StepBuild
from qualify.core import jsontext
from qualify.core.config import ProjectConfig
from qualify.core.errors import ConfigError
from qualify.core.process import capture
from qualify.core.recordredaction import redact_ref
from qualify.core.series import MIN_STEPS, InputSeries
from qualify.core.tomlfile import dotted, suggest

#: An error naming a key of the series (None: the series itself), what is wrong and what to do.
_Raise = Callable[[str | None, str, str], ConfigError]

#: The fewest hex digits a step is named by; more where two revisions share them.
SHORT = 12
#: How long git may take to read a history between two revisions.
GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class InputWalk:
    """The revisions of `input` at `url`, good end first, each probed as `candidate` built with
    the input overridden at it, against `pinned`."""

    input: str
    url: str
    candidate: str
    pinned: str
    revisions: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Each revision shortened to the fewest digits (at least SHORT) that tell them apart."""
        for width in range(SHORT, 41):
            names = tuple(rev[:width] for rev in self.revisions)
            if len(set(names)) == len(names):
                return names
        return self.revisions

    def context(self) -> dict[str, Any]:
        return {
            "pinned": self.pinned,
            "candidate": self.candidate,
            "input": self.input,
            "url": redact_ref(self.url),
        }

    def __call__(self, step: Step) -> StepBuild:
        rev = self.revisions[step.index]
        return StepBuild(
            self.candidate,
            self.pinned,
            ((self.input, at_revision(self.url, rev)),),
            {"input": self.input, "revision": rev},
        )


def input_walk(config: ProjectConfig, name: str, series: InputSeries) -> InputWalk:
    """`[series.NAME]` of an input, checked against the project and its input's history."""

    def error(key: str | None, message: str, hint: str) -> ConfigError:
        path = ("series", name) if key is None else ("series", name, key)
        if config.doc is not None:
            return config.doc.error(path, message, hint)
        return ConfigError(f"{config.path}: {dotted(path)}: {message}", hint)

    candidate = _candidate(config, series, error)
    node = _locked_node(config, series.input, error)
    url = series.url
    if url is None:
        url = unlocked_url(node) if node is not None else None
        if url is None:
            why = (
                "its flake.lock entry cannot take a rev"
                if node is not None
                else "no flake.lock of the project's flake is on this machine"
            )
            raise error(
                "input",
                f"has no URL to give revisions to: {why}",
                f'give the input\'s repository: url = "git+file:///path/to/repo"; {WHAT_TAKES_A_REV}',
            )
        problem = rev_problem(url)
        if problem is not None:
            raise error(
                "input", f"is locked as {redact_ref(url)}, which {problem}", f"give url; {WHAT_TAKES_A_REV}"
            )
    else:
        problem = rev_problem(url)
        if problem is not None:
            raise error("url", f"{redact_ref(url)} {problem}", WHAT_TAKES_A_REV)
    revisions = series.revisions
    if series.span is not None:
        revisions = _history(url, series.span, error)
    return InputWalk(series.input, url, candidate, config.pinned, revisions)


def _candidate(config: ProjectConfig, series: InputSeries, error: _Raise) -> str:
    if series.candidate is not None:
        return series.candidate
    if len(config.candidates) == 1:
        return config.candidates[0]
    if not config.candidates:
        raise error(
            None,
            "names no candidate, and qualify.toml has no `candidate`",
            'name the arm built with each revision: candidate = "ARM" in the series',
        )
    raise error(
        None,
        "names no candidate, and qualify.toml's `candidate` lists " + ", ".join(config.candidates),
        'name the one arm built with each revision: candidate = "ARM" in the series',
    )


def _locked_node(config: ProjectConfig, name: str, error: _Raise) -> dict[str, Any] | None:
    """The input's node in the project's flake.lock, or None when the flake is not a folder
    here or has no flake.lock (nix then reports an unknown input itself)."""
    if ":" in config.flake:
        return None
    lock = (config.root / config.flake).resolve() / "flake.lock"
    if not lock.is_file():
        return None
    try:
        document = jsontext.loads(lock.read_text(encoding="utf-8"))
        nodes = document["nodes"]
        inputs = nodes[document.get("root", "root")].get("inputs") or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"{lock}: cannot be read as a flake.lock ({exc})", "run `nix flake lock` to write it again"
        ) from None
    if name not in inputs:
        raise error(
            "input",
            f"{lock} has no input {name!r}{suggest(name, inputs)}",
            ("inputs locked: " + ", ".join(sorted(inputs)) if inputs else "the flake locks no inputs")
            + f"; or add inputs.{name}.url to flake.nix and run `nix flake lock`",
        )
    label = inputs[name]
    if not isinstance(label, str) or not isinstance(nodes.get(label), dict):
        follows = "/".join(str(p) for p in label) if isinstance(label, list) else str(label)
        raise error(
            "input",
            f"{name!r} follows {follows} in {lock}: overriding it would override that input",
            "name the input it follows",
        )
    node: dict[str, Any] = nodes[label]
    return node


def _history(url: str, span: tuple[str, str], error: _Raise) -> tuple[str, ...]:
    """`from`, then every commit on the ancestry path from `from` to `to`, oldest first."""
    repo = local_repository(url)
    if repo is None:
        raise error(
            "from",
            f"needs the history of {redact_ref(url)}, which is not a git checkout on this machine",
            "list the revisions instead, oldest first: revisions = [...], or give url = "
            '"git+file:///path/to/a/checkout"',
        )
    ends = []
    for key, rev in zip(("from", "to"), span, strict=True):
        argv = ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options"]
        code, out = capture([*argv, f"{rev}^{{commit}}"], timeout_s=GIT_TIMEOUT_S)
        if code != 0:
            raise error(
                key,
                f"{rev!r} is no commit of the git repository {repo}"
                + (f": {out.strip()}" if out.strip() else ""),
                f"`git -C {repo} log --oneline` lists its commits",
            )
        ends.append(out.strip())
    argv = ["git", "-C", str(repo), "rev-list", "--reverse", "--ancestry-path", f"{ends[0]}..{ends[1]}"]
    code, out = capture(argv, timeout_s=GIT_TIMEOUT_S)
    if code != 0:
        raise error(
            "from", f"git could not read the history of {repo}: {out.strip()}", "check the repository"
        )
    revisions = (ends[0], *out.split())
    if len(revisions) < MIN_STEPS:
        raise error(
            "to",
            f"{span[1]!r} is not a descendant of {span[0]!r} in {repo}: no revision lies between them",
            "give `from` the older, good end and `to` a later commit on its history",
        )
    return revisions

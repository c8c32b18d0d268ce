"""Nix's `--log-format internal-json` stream: what was built, for how long, and its log.

Lines start with `@nix ` and carry JSON (`start`, `stop`, `result`, `msg` actions). The
format has no timestamps, so the caller stamps each line as it arrives. Activity and result
types are those of Nix 2.8 through current CppNix and Lix (nix-output-monitor's list; Nix 2.8's
src/libutil/logging.hh): unknown types are ignored, since newer Nix adds some (112/113, results
108/109).

A path taken from a substituter instead of built is an `actSubstitute` activity (108: fields
the path and the substituter's URI), around the `actCopyPath` (100) that copies it; a path a
substituter holds but nix will not trust is only a warning, in words this module matches.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from qualify.core.redaction import redact_known

ACT_BUILDS = 104
ACT_BUILD = 105
ACT_SUBSTITUTE = 108
RES_BUILD_LOG_LINE = 101
RES_SET_PHASE = 104
RES_PROGRESS = 105

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STORE_PATH = re.compile(r"/nix/store/[0-9a-z]{32}-[^\s'\"]+")
TAIL_LINES = 40


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def parse_line(line: str) -> dict[str, Any] | None:
    """The JSON of an `@nix ` line, or None for anything else (plain output, noise)."""
    if not line.startswith("@nix "):
        return None
    try:
        event = json.loads(line[5:])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


_FAILED_BUILDER = re.compile(r"builder for '(/nix/store/[^']+\.drv)' failed")
#: A substitute nix did not use: not signed by a key it trusts. Nix 2.8: "the substitute for 'P'
#: from 'U' is not signed by any of the keys in 'trusted-public-keys'"; later CppNix and Lix:
#: "ignoring substitute for 'P' from 'U', as it's not signed by any of the keys in …".
_UNTRUSTED = re.compile(r"substitute for '(/nix/store/[^']+)' from '([^']+)',? (?:is|as it's) not signed")
#: A daemon that does not let this user add a substituter or a key ("ignoring untrusted
#: substituter 'U'", "ignoring the user-specified (client-specified) setting 'S', because it is
#: a restricted setting"), in either case. Other settings it ignores (`fallback`) leave the
#: cache as it was.
_IGNORED = re.compile(
    r"ignoring (?:untrusted substituter '|the (?:user|client)-specified setting "
    r"'(?:extra-)?(?:substituters|trusted-public-keys)')",
    re.I,
)


@dataclass
class DerivationBuild:
    drv: str
    started: float
    stopped: float | None = None
    phase: str | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    #: Nix's error for this derivation when its builder failed (it comes after the stop).
    failed: str | None = None
    #: The remote builder that built it (its store URI, as nix names it); "" for this machine.
    machine: str = ""

    @property
    def seconds(self) -> float | None:
        return None if self.stopped is None else self.stopped - self.started


@dataclass
class BuildLog:
    """Accumulates a build's events; feed it (timestamp, line) pairs in arrival order."""

    builds: dict[int, DerivationBuild] = field(default_factory=dict)
    #: Store path -> the substituter nix began to substitute it from (it may yet have failed).
    substituting: dict[str, str] = field(default_factory=dict)
    #: Store path -> the substituter whose copy nix ignored: not signed by a key it trusts.
    untrusted: dict[str, str] = field(default_factory=dict)
    #: nix's warnings where it ignored a substituter or a setting the command gave it.
    ignored: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    progress: tuple[int, int, int, int] | None = None  # done, expected, running, failed
    last_line: tuple[str, str] | None = None  # (drv, text) of the newest build log line
    _activity_type: dict[int, int] = field(default_factory=dict)

    def feed(self, at: float, line: str) -> DerivationBuild | None:
        """Take one line; return the derivation whose build started or stopped, if any."""
        event = parse_line(line)
        if event is None:
            return None
        action = event.get("action")
        ident = event.get("id")
        if action == "start" and isinstance(ident, int):
            kind = event.get("type")
            self._activity_type[ident] = kind if isinstance(kind, int) else -1
            fields = event.get("fields") or []
            if kind == ACT_BUILD and fields and isinstance(fields[0], str):
                machine = fields[1] if len(fields) > 1 and isinstance(fields[1], str) else ""
                build = DerivationBuild(fields[0], at, machine=machine)
                self.builds[ident] = build
                return build
            if kind == ACT_SUBSTITUTE and len(fields) > 1 and all(isinstance(f, str) for f in fields[:2]):
                self.substituting.setdefault(fields[0], fields[1])
        elif action == "stop" and ident in self.builds:
            build = self.builds[ident]
            build.stopped = at
            return build
        elif action == "result":
            self._result(event)
        elif action == "msg":
            # What nix says is kept (messages, a failure) and shown: a secret in it redacted.
            text = redact_known(strip_ansi(str(event.get("msg", ""))))
            if text.strip():
                self.messages.append(text)
            self._substitute_warning(text)
            failed = _FAILED_BUILDER.search(text)
            if failed:
                for build in self.builds.values():
                    if build.drv == failed.group(1) and build.failed is None:
                        build.failed = text.splitlines()[0].removeprefix("error: ").strip()
                        return build
        return None

    def _substitute_warning(self, text: str) -> None:
        untrusted = _UNTRUSTED.search(text)
        if untrusted:
            self.untrusted.setdefault(untrusted.group(1), untrusted.group(2))
        elif _IGNORED.search(text):
            self.ignored.append(text.splitlines()[0].removeprefix("warning: ").strip())

    def _result(self, event: dict[str, Any]) -> None:
        ident, kind, fields = event.get("id"), event.get("type"), event.get("fields") or []
        if kind == RES_BUILD_LOG_LINE and ident in self.builds and fields:
            # A builder's line is kept in the tail and shown as progress: a secret redacted.
            text = redact_known(strip_ansi(str(fields[0])))
            self.builds[ident].tail.append(text)
            self.last_line = (self.builds[ident].drv, text)
        elif kind == RES_SET_PHASE and ident in self.builds and fields:
            self.builds[ident].phase = str(fields[0])
        elif (
            kind == RES_PROGRESS
            and self._activity_type.get(ident) == ACT_BUILDS  # type: ignore[arg-type]
            and len(fields) >= 4
            and all(isinstance(f, int) for f in fields[:4])
        ):
            self.progress = (fields[0], fields[1], fields[2], fields[3])

    def built(self) -> list[DerivationBuild]:
        """Distinct derivations whose build started, in start order (a drv counts once)."""
        seen: dict[str, DerivationBuild] = {}
        for build in self.builds.values():
            seen.setdefault(build.drv, build)
        return list(seen.values())

    def error_paths(self) -> list[str]:
        """Store paths named by error messages (a hint only; validity decides what failed)."""
        found: list[str] = []
        for message in self.messages:
            if "error" in message.lower():
                found += [p for p in _STORE_PATH.findall(message) if p not in found]
        return found


@dataclass(frozen=True)
class DryRun:
    """What `nix build --dry-run` says it would do."""

    will_build: tuple[str, ...]
    will_fetch: tuple[str, ...]
    fetch_summary: str | None


def parse_dry_run(lines: list[str]) -> DryRun:
    """Read the `msg` events of a dry run.

    The wording ("these N derivations will be built:", "this derivation will be built:",
    "these N paths will be fetched (…)", followed by indented store paths) is the same in
    Nix 2.8, current CppNix and Lix (src/libmain/shared.cc); only size units differ.
    """
    build: list[str] = []
    fetch: list[str] = []
    summary: str | None = None
    target: list[str] | None = None
    for line in lines:
        event = parse_line(line)
        text = strip_ansi(str(event.get("msg", ""))) if event and event.get("action") == "msg" else None
        if text is None:
            continue
        stripped = text.strip()
        if stripped.endswith("will be built:"):
            target = build
        elif "will be fetched" in stripped:
            target = fetch
            summary = stripped.rstrip(":")
        elif text.startswith("  /nix/store/") and target is not None:
            target.append(stripped)
        else:
            target = None
    return DryRun(tuple(build), tuple(fetch), summary)

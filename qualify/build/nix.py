"""The nix CLI, used only through calls that behave alike in Nix 2.8, current CppNix and Lix.

`nix build --json` / `--dry-run --json`, `--log-format internal-json`, `nix flake metadata
--json`, `nix eval --json` and the legacy `nix-store --query` family. JSON shapes are detected,
never inferred from the version string.

Every call is `privileged`: inside a run nix keeps qualify's user, since a single-user store is
written by its owner (`qualify.core.commanduser`); the checked commands do not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.build.internaljson import BuildLog, DryRun, parse_dry_run
from qualify.core import process
from qualify.core.errors import QualifyError
from qualify.core.runstore import ensure_folder


class NixError(QualifyError):
    """A nix query failed; the message carries nix's own words."""


def _query(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> str:
    code, text = process.capture(argv, env=env, cwd=cwd, timeout_s=600, privileged=True)
    if code == 127:
        raise NixError(f"{argv[0]}: not installed", "install nix (Debian: apt-get install nix-bin)")
    if code != 0:
        raise NixError(
            f"`{' '.join(process.recorded_argv(argv)[:4])} …` failed ({code}): {text.strip()[-600:]}"
        )
    return text


@dataclass(frozen=True)
class FlakeSource:
    """A flake resolved once: every arm builds from `locked_url`, so all share one revision."""

    ref: str
    locked_url: str
    type: str
    revision: str | None
    dirty: bool | None  # None: not version-controlled (a path: flake)
    last_modified: int | None
    locks: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)


def flake_metadata(ref: str, env: Mapping[str, str], cwd: Path | None = None) -> FlakeSource:
    return parse_flake_metadata(
        ref, json.loads(_query(["nix", "flake", "metadata", "--json", ref], env, cwd))
    )


def parse_flake_metadata(ref: str, data: dict[str, Any]) -> FlakeSource:
    """`nix flake metadata --json` in any version's shape."""
    locked = data.get("locked") or {}
    kind = str(locked.get("type", ""))
    revision = data.get("revision")
    if kind in ("git", "github", "gitlab", "sourcehut", "mercurial", "hg"):
        # 2.8 leaves `revision` out for a dirty tree; newer Nix adds `dirtyRevision`.
        dirty: bool | None = revision is None or "dirtyRevision" in data
    else:
        dirty = None
    return FlakeSource(
        ref=ref,
        locked_url=str(data.get("url") or data.get("resolvedUrl") or ref),
        type=kind,
        revision=revision,
        dirty=dirty,
        last_modified=data.get("lastModified"),
        locks=data.get("locks") or {},
        raw=data,
    )


def installable_ref(source: FlakeSource, installable: str) -> tuple[str, bool]:
    """The installable as built from the locked flake, and whether it is the project's flake.

    `.#x`, `#x` and bare attribute paths (`legacyPackages.x86_64-linux.gfx1151.gufo`) refer to
    the project's flake; anything else (`github:o/r#x`) is used as written.
    """
    if installable.startswith((".#", "#")):
        return f"{source.locked_url}#{installable.split('#', 1)[1]}", True
    if installable == ".":
        return f"{source.locked_url}#default", True
    if ":" not in installable and "#" not in installable and not installable.startswith(("/", ".")):
        return f"{source.locked_url}#{installable}", True
    return installable, False


def override_args(overrides: Sequence[tuple[str, str]]) -> list[str]:
    args: list[str] = []
    for name, ref in overrides:
        args += ["--override-input", name, ref]
    return args


@dataclass(frozen=True)
class Planned:
    drv: str
    outputs: dict[str, str]
    dry_run: DryRun


def plan(ref: str, extra: Sequence[str], env: Mapping[str, str], log: Path) -> Planned:
    """`nix build --dry-run --json`: what would be built and fetched, without building."""
    lines: list[str] = []
    done = process.run(
        ["nix", "build", ref, "--dry-run", "--json", "--no-link", "--log-format", "internal-json", *extra],
        log=log,
        env=env,
        on_line=[lines.append],
        separate_stdout=True,
        timeout_s=1800,
        privileged=True,
    )
    if not done.ok:
        raise NixError(
            f"evaluating {ref} failed ({done.describe()})",
            "\n".join(_messages(lines)[-6:]) or f"see {log}",
        )
    drv, outputs = first_result(done.stdout or "")
    return Planned(drv, outputs, parse_dry_run(lines))


def _messages(lines: list[str]) -> list[str]:
    log = BuildLog()
    for line in lines:
        log.feed(0.0, line)
    return log.messages


def first_result(stdout: str) -> tuple[str, dict[str, str]]:
    try:
        results = json.loads(stdout)
    except ValueError:
        raise NixError(f"nix build --json printed no JSON: {stdout[:200]!r}") from None
    # An array of {drvPath, outputs} in every version; newer ones add timing fields.
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        raise NixError(f"unexpected nix build --json shape: {stdout[:200]!r}")
    first = results[0]
    return str(first.get("drvPath", "")), {str(k): str(v) for k, v in (first.get("outputs") or {}).items()}


@dataclass(frozen=True)
class Built:
    ok: bool
    drv: str | None
    outputs: dict[str, str]
    seconds: float
    log: BuildLog
    returncode: int


def build(
    ref: str,
    out_link: Path,
    extra: Sequence[str],
    env: Mapping[str, str],
    log: Path,
    on_event: Callable[[BuildLog, str], None] | None = None,
    timeout_s: float | None = None,
    on_log: Callable[[str, str], None] | None = None,
) -> Built:
    """`nix build --json --out-link`: each stderr line is time-stamped here as it arrives.

    `--print-build-logs` must come before `--log-format`: Nix 2.8 implements `-L` by switching
    the log format, so in the other order the internal-json stream is lost.
    """
    events = BuildLog()

    def take(line: str) -> None:
        before = events.last_line
        changed = events.feed(time.monotonic(), line)
        if on_event is not None and changed is not None:
            on_event(events, changed.drv)
        if on_log is not None and events.last_line is not before and events.last_line:
            on_log(*events.last_line)

    ensure_folder(out_link.parent)  # the run's gcroots: never a link to somewhere else
    done = process.run(
        [
            "nix",
            "build",
            ref,
            "--json",
            "--out-link",
            str(out_link),
            "--print-build-logs",
            "--log-format",
            "internal-json",
            *extra,
        ],
        log=log,
        env=env,
        on_line=[take],
        separate_stdout=True,
        timeout_s=timeout_s,
        privileged=True,
    )
    drv: str | None = None
    outputs: dict[str, str] = {}
    if done.ok:
        drv, outputs = first_result(done.stdout or "")
    return Built(done.ok, drv, outputs, done.duration_s, events, done.returncode)


def requisites(path: str, env: Mapping[str, str]) -> list[str]:
    """The closure of a store path (outputs: runtime; a .drv: the build-time closure)."""
    return _query(["nix-store", "--query", "--requisites", path], env).split()


def sizes(paths: Sequence[str], env: Mapping[str, str]) -> list[int]:
    """NAR sizes, in the order given (one integer per line)."""
    out: list[int] = []
    for start in range(0, len(paths), 500):  # keep argv well under the kernel's limit
        chunk = paths[start : start + 500]
        out += [int(x) for x in _query(["nix-store", "--query", "--size", *chunk], env).split()]
    return out


def derivers(paths: Sequence[str], env: Mapping[str, str]) -> list[str | None]:
    out: list[str | None] = []
    for start in range(0, len(paths), 500):
        chunk = paths[start : start + 500]
        for line in _query(["nix-store", "--query", "--deriver", *chunk], env).splitlines():
            out.append(None if line.strip() in ("", "unknown-deriver") else line.strip())
    return out


def invalid_outputs(drvs: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Derivations (of `drvs`) with an output missing from the store: the ones that failed."""
    failed: list[str] = []
    for drv in drvs:
        outputs = _query(["nix-store", "--query", "--outputs", drv], env).split()
        code, text = process.capture(
            ["nix-store", "--check-validity", "--print-invalid", *outputs], env=env, privileged=True
        )
        if code != 0 or text.strip():
            failed.append(drv)
    return failed


def outputs(drvs: Sequence[str], env: Mapping[str, str]) -> set[str]:
    """Every output path of the derivations `drvs`."""
    found: set[str] = set()
    for start in range(0, len(drvs), 500):
        found |= set(_query(["nix-store", "--query", "--outputs", *drvs[start : start + 500]], env).split())
    return found


def invalid_paths(paths: Sequence[str], env: Mapping[str, str]) -> set[str]:
    """Those of `paths` this host's store does not hold."""
    found: set[str] = set()
    for start in range(0, len(paths), 500):
        argv = ["nix-store", "--check-validity", "--print-invalid", *paths[start : start + 500]]
        found |= set(_query(argv, env).split())
    return found


def version(env: Mapping[str, str]) -> str | None:
    code, text = process.capture(["nix", "--version"], env=env, privileged=True)
    return text.strip() if code == 0 else None


def eval_json(ref: str, env: Mapping[str, str], apply: str | None = None) -> Any:
    argv = ["nix", "eval", "--json", ref]
    if apply:
        argv += ["--apply", apply]
    return json.loads(_query(argv, env))


def eval_expr(expr: str, env: Mapping[str, str]) -> Any:
    return json.loads(_query(["nix", "eval", "--json", "--expr", expr], env))

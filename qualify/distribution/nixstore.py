"""The nix commands the distribution stage runs, each through the one process runner with its log
in the check's `logs/`: copies between stores, path information, verification, fetching a
locked input alone. Only what behaves alike on Nix 2.8, current CppNix and Lix: `nix copy`,
`nix path-info --json`, `nix store verify`, `nix eval` of `builtins.fetchTree`, and the legacy
`nix-store --query` and `--print-fixed-path`.

A fresh store here is a folder used as a local store's root (`nix copy --to /tmp/x`): it starts
empty and holds what was copied into it alone, so what it ends up with came from where it was
copied from. Its paths are read-only, as nix makes them, until `scratch` removes the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.core import process
from qualify.core.context import CheckContext
from qualify.core.environment import child_env
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.outputpump import LineCallback
from qualify.core.redaction import redact_lines
from qualify.records.distribution import Step

#: How long one nix command of the stage may run unless the check says (`timeout`).
DEFAULT_TIMEOUT_S = 3600.0
#: The lines of nix's output an error keeps.
_TAIL = 6


@dataclass(frozen=True)
class Nix:
    """The nix commands of one check: its environment, where its logs go, how long each may run."""

    env: Mapping[str, str]
    logs: Path
    timeout_s: float = DEFAULT_TIMEOUT_S
    echo: LineCallback | None = None

    @classmethod
    def of_check(cls, ctx: CheckContext, env: Mapping[str, str] | None = None) -> Nix:
        """The nix commands of the check `ctx` runs, in `env` (none: the check's own environment,
        with what the project lets it inherit), logged in its folder's `logs/`, each within the
        check's timeout."""
        env = child_env(ctx.spec.env, inherit=ctx.config.inherit_env) if env is None else env
        return cls(env, ctx.folder / "logs", ctx.spec.timeout_s or DEFAULT_TIMEOUT_S, ctx.echo)

    def run(
        self, argv: Sequence[str], name: str, stdin: Path | None = None, **extra_env: str
    ) -> tuple[Step, str]:
        """`argv` run to its end (`stdin`: a file it reads): the step (nix's last words when it
        failed) and its stdout."""
        try:
            with stdin.open("rb") if stdin is not None else nullcontext() as given:
                done = process.run(
                    argv,
                    log=self.logs / f"{name}.log",
                    env={**self.env, **extra_env},
                    timeout_s=self.timeout_s,
                    echo=self.echo,
                    stdin=given,
                    separate_stdout=True,
                    privileged=True,  # nix writes and reads the store as its owner
                )
        except ToolMissing as exc:
            return Step(ok=False, seconds=0.0, error=exc.message), ""
        seconds = round(done.duration_s, 3)
        if done.ok:
            return Step(ok=True, seconds=seconds), done.stdout or ""
        said = [line.strip() for line in redact_lines(done.output_tail) if line.strip()]
        said = [line for line in said if not line.startswith("(use '--show-trace'")]
        # nix's own error, from its first line on; what it was doing before is in the log.
        first = next(
            (i for i, line in enumerate(said) if line.startswith("error")), max(len(said) - _TAIL, 0)
        )
        error = f"{done.describe()}: " + " / ".join(said[first : first + _TAIL])
        return Step(ok=False, seconds=seconds, error=error), done.stdout or ""

    def query(self, argv: Sequence[str], name: str) -> str:
        """`argv`'s stdout, or a QualifyError naming the command and nix's words."""
        step, out = self.run(argv, name)
        if not step.ok:
            raise QualifyError(f"`{' '.join(argv[:3])} …` failed: {step.error}")
        return out

    def public_key(self, secret_key_file: Path) -> str:
        """The public half of a nix secret key, the file given on stdin (never in a command
        line, where it would be echoed and logged)."""
        argv = ["nix", "key", "convert-secret-to-public"]
        step, out = self.run(argv, "public-key", stdin=secret_key_file)
        if not step.ok:
            raise QualifyError(f"`nix key convert-secret-to-public` failed: {step.error}")
        return out.strip()

    def version(self) -> str | None:
        code, text = process.capture(["nix", "--version"], env=dict(self.env), timeout_s=60, privileged=True)
        return text.strip() if code == 0 else None

    def requisites(self, paths: Sequence[str], name: str, *, include_outputs: bool = False) -> list[str]:
        """Every path `paths` need, themselves included (`nix-store -qR`)."""
        argv = ["nix-store", "--query", "--requisites", *(["--include-outputs"] if include_outputs else [])]
        return self.query([*argv, *paths], name).split()

    def path_infos(self, paths: Sequence[str], name: str, store: str | None = None) -> dict[str, Any]:
        """`nix path-info --json` of `paths` (in `store`), by path: NAR hash, size, signatures."""
        argv = ["nix", "path-info", "--json", *(["--store", store] if store else []), *paths]
        return {str(info["path"]): info for info in _listed(json.loads(self.query(argv, name) or "[]"))}

    def copy(
        self, to: str, paths: Sequence[str], name: str, *, source: str | None = None, **options: str
    ) -> Step:
        """`nix copy` of `paths` to the store `to` (from `source`, else this host's store), with
        nix `options` (`require-sigs`, `trusted-public-keys`) given for this command alone."""
        argv = ["nix", "copy", "--to", to, *(["--from", source] if source else [])]
        argv += [arg for key, value in options.items() for arg in ("--option", key.replace("_", "-"), value)]
        return self.run([*argv, *paths], name)[0]

    def fixed_path(self, nar_hash: str) -> str:
        """The store path of a flake input's source with this NAR hash (what fetching it makes)."""
        argv = ["nix-store", "--print-fixed-path", "--recursive", "sha256", nar_hash, "source"]
        return self.query(argv, "fixed-path").strip()

    def fetch_tree(self, locked: Mapping[str, Any], scratch: Path, name: str) -> tuple[Step, str]:
        """Fetch one locked input from its origin alone into the empty store under `scratch`
        (an empty fetcher cache, no substituter); nix checks its NAR hash. The step, and the
        store path it made."""
        spec = scratch / "locked.json"
        spec.write_text(json.dumps(dict(locked)), encoding="utf-8")
        expr = f"(builtins.fetchTree (builtins.fromJSON (builtins.readFile {json.dumps(str(spec))}))).outPath"
        argv = ["nix", "eval", "--impure", "--raw", "--store", str(scratch / "store")]
        argv += ["--option", "substituters", "", "--expr", expr]
        step, out = self.run(argv, name, XDG_CACHE_HOME=str(scratch / "cache"))
        return step, out.strip()

    def valid(self, path: str, name: str) -> bool:
        """Whether this host's store holds `path`."""
        return self.run(["nix", "path-info", path], name)[0].ok


def _listed(document: object) -> list[dict[str, Any]]:
    """`nix path-info --json`'s entries: a list on Nix 2.8, an object by path on newer nix."""
    if isinstance(document, dict):
        return [{"path": path, **(info or {})} for path, info in document.items()]
    return [entry for entry in document if isinstance(entry, dict)] if isinstance(document, list) else []


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A folder for fresh stores and caches, removed with everything in it on leaving (the
    store paths nix made read-only included)."""
    folder = Path(tempfile.mkdtemp(prefix=f"qualify-{prefix}-"))
    try:
        yield folder
    finally:
        _remove(folder)


def _remove(folder: Path) -> None:
    for root, dirs, _files in os.walk(folder):
        for name in dirs:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
    shutil.rmtree(folder, ignore_errors=True)


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under `folder` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())

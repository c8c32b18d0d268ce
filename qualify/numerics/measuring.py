"""One `kld` check's measurement in progress: each role's scoring run, its artifact opened as a
stream, the reference cache, and the reductions to per-token vectors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from qualify.checks.evidence import VERSION_KEY
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError, RunStoreError
from qualify.numerics.formats import open_stream
from qualify.numerics.judge import FLOOR_ROLE
from qualify.numerics.params import NumericsParams
from qualify.numerics.store import (
    CACHED_MEASUREMENT,
    artifact_bytes,
    cache_key,
    cached_reference,
    check_free_space,
    kl_floor_for,
    remove_artifact,
    settings_mismatch,
    settings_of,
    store_reference,
)
from qualify.numerics.stream import LogprobFileError, LogprobStream, RoleStreamError
from qualify.numerics.tokenstats import StreamMismatch, TokenStats, token_stats
from qualify.records.numerics import KldMeasurement


class Measuring:
    """One check's measurement in progress: artifacts on disk, settings, per-token vectors."""

    def __init__(self, ctx: CheckContext, params: NumericsParams, cache_dir: str | None) -> None:
        self.ctx = ctx
        self.params = params
        #: The reference cache's folder, resolved (None: caching turned off).
        self.cache_dir = cache_dir
        self.artifacts: dict[str, Path] = {}
        self.streams: dict[str, LogprobStream] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.size: int | None = self.params.artifact_bytes
        self.record: dict[str, Any] = {"passes": []}

    def values_for(self, role: str) -> dict[str, Any]:
        if role != FLOOR_ROLE:
            return {}
        folder = self.ctx.role_dir(FLOOR_ROLE)
        return {"dir": str(folder), "out_file": str(folder / "output")}

    def run(self, role: str) -> None:
        """Run `role` (pinned.2 is pinned's arm in its own folder) and open its artifact."""
        ctx, arm_role = self.ctx, "pinned" if role == FLOOR_ROLE else role
        folder = ctx.role_dir(role)
        m: dict[str, Any] = {"role": role, "arm": ctx.arms[arm_role].arm.name}
        extra = self.values_for(role)
        try:
            argv = ctx.argv(self.params.run, arm_role, **extra)
            artifact = one_path(ctx, self.params.artifact, arm_role, extra)
            if role == "reference" and self._from_cache(m, argv):
                return
            check_free_space(folder, self.size, f"the {role} role's artifact")
            remove_artifact(artifact)
            lines: list[str] = []
            started = time.monotonic()
            done = ctx.run(
                arm_role,
                argv,
                name="run" if role != FLOOR_ROLE else "run-2",
                cwd=folder,
                on_line=[lines.append],
            )
        except QualifyError as exc:
            m["error"] = {"message": exc.message, "hint": exc.hint}
            self.save(role, m)
            return
        m.update(
            command=done.as_json(),
            output_tail=list(done.output_tail[-20:]),
            outcome=done.describe(),
            ok=done.ok,
            seconds=round(time.monotonic() - started, 3),
            artifact=str(artifact),
        )
        if done.ok:
            self._open(role, artifact, m, lines, argv)
            if role == "reference" and "settings" in m and self.cache_dir:
                key = m["cache_key"] = self._key(argv)
                cache = Path(self.cache_dir)
                self.artifacts[role] = store_reference(cache, key, artifact, m)
                self.streams[role] = open_stream(self.artifacts[role])
                m["artifact"] = str(self.artifacts[role])
        self.save(role, m)

    def save(self, role: str, m: dict[str, Any]) -> None:
        """The role's measurement, checked as its type before it is written."""
        save_measurement(self.ctx, role, m)

    def cached_size(self) -> int | None:
        """The cached reference's bytes, when the cache holds this reference."""
        if not self.cache_dir:
            return None
        try:
            argv = self.ctx.argv(self.params.run, "reference")
        except QualifyError:
            return None
        found = cached_reference(Path(self.cache_dir), self._key(argv))
        return artifact_bytes(found[0]) if found else None

    def artifact_path(self, arm_role: str, extra: dict[str, Any]) -> Path:
        return one_path(self.ctx, self.params.artifact, arm_role, extra)

    def _key(self, argv: list[str]) -> str:
        blank = {"dir": "<dir>", "out_file": "<dir>/output"}
        normalised = self.ctx.argv(self.params.run, "reference", **blank)
        artifact = self.ctx.argv([self.params.artifact], "reference", **blank)
        env = {**self.ctx.arms["reference"].arm.env, **self.ctx.spec.env}
        return cache_key(self.ctx.arms["reference"].out, normalised, " ".join(artifact), env)

    def _from_cache(self, m: dict[str, Any], argv: list[str]) -> bool:
        if not self.cache_dir:
            return False
        key = self._key(argv)
        found = cached_reference(Path(self.cache_dir), key)
        if found is None:
            return False
        artifact, document = found
        try:
            saved = KldMeasurement.load(document, artifact.parent / CACHED_MEASUREMENT)
            stream = open_stream(artifact)
        except (LogprobFileError, RunStoreError):
            return False  # a damaged entry is scored again
        m.update({k: v for k, v in saved.to_json().items() if k not in ("role", "arm", VERSION_KEY)})
        m.update(cached=True, cache_key=key, artifact=str(artifact))
        self.artifacts["reference"], self.streams["reference"] = artifact, stream
        self.settings["reference"] = m["settings"]
        self.size = self.size or artifact_bytes(artifact)
        self.ctx.echo(f"reference: reusing the cached artifact {artifact}")
        self.save("reference", m)
        return True

    def _open(self, role: str, artifact: Path, m: dict[str, Any], lines: list[str], argv: list[str]) -> None:
        try:
            stream = open_stream(artifact)
        except LogprobFileError as exc:
            m["artifact_error"] = exc.message + (f" ({exc.hint})" if exc.hint else "")
            return
        self.artifacts[role], self.streams[role] = artifact, stream
        m["settings"] = self.settings[role] = settings_of(stream, lines, argv)
        m["format"], m["artifact_bytes"] = stream.format, artifact_bytes(artifact)
        self.size = self.size or m["artifact_bytes"]

    def reduce(self, roles: list[str], pairs: list[tuple[str, str]]) -> TokenStats | None:
        """Per-token vectors of `pairs`, or None (the reason recorded) when they cannot be had."""
        if any(r not in self.streams for r in roles):
            return None
        mismatch = settings_mismatch({r: self.settings[r] for r in roles})
        if mismatch:
            self.record["settings_mismatch"] = mismatch
            return None
        started = time.monotonic()
        streams = {r: self.streams[r] for r in roles}
        floor = kl_floor_for(list(streams.values()))
        self.ctx.progress(f"per-token statistics of {', '.join(roles)}")
        try:
            stats = token_stats(streams, pairs=pairs, kl_floor=floor)
        except StreamMismatch as exc:
            self.record["token_mismatch"] = exc.message
            return None
        except LogprobFileError as exc:
            self.record["artifact_error"] = {"role": failed_role(exc), "message": exc.message}
            return None
        finally:
            self.ctx.progress(None)
        seconds = time.monotonic() - started
        self.record["passes"].append(
            {
                "roles": roles,
                "pairs": [list(p) for p in pairs],
                "seconds": round(seconds, 3),
                "tokens": stats.n_tokens,
            }
        )
        self.ctx.echo(
            f"per-token statistics of {', '.join(roles)}: {stats.n_tokens} tokens in {seconds:.1f} s"
        )
        return stats

    def discard(self, role: str) -> None:
        if role != "reference" and role in self.artifacts and not self.params.keep:
            self.streams.pop(role, None)  # drop the memory map before the file goes
            remove_artifact(self.artifacts.pop(role))


def save_measurement(ctx: CheckContext, role: str, m: dict[str, Any]) -> None:
    """A role's measurement, checked as its type (`KldMeasurement`) before it is written."""
    ctx.save(role, KldMeasurement.load(m, ctx.role_dir(role) / "measurement.json").to_json())


def failed_role(exc: LogprobFileError) -> str | None:
    """The role whose stream failed, as the reader said; None where no reader named one (an
    error while a chunk's rows were decoded, not while the stream was read)."""
    return exc.role if isinstance(exc, RoleStreamError) else None


def one_path(ctx: CheckContext, template: str, role: str, extra: dict[str, Any]) -> Path:
    argv = ctx.argv([template], role, **extra)
    if len(argv) != 1 or not argv[0]:
        raise QualifyError(f"{template!r} must name exactly one path, got {argv}")
    return Path(argv[0])

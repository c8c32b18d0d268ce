"""The `kld` kind's measure and judge.

`qualify.numerics.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from qualify.checks.base import Finding, Judgement, SavedCheck
from qualify.checks.findings import headline, worst
from qualify.checks.roleruns import run_findings
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.progress import Progress
from qualify.core.runstore import read_json, write_json
from qualify.core.verdicts import Verdict
from qualify.numerics.formats import open_stream
from qualify.numerics.judge import FLOOR_ROLE, Settings, judge_stats
from qualify.numerics.kind import DEFAULT_CACHE
from qualify.numerics.store import (
    artifact_bytes,
    cache_key,
    cached_reference,
    check_free_space,
    disk_plan,
    kl_floor_for,
    load_stats,
    merge_stats,
    remove_artifact,
    save_stats,
    settings_mismatch,
    settings_of,
    store_reference,
)
from qualify.numerics.stream import LogprobFileError, LogprobStream
from qualify.numerics.streamed import score_together
from qualify.numerics.tokenstats import StreamMismatch, TokenStats, token_stats

RECORD = "numerics.json"


class _Measuring:
    """One check's measurement in progress: artifacts on disk, settings, per-token vectors."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.params = ctx.spec.params
        self.artifacts: dict[str, Path] = {}
        self.streams: dict[str, LogprobStream] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.size: int | None = self.params.get("artifact_bytes")
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
            argv = ctx.argv(self.params["run"], arm_role, **extra)
            artifact = _one_path(ctx, self.params["artifact"], arm_role, extra)
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
            ctx.save(role, m)
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
            if role == "reference" and "settings" in m and self.params["cache_dir"]:
                key = m["cache_key"] = self._key(argv)
                cache = Path(self.params["cache_dir"])
                self.artifacts[role] = store_reference(cache, key, artifact, m)
                self.streams[role] = open_stream(self.artifacts[role])
                m["artifact"] = str(self.artifacts[role])
        ctx.save(role, m)

    def cached_size(self) -> int | None:
        """The cached reference's bytes, when the cache holds this reference."""
        if not self.params["cache_dir"]:
            return None
        try:
            argv = self.ctx.argv(self.params["run"], "reference")
        except QualifyError:
            return None
        found = cached_reference(Path(self.params["cache_dir"]), self._key(argv))
        return artifact_bytes(found[0]) if found else None

    def artifact_path(self, arm_role: str, extra: dict[str, Any]) -> Path:
        return _one_path(self.ctx, self.params["artifact"], arm_role, extra)

    def _key(self, argv: list[str]) -> str:
        blank = {"dir": "<dir>", "out_file": "<dir>/output"}
        normalised = self.ctx.argv(self.params["run"], "reference", **blank)
        artifact = self.ctx.argv([self.params["artifact"]], "reference", **blank)
        env = {**self.ctx.arms["reference"].arm.env, **self.ctx.spec.env}
        return cache_key(self.ctx.arms["reference"].out, normalised, " ".join(artifact), env)

    def _from_cache(self, m: dict[str, Any], argv: list[str]) -> bool:
        if not self.params["cache_dir"]:
            return False
        key = self._key(argv)
        found = cached_reference(Path(self.params["cache_dir"]), key)
        if found is None:
            return False
        artifact, saved = found
        try:
            stream = open_stream(artifact)
        except LogprobFileError:
            return False  # a damaged entry is scored again
        m.update({k: v for k, v in saved.items() if k not in ("role", "arm")})
        m.update(cached=True, cache_key=key, artifact=str(artifact))
        self.artifacts["reference"], self.streams["reference"] = artifact, stream
        self.settings["reference"] = m["settings"]
        self.size = self.size or artifact_bytes(artifact)
        self.ctx.echo(f"reference: reusing the cached artifact {artifact}")
        self.ctx.save("reference", m)
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
            role = next((r for r in roles if str(self.artifacts[r]) in exc.message), roles[-1])
            self.record["artifact_error"] = {"role": role, "message": exc.message}
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
        if role != "reference" and role in self.artifacts and not self.params.get("keep"):
            self.streams.pop(role, None)  # drop the memory map before the file goes
            remove_artifact(self.artifacts.pop(role))


def measure(ctx: CheckContext) -> None:
    roles = ctx.roles
    if "reference" not in roles:
        for role in roles:
            ctx.save(
                role,
                {
                    "role": role,
                    "error": {
                        "message": "the kld check needs the reference role",
                        "hint": 'add "reference" to the check\'s roles',
                    },
                },
            )
        return
    state = _Measuring(ctx)
    state.params = {**state.params, "cache_dir": _cache_dir(ctx)}
    state.record["settings"] = state.settings
    floor = "pinned" in roles and bool(ctx.spec.params.get("floor_rerun", True))
    planned = ["reference", *(["pinned"] if "pinned" in roles else []), *([FLOOR_ROLE] if floor else [])]
    planned.append("candidate")

    def run(role: str) -> None:
        ctx.advance(Progress(role, planned.index(role), len(planned), "scoring runs"))
        state.run(role)

    streamed = bool(ctx.spec.params.get("stream"))
    disk = disk_plan(
        ctx.folder,
        state.size or state.cached_size(),
        cached=state.cached_size() is not None,
        streamed=streamed,
        others=planned[1:],
        keep=bool(state.params.get("keep")),
    )
    state.record["disk"] = {"stored": list(disk.stored), "bytes": disk.bytes, "free": disk.free}
    ctx.echo(f"numerics: {disk.describe()}")
    check_free_space(ctx.folder, disk.bytes or None, "the numerics stage (" + ", ".join(disk.stored) + ")")
    stats: TokenStats | None = None
    if streamed:
        run("reference")
        stats = score_together(state, planned[1:])
        if stats is not None:
            save_stats(stats, ctx.folder)
        write_json(ctx.folder / RECORD, state.record)
        return
    for role in planned[:-1]:
        run(role)
    if floor:
        pairs = [("reference", "pinned"), ("reference", FLOOR_ROLE), ("pinned", FLOOR_ROLE)]
        stats = state.reduce(["reference", "pinned", FLOOR_ROLE], pairs)
        state.discard(FLOOR_ROLE)
    run("candidate")
    others = [r for r in ("pinned", "candidate") if r in roles]
    pairs = [("reference", "candidate")] + ([("pinned", "candidate")] if "pinned" in others else [])
    if stats is None and "pinned" in others:
        pairs.insert(0, ("reference", "pinned"))
    second = state.reduce(["reference", *others], pairs)
    stats = merge_stats(stats, second) if stats is not None and second is not None else second
    if stats is not None:
        save_stats(stats, ctx.folder)
    for role in (*others, FLOOR_ROLE):
        state.discard(role)
    write_json(ctx.folder / RECORD, state.record)


def _cache_dir(ctx: CheckContext) -> str | None:
    template = ctx.spec.params.get("cache")
    if template == "":
        return None  # caching turned off
    return str(_one_path(ctx, template or DEFAULT_CACHE, "reference", {}).resolve())


def _one_path(ctx: CheckContext, template: str, role: str, extra: dict[str, Any]) -> Path:
    argv = ctx.argv([template], role, **extra)
    if len(argv) != 1 or not argv[0]:
        raise QualifyError(f"{template!r} must name exactly one path, got {argv}")
    return Path(argv[0])


def judge(saved: SavedCheck) -> Judgement:
    params = saved.spec.params
    floor = "pinned" in saved.roles and bool(params.get("floor_rerun", True))
    roles = (*saved.roles, FLOOR_ROLE) if floor else saved.roles
    findings = run_findings(replace(saved, roles=roles))
    for role in roles:
        m = saved.measurement(role) or {}
        if m.get("artifact_error"):
            verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
            findings.append(Finding(verdict, m["artifact_error"], role))
    record = read_json(saved.folder / RECORD) if (saved.folder / RECORD).is_file() else {}
    if record.get("settings_mismatch"):
        findings.append(
            Finding(Verdict.ERROR, f"settings differ between roles: {record['settings_mismatch']}", None)
        )
    if record.get("token_mismatch"):
        findings.append(
            Finding(Verdict.FAIL, f"the roles scored different tokens: {record['token_mismatch']}", None)
        )
    if record.get("artifact_error"):
        role = record["artifact_error"]["role"]
        verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
        findings.append(Finding(verdict, record["artifact_error"]["message"], role))
    stats = load_stats(saved.folder)
    judged: list[str] = []
    tables: tuple[Any, ...] = ()
    charts: tuple[Any, ...] = ()
    facts: dict[str, Any] = {"settings": record.get("settings", {})}
    if stats is not None:
        settings = Settings(
            min_chunks=int(params.get("min_chunks") or 30),
            resamples=int(params.get("resamples") or 10_000),
            seed=int(params.get("seed") or 0),
            confidence=float(params.get("confidence") or 0.95),
            flip_margin=float(params["flip_margin"] if params.get("flip_margin") is not None else 0.1),
        )
        outcome = judge_stats(stats, saved.spec.limits, settings)
        findings.extend(outcome.findings)
        judged = outcome.judged
        tables, facts = tuple(outcome.tables), {**facts, **outcome.facts}
        charts = tuple(outcome.charts)
    elif not findings:
        findings.append(
            Finding(Verdict.FAIL, "no per-token vectors saved: nothing was compared", "candidate")
        )
    verdict = worst(findings)
    summary = _summary(facts)
    reason = headline(verdict, findings, summary)
    if reason != summary and summary:
        reason += f" — {summary}"
    return Judgement(verdict, reason, tuple(findings), tables, facts, charts, judged=tuple(judged))


def _summary(facts: dict[str, Any]) -> str:
    s = facts.get("summaries", {})
    parts = []
    for role in ("pinned", "candidate"):
        v = s.get(f"reference|{role}")
        if v:
            parts.append(f"{role} mean KLD {v['kld_mean']:.3g}, top-1 {100 * v['same_top_p']:.2f} %")
    ni = facts.get("noninferiority")
    if ni:
        parts.append(f"θ bound {ni['bound']:.3g} vs δ {ni['delta']:.3g}")
    if facts.get("n_chunks") is not None:
        parts.append(f"{facts['n_chunks']} chunks")
    return "; ".join(parts)

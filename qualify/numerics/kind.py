"""`kld`: matched-token KL, NLL and top-1 against a reference; non-inferiority against pinned.

Measures: the plan's `run` command per role — reference, pinned, pinned again (`pinned.2`, the
run-to-run noise floor; `floor_rerun = false` leaves it out) and candidate — each leaving an
artifact at `artifact` (default `{out_file}`): a llama.cpp `--kl-divergence-base` file, a
`qualify.logprobs/v1` directory or a `qualify.topk/v1` file. Before each run the free disk space
is checked against one artifact's size (the plan's `artifact_bytes`, else the size of the first
artifact written): not enough is ERROR with both figures. The reference's artifact is cached under
`cache` keyed by the reference arm's out path and the settings (command, environment, the files
it names), so a second run reuses it. The roles' settings (context, scored window, vocabulary,
chunks, llama-perplexity's batch size and sequences per batch, `-ub`) are recorded and must
match. Then the artifacts are read chunk by chunk into per-token vectors in float64 (KL of every
pair, NLL, top-1, top-1/top-2 margin, Δp, NaN/Inf counts; `qualify.numerics.tokenstats`), saved as
`pertoken.npz` in each role's folder, and every artifact but the reference's is deleted unless
`keep`. pinned.2 is reduced (and deleted) before the candidate runs, so at most three artifacts
exist at once. The KL is llama-perplexity's (truncated at -16 nats, not renormalised) when any
input is a llama.cpp file, the exact KL otherwise.

Judgement (a pure function of the saved vectors and the plan's limits; `qualify.numerics.judge`):
each of `max_mean_kld`, `max_p99_kld`, `min_top1_agreement` (a fraction), `max_abs_dppl_pct`
and `max_confident_flips` (per 100 000 scored tokens; a flip is a top-1 change where the
reference's top-1/top-2 gap exceeds `flip_margin` nats) is judged on a one-sided bound at
`confidence` (95 %) from a seeded BCa bootstrap over chunks (`resamples`, 10 000; chunks are the
units: tokens within a chunk are correlated). Non-inferiority against pinned: θ = Σ_c S_c / Σ_c
n_c with S_c chunk c's sum of KL(ref‖candidate) − KL(ref‖pinned) over its n_c tokens; it holds
when the upper bound on θ is at most δ = max(`noninferiority_margin` (default 0.10) × mean
KL(ref‖pinned), 3 × floor), floor = mean |KL(pinned‖pinned.2)| per token.

`max_abs_dppl_pct` and llama.cpp files: a target more than 16 nats below its row's maximum is
stored at the row's floor, so its NLL (and any PPL) is only a lower bound. |ΔPPL %| is therefore
judged over the tokens whose target is above the floor in both the reference and the judged role
(all tokens for qualify's formats); the table shows how many were left out and llama-perplexity's
own all-token ΔPPL next to it.

Verdict:
- ERROR: a role could not run, the reference or pinned run failed or left an unreadable
  artifact, not enough disk, settings differ between roles, NaN/Inf in the reference or pinned.
- FAIL: the candidate's run failed or left an unreadable artifact; the roles scored different
  tokens (the first mismatch is named); no token compared; NaN/Inf in the candidate; a limit's
  estimate beyond it; θ̂ > δ.
- INCONCLUSIVE: fewer than `min_chunks` chunks (30); an estimate within its limit whose bound is
  not; θ̂ ≤ δ < its bound.
- WARN: the pinned build itself beyond a limit (the limit is tighter than the baseline); KL from
  top-K rows (a lower bound); no floor measured.
- PASS otherwise.

What it cannot prove: one text, one model and one context size were scored; the bounds treat
chunks as independent draws from the text (they are consecutive windows of one corpus); a
llama.cpp file's uint16 encoding adds about ±3e-5 nats per token, so tail percentiles below
about 1e-4 are encoding noise; a top-K KL is a lower bound; greedy generation, batch sizes other
than the recorded one and long contexts are not exercised; a candidate that is less
deterministic than pinned from run to run is not detected (only pinned is rerun).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from qualify.checks.base import CheckKind, Finding, Judgement, Param, SavedCheck
from qualify.checks.findings import headline, worst
from qualify.checks.roleruns import run_findings
from qualify.core.checkspec import CheckSpec
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import read_json, write_json
from qualify.core.verdicts import Verdict
from qualify.numerics.formats import open_stream
from qualify.numerics.judge import FLOOR_ROLE, GATES, LIMIT_NAMES, Settings, judge_stats
from qualify.numerics.store import (
    artifact_bytes,
    cache_key,
    cached_reference,
    check_free_space,
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
from qualify.numerics.tokenstats import StreamMismatch, TokenStats, token_stats

RECORD = "numerics.json"
DEFAULT_CACHE = "{run_dir}/../.cache/kld"


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
    stats: TokenStats | None = None
    for role in ("reference", "pinned", FLOOR_ROLE):
        if role in roles or (role == FLOOR_ROLE and floor):
            state.run(role)
    if floor:
        pairs = [("reference", "pinned"), ("reference", FLOOR_ROLE), ("pinned", FLOOR_ROLE)]
        stats = state.reduce(["reference", "pinned", FLOOR_ROLE], pairs)
        state.discard(FLOOR_ROLE)
    state.run("candidate")
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


def _needs_pinned(spec: CheckSpec) -> str | None:
    if any(gate.limit in spec.limits for gate in GATES):
        return None
    return "without a limit of its own (max_mean_kld, …) its only judgement is non-inferiority to pinned"


def _invalid(spec: CheckSpec) -> str | None:
    chunks = spec.params.get("min_chunks")
    if chunks is not None and int(chunks) < 2:
        return f"min_chunks = {chunks}: a bootstrap bound needs at least 2 chunks to resample"
    return None


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


KIND = CheckKind(
    name="kld",
    summary="matched-token KL, NLL and top-1 against a reference within limits; non-inferior to pinned",
    params=(
        Param(
            "run", "string", required=True, help="the scoring command; it leaves an artifact at `artifact`"
        ),
        Param("artifact", "string", "{out_file}", help="where the command leaves its log-prob artifact"),
        Param("keep", "boolean", False, help="keep every role's artifact (default: only the reference's)"),
        Param("floor_rerun", "boolean", True, help="score pinned twice (pinned.2) for the noise floor"),
        Param("cache", "string", DEFAULT_CACHE, help='the reference cache\'s folder ("" turns caching off)'),
        Param("artifact_bytes", "integer", None, help="one artifact's size, checked before the first run"),
        Param("min_chunks", "integer", 30, help="fewer scored chunks is INCONCLUSIVE"),
        Param("resamples", "integer", 10_000, help="bootstrap resamples"),
        Param("seed", "integer", 0, help="bootstrap seed"),
        Param("confidence", "number", 0.95, help="one-sided confidence of every bound"),
        Param("flip_margin", "number", 0.1, help="reference top-1/top-2 gap (nats) making a flip confident"),
    ),
    measure=measure,
    judge=judge,
    needs_pinned=_needs_pinned,
    invalid=_invalid,
    verdict_rules=(
        "FAIL if a limit's estimate is beyond it, the candidate is not non-inferior to pinned "
        "(θ̂ > δ), tokens differ, NaN/Inf appear or the candidate's run fails; INCONCLUSIVE if a "
        "one-sided 95 % bound crosses a limit or δ while the estimate does not, or fewer than "
        "min_chunks chunks; ERROR if settings differ, disk is short or the baseline fails; "
        "WARN if pinned itself is beyond a limit; PASS otherwise"
    ),
    default_roles=("pinned", "candidate", "reference"),
    limits=LIMIT_NAMES,
)

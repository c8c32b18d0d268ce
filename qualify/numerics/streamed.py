"""The `kld` check with `stream = true`: every role but the reference scored at the same time,
each into a named pipe that qualify reduces as it is written.

The reference is scored to a file first (or found in the cache): every pair needs it, and it is
reused across runs and across a run set's members. Then pinned, its rerun (pinned.2) and the
candidate start together, each writing its `--kl-divergence-base` output into a FIFO at its
artifact path; one pass over the four streams, in lockstep, gives every pair the judge needs.
Nothing but the reference reaches the disk, so the stage needs the reference's bytes free, not
four files' worth. The price: the three scoring commands run at once (three models in memory,
sharing the cores or the GPU), which is why a plan turns it on.

A writer that dies, a stream that ends early, or tokens that differ stop the pass: every other
writer is ended, no per-token vectors are saved, the pipes are removed, and the record names the
role and the offset.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from qualify.core import background, process
from qualify.core.errors import QualifyError
from qualify.core.progress import Progress
from qualify.numerics.judge import FLOOR_ROLE
from qualify.numerics.llamapipe import LlamaLogitsPipe, make_fifo
from qualify.numerics.measuring import Measuring
from qualify.numerics.store import artifact_bytes, settings_mismatch, settings_of
from qualify.numerics.stream import LogprobFileError, LogprobStream
from qualify.numerics.tokenstats import LLAMA_KL_FLOOR, StreamMismatch, TokenStats, token_stats


def pairs_for(roles: list[str]) -> list[tuple[str, str]]:
    """The pairs one pass computes: each role against the reference, the floor's, and pinned
    against each candidate (a run set's members, when it scores them at once)."""
    pairs = [("reference", r) for r in roles]
    if "pinned" in roles:
        pairs += [("pinned", r) for r in roles if r != "pinned"]
    return pairs


def score_together(state: Measuring, roles: list[str]) -> TokenStats | None:
    """Score `roles` at once through pipes and reduce them with the reference's stream."""
    ctx = state.ctx
    if "reference" not in state.streams:
        return None  # the reference failed: the roles are not worth scoring
    started = time.monotonic()
    prepared: dict[str, tuple[str, list[str], Path, dict[str, Any]]] = {}
    logs = {
        role: ctx.log("pinned" if role == FLOOR_ROLE else role, "run-2" if role == FLOOR_ROLE else "run")
        for role in roles
    }
    for role in roles:
        arm_role = "pinned" if role == FLOOR_ROLE else role
        m: dict[str, Any] = {"role": role, "arm": ctx.arms[arm_role].arm.name, "streamed": True}
        try:
            extra = state.values_for(role)
            argv = ctx.argv(state.params["run"], arm_role, **extra)
            artifact = state.artifact_path(arm_role, extra)
            make_fifo(artifact)
        except (QualifyError, OSError) as exc:
            message = exc.message if isinstance(exc, QualifyError) else str(exc)
            m["error"] = {"message": message, "hint": getattr(exc, "hint", None)}
            ctx.save(role, m)
            continue
        prepared[role] = (arm_role, argv, artifact, m)
    if len(prepared) < len(roles):
        for _, _, artifact, _ in prepared.values():
            artifact.unlink(missing_ok=True)
        return None
    lines: dict[str, list[str]] = {role: [] for role in roles}
    stats: TokenStats | None = None
    failed: dict[str, Any] | None = None
    finished: dict[str, process.Completed] = {}
    ctx.advance(Progress(", ".join(roles), 1, 2, "scoring runs"))
    with ExitStack() as stack:
        running = {
            role: stack.enter_context(
                background.start(
                    argv,
                    log=logs[role],
                    env=ctx.env(arm_role),
                    cwd=ctx.role_dir(role),
                    timeout_s=ctx.spec.timeout_s,
                    echo=ctx.echo,
                    on_line=[lines[role].append],
                )
            )
            for role, (arm_role, argv, _, _) in prepared.items()
        }
        streams: dict[str, LogprobStream] = {"reference": state.streams["reference"]}
        try:
            for role, (_, _, artifact, _) in prepared.items():
                streams[role] = LlamaLogitsPipe(artifact, running[role].alive)
            ctx.progress(f"per-token statistics of {', '.join(streams)}, as they are scored")
            stats = token_stats(streams, pairs=pairs_for(roles), kl_floor=LLAMA_KL_FLOOR)
        except LogprobFileError as exc:
            role = next((r for r, p in prepared.items() if str(p[2]) in exc.message), roles[-1])
            failed = {
                "role": role,
                "message": f"{role}: " + exc.message + (f" ({exc.hint})" if exc.hint else ""),
            }
        except StreamMismatch as exc:
            state.record["token_mismatch"] = exc.message
        finally:
            ctx.progress(None)
        if stats is None:
            # Writers blocked on a pipe nobody reads any more: end them, not wait for them.
            for job in running.values():
                if job.alive():
                    process.kill_group(job.process, grace_s=1.0)
        for role, job in running.items():
            finished[role] = job.wait()
    for role, (_, argv, artifact, m) in prepared.items():
        done = finished[role]
        m.update(
            command={**done.as_json(), "log": str(logs[role])},
            output_tail=list(done.output_tail[-20:]),
            outcome=done.describe(),
            ok=done.ok,
            seconds=round(done.duration_s, 3),
            artifact=str(artifact),
        )
        stream = streams.get(role)
        if stream is not None:
            m["settings"] = state.settings[role] = settings_of(stream, lines[role], argv)
            m["format"], m["artifact_bytes"] = stream.format, 0
        artifact.unlink(missing_ok=True)  # the pipe: nothing was ever stored in it
        ctx.save(role, m)
    if failed is not None:
        state.record["artifact_error"] = failed
        return None
    if stats is None:
        return None
    mismatch = settings_mismatch({r: state.settings[r] for r in ["reference", *roles] if r in state.settings})
    if mismatch:
        state.record["settings_mismatch"] = mismatch
        return None
    seconds = time.monotonic() - started
    state.record["passes"].append(
        {
            "roles": ["reference", *roles],
            "pairs": [list(p) for p in pairs_for(roles)],
            "seconds": round(seconds, 3),
            "tokens": stats.n_tokens,
            "streamed": True,
            "reference_bytes": artifact_bytes(state.artifacts["reference"]),
        }
    )
    ctx.echo(f"scored and reduced {', '.join(roles)} together: {stats.n_tokens} tokens in {seconds:.1f} s")
    return stats

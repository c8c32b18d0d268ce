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
role (the one whose stream the reader was reading) and the offset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.core import background, children, process
from qualify.core.errors import QualifyError
from qualify.core.progress import Progress
from qualify.numerics.judge import FLOOR_ROLE
from qualify.numerics.llamapipe import LlamaLogitsPipe, make_fifo
from qualify.numerics.measuring import Measuring, failed_role
from qualify.numerics.store import artifact_bytes, settings_mismatch, settings_of
from qualify.numerics.stream import LogprobFileError, LogprobStream, RoleStreamError
from qualify.numerics.tokenstats import LLAMA_KL_FLOOR, StreamMismatch, TokenStats, token_stats


def pairs_for(roles: list[str]) -> list[tuple[str, str]]:
    """The pairs one pass computes: each role against the reference, the floor's, and pinned
    against each candidate (a run set's members, when it scores them at once)."""
    pairs = [("reference", r) for r in roles]
    if "pinned" in roles:
        pairs += [("pinned", r) for r in roles if r != "pinned"]
    return pairs


@dataclass(frozen=True)
class Scoring:
    """One role's scoring command, ready to start: the arm it runs (pinned.2 runs pinned's), its
    command line, the named pipe it writes into, its log, and the measurement saved for it."""

    role: str
    arm_role: str
    argv: list[str]
    pipe: Path
    log: Path
    measurement: dict[str, Any]


@dataclass
class Pass:
    """What one pass over the streams left: the vectors (None when it stopped), the role whose
    stream stopped it, each command's end, and what each role's stream and output said."""

    stats: TokenStats | None = None
    failed: dict[str, Any] | None = None
    finished: dict[str, process.Completed] = field(default_factory=dict)
    streams: dict[str, LogprobStream] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    #: The chunks read when a look decided and the writers were ended (None: read to the end).
    stopped: int | None = None


def score_together(
    state: Measuring,
    roles: list[str],
    looks: Sequence[int] = (),
    stop: Callable[[TokenStats], bool] | None = None,
) -> TokenStats | None:
    """Score `roles` at once through pipes and reduce them with the reference's stream; at each
    of `looks` the vectors so far go to `stop`, and when it says the look decided, every writer
    is ended and the rest of the corpus is not scored (`qualify.numerics.looks`)."""
    if "reference" not in state.streams:
        return None  # the reference failed: the roles are not worth scoring
    started = time.monotonic()
    scorings = _prepare(state, roles)
    if scorings is None:
        return None
    done = _run_pass(state, scorings, looks, stop)
    for scoring in scorings:
        _save(state, scoring, done)
    return _recorded(state, roles, done, time.monotonic() - started)


def _prepare(state: Measuring, roles: list[str]) -> list[Scoring] | None:
    """Each role's command and pipe; None (every pipe removed) when one role's cannot be made,
    that role's measurement saying why."""
    ctx = state.ctx
    logs = {
        role: ctx.log("pinned" if role == FLOOR_ROLE else role, "run-2" if role == FLOOR_ROLE else "run")
        for role in roles
    }
    scorings: list[Scoring] = []
    for role in roles:
        arm_role = "pinned" if role == FLOOR_ROLE else role
        m: dict[str, Any] = {"role": role, "arm": ctx.arms[arm_role].arm.name, "streamed": True}
        try:
            extra = state.values_for(role)
            argv = ctx.argv(state.params.run, arm_role, **extra)
            pipe = state.artifact_path(arm_role, extra)
            make_fifo(pipe)
        except (QualifyError, OSError) as exc:
            message = exc.message if isinstance(exc, QualifyError) else str(exc)
            m["error"] = {"message": message, "hint": getattr(exc, "hint", None)}
            state.save(role, m)
            continue
        scorings.append(Scoring(role, arm_role, argv, pipe, logs[role], m))
    if len(scorings) < len(roles):
        for scoring in scorings:
            scoring.pipe.unlink(missing_ok=True)
        return None
    return scorings


def _run_pass(
    state: Measuring,
    scorings: list[Scoring],
    looks: Sequence[int],
    stop: Callable[[TokenStats], bool] | None,
) -> Pass:
    """Start every scoring command and reduce their pipes with the reference's stream in one
    pass; a stream that stops the pass ends every writer still running."""
    ctx = state.ctx
    roles = [s.role for s in scorings]
    done = Pass(lines={role: [] for role in roles})
    ctx.advance(Progress(", ".join(roles), 1, 2, "scoring runs"))
    with ExitStack() as stack:
        running = {
            s.role: stack.enter_context(
                background.start(
                    s.argv,
                    log=s.log,
                    env=ctx.env(s.arm_role),
                    cwd=ctx.role_dir(s.role),
                    timeout_s=ctx.spec.timeout_s,
                    echo=ctx.echo,
                    on_line=[done.lines[s.role].append],
                )
            )
            for s in scorings
        }
        done.streams["reference"] = state.streams["reference"]
        try:
            for s in scorings:
                try:
                    done.streams[s.role] = LlamaLogitsPipe(s.pipe, running[s.role].alive)
                except LogprobFileError as exc:
                    raise RoleStreamError(s.role, exc) from exc
            ctx.progress(f"per-token statistics of {', '.join(done.streams)}, as they are scored")
            done.stats = token_stats(
                done.streams, pairs=pairs_for(roles), kl_floor=LLAMA_KL_FLOOR, looks=looks, stop=stop
            )
            total = state.streams["reference"].n_chunk
            if done.stats.n_chunks < total:
                done.stopped = done.stats.n_chunks
        except LogprobFileError as exc:
            role = failed_role(exc)
            said = exc.message + (f" ({exc.hint})" if exc.hint else "")
            done.failed = {"role": role, "message": f"{role}: {said}" if role else said}
        except StreamMismatch as exc:
            state.record["token_mismatch"] = exc.message
        finally:
            ctx.progress(None)
        if done.stats is None or done.stopped is not None:
            # Writers blocked on a pipe nobody reads any more: end them, not wait for them.
            for job in running.values():
                if job.alive():
                    children.kill_group(job.process, grace_s=1.0)
        for role, job in running.items():
            done.finished[role] = job.wait()
    return done


def _save(state: Measuring, scoring: Scoring, done: Pass) -> None:
    """A role's measurement: how its command ended and what its stream said; its pipe removed."""
    finished, m = done.finished[scoring.role], scoring.measurement
    m.update(
        command={**finished.as_json(), "log": str(scoring.log)},
        output_tail=list(finished.output_tail[-20:]),
        outcome=finished.describe(),
        ok=finished.ok,
        seconds=round(finished.duration_s, 3),
        artifact=str(scoring.pipe),
    )
    if done.stopped is not None and not finished.ok:
        # qualify ended it: every chunk the judgement needed had been read from its stream.
        m.update(
            ok=True,
            outcome=f"ended by qualify after {done.stopped} chunks: the look decided",
            stopped_after_chunks=done.stopped,
        )
    stream = done.streams.get(scoring.role)
    if stream is not None:
        m["settings"] = state.settings[scoring.role] = settings_of(
            stream, done.lines[scoring.role], scoring.argv
        )
        m["format"], m["artifact_bytes"] = stream.format, 0
    scoring.pipe.unlink(missing_ok=True)  # the pipe: nothing was ever stored in it
    state.save(scoring.role, m)


def _recorded(state: Measuring, roles: list[str], done: Pass, seconds: float) -> TokenStats | None:
    """The pass in the record, and its vectors; None (the reason recorded) when it stopped or
    the roles' settings differ."""
    if done.failed is not None:
        state.record["artifact_error"] = done.failed
        return None
    stats = done.stats
    if stats is None:
        return None
    mismatch = settings_mismatch({r: state.settings[r] for r in ["reference", *roles] if r in state.settings})
    if mismatch:
        state.record["settings_mismatch"] = mismatch
        return None
    state.record["passes"].append(
        {
            "roles": ["reference", *roles],
            "pairs": [list(p) for p in pairs_for(roles)],
            "seconds": round(seconds, 3),
            "tokens": stats.n_tokens,
            "chunks": stats.n_chunks,
            "stopped_at_look": done.stopped is not None,
            "streamed": True,
            "reference_bytes": artifact_bytes(state.artifacts["reference"]),
        }
    )
    state.ctx.echo(
        f"scored and reduced {', '.join(roles)} together: {stats.n_tokens} tokens in {seconds:.1f} s"
    )
    return stats

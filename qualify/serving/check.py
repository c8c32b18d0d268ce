"""The `openai-suite` kind's measure and judge.

`qualify.serving.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

from contextlib import ExitStack

from qualify.checks.base import Judgement, SavedCheck
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import write_json
from qualify.records.serving import (
    Problem,
    ServingCases,
    ServingMeasurement,
    ServingTiming,
    StartError,
)
from qualify.serving.cases import Settings, SuiteRun
from qualify.serving.judgement import CASES, TIMING, SavedServing, assess
from qualify.serving.kind import KIND
from qualify.serving.lifecycle import RoleServer, ServerStartFailed, role_server
from qualify.serving.params import DEFAULT_PROMPTS, ServingParams
from qualify.serving.suites import SUITES, run_suites
from qualify.serving.tables import serving_tables
from qualify.serving.timing import REQUEST_TYPES, design_timing, run_timing

DEFAULT_LIMITS = KIND.limit_defaults()


def _selected(names: list[str], allowed: tuple[str, ...], param: str) -> list[str]:
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise QualifyError(f"{param}: unknown {unknown}", "choose from " + ", ".join(allowed))
    return [n for n in allowed if n in names]


def measure(ctx: CheckContext) -> None:
    p = ServingParams.of(ctx.spec)
    suites = _selected(list(p.suites), tuple(SUITES), "suites")
    types = _selected(list(p.timing), REQUEST_TYPES, "timing")
    settings = Settings(
        prompts=p.prompts or DEFAULT_PROMPTS,
        n_predict=p.n_predict,
        n_probs=p.n_probs,
        concurrency=p.concurrency,
        slot_save=p.slot_save,
    )
    servers: dict[str, RoleServer] = {}
    with ExitStack() as stack:
        for role in ctx.roles:
            arm = ctx.arms[role].arm.name
            ctx.progress(f"{role}: starting the server")
            try:
                servers[role] = stack.enter_context(
                    role_server(
                        ctx,
                        role,
                        p.server,
                        ready_timeout_s=float(p.ready_timeout),
                        request_timeout_s=float(p.request_timeout),
                    )
                )
            except ServerStartFailed as exc:
                error = StartError(message=exc.message, log_tail=exc.tail, missing=exc.missing)
                unstarted = ServingMeasurement(
                    role=role, arm=arm, suites=suites, start_error=error, not_run=suites
                )
                ctx.save(role, unstarted.to_json())
                continue
            except QualifyError as exc:  # a placeholder the template cannot fill
                problem = Problem(message=exc.message, hint=exc.hint)
                ctx.save(role, ServingMeasurement(role=role, arm=arm, suites=suites, error=problem).to_json())
                continue
            finally:
                ctx.progress(None)
            ctx.echo(
                f"{role}: server ready at {servers[role].base_url} ({servers[role].props.get('build_info')})"
            )
        for role, server in servers.items():

            def progress(text: str | None, role: str = role) -> None:
                ctx.progress(text and f"{role}: {text}")

            run = SuiteRun(server.client, server.props, settings, progress)
            done = run_suites(run, suites, server.tail)
            write_json(
                ctx.role_dir(role) / CASES, ServingCases(cases=[c.saved() for c in done.cases]).to_json()
            )
            failed = sum(bool(c.problems) for c in done.cases)
            ctx.echo(f"{role}: {len(done.cases)} cases in {len(done.ran)} suites, {failed} failing")
            measured = ServingMeasurement(
                role=role,
                arm=ctx.arms[role].arm.name,
                server=server.describe(),
                suites=suites,
                ran=done.ran,
                not_run=done.not_run,
                died=done.died,
            )
            ctx.save(role, measured.to_json())
        # Pinned and every other role whose server still runs: a run of one's candidate, or each
        # member of a run set measured beside one pinned.
        alive = [r for r in ctx.roles if r in servers and servers[r].alive()]
        if types and "pinned" in alive and len(alive) >= 2:
            design = design_timing(
                types,
                p.timing_tokens,
                p.timing_prompt_tokens,
                p.warmup,
                p.repeats,
                float(p.alpha),
            )
            ctx.echo(f"timing: {design.pairs} pairs per request type (computed from alpha {design.alpha})")
            records = run_timing({r: servers[r].client for r in alive}, design, ctx.progress, ctx.advance)
            timing = ServingTiming(
                pairs=design.pairs, types=list(types), warmup=design.warmup, records=records
            )
            write_json(ctx.folder / TIMING, timing.to_json())


def judge(saved: SavedCheck) -> Judgement:
    judgement = assess(SavedServing.load(saved), {**DEFAULT_LIMITS, **saved.spec.limits})
    return Judgement(
        judgement.verdict,
        judgement.reason,
        judgement.findings,
        serving_tables(judgement),
        judgement.facts,
        judged=judgement.judged,
    )

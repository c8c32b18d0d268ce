"""The `nix-build` kind's measure and judge.

`qualify.build.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

import json
import platform
from typing import Any

import pandas as pd

from qualify.build import builders, flakeinputs, nix, plancache, resumed, substituted, toolchain
from qualify.build.closure import diff_summary, store_name
from qualify.build.internaljson import BuildLog
from qualify.build.params import BuildParams
from qualify.build.plancache import CACHES
from qualify.build.tables import (
    arms_table,
    built_where_table,
    column,
    diff_table,
    inputs_table,
    plan_table,
    toolchain_table,
    write_diff,
)
from qualify.checks.base import Finding, Judgement, SavedCheck
from qualify.checks.findings import headline, worst
from qualify.checks.runoptions import RunOptions
from qualify.core.context import CheckContext
from qualify.core.environment import child_env
from qualify.core.errors import QualifyError
from qualify.core.progress import Progress
from qualify.core.recordredaction import redact_argv, redact_ref, redact_values
from qualify.core.redaction import redact_lines
from qualify.core.runstore import write_json
from qualify.core.secretsources import remember_named
from qualify.core.verdicts import Verdict
from qualify.records.build import (
    BuildFacts,
    BuildMeasurement,
    BuildPlan,
    BuildSource,
    ClosureDiff,
    DerivationBuilt,
    FailedDerivation,
    InputsUsed,
    InputUsed,
    PlanCaches,
    Problem,
    RolePlan,
    SourceProblem,
    read_source,
)

SOURCE = "source.json"
PLAN = "plan.json"


def _system() -> str:
    machine = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
    return f"{machine.get(platform.machine().lower(), platform.machine())}-linux"


def measure(ctx: CheckContext) -> None:
    env = child_env(ctx.spec.env, inherit=ctx.config.inherit_env)
    params = BuildParams.of(ctx.spec)
    try:
        source = _resolve(ctx, params, env)
    except QualifyError as exc:
        problem = SourceProblem(error=Problem(message=exc.message, hint=exc.hint))
        write_json(ctx.folder / SOURCE, redact_values(problem.to_json(), known=True))
        return
    if source.refused:
        return
    refs = _refs(ctx, params, source, plancache.cache_args(plancache.plan_caches(ctx, params, env)))
    plans = _dry_runs(ctx, refs, env)
    built: dict[str, BuildMeasurement] = {}
    valid: set[str] = set()  # derivations an earlier role built: nix will not build them again
    for role in ctx.roles:
        key = json.dumps(refs[role]["argv"])
        planned = None if plans[role].error is not None else plans[role].will_build
        todo = None if planned is None else len(set(planned) - valid)
        measurement = _build_role(ctx, role, refs[role], env, shared_with=built.get(key), todo=todo)
        valid |= {b.drv for b in measurement.built if b.seconds is not None and not b.failed}
        built.setdefault(key, measurement)
        ctx.echo(f"{role}: {substituted.said(measurement)}")
        # The nix options among its arguments may hold an access token: saved redacted.
        saved = redact_values(measurement.to_json(), known=True)
        ctx.save(role, {**saved, "extra_args": redact_argv(measurement.extra_args)})
        if measurement.ok:
            ctx.record_arm(role, drv=measurement.drv, out=measurement.out)
            _closures(ctx, role, measurement, env)
    _inputs(ctx, source, env)


def _resolve(ctx: CheckContext, params: BuildParams, env: dict[str, str]) -> BuildSource:
    flake = ctx.config.flake
    ref = flake if ":" in flake else str((ctx.config.root / flake).resolve())
    version = nix.version(env)
    if version is None:
        raise QualifyError("nix is not installed", "install nix (Debian: apt-get install nix-bin)")
    meta = nix.flake_metadata(ref, env, cwd=ctx.config.root)
    options = RunOptions.of(ctx.options)
    allow_dirty = options.allow_dirty
    nix_settings = builders.settings(params, options.nix_options)
    resumed.refuse_redacted(nix_settings)
    resumed.refuse_redacted_overrides(options.override_inputs)
    remember_named(nix_settings)  # an access token is redacted wherever nix prints it
    # Before any evaluation or build: a builder that is down fails here, by name.
    builders.probe(builders.builder_uris(nix_settings.get("builders", "")), env)
    source = BuildSource(
        nix_version=version,
        flake=ref,
        locked_url=meta.locked_url,
        type=meta.type,
        revision=meta.revision,
        dirty=meta.dirty,
        allow_dirty=allow_dirty,
        last_modified=meta.last_modified,
        locks=meta.locks,
        override_inputs=[[n, r] for n, r in options.override_inputs],
        nix_options=nix_settings,
        system=params.system or _system(),
        refused=bool(meta.dirty) and not allow_dirty,
    )
    # Saved with secrets redacted (`access-tokens=<redacted>`); the build uses what is returned.
    write_json(ctx.folder / SOURCE, redact_values(source.to_json()))
    return source


def _refs(
    ctx: CheckContext, params: BuildParams, source: BuildSource, cache_args: list[str]
) -> dict[str, dict[str, Any]]:
    locked = nix.FlakeSource(
        source.flake,
        source.locked_url,
        source.type,
        source.revision,
        source.dirty,
        source.last_modified,
        source.locks,
        {},
    )
    overrides = [(str(o[0]), str(o[1])) for o in source.override_inputs]
    refs = {}
    for role in ctx.roles:
        arm = ctx.arms[role].arm
        ref, ours = nix.installable_ref(locked, arm.installable)
        extra = [*arm.nix_args]
        if role == "candidate" and overrides:
            extra += nix.override_args(overrides)
        for option, value in (("--max-jobs", params.max_jobs), ("--cores", params.cores)):
            if value is not None:
                extra += [option, str(value)]
        extra += builders.option_args(source.nix_options or {}) + cache_args
        refs[role] = {"ref": ref, "extra": extra, "from_project": ours, "argv": [ref, *extra]}
    return refs


def _dry_runs(ctx: CheckContext, refs: dict[str, dict[str, Any]], env: dict[str, str]) -> dict[str, RolePlan]:
    """Each role's dry run: what nix will build and fetch (saved as plan.json, returned)."""
    found: dict[str, dict[str, Any]] = {}
    sets: dict[str, set[str]] = {}
    for role in ctx.roles:
        try:
            planned = nix.plan(refs[role]["ref"], refs[role]["extra"], env, ctx.log(role, "dry-run"))
        except QualifyError as exc:
            found[role], sets[role] = {"error": exc.message, "hint": exc.hint}, set()
            continue
        sets[role] = set(planned.dry_run.will_build)
        found[role] = {
            "drv": planned.drv,
            "will_build": list(planned.dry_run.will_build),
            "will_fetch": list(planned.dry_run.will_fetch),
            "fetch_summary": planned.dry_run.fetch_summary,
        }
    plans: dict[str, RolePlan] = {}
    for role, entry in found.items():
        others = set().union(*(s for r, s in sets.items() if r != role)) if len(sets) > 1 else set()
        shared, exclusive = sorted(sets[role] & others), sorted(sets[role] - others)
        plans[role] = RolePlan.model_validate({**entry, "shared": shared, "exclusive": exclusive})
        ctx.echo(
            f"{role}: {len(sets[role])} derivations to build ({len(exclusive)} its own, "
            f"{len(shared)} shared), {len(plans[role].will_fetch)} paths to fetch"
        )
    # nix's messages may quote a URL with its password, or a token nix was given.
    write_json(ctx.folder / PLAN, redact_values(BuildPlan(roles=plans).to_json(), known=True))
    return plans


def _build_role(
    ctx: CheckContext,
    role: str,
    ref: dict[str, Any],
    env: dict[str, str],
    shared_with: BuildMeasurement | None,
    todo: int | None = None,
) -> BuildMeasurement:
    """Build one role's arm; `todo` is how many derivations the dry run left it to build."""
    out_link = ctx.run_dir / "gcroots" / role
    ctx.advance(Progress(role, 0, todo, "derivations"))

    def progress(events: BuildLog, drv: str) -> None:
        done = [b for b in events.built() if b.stopped is not None]
        build = next(b for b in events.built() if b.drv == drv)
        name = store_name(drv).removesuffix(".drv")
        if build.failed is not None:
            ctx.echo(f"{role}: FAILED {name}: {build.failed}")
        elif build.stopped is None:
            ctx.echo(f"{role}: building {name} ({len(done)} done)")
        else:
            # Nix reports a failure only after the stop: "finished", not "built", until then.
            ctx.echo(f"{role}: finished {name} after {build.seconds:.1f} s ({len(done)} done)")
        failed = sum(b.failed is not None for b in events.built())
        ctx.advance(Progress(role, len(done), todo, "derivations", failed=failed))

    def log_line(drv: str, text: str) -> None:
        ctx.progress(f"{role}: {store_name(drv).removesuffix('.drv')}> {text[:120]}")

    result = nix.build(
        ref["ref"], out_link, ref["extra"], env, ctx.log(role, "build"), progress, on_log=log_line
    )
    ctx.progress(None)
    built = [
        DerivationBuilt(
            drv=b.drv,
            seconds=None if b.seconds is None else round(b.seconds, 3),
            failed=b.failed,
            machine=b.machine,
        )
        for b in result.log.built()
    ]
    return BuildMeasurement(
        role=role,
        arm=ctx.arms[role].arm.name,
        installable=ctx.arms[role].arm.installable,
        ref=ref["ref"],
        extra_args=ref["extra"],
        from_project_flake=ref["from_project"],
        ok=result.ok,
        returncode=result.returncode,
        seconds=round(result.seconds, 3),
        drv=result.drv,
        outputs=result.outputs,
        out=result.outputs.get("out") or next(iter(result.outputs.values()), None),
        gcroot=str(out_link),
        shared_build_with=shared_with.role if shared_with else None,
        built=built,
        progress=list(result.log.progress) if result.log.progress else None,
        messages=result.log.messages[-20:],
        log=str(ctx.log(role, "build")),
        **({} if result.ok else {"failed": _failed(result.log, env)}),
        substitution=substituted.measured(result.log, env),
    )


def _failed(log: BuildLog, env: dict[str, str]) -> list[FailedDerivation]:
    """The derivations that failed, found by output validity, each with its log tail."""
    started = [b for b in log.built()]
    try:
        bad = set(nix.invalid_outputs([b.drv for b in started if b.stopped is not None], env))
    except QualifyError:
        bad = set()
    failed = [b for b in started if b.drv in bad] or [b for b in started if b.drv in log.error_paths()]
    # Each line was redacted as nix sent it; a secret split over two lines is found here.
    return [FailedDerivation(drv=b.drv, tail=redact_lines(b.tail)) for b in failed]


def _closures(ctx: CheckContext, role: str, measurement: BuildMeasurement, env: dict[str, str]) -> None:
    folder = ctx.role_dir(role)
    runtime = nix.requisites(str(measurement.out), env)
    sizes = nix.sizes(runtime, env)
    derivers = nix.derivers(runtime, env)
    pd.DataFrame({"path": runtime, "size": sizes, "deriver": derivers}).to_csv(
        folder / "runtime-closure.csv", index=False
    )
    build_closure = [p for p in nix.requisites(str(measurement.drv), env) if p.endswith(".drv")]
    pd.DataFrame({"drv": build_closure}).to_csv(folder / "build-closure.csv", index=False)


def _inputs(ctx: CheckContext, source: BuildSource, env: dict[str, str]) -> None:
    direct = flakeinputs.direct_inputs(source.locks)
    overrides = {name: ref for name, ref in source.override_inputs}
    probes: dict[str, str] | None = None
    for role in ctx.roles:
        if not BuildMeasurement.read(ctx.role_dir(role) / "measurement.json").ok:
            continue
        arm = ctx.arms[role].arm.name
        names = flakeinputs.declared(source.locked_url, arm, env)
        method = "declared by the flake (qualify.<arm>.inputs)"
        if names is None:
            if probes is None:
                probes = flakeinputs.probe_drvs(source.locked_url, list(direct), source.system, env)
            closure = set(pd.read_csv(ctx.role_dir(role) / "build-closure.csv")["drv"])
            names = flakeinputs.used_by(closure, probes) or None
            method = "probe package found in the build closure" if names else "unknown"
        used = {}
        for name in names or []:
            entry = dict(direct.get(name, {}))
            if role == "candidate" and name in overrides:
                entry = {"original": redact_ref(overrides[name]), "override": True}
            used[name] = InputUsed.model_validate(entry)
        inputs = InputsUsed(method=method, inputs=used, flake_inputs=sorted(direct))
        write_json(ctx.role_dir(role) / "inputs.json", inputs.to_json())


def judge(saved: SavedCheck) -> Judgement:
    source_path = saved.folder / SOURCE
    if not source_path.is_file():
        return Judgement(Verdict.ERROR, "the build was not measured (the run stopped first)")
    source = read_source(source_path)
    if isinstance(source, SourceProblem):
        error = source.error
        return Judgement(Verdict.ERROR, error.message + (f" ({error.hint})" if error.hint else ""))
    if source.refused:
        return Judgement(
            Verdict.ERROR,
            f"the source tree {source.flake} has uncommitted changes: the arms would not come "
            "from one revision (commit them, or pass --allow-dirty)",
        )
    findings: list[Finding] = []
    if source.dirty:
        findings.append(Finding(Verdict.WARN, "built from a dirty tree (--allow-dirty)"))
    builds = {role: saved.measured(role, BuildMeasurement) for role in saved.roles}
    params = BuildParams.of_saved(saved)
    parts = toolchain.components(params.toolchain or None, params.single_version)
    found: dict[str, dict[str, list[str]]] = {}
    for role, m in builds.items():
        if m is None:
            findings.append(Finding(Verdict.ERROR, "not built (the run stopped first)", role))
            continue
        if not m.from_project_flake:
            findings.append(Finding(Verdict.WARN, f"{m.installable} is not from the project's flake", role))
        if not m.ok:
            findings.append(_build_failure(role, m))
            continue
        names = [store_name(d).removesuffix(".drv") for d in column(saved, role, "build-closure.csv", "drv")]
        found[role] = toolchain.versions(names, parts)
        for component, versions in toolchain.mixed(found[role], parts).items():
            verdict = Verdict.FAIL if role == "candidate" else Verdict.WARN
            findings.append(
                Finding(
                    verdict,
                    f"mixed toolchain: {component} in {len(versions)} versions ({', '.join(versions)})",
                    role,
                )
            )
        if not found[role]:
            findings.append(Finding(Verdict.WARN, "no toolchain component found in the build closure", role))
    caches = PlanCaches.read(saved.folder / CACHES).caches if (saved.folder / CACHES).is_file() else []
    findings += substituted.findings(builds, caches)
    tables = [arms_table(builds, saved)]
    if (came_from := substituted.table(builds, caches)) is not None:
        tables.append(came_from)
    where = built_where_table(builds)
    if where is not None:
        tables.append(where)
    if (saved.folder / PLAN).is_file():
        tables.append(plan_table(BuildPlan.read(saved.folder / PLAN)))
    if found:
        tables.append(toolchain_table(found))
    diffs: dict[str, ClosureDiff] = {}
    compared = [builds.get(r) for r in ("pinned", "candidate")]
    if all(b is not None and b.ok for b in compared):
        for kind, label in (("runtime", "Runtime closure"), ("build", "Build-time closure")):
            diff = write_diff(saved, kind)
            diffs[f"{kind}_diff"] = ClosureDiff.model_validate(diff_summary(diff))
            tables.append(diff_table(diff, diffs[f"{kind}_diff"], label))
        tables.append(inputs_table(saved))
    facts = BuildFacts.model_validate({"source": source.facts(), **diffs})
    verdict = worst(findings)
    built = sum(len(m.built) for m in builds.values() if m)
    taken = substituted.from_plan(builds, caches)
    ok = f"{len(builds)} roles built from one revision ({built} derivations built" + (
        f", {substituted.paths(taken)} substituted from the plan's cache)" if taken else ")"
    )
    judged = [f"{role} built, its toolchain components checked" for role in found]
    judged += [
        f"{kind} closure compared with pinned" for kind in ("runtime", "build") if f"{kind}_diff" in diffs
    ]
    return Judgement(
        verdict, headline(verdict, findings, ok), tuple(findings), tuple(tables), facts, judged=tuple(judged)
    )


def _build_failure(role: str, m: BuildMeasurement) -> Finding:
    verdict = Verdict.FAIL if role == "candidate" else Verdict.ERROR
    failed = m.failed or []
    if failed:
        first = failed[0]
        tail = "\n".join(first.tail[-15:])
        text = f"build failed in {store_name(first.drv)}" + (
            f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        )
        return Finding(verdict, f"{text}\n{tail}".rstrip(), role)
    messages = "\n".join(m.messages[-5:])
    return Finding(verdict, f"nix build failed (exit {m.returncode})\n{messages}".rstrip(), role)

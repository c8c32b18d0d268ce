"""The `openai-suite` kind's measure and judge.

`qualify.serving.kind` declares the kind (parameters, limits, verdict rules) and documents what it
measures and how it decides; `qualify.kinds` imports this module when such a check first runs
or is judged.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from qualify.checks.base import Finding, Judgement, SavedCheck, TableData
from qualify.checks.findings import headline, worst
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import read_json, write_json
from qualify.core.verdicts import Verdict
from qualify.serving.cases import Settings, SuiteRun
from qualify.serving.compare import compare_cases
from qualify.serving.kind import DEFAULT_PROMPTS, KIND
from qualify.serving.lifecycle import RoleServer, ServerStartFailed, role_server
from qualify.serving.suites import SUITES, run_suites
from qualify.serving.timing import REQUEST_TYPES, judge_timing, plan_timing, run_timing

CASES = "cases.json"
TIMING = "timing.json"
DEFAULT_LIMITS = KIND.limit_defaults()


def _selected(names: list[str], allowed: tuple[str, ...], param: str) -> list[str]:
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise QualifyError(f"{param}: unknown {unknown}", "choose from " + ", ".join(allowed))
    return [n for n in allowed if n in names]


def measure(ctx: CheckContext) -> None:
    p = ctx.spec.params
    suites = _selected(list(p["suites"]), tuple(SUITES), "suites")
    types = _selected(list(p["timing"]), REQUEST_TYPES, "timing")
    settings = Settings(
        prompts=tuple(p["prompts"]) or tuple(DEFAULT_PROMPTS),
        n_predict=int(p["n_predict"]),
        n_probs=int(p["n_probs"]),
        concurrency=int(p["concurrency"]),
        slot_save=bool(p["slot_save"]),
    )
    servers: dict[str, RoleServer] = {}
    with ExitStack() as stack:
        for role in ctx.roles:
            measurement: dict[str, Any] = {"role": role, "arm": ctx.arms[role].arm.name, "suites": suites}
            ctx.progress(f"{role}: starting the server")
            try:
                servers[role] = stack.enter_context(
                    role_server(
                        ctx,
                        role,
                        p["server"],
                        ready_timeout_s=float(p["ready_timeout"]),
                        request_timeout_s=float(p["request_timeout"]),
                    )
                )
            except ServerStartFailed as exc:
                measurement["start_error"] = {
                    "message": exc.message,
                    "log_tail": exc.tail,
                    "missing": exc.missing,
                }
                measurement["not_run"] = suites
                ctx.save(role, measurement)
                continue
            except QualifyError as exc:  # a placeholder the template cannot fill
                measurement["error"] = {"message": exc.message, "hint": exc.hint}
                ctx.save(role, measurement)
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
                ctx.role_dir(role) / CASES, {"schema_version": 1, "cases": [c.as_json() for c in done.cases]}
            )
            failed = sum(bool(c.problems) for c in done.cases)
            ctx.echo(f"{role}: {len(done.cases)} cases in {len(done.ran)} suites, {failed} failing")
            ctx.save(
                role,
                {
                    "role": role,
                    "arm": ctx.arms[role].arm.name,
                    "server": server.describe(),
                    "suites": suites,
                    "ran": done.ran,
                    "not_run": done.not_run,
                    "died": done.died,
                },
            )
        alive = [r for r in ("pinned", "candidate") if r in servers and servers[r].alive()]
        if types and len(alive) == 2:
            plan = plan_timing(
                types,
                int(p["timing_tokens"]),
                int(p["timing_prompt_tokens"]),
                int(p["warmup"]),
                p.get("repeats"),
                float(p["alpha"]),
            )
            ctx.echo(f"timing: {plan.pairs} pairs per request type (computed from alpha {plan.alpha})")
            records = run_timing({r: servers[r].client for r in alive}, plan, ctx.progress, ctx.advance)
            write_json(
                ctx.folder / TIMING,
                {
                    "schema_version": 1,
                    "pairs": plan.pairs,
                    "types": list(types),
                    "warmup": plan.warmup,
                    "records": records,
                },
            )


def _role_findings(saved: SavedCheck) -> tuple[list[Finding], dict[str, dict[str, Any]]]:
    findings: list[Finding] = []
    measured: dict[str, dict[str, Any]] = {}
    for role in saved.roles:
        m = saved.measurement(role)
        baseline = Verdict.FAIL if role == "candidate" else Verdict.ERROR
        if m is None:
            findings.append(Finding(Verdict.ERROR, "not measured (the run stopped first)", role))
            continue
        measured[role] = m
        if "error" in m:
            hint = m["error"].get("hint")
            findings.append(
                Finding(Verdict.ERROR, m["error"]["message"] + (f" ({hint})" if hint else ""), role)
            )
        elif "start_error" in m:
            error = m["start_error"]
            tail = "\n".join(error.get("log_tail", [])[-8:])
            verdict = Verdict.ERROR if error.get("missing") else baseline
            findings.append(
                Finding(verdict, f"server did not start: {error['message']}\n{tail}".rstrip(), role)
            )
        elif m.get("died"):
            died = m["died"]
            tail = "\n".join(died.get("log_tail", [])[-8:])
            not_run = ", ".join(m.get("not_run", []))
            findings.append(
                Finding(
                    baseline,
                    f"server died in suite {died['suite']} (not run: {not_run})\n{tail}".rstrip(),
                    role,
                )
            )
    return findings, measured


def _cases(saved: SavedCheck, role: str) -> list[dict[str, Any]]:
    path = saved.role_dir(role) / CASES
    return list(read_json(path)["cases"]) if path.is_file() else []


def judge(saved: SavedCheck) -> Judgement:
    limits = {**DEFAULT_LIMITS, **saved.spec.limits}
    findings, measured = _role_findings(saved)
    by_role = {role: _cases(saved, role) for role in saved.roles}
    for role in ("pinned", "candidate"):
        if role in measured and not by_role.get(role) and "error" not in measured[role]:
            findings.append(
                Finding(
                    Verdict.FAIL if role == "candidate" else Verdict.ERROR,
                    "no serving case ran: nothing was measured",
                    role,
                )
            )
    case_findings, rows, greedy = compare_cases(by_role, limits["tie_margin"])
    findings.extend(case_findings)
    tables = [
        TableData(
            "Serving cases (per suite; failures first)",
            ("suite", "case", "pinned", "candidate", "across roles", "first difference"),
            tuple(
                (r.suite, r.case, r.pinned, r.candidate, r.across, r.first_difference)
                for r in sorted(rows, key=lambda r: (r.candidate == "pass" and r.across != "differs",))
            ),
        )
    ]
    if greedy:
        tables.append(
            TableData(
                "Greedy faithfulness (first divergence per prompt)",
                ("case", "tokens compared", "first divergence", "pinned top-2 margin", "near-tie"),
                tuple(
                    (
                        g["case"],
                        g["compared"],
                        "none" if g["position"] is None else g["position"],
                        "" if g["margin"] is None else round(g["margin"], 4),
                        "" if g["position"] is None else ("yes" if g["tie"] else "no"),
                    )
                    for g in greedy
                ),
                collapsed=True,
            )
        )
    facts: dict[str, Any] = {"cases": {r: len(c) for r, c in by_role.items()}, "greedy": greedy}
    judged = []
    if by_role.get("candidate"):
        judged.append(f"{len(by_role['candidate'])} candidate cases checked")
    if by_role.get("candidate") and by_role.get("pinned"):
        judged.append(f"{len(rows)} cases compared with pinned")
    timing_path = saved.folder / TIMING
    if timing_path.is_file():
        timing = read_json(timing_path)
        gate = judge_timing(
            timing["records"],
            timing["types"],
            float(saved.spec.params.get("alpha", KIND.param("alpha").default)),
            limits["max_slowdown_pct"],
            limits["max_slowdown_ms"],
        )
        failed = [r for r in timing["records"] if not r.get("ok")]
        for record in failed[:5]:
            verdict = Verdict.FAIL if record["role"] == "candidate" else Verdict.ERROR
            findings.append(
                Finding(
                    verdict, f"timing {record['type']} request failed: {record.get('error')}", record["role"]
                )
            )
        for row in gate:
            if row.result == "FAIL":
                findings.append(
                    Finding(
                        Verdict.FAIL,
                        f"timing {row.type} {row.metric}: median "
                        f"{row.candidate_median:.1f} vs {row.pinned_median:.1f} ms exceeds the bound "
                        f"{row.bound:.1f} ms (one-sided p {row.p_value:.4f} ≤ {row.level:.4f})",
                        "candidate",
                    )
                )
            elif row.result == "INCONCLUSIVE":
                why = (
                    "no complete pairs"
                    if not row.pairs
                    else f"median over the bound, not significant (p {row.p_value:.4f} > {row.level:.4f})"
                )
                findings.append(
                    Finding(Verdict.INCONCLUSIVE, f"timing {row.type} {row.metric}: {why}", "candidate")
                )
        tables.append(
            TableData(
                f"Timing gate: candidate − pinned ≤ max({limits['max_slowdown_pct']:g} % × pinned, "
                f"{limits['max_slowdown_ms']:g} ms); {timing['pairs']} ABBA pairs per type after "
                f"{timing['warmup']} warm-up (computed so the one-sided test can reach its Holm level)",
                (
                    "request",
                    "metric",
                    "pairs",
                    "pinned median ms",
                    "candidate median ms",
                    "Δ ms",
                    "bound ms",
                    "one-sided p",
                    "Holm level",
                    "result",
                ),
                tuple(
                    (
                        r.type,
                        r.metric,
                        r.pairs,
                        _ms(r.pinned_median),
                        _ms(r.candidate_median),
                        _ms(
                            None
                            if r.pinned_median is None or r.candidate_median is None
                            else r.candidate_median - r.pinned_median
                        ),
                        _ms(r.bound),
                        "" if r.p_value is None else f"{r.p_value:.4f}",
                        "" if r.level is None else f"{r.level:.4f}",
                        r.result,
                    )
                    for r in gate
                ),
            )
        )
        facts["timing"] = {"pairs": timing["pairs"], "rows": [r.__dict__ for r in gate]}
        judged += [f"timing {r.type} {r.metric}" for r in gate if r.result in ("PASS", "FAIL")]
    elif "pinned" in measured and "candidate" in measured and saved.spec.params.get("timing"):
        findings.append(Finding(Verdict.WARN, "timing gate not run (a server was not up for it)", None))
    tables.append(_servers_table(saved, measured))
    verdict = worst(findings)
    counts = {
        r: f"{sum(not c['problems'] for c in cs)}/{len(cs)} cases pass" for r, cs in by_role.items() if cs
    }
    summary = "; ".join(f"{r} {t}" for r, t in counts.items())
    reason = headline(verdict, findings, summary)
    if reason != summary and summary:
        reason += f" — {summary}"
    return Judgement(verdict, reason, tuple(findings), tuple(tables), facts, judged=tuple(judged))


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _servers_table(saved: SavedCheck, measured: dict[str, dict[str, Any]]) -> TableData:
    rows = []
    for role, m in measured.items():
        server = m.get("server") or {}
        log = saved.folder / "logs" / f"{role}-server.log"
        status = (
            "died in " + m["died"]["suite"]
            if m.get("died")
            else ("not started" if "start_error" in m else "ok")
        )
        rows.append(
            (
                role,
                m.get("arm"),
                server.get("build_info") or "",
                server.get("total_slots") or "",
                server.get("n_ctx") or "",
                server.get("ready_after_s") or "",
                status,
                ", ".join(m.get("not_run", [])),
                str(log.relative_to(saved.folder)),
            )
        )
    return TableData(
        "Servers",
        ("role", "arm", "build", "slots", "slot n_ctx", "ready after s", "status", "suites not run", "log"),
        tuple(rows),
        collapsed=True,
    )

"""The plan as `qualify plan` prints it: indented lines readable at 80 columns, each value in
the TOML syntax a stage file would hold, with what the plan declares not applicable, what it
leaves out and why it can never qualify, if it cannot."""

from __future__ import annotations

import json

from qualify.checks.registry import kind_named
from qualify.core.recordredaction import redact_values
from qualify.pipeline.plan import Plan


def toml_value(value: object) -> str:
    """A value as it would be written in a stage file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def plan_text(plan: Plan) -> str:
    """The resolved plan as indented lines (readable at 80 columns), values in TOML syntax."""
    lines = [f"plan {plan.source}" + (f" (profile {plan.profile})" if plan.profile else "")]
    for stage in plan.stages:
        gate = "  (inconclusive → warn)" if stage.inconclusive_as_warn else ""
        lines.append(f"{stage.folder}{gate}")
        if stage.requires is not None:
            lines.append(f"  requires  {stage.requires}  (else SKIPPED on this host)")
        for check in stage.checks:
            kind = kind_named(check.kind, check.name)
            roles = "every role of the run" if kind.builds_arms else ", ".join(check.roles)
            lines.append(f"  {check.name}  [{check.kind}]  roles: {roles}")
            # A parameter that means nothing for this check's settings (a server bench's request
            # sizes on a metrics bench) is left out: the plan shows what the check will use.
            applies = {p.name for p in kind.params if p.applies(check.params)}
            params = {
                k: v for k, v in check.params.items() if k in applies and v not in (None, False, [], {})
            }
            if check.timeout_s is not None:
                lines.append(f"    timeout = {check.timeout_s:g}  (seconds per role)")
            if check.limits:
                lines.append(f"    limits = {toml_value(dict(check.limits))}")
            lines += [f"    {k} = {toml_value(v)}" for k, v in redact_values(params).items()]
            lines += [f"    vars.{k} = {toml_value(v)}" for k, v in redact_values(check.vars).items()]
    lines += [f"{n.name}  NOT APPLICABLE: {n.reason}" for n in plan.not_applicable]
    lines += [f"{name}  NOT CONFIGURED" for name in plan.not_configured()]
    lines += [f"never qualifies: {why}" for why in plan.never_qualifies()]
    return "\n".join(lines)

"""Every check kind described from the registry: `qualify kinds` and docs/check-kinds.md.

One source for both, so the document cannot drift from the code (a test regenerates it).
"""

from __future__ import annotations

from typing import Any

from qualify.checks import junit, metrics
from qualify.checks.base import TIMEOUT, CheckKind
from qualify.checks.registry import installed
from qualify.core.capped import size_words


def kind_json(kind: CheckKind) -> dict[str, Any]:
    return {
        "name": kind.name,
        "summary": kind.summary,
        "params": [
            {
                "name": p.name,
                "type": p.type,
                "default": p.default,
                "required": p.required,
                "range": p.allowed.notation() if p.allowed else None,
                "help": p.help,
            }
            for p in kind.params
        ],
        "limits": (
            [
                {"name": lim.name, "range": lim.allowed.notation(), "default": lim.default, "help": lim.help}
                for lim in kind.limits
            ]
            if kind.limits is not None
            else OPEN_LIMITS
        ),
        "default_roles": list(kind.default_roles),
        "builds_arms": kind.builds_arms,
        "verdict_rules": kind.verdict_rules,
        **_evidence(kind),
    }


def _evidence(kind: CheckKind) -> dict[str, Any]:
    """What the kind's measurement and facts hold, from their types (null: not typed yet)."""
    types = kind.evidence_types()
    if types is None:
        return {"measurement": None, "facts": None}
    out: dict[str, Any] = {}
    for name, model in (("measurement", types.measurement), ("facts", types.facts)):
        out[name] = None if model is None else {"version": model.VERSION, "fields": model.fields()}
    return out


#: What a kind that takes any limit name accepts (`qualify.checks.base.open_limit`).
OPEN_LIMITS = "any max_* or min_* (a finite number) or *_margin (≥ 0, a fraction of pinned's value)"


def _default(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'`"{value}"`' if value else '`""`'
    if isinstance(value, (list, tuple)):
        return "`[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _limit_lines(kind: CheckKind) -> list[str]:
    if kind.limits is None:
        return [
            "Limits: any `max_*` or `min_*` (a finite number) or `*_margin` "
            "(≥ 0, a fraction of pinned's value)."
        ]
    if not kind.limits:
        return ["Limits: none."]
    lines = ["| limit | range | default | |", "|---|---|---|---|"]
    for lim in kind.limits:
        default = _default(lim.default) if lim.default is not None else "— (judged only when set)"
        lines.append(f"| `{lim.name}` | {_cell(lim.allowed.notation())} | {default} | {_cell(lim.help)} |")
    return lines


def kinds_markdown() -> str:
    lines = [
        "# Check kinds",
        "",
        "Generated from qualify's registry (`qualify kinds`); `tests/test_kinds_doc.py` keeps it in",
        "step. Parameters go in a `[[check]]` table of a stage file, limits in its `limits` table.",
        "Every check also takes `timeout` (seconds a role may run before it is stopped, "
        f"{TIMEOUT.allowed.notation() if TIMEOUT.allowed else 'any'}),",
        "`env`, `roles`, `vars` and `description`.",
        "",
        "A number is checked against its range when the plan is loaded (profiles included): a value",
        "outside it, NaN or infinity is a usage error naming the file, the line and the range. A limit",
        "without a default is judged only when the plan sets it.",
        "",
        # The caps come from the readers themselves, so this line cannot drift from them.
        "A file a check's command writes is read up to a cap: the metrics JSON up to "
        f"{size_words(metrics.MAX_BYTES)}, JUnit XML",
        f"up to {size_words(junit.MAX_BYTES)}. A larger file is refused without being read, "
        "naming its size and the cap (FAIL",
        "for the candidate, ERROR for another role).",
        "",
    ]
    for kind in installed():
        lines += [f"## `{kind.name}`", "", kind.summary + ".", ""]
        lines += ["| parameter | type | default | range | |", "|---|---|---|---|---|"]
        for p in kind.params:
            default = "required" if p.required else _default(p.default)
            shown = _cell(p.allowed.notation()) if p.allowed else ""
            lines.append(f"| `{p.name}` | {p.type} | {_cell(default)} | {shown} | {_cell(p.help)} |")
        roles = ", ".join(kind.default_roles) if not kind.builds_arms else "every role of the run"
        lines += [
            "",
            *_limit_lines(kind),
            "",
            f"Roles by default: {roles}.",
            "",
            f"Verdict: {kind.verdict_rules}.",
            "",
        ]
    return "\n".join(lines)

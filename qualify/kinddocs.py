"""Every check kind described from the registry: `qualify kinds` and docs/check-kinds.md.

One source for both, so the document cannot drift from the code (a test regenerates it).
"""

from __future__ import annotations

from typing import Any

from qualify.checks.base import CheckKind
from qualify.checks.registry import installed


def kind_json(kind: CheckKind) -> dict[str, Any]:
    return {
        "name": kind.name,
        "summary": kind.summary,
        "params": [
            {"name": p.name, "type": p.type, "default": p.default, "required": p.required, "help": p.help}
            for p in kind.params
        ],
        "limits": list(kind.limits) if kind.limits is not None else "any max_*, min_* or *_margin",
        "default_roles": list(kind.default_roles),
        "builds_arms": kind.builds_arms,
        "verdict_rules": kind.verdict_rules,
    }


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


def kinds_markdown() -> str:
    lines = [
        "# Check kinds",
        "",
        "Generated from qualify's registry (`qualify kinds`); `tests/test_kinds_doc.py` keeps it in",
        "step. Parameters go in a `[[check]]` table of a stage file, limits in its `limits` table.",
        "",
    ]
    for kind in installed():
        lines += [f"## `{kind.name}`", "", kind.summary + ".", ""]
        lines += ["| parameter | type | default | |", "|---|---|---|---|"]
        for p in kind.params:
            default = "required" if p.required else _default(p.default)
            lines.append(f"| `{p.name}` | {p.type} | {_cell(default)} | {_cell(p.help)} |")
        limits = (
            ", ".join(f"`{name}`" for name in kind.limits)
            if kind.limits
            else "any `max_*`, `min_*`, `*_margin`"
        )
        roles = ", ".join(kind.default_roles) if not kind.builds_arms else "every role of the run"
        lines += [
            "",
            f"Limits: {limits}. Roles by default: {roles}.",
            "",
            f"Verdict: {kind.verdict_rules}.",
            "",
        ]
    return "\n".join(lines)

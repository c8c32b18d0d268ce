"""The instruction-mix rules of the kernel comparison: what a reviewer would flag.

Contract of `mix_findings(p, c, limits)`: `p` and `c` are one GPU kernel's figures in the
pinned and candidate builds (with the `qualify.compile.instmix.MIX_COLUMNS`); the result is a
list of (severity, reason), empty when either build's mix was not read:

- FAIL: the kernel had matrix instructions and has none (its matrix work went to plain ALU
  code); its scratch loads and stores grew past `max_scratch_instruction_growth` (new traffic
  to private memory: spills or a private array the compiler no longer keeps in registers);
- WARN: its code grew past `max_code_growth_pct` (instruction-cache pressure, and usually a
  change of unrolling or inlining worth a look);
- INFO: fewer matrix instructions, a class whose share of the kernel's instructions moved by
  `min_class_shift_pct` points or more, and changed 16-bit operand counts (16-bit registers
  turned on or off): shifts to read, not failures, since a static count is not a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qualify.compile.instmix import CLASSES, TITLES, shares

Found = list[tuple[str, str]]


def mix_findings(
    p: Mapping[str, Any],
    c: Mapping[str, Any],
    scratch_growth: float,
    code_growth_pct: float,
    shift_pct: float,
) -> Found:
    """See the module docstring."""
    if not p.get("instructions") or not c.get("instructions"):
        return []
    found: Found = []
    before, after = p.get("matrix") or 0, c.get("matrix") or 0
    if before and not after:
        found.append(("FAIL", f"matrix instructions {before} → 0 (lost)"))
    elif after < before:
        found.append(("INFO", f"matrix instructions {before} → {after}"))
    traffic = [(p.get(k) or 0, c.get(k) or 0) for k in ("scratch_load", "scratch_store")]
    was, now = sum(t[0] for t in traffic), sum(t[1] for t in traffic)
    if now > was + scratch_growth:
        new = " (new)" if was == 0 else ""
        found.append(
            (
                "FAIL",
                f"scratch loads+stores {was} → {now} ({traffic[0][1]} loads, {traffic[1][1]} stores){new}",
            )
        )
    size_before, size_after = p.get("code_bytes") or 0, c.get("code_bytes") or 0
    if size_before and (size_after - size_before) * 100 > code_growth_pct * size_before:
        grown = (size_after - size_before) * 100 / size_before
        found.append(("WARN", f"code {size_before} → {size_after} B (+{grown:.0f} %)"))
    moved = _shifts(p, c, shift_pct)
    if moved:
        found.append(("INFO", f"mix {moved}"))
    halves = [
        f"{TITLES[k]} {p.get(k) or 0} → {c.get(k) or 0}"
        for k in ("true16_operands", "high16_operands")
        if (p.get(k) or 0) != (c.get(k) or 0)
    ]
    if halves and ((p.get("high16_operands") or 0) != (c.get("high16_operands") or 0)):
        found.append(("INFO", ", ".join(halves)))
    return found


def _shifts(p: Mapping[str, Any], c: Mapping[str, Any], shift_pct: float) -> str:
    """'VALU 41 → 47 %, LDS 12 → 8 %' for the classes whose share moved by `shift_pct` or more."""
    share_p, share_c = shares(p), shares(c)
    parts = [
        f"{TITLES[k]} {share_p[k]:.0f} → {share_c[k]:.0f} %"
        for k in CLASSES
        if abs(share_c[k] - share_p[k]) >= shift_pct > 0
    ]
    return ", ".join(parts)

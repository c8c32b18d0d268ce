"""The instruction-mix rules of the kernel comparison: what a reviewer would flag.

Contract of `mix_findings(p, c, limits)`: `p` and `c` are one GPU kernel's instruction mix in
the pinned and candidate builds (`qualify.compile.instmix.Mix`); the result is a list of
(severity, reason), empty when either build's mix was not read:

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

from qualify.compile.instmix import CLASSES, OPERAND_COUNTS, TITLES, Mix, shares

Found = list[tuple[str, str]]


def mix_findings(p: Mix, c: Mix, scratch_growth: float, code_growth_pct: float, shift_pct: float) -> Found:
    """See the module docstring."""
    if not p.read or not c.read:
        return []
    found: Found = []
    before, after = p.matrix, c.matrix
    if before and not after:
        found.append(("FAIL", f"matrix instructions {before} → 0 (lost)"))
    elif after < before:
        found.append(("INFO", f"matrix instructions {before} → {after}"))
    was, now = p.scratch_load + p.scratch_store, c.scratch_load + c.scratch_store
    if now > was + scratch_growth:
        new = " (new)" if was == 0 else ""
        found.append(
            (
                "FAIL",
                f"scratch loads+stores {was} → {now} ({c.scratch_load} loads, {c.scratch_store} stores){new}",
            )
        )
    size_before, size_after = p.code_bytes, c.code_bytes
    if size_before and (size_after - size_before) * 100 > code_growth_pct * size_before:
        grown = (size_after - size_before) * 100 / size_before
        found.append(("WARN", f"code {size_before} → {size_after} B (+{grown:.0f} %)"))
    moved = _shifts(p, c, shift_pct)
    if moved:
        found.append(("INFO", f"mix {moved}"))
    halves = [f"{TITLES[k]} {p.count(k)} → {c.count(k)}" for k in OPERAND_COUNTS if p.count(k) != c.count(k)]
    if halves and p.high16_operands != c.high16_operands:
        found.append(("INFO", ", ".join(halves)))
    return found


def _shifts(p: Mix, c: Mix, shift_pct: float) -> str:
    """'VALU 41 → 47 %, LDS 12 → 8 %' for the classes whose share moved by `shift_pct` or more."""
    share_p, share_c = shares(p), shares(c)
    parts = [
        f"{TITLES[k]} {share_p[k]:.0f} → {share_c[k]:.0f} %"
        for k in CLASSES
        if abs(share_c[k] - share_p[k]) >= shift_pct > 0
    ]
    return ", ".join(parts)

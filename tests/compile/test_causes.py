"""What goes with the findings: the association table on small tables of findings whose Fisher
p-value is known, worked out here from the hypergeometric distribution (and, for the first,
the textbook's: Fisher's lady tasting tea, 3 of 4 cups right, two-sided p = 34/70)."""

from __future__ import annotations

from math import comb
from typing import Any

import pytest

from qualify.compile.causes import LEAD_P, associations, cause_table, lead
from qualify.compile.diff import KernelDiff
from qualify.compile.instmix import MIX_COLUMNS
from qualify.records.compile import Association, p_text

#: A kernel that does work (it loads, computes, waits), in the instruction mix's columns.
WORK: dict[str, Any] = {
    **dict.fromkeys(MIX_COLUMNS, 0),
    "instructions": 100, "code_bytes": 400, "valu": 60, "salu": 20, "global": 10, "smem": 5, "waits": 5,
    "vgpr_count": 64, "sgpr_count": 30,
}  # fmt: skip
#: ggml's NO_DEVICE_CODE stub as the recorded gfx1151 run counts it.
STUB: dict[str, Any] = {
    **dict.fromkeys(MIX_COLUMNS, 0),
    "instructions": 8, "code_bytes": 40, "salu": 6, "branches": 1, "other": 1, "vgpr_count": 40, "sgpr_count": 36,
}  # fmt: skip


def kernel(n: int, severity: str, *, high16: bool = False, vgprs: bool = False) -> KernelDiff:
    """Kernel `n` judged `severity`; `high16`: it gained true16 high-half operands; `vgprs`: VGPRs."""
    after = {**WORK, "high16_operands": 12 if high16 else 0, "true16_operands": 20 if high16 else 0}
    if vgprs:
        after["vgpr_count"] = 72
    return KernelDiff("amdgpu", "gfx1151", f"k{n}", severity, (), dict(WORK), after)


def table(with_fail: int, with_other: int, without_fail: int, without_other: int) -> list[KernelDiff]:
    """Kernels as a 2×2 table: with the change (gained high halves) FAIL or INFO, without it."""
    cells = (
        [("FAIL", True)] * with_fail
        + [("INFO", True)] * with_other
        + [("FAIL", False)] * without_fail
        + [("INFO", False)] * without_other
    )
    return [kernel(i, severity, high16=shown) for i, (severity, shown) in enumerate(cells)]


def hypergeometric_p(a: int, b: int, c: int, d: int) -> float:
    """Fisher's two-sided p of [[a, b], [c, d]]: the tables with its margins no likelier than it."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return comb(col, x) * comb(n - col, row - x) / comb(n, row)

    seen = prob(a)
    return sum(
        p for x in range(max(0, row + col - n), min(row, col) + 1) if (p := prob(x)) <= seen * (1 + 1e-7)
    )


def high16(found: list[Association], outcome: str = "FAIL") -> Association:
    return next(a for a in found if a.change == "high16_gained" and a.outcome == outcome)


def test_the_lady_tasting_tea() -> None:
    found = high16(associations(table(3, 1, 1, 3)))
    assert (found.both, found.with_change, found.in_outcome, found.kernels) == (3, 4, 4, 8)
    assert found.p_value == pytest.approx(34 / 70)
    assert found.odds_ratio == pytest.approx(9.0)
    assert (found.share_with, found.share_without) == (0.75, 0.25)
    assert not found.lead  # p ≈ 0.49: no headline


def test_a_strong_association_is_the_headline_with_its_counts() -> None:
    found = associations(table(20, 5, 2, 30))
    named = lead(found)
    assert named is not None and named.change == "high16_gained"
    assert named.p_value == pytest.approx(hypergeometric_p(20, 5, 2, 30), rel=1e-9) and named.p_value < LEAD_P
    assert named.sentence() == (
        "20 of the 22 failing AMDGPU kernels gained true16 high-half operands (of the 25 kernels with "
        f"this change, 80.0 % fail; of the 32 without it, 6.2 %; Fisher p ≈ {p_text(named.p_value)})"
    )
    shown = cause_table(found)
    assert shown is not None and shown.lead
    [row] = [dict(zip(shown.columns, r, strict=True)) for r in shown.rows if r[2] == named.words]
    assert row["in the outcome with it"] == "20 of 22" and row["named"] == "headline"
    assert (
        row["with it: in the outcome"] == "80.0 % of 25"
        and row["without it: in the outcome"] == "6.2 % of 32"
    )


def test_a_change_seen_in_a_minority_of_the_failures_is_not_the_headline() -> None:
    # 8 of 30 failing kernels gained high halves, and none of the 200 others: a p far below
    # the headline's, yet the change goes with fewer than half of the failures.
    found = high16(associations(table(8, 0, 22, 200)))
    assert found.p_value == pytest.approx(hypergeometric_p(8, 0, 22, 200), rel=1e-9)
    assert found.p_value < LEAD_P / 1000 and found.both < found.in_outcome / 2 and not found.lead


def test_a_change_the_rules_read_is_listed_never_named() -> None:
    # Every failing kernel gained VGPRs (the rules read them: occupancy, spills); most gained
    # high halves too. The headline names the high halves.
    kernels = [kernel(i, "FAIL", high16=i < 15, vgprs=True) for i in range(20)]
    kernels += [kernel(100 + i, "INFO", high16=i < 10) for i in range(60)]
    found = associations(kernels)
    vgprs = next(a for a in found if a.change == "vgpr_grew" and a.outcome == "FAIL")
    assert vgprs.judged_by_rules and vgprs.p_value < high16(found).p_value and not vgprs.lead
    assert lead(found) == high16(found)


def test_stubs_are_not_counted_and_warnings_are_counted_without_the_failures() -> None:
    kernels = table(3, 1, 1, 3)
    kernels += [
        KernelDiff("amdgpu", "gfx1151", f"s{i}", "stub", (), dict(STUB), dict(STUB)) for i in range(50)
    ]
    kernels += [kernel(200 + i, "WARN", high16=i < 2) for i in range(4)]
    found = associations(kernels)
    assert high16(found).kernels == 12  # the 8 of the table and the 4 WARNs, not the 50 stubs
    warned = high16(found, "WARN")
    # Among the kernels that did not fail: 4 WARN (2 with high halves), 4 INFO (1 with them).
    assert (warned.kernels, warned.in_outcome, warned.both, warned.with_change) == (8, 4, 2, 3)
    assert warned.p_value == pytest.approx(hypergeometric_p(2, 1, 2, 3))


def test_nothing_to_associate_without_failures_or_warnings() -> None:
    assert associations([kernel(i, "INFO", high16=i % 2 == 0) for i in range(10)]) == []
    assert cause_table([]) is None

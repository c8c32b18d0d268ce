"""What goes with the kernel comparison's findings: the reviewer's why beside the diff's what.

Contract of `associations(results)`: `results` are the comparison's kernels
(`qualify.compile.diff`); the result holds, per GPU family, outcome and change below, how many
kernels show the change and end in the outcome, counted both ways, with Fisher's exact test
(two-sided) on that 2×2 table (`qualify.records.compile.Association`). It states an
association and its strength, never a cause: two changes that come together (true16 operands
and a larger VALU share) go with the same failures.

Which kernels are counted: those in both builds that are a stub in neither
(`qualify.compile.stubs`); a change read from the instruction mix only where both builds' mixes
were read. For FAIL, each such kernel, FAIL against every other severity; for WARN, those that
did not FAIL or ERROR, WARN against the rest, so that a change that goes with failing does not
read as one that keeps kernels from warning.

The changes (pinned → candidate), of the instruction mix (what the compiler now emits):

- ``high16_gained``: true16 high-half operands (`v1.h`) appear: none in pinned, some in the
  candidate (16-bit values newly kept in register halves);
- ``packed16_share_fell`` / ``packed16_share_rose``, ``valu_share_rose`` / ``valu_share_fell``:
  the class's share of the kernel's instructions moved by `SHARE_POINTS` percentage points or
  more (the kind's default `min_class_shift_pct`, past which the diff lists a shift);
- ``matrix_fewer``: fewer matrix instructions (WMMA, SWMMAC, MFMA; CUDA's MMA);

and of resources (what the code costs):

- ``scratch_gained``: scratch (CUDA: local) loads and stores appear where there were none;
- ``code_grew``: the code grew by more than `CODE_GROWTH_PCT` %;
- ``sgpr_grew``: more SGPRs (AMDGPU); ``vgpr_grew``: more VGPRs (CUDA: ``registers_grew``).

A change that the outcome's own rules read is marked (`judged_by_rules`): scratch instructions
and lost matrix instructions fail by rule, VGPRs set occupancy and spills, SGPRs occupancy
before GFX10, code growth past `max_code_growth_pct` warns. Its association is partly by
construction and explains nothing.

The headline (`lead`) names, per outcome, the association with the smallest p among the changes
of the instruction mix that the outcome's rules do not read, that go with more of the outcome
(the share with the change above the share without), that at least half of the outcome's
kernels show (`LEAD_SUPPORT`: a change seen in a minority explains a minority, and the table
lists it), and whose p is below `LEAD_P`. Resources are left to the table: they are what the
rules judge, and what a change of the mix leads to (spill code grows the code, values kept
live take registers); the mix says what the compiler does differently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qualify.checks.figures import Cell, Table
from qualify.compile.diff import KernelDiff
from qualify.compile.instmix import Mix, shares
from qualify.compile.stubs import figures_stub
from qualify.records.compile import Association, Outcome, p_text, percent

#: Percentage points a class's share must move to count as a shift.
SHARE_POINTS = 5.0
#: Code growth that counts, in percent.
CODE_GROWTH_PCT = 10.0
#: The least share of an outcome's kernels a headline's change must be seen in.
LEAD_SUPPORT = 0.5
#: The largest p a headline's association may have.
LEAD_P = 0.001
_OUTCOMES: tuple[Outcome, ...] = ("FAIL", "WARN")
_FAILED = ("FAIL", "ERROR")  # left out of the kernels a WARN is counted in
_FAMILIES = ("amdgpu", "cuda")

Figures = Mapping[str, Any]
#: What a change is of: what the compiler now emits, or what the code costs in resources.
MIX, RESOURCES = "instruction mix", "resources"


@dataclass(frozen=True)
class Sides:
    """One kernel's two builds as the tests read them: its figures, and its mixes when both
    were read (None: a change read from the mix cannot be told)."""

    pinned: Figures
    candidate: Figures
    mixes: tuple[Mix, Mix] | None

    @classmethod
    def of(cls, result: KernelDiff) -> Sides:
        p, c = result.pinned or {}, result.candidate or {}
        before, after = Mix.of(p), Mix.of(c)
        return cls(p, c, (before, after) if before.read and after.read else None)


@dataclass(frozen=True)
class Change:
    """One change a kernel may show: its key, its words, what it is of (`MIX`, `RESOURCES`),
    which outcomes' rules read it, and its test (None: it cannot be told for the kernel)."""

    key: str
    words: str
    of: str
    judged_by: frozenset[str]
    shows: Callable[[Sides], bool | None]
    family: str | None = None  # the only family it applies to; None: every GPU family


def _mix_test(test: Callable[[Mix, Mix], bool]) -> Callable[[Sides], bool | None]:
    def shows(sides: Sides) -> bool | None:
        return None if sides.mixes is None else test(*sides.mixes)

    return shows


def _share_moved(column: str, sign: int) -> Callable[[Sides], bool | None]:
    return _mix_test(lambda p, c: sign * (shares(c)[column] - shares(p)[column]) >= SHARE_POINTS)


def _grew(column: str) -> Callable[[Sides], bool | None]:
    def shows(sides: Sides) -> bool | None:
        before, after = sides.pinned.get(column), sides.candidate.get(column)
        return None if before is None or after is None else bool(after > before)

    return shows


def _code_grew(p: Mix, c: Mix) -> bool:
    return p.code_bytes > 0 and (c.code_bytes - p.code_bytes) * 100 > CODE_GROWTH_PCT * p.code_bytes


def _scratch(m: Mix) -> int:
    return m.scratch_load + m.scratch_store


_NONE, _FAIL, _WARN = frozenset[str](), frozenset({"FAIL"}), frozenset({"WARN"})
_SHARE = f"by {SHARE_POINTS:.0f} points or more"
CHANGES: tuple[Change, ...] = (
    Change(
        "high16_gained",
        "gained true16 high-half operands",
        MIX,
        _NONE,
        _mix_test(lambda p, c: p.high16_operands == 0 < c.high16_operands),
    ),
    Change(
        "packed16_share_fell",
        f"had their packed 16-bit share fall {_SHARE}",
        MIX,
        _NONE,
        _share_moved("packed16", -1),
    ),
    Change(
        "packed16_share_rose",
        f"had their packed 16-bit share rise {_SHARE}",
        MIX,
        _NONE,
        _share_moved("packed16", 1),
    ),
    Change("valu_share_rose", f"had their VALU share rise {_SHARE}", MIX, _NONE, _share_moved("valu", 1)),
    Change("valu_share_fell", f"had their VALU share fall {_SHARE}", MIX, _NONE, _share_moved("valu", -1)),
    Change(
        "matrix_fewer", "lost matrix instructions", MIX, _FAIL, _mix_test(lambda p, c: c.matrix < p.matrix)
    ),
    Change(
        "scratch_gained",
        "gained scratch loads and stores where they had none",
        RESOURCES,
        _FAIL,
        _mix_test(lambda p, c: _scratch(p) == 0 < _scratch(c)),
    ),
    Change(
        "code_grew",
        f"grew their code by more than {CODE_GROWTH_PCT:.0f} %",
        RESOURCES,
        _WARN,
        _mix_test(_code_grew),
    ),
    Change("sgpr_grew", "gained SGPRs", RESOURCES, _FAIL, _grew("sgpr_count"), family="amdgpu"),
    Change("vgpr_grew", "gained VGPRs", RESOURCES, _FAIL | _WARN, _grew("vgpr_count"), family="amdgpu"),
    Change("registers_grew", "gained registers", RESOURCES, _FAIL | _WARN, _grew("registers"), family="cuda"),
)


def associations(results: Sequence[KernelDiff]) -> list[Association]:
    """Per family, outcome and change that some counted kernel shows (see the module), the
    association with its test, ordered by family, outcome, then p; the headline's marked."""
    found: list[Association] = []
    for family in _FAMILIES:
        counted = [
            r
            for r in results
            if r.family == family
            and r.pinned is not None
            and r.candidate is not None
            and not figures_stub(r.pinned)
            and not figures_stub(r.candidate)
        ]
        # Each kernel's changes, told once for both outcomes.
        sides = [Sides.of(r) for r in counted]
        shown = {
            change.key: [change.shows(s) for s in sides]
            for change in CHANGES
            if change.family in (None, family)
        }
        for outcome in _OUTCOMES:
            kept = [i for i, r in enumerate(counted) if outcome == "FAIL" or r.severity not in _FAILED]
            hits = {i: counted[i].severity == outcome for i in kept}
            if not any(hits.values()):
                continue
            told = [
                _association(family, outcome, change, hits, shown[change.key])
                for change in CHANGES
                if change.key in shown
            ]
            rows = sorted((a for a in told if a is not None), key=lambda a: a.p_value)
            found += _with_lead(rows)
    return found


def _association(
    family: str, outcome: Outcome, change: Change, hits: Mapping[int, bool], shows: Sequence[bool | None]
) -> Association | None:
    """The association of `change` with `outcome` over the kernels `hits` names (kernel index ->
    whether it ends in the outcome), `shows` telling which show the change."""
    told = [(hit, bool(shows[i])) for i, hit in hits.items() if shows[i] is not None]
    with_change = sum(shown for _, shown in told)
    if not with_change:
        return None  # no kernel shows it: nothing to associate
    in_outcome = sum(hit for hit, _ in told)
    both = sum(hit and shown for hit, shown in told)
    neither = len(told) - with_change - in_outcome + both
    odds_ratio, p_value = fisher(both, with_change - both, in_outcome - both, neither)
    return Association(
        family=family,
        outcome=outcome,
        change=change.key,
        words=change.words,
        of=change.of,
        kernels=len(told),
        with_change=with_change,
        in_outcome=in_outcome,
        both=both,
        odds_ratio=odds_ratio,
        p_value=p_value,
        judged_by_rules=outcome in change.judged_by,
        lead=False,
    )


def fisher(a: int, b: int, c: int, d: int) -> tuple[float | None, float]:
    """Fisher's exact test, two-sided, of [[a, b], [c, d]] (with the change: in the outcome,
    not; without it: in the outcome, not): the sample odds ratio (None when infinite or
    undefined) and the p-value."""
    from scipy.stats import fisher_exact  # the stages' library, loaded when a judge needs it

    statistic, p_value = fisher_exact([[a, b], [c, d]], alternative="two-sided")
    ratio = float(statistic)
    return (ratio if math.isfinite(ratio) else None), float(p_value)


def _with_lead(rows: list[Association]) -> list[Association]:
    """`rows` (sorted by p) with the headline's association marked: the first that qualifies."""
    for i, row in enumerate(rows):
        if (
            row.of == MIX
            and not row.judged_by_rules
            and row.share_with > row.share_without
            and row.both >= LEAD_SUPPORT * row.in_outcome
            and row.p_value < LEAD_P
        ):
            return [*rows[:i], row.model_copy(update={"lead": True}), *rows[i + 1 :]]
    return rows


def lead(found: Sequence[Association], outcome: str = "FAIL") -> Association | None:
    """The association the headline names for `outcome` (the first family's that has one)."""
    return next((a for a in found if a.lead and a.outcome == outcome), None)


_FAMILY_NAMES = {"amdgpu": "AMDGPU", "cuda": "CUDA"}


def cause_table(found: Sequence[Association]) -> Table | None:
    """The associations as the report's first table of the check, above its findings."""
    if not found:
        return None
    rows: list[tuple[Cell, ...]] = []
    for a in found:
        ratio = f"{a.odds_ratio:.2g}" if a.odds_ratio is not None else "∞" if a.both else "—"
        rows.append(
            (
                a.outcome,
                _FAMILY_NAMES.get(a.family, a.family),
                a.words,
                a.of,
                f"{a.both} of {a.in_outcome}",
                f"{percent(a.share_with)} of {a.with_change}",
                f"{percent(a.share_without)} of {a.kernels - a.with_change}",
                ratio,
                p_text(a.p_value),
                "yes" if a.judged_by_rules else "",
                "headline" if a.lead else "",
            )
        )
    columns = (
        "outcome", "family", "kernels that", "change of", "in the outcome with it", "with it: in the outcome",
        "without it: in the outcome", "odds ratio", "Fisher p", "read by the outcome's rules", "named",
    )  # fmt: skip
    return Table(
        title=(
            "What goes with the findings (an association, not proof): each change, counted in the "
            "kernels of both builds that are not stubs; Fisher's exact test, two-sided"
        ),
        columns=columns,
        rows=tuple(rows),
        lead=True,
    )

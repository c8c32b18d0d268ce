"""The bench check's one line of why: what `qualify show`, the report's tables and summary.md
print beside its verdict.

It reads in this order, each part bounded, the whole at most `MAX_WHY` characters:

1. the result: each test's finding with its ratio R and interval, the tests that decide the
   verdict first (a regression or an INVALID test, then the undecided ones);
2. the pairs and why the schedule stopped;
3. what else made the verdict, when a finding beyond the tests did (a unit that crashed,
   builds that differ);
4. one clause on the machine's conditions, counted over the units (other processes' CPU, a
   throttled GPU, a GPU co-tenant that came or went): each unit's detail stays in the check's
   findings and tables, where a long run's dozens of flagged units do not bury the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from qualify.bench import conditions, machine, tables
from qualify.bench.judge import INCONCLUSIVE, INVALID, SLOWER, Outcome
from qualify.checks.base import Finding
from qualify.checks.findings import headline
from qualify.core.verdicts import Verdict
from qualify.records.bench import BenchUnit

#: The most characters the why may have: summary.md cuts a line at 400, and a check's why is
#: printed there after its stage's and its own name.
MAX_WHY = 320
#: What each part may take before it is cut: the result gets the room the others leave, between
#: its least and its most (it is what was asked); the stop reason gives way first.
RESULTS_CHARS = (90, 170)
STOP_CHARS = (40, 90)
DECIDING_CHARS = 110
ENVIRONMENT_CHARS = 190
INVALID_CHARS = 110
_SEPARATOR = " — "


@dataclass(frozen=True)
class Result:
    """What the judgement found, as the why needs it."""

    verdict: Verdict
    outcomes: Sequence[Outcome]
    invalid: dict[str, str]  # why a test is INVALID, by test
    margin: float
    pairs: int
    stop_reason: str


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis where it was cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def line(result: Result, others: Sequence[Finding], units: list[BenchUnit], holders: Sequence[str]) -> str:
    """The why. `others` are the findings that are neither a test's nor the machine's (a unit
    that failed, builds that differ); `holders` the processes that held the GPU throughout."""
    extra = [
        clip(text, limit)
        for text, limit in (
            (headline(result.verdict, others, ""), DECIDING_CHARS),
            (environment(units, holders), ENVIRONMENT_CHARS),
        )
        if text
    ]
    taken = sum(len(text) + len(_SEPARATOR) for text in extra) + len(_SEPARATOR)
    stop_room = _between(MAX_WHY - RESULTS_CHARS[0] - taken, STOP_CHARS)
    stop = f"{result.pairs} pairs ({clip(result.stop_reason, stop_room)})"
    results = _results(result, _between(MAX_WHY - taken - len(stop), RESULTS_CHARS))
    return clip(_SEPARATOR.join([results, stop, *extra]), MAX_WHY)


def _between(value: int, bounds: tuple[int, int]) -> int:
    return max(bounds[0], min(bounds[1], value))


def _rank(outcome: Outcome, invalid: dict[str, str]) -> int:
    """What decides the verdict first: FAIL or ERROR, then INCONCLUSIVE, then WARN, then PASS."""
    if outcome.label in invalid or (outcome.finding == SLOWER and outcome.regression):
        return 0
    if outcome.finding == INCONCLUSIVE:
        return 1
    return 2 if outcome.finding == SLOWER else 3


def _test(outcome: Outcome, invalid: str | None, margin: float) -> str:
    if invalid is not None:
        return f"{outcome.label} {INVALID} ({clip(invalid, INVALID_CHARS)})"
    finding = outcome.finding
    if finding == SLOWER:
        finding += f" (a regression beyond {margin:.1%})" if outcome.regression else f" (within {margin:.1%})"
    shift = outcome.shift
    if shift is None:
        return f"{outcome.label} {finding} ({outcome.note})"
    text = f"{outcome.label} {finding}, R = {shift.ratio:.4f} [{tables.interval(shift)}]"
    return text + (f" ({outcome.note})" if finding == INCONCLUSIVE and outcome.note else "")


def _results(result: Result, room: int) -> str:
    """Every test's finding that fits in `room` characters, the deciding ones first (the first
    always); the rest counted by finding."""
    ordered = sorted(result.outcomes, key=lambda o: _rank(o, result.invalid))
    if not ordered:
        return "no tests"
    shown: list[str] = []
    for outcome in ordered:
        text = _test(outcome, result.invalid.get(outcome.label), result.margin)
        if shown and sum(len(s) + 2 for s in shown) + len(text) > room:
            break
        shown.append(text)
    rest = ordered[len(shown) :]
    if rest:
        counted = Counter(INVALID if o.label in result.invalid else o.finding for o in rest)
        shown.append(f"+{len(rest)} more: " + ", ".join(f"{n} {name}" for name, n in counted.items()))
    return "; ".join(shown)


def environment(units: list[BenchUnit], holders: Sequence[str]) -> str:
    """One clause on the machine's conditions over the units, or "" when nothing was seen."""
    pair_units = sum(1 for u in units if u.phase == "pair")
    ran = sum(1 for u in units if u.phase in ("pair", "warmup"))
    flagged = conditions.flag_counts(units)
    parts = []

    def noted(*prefixes: str) -> int:
        return sum(1 for u in units if any(n.startswith(prefixes) for n in u.env_notes))

    # A unit whose GPU holders or governor changed is INVALID (an ERROR finding): said first.
    if came := noted(machine.CO_TENANT, machine.GPU_GONE):
        parts.append(f"INVALID: a GPU co-tenant came or went during {came} of {ran} units")
    if governor := noted(machine.GOVERNOR):
        parts.append(f"INVALID: the CPU governor changed during {governor} of {ran} units")
    if flagged.get(conditions.FOREIGN_CPU):
        parts.append(
            f"CPU taken by other processes during {flagged[conditions.FOREIGN_CPU]} of {pair_units} units"
        )
    if flagged.get(conditions.THROTTLED):
        parts.append(f"GPU throttled during {flagged[conditions.THROTTLED]} of {pair_units} units")
    if holders:
        parts.append(
            f"{len(holders)} other process{'' if len(holders) == 1 else 'es'} held the GPU throughout"
        )
    if not parts:
        return ""
    return "; ".join(parts) + " (details in the check's findings and tables)"

"""The kernel comparison by source file: which translation units the failures come from.

Contract of `by_source(results)`: per source file the candidate's GPU kernels were compiled from
(`KernelDiff.source_files`; the pinned build's for a kernel missing from the candidate), its
kernels, how many FAIL and WARN, and how its FAIL kernels fail (`qualify.compile.failurekinds`),
most FAILs first. Stubs are left out, as they are from the judgement. A kernel built into
several translation units counts in each of them. Kernels without a known source count in one
group of their own, `None`, listed last; nothing is said at all (an empty list) when no kernel
of either build has a source, as in runs scanned before source files were read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from qualify.checks.figures import Cell, Table
from qualify.compile.diff import KernelDiff
from qualify.compile.failurekinds import FAILURE_KINDS, failure_kinds
from qualify.records.compile import SOURCE_COLUMNS, UNKNOWN_SOURCE, SourceFailures

_GPU = ("amdgpu", "cuda")


@dataclass
class SourceCounts:
    """One source file's kernels as judged (`source` None: kernels whose source is not known)."""

    source: str | None
    kernels: int = 0
    fail: int = 0
    warn: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    def failing_kinds(self) -> str:
        """'12 spill more, 3 lose occupancy': how its FAIL kernels fail, the worst kind first
        (every kind: the worst may be the rarest)."""
        order = list(dict.fromkeys(words for _, words in FAILURE_KINDS))
        named = sorted(self.kinds.items(), key=lambda kind: order.index(kind[0]))
        return ", ".join(f"{n} {words}" for words, n in named)


def by_source(results: Sequence[KernelDiff]) -> list[SourceCounts]:
    """Per source file, most FAILs first (then WARNs, kernels, name); unknown sources last."""
    judged = [r for r in results if r.family in _GPU and r.severity != "stub"]
    # Said where either build's scan read a source: a candidate that names none (stripped) then
    # shows as one group, with why.
    if not any((side or {}).get("source_files") for r in judged for side in (r.pinned, r.candidate)):
        return []
    found: dict[str | None, SourceCounts] = {}
    for r in judged:
        for source in r.source_files or (None,):
            counts = found.setdefault(source, SourceCounts(source))
            counts.kernels += 1
            counts.fail += r.severity == "FAIL"
            counts.warn += r.severity == "WARN"
            if r.severity == "FAIL":
                for kind in failure_kinds(r):
                    counts.kinds[kind] = counts.kinds.get(kind, 0) + 1
    return sorted(
        found.values(), key=lambda c: (c.source is None, -c.fail, -c.warn, -c.kernels, c.source or "")
    )


def failing_sources(counts: Sequence[SourceCounts]) -> list[SourceFailures]:
    """The known sources with FAIL kernels, as the check's facts name them."""
    return [
        SourceFailures(source=c.source, kernels=c.kernels, FAIL=c.fail, WARN=c.warn)
        for c in counts
        if c.source is not None and c.fail
    ]


def source_table(counts: Sequence[SourceCounts], unknown_why: Sequence[str] = ()) -> Table | None:
    """`by_source`'s counts as the table the check's failures are read by first; `unknown_why`
    are the scans' reasons why some kernels have no source file. None when no source is known."""
    if not counts:
        return None
    rows: list[tuple[Cell, ...]] = []
    for c in counts:
        how = c.failing_kinds()
        if c.source is None and unknown_why:
            how = "; ".join([*([how] if how else []), f"why not known: {'; '.join(unknown_why)}"])
        rows.append((c.source if c.source is not None else UNKNOWN_SOURCE, c.kernels, c.fail, c.warn, how))
    return Table(
        title=(
            "Kernels by source file, most failures first: the candidate's translation units "
            "(a kernel built in several counts in each; stubs left out)"
        ),
        columns=SOURCE_COLUMNS,
        rows=tuple(rows),
        lead=True,
    )

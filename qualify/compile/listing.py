"""`qualify kernels PATH [PATH2]`: list one build's kernels, or compare two, outside a run.

With one path it lists every kernel it finds; with two it compares them (the first as pinned,
the second as candidate) with the default limits of the `kernel-resources` check and returns
exit code 1 when a kernel FAILs or ERRORs, so that it can gate a script as it gates a run.
`--json` prints JSON Lines: one object per kernel, with `family`, `target`, `name` and the
resource fields named as in the metadata (`vgpr_count`, `sgpr_count`, `vgpr_spill_count`, ...;
CUDA `registers`, `stack`, `shared`, `local`; host `code_size`, `stack_bytes`), plus the
estimated `occupancy` and, where it is known, the `source_file` the kernel was compiled from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from qualify.compile.diff import KernelDiff, Limits, diff
from qualify.compile.matching import aggregate
from qualify.compile.params import DEFAULT_PATTERNS
from qualify.compile.scan import FAMILIES, KernelScan, scan
from qualify.compile.tables import kernel_tables
from qualify.core.errors import ExitCode, UsageError

# What the JSON keeps of a row: the figures, not the bookkeeping of the scan.
_DROPPED = ("key", "occupancy_limiter", "wavefront_sizes", "copies", "source_files")


def _scan(path: Path, host_patterns: Sequence[str], ptxas_logs: Sequence[Path]) -> KernelScan:
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory", "give a build's out path or a binary")
    for log in ptxas_logs:
        if not log.is_file():
            raise UsageError(f"--ptxas-log {log}: no such file", "save `ptxas -v` output there first")
    return scan(path, host_patterns=host_patterns, ptxas_logs=ptxas_logs)


def show_kernels(
    paths: Sequence[Path],
    *,
    as_json: bool,
    host_patterns: Sequence[str] = DEFAULT_PATTERNS,
    ptxas_logs: Sequence[Path] = (),
    console: Console | None = None,
) -> ExitCode:
    """List (one path) or compare (two paths) kernels; print to `console` or JSON Lines."""
    # With --json, stdout carries only the JSON Lines: every message goes to stderr.
    console = console or Console(stderr=as_json)
    if len(paths) not in (1, 2):
        raise UsageError(f"give one path to list or two to compare, not {len(paths)}")
    scans = [_scan(p, host_patterns, ptxas_logs) for p in paths]
    for found in scans:
        for item in found.unreadable:
            console.print(f"[yellow]unreadable:[/] {escape(item['file'])}: {escape(item['message'])}")
    limits = Limits()
    if len(scans) == 1:
        _list(scans[0], limits, as_json, console)
        if not sum(scans[0].counts().values()):
            console.print(f"[yellow]no kernels found in {escape(str(paths[0]))}[/]")
            if host_patterns and scans[0].files:
                # Files were read, so the host functions are there under other names.
                console.print(
                    f"no GPU code, and no host function matches {escape(', '.join(host_patterns))}: "
                    "--host-pattern GLOB names the engine's kernel functions "
                    "(--host-pattern '*' lists every function)",
                    highlight=False,
                )
            return ExitCode.NOT_QUALIFIED
        return ExitCode.HARNESS_ERROR if scans[0].unreadable else ExitCode.QUALIFIED
    results = diff(scans[0].tables, scans[1].tables, limits)
    if as_json:
        for r in results:
            print(json.dumps(_diff_json(r), default=str))  # JSON Lines: never wrapped
    else:
        _print_diff(results, console)
    if any(r.severity in ("FAIL", "ERROR") for r in results) or not all(
        sum(s.counts().values()) for s in scans
    ):
        return ExitCode.NOT_QUALIFIED
    return ExitCode.HARNESS_ERROR if any(s.unreadable for s in scans) else ExitCode.QUALIFIED


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    figures = {k: v for k, v in row.items() if k not in _DROPPED and v is not None}
    if "processor" in figures:  # AMDGPU: `target` is the processor, as kernels are matched by it
        figures["target_id"] = figures.pop("target")
        figures.pop("processor")
    return figures


def _list(found: KernelScan, limits: Limits, as_json: bool, console: Console) -> None:
    for family in FAMILIES:
        rows = aggregate(family, found.tables[family], limits.cuda_block_size) if as_json else None
        if as_json:
            assert rows is not None
            for (target, key), row in sorted(rows.items()):
                obj = {"family": family, **_figures(row), "target": target or None, "name": key}
                print(json.dumps(obj, default=str))
    if as_json:
        return
    results = diff(found.tables, found.tables, limits)  # a build against itself: every row "same"
    for table in kernel_tables(results):
        _print_table(
            table.title.replace(": unchanged", ""),
            table.columns,
            table.rows,
            console,
            drop=("severity", "why"),
        )


def _diff_json(r: KernelDiff) -> dict[str, Any]:
    return {
        "family": r.family,
        "target": r.target or None,
        "name": r.key,
        "severity": r.severity,
        "reasons": list(r.reasons),
        "pinned": None if r.pinned is None else _figures(r.pinned),
        "candidate": None if r.candidate is None else _figures(r.candidate),
    }


def _print_diff(results: list[KernelDiff], console: Console) -> None:
    for table in kernel_tables(results):
        if not table.collapsed:
            _print_table(table.title, table.columns, table.rows, console)
        else:
            console.print(f"[dim]{escape(table.title)}[/]")
    severities = ("FAIL", "ERROR", "WARN", "INFO", "same", "stub")
    counts = {s: sum(r.severity == s for r in results) for s in severities}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))


def _print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    console: Console,
    drop: Sequence[str] = (),
) -> None:
    if not rows:
        return
    # Columns empty in every row (AGPRs on RDNA, spill bytes without a ptxas log) say nothing.
    keep = [i for i, c in enumerate(columns) if c not in drop and any(str(r[i]) for r in rows)]
    table = Table(title=title, title_justify="left")
    for i in keep:
        table.add_column(columns[i], overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(row[i])) for i in keep))
    console.print(table)

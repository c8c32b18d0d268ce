"""Bisect folders beside the runs: what `qualify runs` lists of them and `qualify show` prints.

A bisect's folder (`qualify bisect`) sits in the runs directory and holds `bisect.json`, the
search's saved state, with its answer once it has one, and `bisect.md`. It has no run.json,
so the run listing would not see it; these read it through its type (`BisectFile`), and a
folder whose state does not read is listed as broken, with why, like a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualify.cli.app import print_json
from qualify.console import safe

if TYPE_CHECKING:
    from rich.console import Console

STATE = "bisect.json"
SUMMARY = "bisect.md"
PAGE = "bisect.html"


def bisect_folders(runs_dir: Path) -> list[Path]:
    """The bisect folders in `runs_dir`, by name (their names start with the UTC time)."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if (p / STATE).is_file() and not (p / "run.json").exists())


def bisect_entry(folder: Path) -> dict[str, Any]:
    """One bisect as `qualify runs` lists it: its series' ends, whether it answered, and what."""
    from qualify.bisect.resume import read_file
    from qualify.checks.evidence import validated
    from qualify.core.errors import RunStoreError
    from qualify.records.bisect import SearchContext

    base: dict[str, Any] = {"kind": "bisect", "run_id": folder.name, "path": str(folder)}
    try:
        saved = read_file(folder / STATE)
        context = validated(SearchContext, saved.context, folder / STATE, "context")
    except RunStoreError as exc:
        return {**base, "status": "broken", "error": exc.message, "hint": exc.hint or ""}
    series, answer = saved.series, saved.answer
    started = [p.started for p in saved.probes if p.started]
    ends = f"{series[0]} … {series[-1]}"
    return {
        **base,
        "candidate": f"{saved.mode.value}: {ends} ({len(series)} steps)",
        "profile": context.profile,
        "status": "open" if answer is None else "answered",
        "verdict": None if answer is None else answer.finding.value.upper(),
        "line": None if answer is None else answer.line,
        "probes": len(saved.probes),
        "created_at": min(started) if started else None,
    }


def named_bisect(runs_dir: Path, name: str | None) -> Path | None:
    """The bisect folder `name` names (a folder name in `runs_dir`, or a path), else None."""
    if name is None:
        return None
    for folder in (Path(name), runs_dir / name):
        if (folder / STATE).is_file() and not (folder / "run.json").exists():
            return folder
    return None


def show_bisect(
    console: Console, project: Path, runs_dir: Path | None, name: str | None, *, as_json: bool
) -> bool:
    """Print a bisect folder's summary (bisect.md, or bisect.json with --json) when `name` names
    one; False when it names a run (or nothing)."""
    from qualify.core.config import load_config
    from qualify.core.runstore import read_json
    from qualify.pipeline.request import runs_dir_for

    if name is None:
        return False
    folder = named_bisect(Path(name).parent, name)  # a bisect given by its path
    if folder is None and "/" not in name:
        folder = named_bisect(runs_dir_for(load_config(project), runs_dir), name)
    if folder is None:
        return False
    if as_json:
        print_json(read_json(folder / STATE))  # refused naming the file when it does not read
    elif (folder / SUMMARY).is_file():
        console.print((folder / SUMMARY).read_text(encoding="utf-8"), markup=False, highlight=False)
    else:
        resume = f"resume it with `qualify bisect … --run {safe(folder.name)}`"
        console.print(f"bisect {safe(folder.name)}: not answered yet ({resume})")
    return True

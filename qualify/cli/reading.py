"""The commands that read what exists: runs, show, report, kernels, doctor, kinds, init."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qualify.checks import registry
from qualify.cli.app import JsonOpt, ProjectOpt, RunsDirOpt, app, print_json
from qualify.console import PIPED_TABLE_WIDTH, open_console, safe

if TYPE_CHECKING:
    from rich.console import Console

    from qualify.core.runstore import RunDir

from qualify.cli.runentries import run_entry
from qualify.cli.running import publish_for


@app.command()
def runs(project: ProjectOpt = Path(), runs_dir: RunsDirOpt = None, as_json: JsonOpt = False) -> None:
    """List the saved runs, oldest first."""
    from rich.table import Table

    from qualify.cli.bisectlist import bisect_entry, bisect_folders
    from qualify.console import badge
    from qualify.core.config import load_config
    from qualify.core.runlist import list_runs
    from qualify.pipeline.request import runs_dir_for

    console = open_console()
    directory = runs_dir_for(load_config(project), runs_dir)
    bisects = [bisect_entry(folder) for folder in bisect_folders(directory)]
    entries = [run_entry(entry) for entry in list_runs(directory)] + bisects
    if as_json:
        print_json(entries)
        return
    table = Table(title=safe(f"runs in {directory}"), title_justify="left")
    # A run id is what the next command is given: never wrapped or cut, whatever the width;
    # the other columns fold onto more lines rather than end in "…".
    longest = max((len(e["run_id"]) for e in entries), default=3)
    table.add_column("run", no_wrap=True, min_width=longest)
    for column in ("candidate", "profile", "status", "verdict", "created"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        if entry["status"] == "broken":
            # One broken run must not hide the others: list it, say what is wrong and what to do.
            why = entry["error"] + (f" (what to do: {entry['hint']})" if entry["hint"] else "")
            table.add_row(safe(entry["run_id"]), "?", "", "[red]broken[/]", "—", safe(why))
            continue
        table.add_row(
            safe(entry["run_id"]),
            safe(entry["candidate"] or "?"),
            safe(entry["profile"] or ""),
            entry["status"],
            badge(entry["verdict"] or "—"),
            safe(entry["created_at"] or ""),
        )
    console.print(table)


@app.command()
def show(
    run_id: Annotated[
        str | None, typer.Argument(metavar="RUN", help="Run id or path (default: the latest).")
    ] = None,
    project: ProjectOpt = Path(),
    runs_dir: RunsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a run's stage chain and its checks."""
    from dataclasses import replace

    from rich.table import Table

    from qualify.console import badge
    from qualify.records.run import RunRecord
    from qualify.report.model import build_model
    from qualify.report.views import with_shared

    console = open_console()
    from qualify.cli.bisectlist import show_bisect

    if show_bisect(console, project, runs_dir, run_id, as_json=as_json):
        return
    opened = _open(project, runs_dir, run_id)
    kind = RunRecord.load(opened).kind
    if kind in ("set", "fleet"):
        _show_matrix(console, opened, as_json=as_json)
        return
    model = build_model(opened)
    # A run set's member: a check that read the set's one measurement shows that one's time.
    model = replace(model, stages=with_shared(model.stages, opened.path))
    if as_json:
        print_json(model.as_json())
        return
    note = f" — {safe(model.verdict_note)}" if model.verdict_note else ""
    console.print(f"run {safe(model.run_id)}: {badge(model.verdict)}{note}  ({safe(model.status)})")
    console.print(
        " → ".join(
            f"{safe(s.name)} {badge(s.outcome)}" + (" [yellow](ungated)[/]" if s.ungated else "")
            for s in model.stages
        )
    )
    table = Table(title_justify="left")
    for column in ("stage", "check", "verdict", "time", "why"):
        table.add_column(column)
    for stage in model.stages:
        if not stage.checks:
            table.add_row(safe(stage.name), "", badge(stage.outcome), "", safe(stage.reason))
        for check in stage.checks:
            table.add_row(
                safe(stage.name),
                safe(check.name),
                badge(check.verdict),
                safe(check.duration),
                safe(check.reason),
            )
    console.print(table)


def _show_matrix(console: Console, run: RunDir, *, as_json: bool) -> None:
    """A run set or a merged fleet report as `show` prints it: the verdict, the controls or the
    hosts, then stages × members (or hosts)."""
    from rich.table import Table

    from qualify.console import badge
    from qualify.records.run import RunRecord
    from qualify.report.fleet import FleetModel, fleet_model
    from qualify.report.matrix import MatrixModel, build_set_model

    fleet = RunRecord.load(run).kind == "fleet"
    model: FleetModel | MatrixModel = fleet_model(run.path) if fleet else build_set_model(run)
    if as_json:
        print_json(model.as_json())
        return
    what = "fleet report" if fleet else "run set"
    note = f" — {safe(model.verdict_note)}" if model.verdict_note else ""
    console.print(f"{what} {safe(model.run_id)}: {badge(model.verdict)}{note}  ({safe(model.status)})")
    console.print(safe(model.verdict_reason))
    if isinstance(model, MatrixModel) and model.controls_line:
        console.print(safe(model.controls_line))
    if isinstance(model, FleetModel):
        for host in model.hosts:
            gpus = "; ".join(host.gpus) or "no GPU"
            console.print(
                f"  {safe(host.key)}: {badge(host.verdict)}  {safe(gpus)}, kernel {safe(host.kernel)}"
            )
        for line in model.differences:
            console.print(f"  differs: {safe(line)}")
    table = Table(title_justify="left")
    table.add_column("stage")
    for column in model.columns:
        sub = column.arm if fleet else column.role
        table.add_column(f"{safe(column.title)}\n[dim]{safe(sub)}[/]")
    for stage in model.stages:
        table.add_row(
            safe(stage),
            *(badge(cell.outcome) if (cell := model.cells[stage].get(c.key)) else "" for c in model.columns),
        )
    table.add_row("verdict", *(badge(c.verdict) for c in model.columns))
    console.print(table)


@app.command()
def report(
    run_id: Annotated[
        str | None, typer.Argument(metavar="RUN", help="Run id or path (default: the latest).")
    ] = None,
    project: ProjectOpt = Path(),
    runs_dir: RunsDirOpt = None,
    rejudge: Annotated[
        bool, typer.Option("--rejudge", help="Re-decide every check with the plan's current limits first.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write report.html, summary.md, report.json and junit.xml from a saved run."""
    from qualify.console import badge
    from qualify.pipeline.rejudge import project_root_for, rejudge_with_project_plan
    from qualify.records.run import RunRecord
    from qualify.report.render import render
    from qualify.report.rendered import RenderedVerdict

    console = open_console(stderr=as_json)
    run = _open(project, runs_dir, run_id)
    with run.writing():  # a rejudgement writes nothing through a link inside the run
        changes = rejudge_with_project_plan(run, project) if rejudge else []
    for change in changes:
        where = safe(f"{change.stage}/{change.check}")
        console.print(f"{where}: {badge(change.before)} → {badge(change.after)}")
    if rejudge:
        # Say whose plan decided: a run's own project wins over -C while it still exists.
        plan_root, profile = project_root_for(run, project), RunRecord.load(run).profile
        console.print(
            f"re-decided with the plan of {safe(str(plan_root))} (profile {safe(str(profile))}); "
            f"{len(changes)} check(s) changed"
        )
    files = render(run)
    publish_for(run, files.markdown, to_stderr=as_json)
    if as_json:
        print_json(
            {
                "run_id": run.run_id,
                "run_dir": str(run.path),
                "verdict": RenderedVerdict.read(files.json).verdict,
                "report": {k: str(v) for k, v in vars(files).items()},
                "rejudged": [
                    {"stage": c.stage, "check": c.check, "before": c.before, "after": c.after}
                    for c in changes
                ],
            }
        )
        return
    console.print("\n".join(safe(str(path)) for path in vars(files).values()))


@app.command()
def kernels(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="A build's out path or binary; a second one to compare."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="JSON Lines: one object per kernel.")] = False,
    host_pattern: Annotated[
        list[str] | None,
        typer.Option(
            metavar="GLOB",
            help="Host function glob (repeatable; default: ggml's kernels).",
            show_default=False,
        ),
    ] = None,
    no_host: Annotated[bool, typer.Option("--no-host", help="GPU kernels only.")] = False,
    ptxas_log: Annotated[
        list[Path] | None,
        typer.Option(metavar="PATH", help="A saved `ptxas -v` output (CUDA spill bytes; repeatable)."),
    ] = None,
) -> None:
    """List the kernels of a build, or compare two builds' kernels (exit 1 on a regression)."""
    from qualify.compile.listing import show_kernels
    from qualify.compile.params import DEFAULT_PATTERNS

    patterns = () if no_host else tuple(host_pattern or DEFAULT_PATTERNS)
    code = show_kernels(
        paths,
        as_json=as_json,
        host_patterns=patterns,
        ptxas_logs=ptxas_log or (),
        console=open_console(stderr=as_json),
    )
    raise typer.Exit(int(code))


@app.command()
def doctor(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            "-C",
            metavar="DIR",
            help="Also check what this project's run needs: its plan, flake, arms, data files, disk.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What this machine offers a qualification run (nix, compilers, GPUs, permissions), and with
    -C what a project's run needs; exit 1, with the fix for each, when a run cannot start."""
    from rich.table import Column, Table

    from qualify.doctor import probes

    found = probes(project)
    missing = [p for p in found if p.required and not p.ok]
    if as_json:
        print_json([vars(p) for p in found])
        raise typer.Exit(1 if missing else 0)
    columns = (Column(c, overflow="fold") for c in ("", "what", "found", "needed for"))  # never "…"
    table = Table(*columns, title="qualify doctor", title_justify="left")
    for probe in found:
        mark = "[green]ok[/]" if probe.ok else ("[red]missing[/]" if probe.required else "[yellow]--[/]")
        table.add_row(mark, safe(probe.what), safe(probe.detail), safe(probe.needed_for))
    (console := open_console()).print(table, width=None if console.is_terminal else PIPED_TABLE_WIDTH)
    err = open_console(stderr=True)
    for probe in found:
        if not probe.ok and probe.fix:
            style = "red" if probe.required else "yellow"
            err.print(f"[{style}]{safe(probe.what)}:[/] {safe(probe.fix)}", highlight=False)
    if missing:
        err.print(f"[red]a run needs what is missing here:[/] {safe(', '.join(p.what for p in missing))}")
        raise typer.Exit(1)


@app.command(name="kinds")
def list_kinds(
    name: Annotated[
        str | None, typer.Argument(metavar="KIND", help="One kind (default: every kind).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout: one object per kind.")] = False,
) -> None:
    """Every check kind's parameters, defaults, limits and verdict rules."""
    from rich.table import Table

    from qualify.kinddocs import OPEN_LIMITS, kind_json

    chosen = [registry.kind_named(name, "qualify kinds")] if name else list(registry.installed())
    if as_json:
        print_json([kind_json(k) for k in chosen])
        return
    console = open_console()
    for kind in chosen:
        table = Table(title=f"{kind.name}: {kind.summary}", title_justify="left")
        for column in ("parameter", "type", "default", "range", "help"):
            table.add_column(column)
        for p in kind.params:
            default = "required" if p.required else repr(p.default)
            shown = p.allowed.notation() if p.allowed else ""
            table.add_row(p.name, p.type, safe(default), safe(shown), safe(p.help))
        console.print(table)
        if kind.limits:
            limits = Table(title=f"{kind.name} limits", title_justify="left")
            for column in ("limit", "range", "default", "help"):
                limits.add_column(column)
            for lim in kind.limits:
                default = "judged only when set" if lim.default is None else f"{lim.default:g}"
                limits.add_row(lim.name, safe(lim.allowed.notation()), default, safe(lim.help))
            console.print(limits)
        else:
            console.print(f"limits: {safe(OPEN_LIMITS) if kind.limits is None else 'none'}")
        console.print(f"verdict: {safe(kind.verdict_rules)}\n")


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The project directory.")] = Path(),
    force: Annotated[bool, typer.Option(help="Overwrite an existing qualify.toml and stages/.")] = False,
) -> None:
    """Write a starting qualify.toml, copy the default plan into stages/ (its kernel check fitted
    to the engine's build or sources), add runs/ and result links to .gitignore, and print the
    next steps."""
    from qualify.scaffold import init_project, next_steps

    console = open_console()
    # What init found is said as it goes (nix may take a while), store paths whole, to be copied.
    for path in init_project(
        directory, force=force, say=lambda text: console.print(safe(text), highlight=False, soft_wrap=True)
    ):
        console.print(f"wrote {safe(str(path))}", highlight=False)
    console.print("\nnext:", highlight=False)
    for number, step in enumerate(next_steps(directory), 1):
        console.print(f"  {number}. {safe(step)}", highlight=False)


def _open(project: Path, runs_dir: Path | None, run_id: str | None) -> RunDir:
    from qualify.core.config import load_config
    from qualify.core.runlist import open_run
    from qualify.pipeline.request import runs_dir_for

    if run_id is not None and (Path(run_id) / "run.json").is_file():
        return open_run(Path(run_id).parent, run_id)  # a run given by its path
    return open_run(runs_dir_for(load_config(project), runs_dir), run_id)

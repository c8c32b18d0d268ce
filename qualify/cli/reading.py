"""The commands that read what exists: runs, show, report, kernels, doctor, kinds, init."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from qualify.checks import registry
from qualify.cli.app import JsonOpt, ProjectOpt, RunsDirOpt, app
from qualify.core.errors import QualifyError

if TYPE_CHECKING:
    from qualify.core.runstore import RunDir

from qualify.cli.running import publish_for


@app.command()
def runs(project: ProjectOpt = Path(), runs_dir: RunsDirOpt = None, as_json: JsonOpt = False) -> None:
    """List the saved runs, oldest first."""
    from rich.table import Table

    from qualify.console import badge
    from qualify.core.config import load_config
    from qualify.core.runstore import list_runs
    from qualify.pipeline.request import runs_dir_for

    console = Console()
    directory = runs_dir_for(load_config(project), runs_dir)
    if as_json:
        print(json.dumps([_run_entry(entry) for entry in list_runs(directory)], indent=2))
        return
    table = Table(title=f"runs in {directory}", title_justify="left")
    for column in ("run", "candidate", "profile", "status", "verdict", "created"):
        table.add_column(column)
    for entry in map(_run_entry, list_runs(directory)):
        if entry["status"] == "broken":
            # One broken run must not hide the others: list it, say what is wrong.
            table.add_row(entry["run_id"], "?", "", "[red]broken[/]", "—", escape(entry["error"]))
            continue
        table.add_row(
            entry["run_id"],
            entry["candidate"] or "?",
            entry["profile"] or "",
            entry["status"],
            badge(entry["verdict"] or "—"),
            entry["created_at"] or "",
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
    from rich.table import Table

    from qualify.console import badge
    from qualify.report.model import build_model

    console = Console()
    opened = _open(project, runs_dir, run_id)
    kind = opened.read().get("kind")
    if kind in ("set", "fleet"):
        _show_matrix(console, opened, as_json=as_json)
        return
    model = build_model(opened)
    if as_json:
        print(json.dumps(model.as_json(), indent=2, default=str))
        return
    console.print(f"run {model.run_id}: {badge(model.verdict)}  ({model.status})")
    console.print(
        " → ".join(
            f"{s.name} {badge(s.outcome)}" + (" [yellow](ungated)[/]" if s.ungated else "")
            for s in model.stages
        )
    )
    table = Table(title_justify="left")
    for column in ("stage", "check", "verdict", "why"):
        table.add_column(column)
    for stage in model.stages:
        if not stage.checks:
            table.add_row(stage.name, "", badge(stage.outcome), escape(stage.reason))
        for check in stage.checks:
            table.add_row(stage.name, check.name, badge(check.verdict), escape(check.reason))
    console.print(table)


def _show_matrix(console: Console, run: RunDir, *, as_json: bool) -> None:
    """A run set or a merged fleet report as `show` prints it: the verdict, the controls or the
    hosts, then stages × members (or hosts)."""
    from rich.table import Table

    from qualify.console import badge
    from qualify.report.fleet import FleetModel, fleet_model
    from qualify.report.matrix import MatrixModel, build_set_model

    fleet = run.read().get("kind") == "fleet"
    model: FleetModel | MatrixModel = fleet_model(run.path) if fleet else build_set_model(run)
    if as_json:
        print(json.dumps(model.as_json(), indent=2, default=str))
        return
    what = "fleet report" if fleet else "run set"
    console.print(f"{what} {model.run_id}: {badge(model.verdict)}  ({model.status})")
    console.print(escape(model.verdict_reason))
    if isinstance(model, MatrixModel) and model.controls_line:
        console.print(escape(model.controls_line))
    if isinstance(model, FleetModel):
        for host in model.hosts:
            gpus = "; ".join(host.gpus) or "no GPU"
            console.print(
                f"  {escape(host.key)}: {badge(host.verdict)}  {escape(gpus)}, kernel {escape(host.kernel)}"
            )
        for line in model.differences:
            console.print(f"  differs: {escape(line)}")
    table = Table(title_justify="left")
    table.add_column("stage")
    for column in model.columns:
        sub = column.arm if fleet else column.role
        table.add_column(f"{escape(column.title)}\n[dim]{escape(sub)}[/]")
    for stage in model.stages:
        table.add_row(
            stage,
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
) -> None:
    """Write report.html, summary.md and report.json from a saved run."""
    from qualify.console import badge
    from qualify.pipeline.rejudge import rejudge_with_project_plan
    from qualify.report.render import render

    run = _open(project, runs_dir, run_id)
    if rejudge:
        changes = rejudge_with_project_plan(run, project)
        for change in changes:
            where = escape(f"{change.stage}/{change.check}")
            Console().print(f"{where}: {badge(change.before)} → {badge(change.after)}")
        Console().print(f"re-decided; {len(changes)} check(s) changed")
    files = render(run)
    publish_for(run, files.markdown)
    Console().print(
        f"{escape(str(files.html))}\n{escape(str(files.markdown))}\n{escape(str(files.json))}\n"
        f"{escape(str(files.junit))}"
    )


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
    from qualify.compile.kind import DEFAULT_PATTERNS
    from qualify.compile.listing import show_kernels

    patterns = () if no_host else tuple(host_pattern or DEFAULT_PATTERNS)
    code = show_kernels(paths, as_json=as_json, host_patterns=patterns, ptxas_logs=ptxas_log or ())
    raise typer.Exit(int(code))


@app.command()
def doctor(as_json: JsonOpt = False) -> None:
    """What this machine offers a qualification run (nix, compilers, GPUs, permissions)."""
    from rich.table import Table

    from qualify.doctor import probes

    found = probes()
    missing = [p.what for p in found if p.required and not p.ok]
    if as_json:
        print(json.dumps([vars(p) for p in found], indent=2))
        raise typer.Exit(1 if missing else 0)
    table = Table(title="qualify doctor", title_justify="left")
    for column in ("", "what", "found", "needed for"):
        table.add_column(column)
    for probe in found:
        mark = "[green]ok[/]" if probe.ok else ("[red]missing[/]" if probe.required else "[yellow]--[/]")
        table.add_row(mark, probe.what, escape(probe.detail), probe.needed_for)
    Console().print(table)
    if missing:
        Console(stderr=True).print(f"[red]a run needs what is missing here:[/] {', '.join(missing)}")
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

    from qualify.kinddocs import kind_json

    chosen = [registry.kind_named(name, "qualify kinds")] if name else list(registry.installed())
    if as_json:
        print(json.dumps([kind_json(k) for k in chosen], indent=2, default=str))
        return
    console = Console()
    for kind in chosen:
        table = Table(title=f"{kind.name}: {kind.summary}", title_justify="left")
        for column in ("parameter", "type", "default", "help"):
            table.add_column(column)
        for p in kind.params:
            default = "required" if p.required else repr(p.default)
            table.add_row(p.name, p.type, escape(default), escape(p.help))
        console.print(table)
        console.print(f"limits: {', '.join(kind.limits) if kind.limits else 'any max_*, min_*, *_margin'}")
        console.print(f"verdict: {escape(kind.verdict_rules)}\n")


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The project directory.")] = Path(),
    force: Annotated[bool, typer.Option(help="Overwrite an existing qualify.toml and stages/.")] = False,
) -> None:
    """Write a starting qualify.toml and copy the default plan into stages/."""
    from qualify.scaffold import init_project

    for path in init_project(directory, force=force):
        Console().print(f"wrote {escape(str(path))}")


def _run_entry(entry: RunDir) -> dict[str, Any]:
    try:
        saved = entry.read()
        status = entry.status()
    except QualifyError as exc:
        return {"run_id": entry.run_id, "path": str(entry.path), "status": "broken", "error": exc.message}
    return {
        "run_id": entry.run_id,
        "path": str(entry.path),
        "candidate": _candidates(saved),
        "profile": saved.get("profile"),
        "status": status,
        "verdict": saved.get("verdict"),
        "created_at": saved.get("created_at"),
    }


def _candidates(saved: dict[str, Any]) -> str | None:
    """The run's candidate arm; a run set's candidates, and how many controls ran with them."""
    if saved.get("kind") == "fleet":
        return f"fleet of {len(saved.get('hosts', []))} hosts"
    if saved.get("kind") != "set":
        arm = saved.get("roles", {}).get("candidate", {}).get("arm")
        return str(arm) if arm is not None else None
    members = saved.get("members", [])
    names = ", ".join(m["arm"] for m in members if m.get("role") == "candidate")
    controls = sum(m.get("role") != "candidate" for m in members)
    return names + (f" (+{controls} control{'s' if controls > 1 else ''})" if controls else "")


def _open(project: Path, runs_dir: Path | None, run_id: str | None) -> RunDir:
    from qualify.core.config import load_config
    from qualify.core.runstore import open_run
    from qualify.pipeline.request import runs_dir_for

    if run_id is not None and (Path(run_id) / "run.json").is_file():
        return open_run(Path(run_id).parent, run_id)  # a run given by its path
    return open_run(runs_dir_for(load_config(project), runs_dir), run_id)

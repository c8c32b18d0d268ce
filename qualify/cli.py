"""The `qualify` command line: thin commands, each calling one function.

This is the one place where errors become exit codes (docs/design.md): QualifyError is caught once,
rendered with rich; click's own codes are remapped (usage error 4, Ctrl-C 130).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from qualify import __version__
from qualify.checks import registry
from qualify.core.errors import ExitCode, QualifyError

if TYPE_CHECKING:
    from qualify.checks.base import CheckKind
    from qualify.core.runstore import RunDir


def _all_kinds() -> tuple[CheckKind, ...]:
    from qualify.kinds import KINDS

    return KINDS


# The CLI is an entry point: it hands the one list of kinds to the spine's registry, imported
# when a command first needs a kind (the stage packages pull in pandas; --help must not wait).
registry.install_on_demand(_all_kinds)

_state = {"debug": False}


class QualifyGroup(TyperGroup):
    """Runs click in non-standalone mode so that every exit code is ours."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        err = Console(stderr=True, soft_wrap=True)  # paths and commands stay copyable
        try:
            code = super().main(*args, **kwargs)
        except typer.TyperException as exc:
            # Usage errors (click's exit code 2), bad parameters.
            show = getattr(exc, "show", None)
            if callable(show):
                show()
            else:
                err.print(escape(exc.format_message()))
            sys.exit(ExitCode.USAGE_ERROR)
        except (typer.Abort, KeyboardInterrupt):
            err.print("[yellow]interrupted[/]")
            sys.exit(ExitCode.INTERRUPTED)
        except QualifyError as exc:
            if _state["debug"]:
                err.print(escape(traceback.format_exc()))
            err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {escape(exc.hint)}", highlight=False)
            sys.exit(exc.exit_code)
        except Exception as exc:
            if _state["debug"]:
                err.print(escape(traceback.format_exc()))
            err.print(f"[bold red]internal error:[/] {escape(repr(exc))}", highlight=False)
            err.print("[dim]hint:[/] rerun with --debug for the traceback")
            sys.exit(ExitCode.HARNESS_ERROR)
        sys.exit(int(code or 0))


app = typer.Typer(
    cls=QualifyGroup,
    help="Qualify a toolchain move of a GPU inference engine packaged as a Nix flake.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

ProjectOpt = Annotated[
    Path, typer.Option("--project", "-C", metavar="DIR", help="Project directory holding qualify.toml.")
]
RunsDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--runs-dir",
        metavar="DIR",
        help="Where runs live (default: runs/ in the project, or $QUALIFY_RUNS_DIR).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON on stdout; every message goes to stderr.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"qualify {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    _state["debug"] = debug


@app.command()
def run(
    candidate: Annotated[str | None, typer.Option(metavar="ARM", help="The arm to qualify.")] = None,
    pinned: Annotated[
        str | None, typer.Option(metavar="ARM", help="The arm it is compared with (default: the config's).")
    ] = None,
    project: ProjectOpt = Path(),
    profile: Annotated[
        str | None, typer.Option(metavar="NAME", help="A plan profile (e.g. quick, full).")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", metavar="RUN", help="Resume or rerun this saved run.")
    ] = None,
    only: Annotated[
        str | None, typer.Option(metavar="STAGE", help="Rerun only this stage of a saved run.")
    ] = None,
    from_stage: Annotated[
        str | None, typer.Option("--from", metavar="STAGE", help="Rerun this stage and the later ones.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rerun stages that passed with unchanged inputs.")
    ] = False,
    no_gate: Annotated[
        bool, typer.Option("--no-gate", help="Run later stages past a failed gate (marked ungated).")
    ] = False,
    runs_dir: RunsDirOpt = None,
    allow_dirty: Annotated[
        bool, typer.Option("--allow-dirty", help="Build from a tree with uncommitted changes (reported).")
    ] = False,
    override_input: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=FLAKEREF", help="Replace a flake input for the candidate only (repeatable)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build the arms and run the plan's stages in order, each gating the next."""
    from qualify.console import ConsoleEvents, badge
    from qualify.pipeline.runner import RunRequest, execute, parse_overrides
    from qualify.report.model import build_model
    from qualify.report.render import render

    console = Console(stderr=as_json)
    request = RunRequest(
        project,
        candidate,
        pinned,
        profile,
        run_id,
        only,
        from_stage,
        force,
        no_gate,
        runs_dir,
        allow_dirty,
        parse_overrides(override_input or []),
    )
    outcome = execute(request, ConsoleEvents(console))
    files = render(outcome.run)
    _publish(outcome.run, files.markdown, to_stderr=as_json)
    verdict = outcome.verdict.value if outcome.verdict else "INTERRUPTED"
    if as_json:
        stages = {s.name: s.outcome for s in build_model(outcome.run).stages}
        document = {
            "run_id": outcome.run.run_id,
            "verdict": verdict,
            "exit_code": int(outcome.exit_code),
            "run_dir": str(outcome.run.path),
            "report": {k: str(v) for k, v in vars(files).items()},
            "stages": stages,
        }
        print(json.dumps(document, indent=2))
    console.print(f"\n{badge(verdict)}  run {escape(str(outcome.run.path))}")
    console.print(f"report: {escape(str(files.html))}\nsummary: {escape(str(files.markdown))}")
    if outcome.verdict is None:
        console.print(f"resume with: qualify run --run {outcome.run.run_id}")
    raise typer.Exit(int(outcome.exit_code))


@app.command()
def plan(
    project: ProjectOpt = Path(),
    profile: Annotated[
        str | None, typer.Option(metavar="NAME", help="Show the plan as this profile resolves it.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the resolved plan, with the default stages it leaves NOT CONFIGURED."""
    from qualify.console import plan_text
    from qualify.core.config import load_config
    from qualify.pipeline.plan import load_plan
    from qualify.pipeline.templates import check_templates

    console = Console(stderr=as_json)
    config = None
    try:
        config = load_config(project)
    except QualifyError:
        if (project / "qualify.toml").exists():
            raise
        console.print("[dim]no qualify.toml here: showing the built-in default plan[/]")
    resolved = load_plan(config.plan_dir if config else None, profile)
    if config is not None:
        check_templates(resolved, config)
    if as_json:
        print(json.dumps({**resolved.as_json(), "not_configured": list(resolved.not_configured())}, indent=2))
        return
    # Plain lines, not a table: long commands and globs stay whole and copyable at any width.
    console.print(escape(plan_text(resolved)), highlight=False, soft_wrap=True)


@app.command()
def runs(project: ProjectOpt = Path(), runs_dir: RunsDirOpt = None, as_json: JsonOpt = False) -> None:
    """List the saved runs, oldest first."""
    from qualify.console import badge
    from qualify.core.config import load_config
    from qualify.core.runstore import list_runs
    from qualify.pipeline.runner import runs_dir_for

    console = Console()
    directory = runs_dir_for(load_config(project), runs_dir)
    if as_json:
        print(json.dumps([_run_entry(entry) for entry in list_runs(directory)], indent=2))
        return
    table = Table(title=f"runs in {directory}", title_justify="left")
    for column in ("run", "candidate", "profile", "status", "verdict", "created"):
        table.add_column(column)
    for entry in list_runs(directory):
        try:
            saved = entry.read()
            status = entry.status()
        except QualifyError as exc:
            # One broken run must not hide the others: list it, say what is wrong.
            table.add_row(entry.run_id, "?", "", "[red]broken[/]", "—", escape(exc.message))
            continue
        table.add_row(
            entry.run_id,
            saved.get("roles", {}).get("candidate", {}).get("arm", "?"),
            saved.get("profile") or "",
            status,
            badge(saved.get("verdict") or "—"),
            saved.get("created_at", ""),
        )
    console.print(table)


@app.command()
def show(
    run_id: Annotated[str | None, typer.Argument(help="Run id or path (default: the latest).")] = None,
    project: ProjectOpt = Path(),
    runs_dir: RunsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a run's stage chain and its checks."""
    from qualify.console import badge
    from qualify.report.model import build_model

    console = Console()
    model = build_model(_open(project, runs_dir, run_id))
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


@app.command()
def report(
    run_id: Annotated[str | None, typer.Argument(help="Run id or path (default: the latest).")] = None,
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
        changes = rejudge_with_project_plan(run)
        for change in changes:
            where = escape(f"{change.stage}/{change.check}")
            Console().print(f"{where}: {badge(change.before)} → {badge(change.after)}")
        Console().print(f"re-decided; {len(changes)} check(s) changed")
    files = render(run)
    _publish(run, files.markdown)
    Console().print(
        f"{escape(str(files.html))}\n{escape(str(files.markdown))}\n{escape(str(files.json))}\n"
        f"{escape(str(files.junit))}"
    )


def _publish(run: RunDir, summary: Path, *, to_stderr: bool = False) -> None:
    # Workflow commands go out unformatted (rich would wrap and colour them), on stdout unless
    # stdout carries JSON; the runner reads them from the step's whole output.
    from qualify.report.github import publish
    from qualify.report.model import build_model

    stream = sys.stderr if to_stderr else sys.stdout
    publish(build_model(run), summary, os.environ, lambda line: print(line, file=stream, flush=True))


@app.command()
def kernels(
    paths: Annotated[
        list[Path], typer.Argument(help="A build's out path or binary; a second one to compare.")
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
    from qualify.compile.hostkernels import DEFAULT_PATTERNS
    from qualify.compile.listing import show_kernels

    patterns = () if no_host else tuple(host_pattern or DEFAULT_PATTERNS)
    code = show_kernels(paths, as_json=as_json, host_patterns=patterns, ptxas_logs=ptxas_log or ())
    raise typer.Exit(int(code))


@app.command()
def doctor(as_json: JsonOpt = False) -> None:
    """What this machine offers a qualification run (nix, compilers, GPUs, permissions)."""
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
    name: Annotated[str | None, typer.Argument(help="One kind (default: every kind).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout: one object per kind.")] = False,
) -> None:
    """Every check kind's parameters, defaults, limits and verdict rules."""
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
    directory: Annotated[Path, typer.Argument(help="The project directory.")] = Path(),
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
        "candidate": saved.get("roles", {}).get("candidate", {}).get("arm"),
        "profile": saved.get("profile"),
        "status": status,
        "verdict": saved.get("verdict"),
        "created_at": saved.get("created_at"),
    }


def _open(project: Path, runs_dir: Path | None, run_id: str | None) -> RunDir:
    from qualify.core.config import load_config
    from qualify.core.runstore import open_run
    from qualify.pipeline.runner import runs_dir_for

    if run_id is not None and (Path(run_id) / "run.json").is_file():
        return open_run(Path(run_id).parent, run_id)  # a run given by its path
    return open_run(runs_dir_for(load_config(project), runs_dir), run_id)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point: SIGTERM stops a run as cleanly as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _terminate)
    # `qualify` alone asks for the help: shown, and not an error.
    app(args=sys.argv[1:] or ["--help"])

"""The commands that start work: `qualify run` and `qualify plan`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qualify.cli.app import JsonOpt, ProjectOpt, RunsDirOpt, app, print_json
from qualify.console import open_console, safe
from qualify.core.errors import QualifyError

if TYPE_CHECKING:
    from qualify.core.runstore import RunDir


def arm_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of an arm: the names in the project's qualify.toml (`-C` or here)."""
    from qualify.core.config import load_config

    try:
        config = load_config(ctx.params.get("project") or Path())
    except QualifyError:
        return []
    return sorted(name for name in config.arms if name.startswith(incomplete))


@app.command()
def run(
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ARM",
            help="The arm to qualify (repeatable: several candidates, measured together, in one run set; "
            "default: qualify.toml's candidate).",
            autocompletion=arm_names,
        ),
    ] = None,
    pinned: Annotated[
        str | None,
        typer.Option(
            metavar="ARM",
            help="The arm it is compared with (default: the config's).",
            autocompletion=arm_names,
        ),
    ] = None,
    project: ProjectOpt = Path(),
    profile: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="A plan profile, e.g. quick, full (default: qualify.toml's profile)."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run", metavar="RUN", help="Resume or rerun this saved run, with the plan it was made with."
        ),
    ] = None,
    only: Annotated[
        str | None, typer.Option(metavar="STAGE", help="Rerun only this stage of a saved run.")
    ] = None,
    from_stage: Annotated[
        str | None, typer.Option("--from", metavar="STAGE", help="Rerun this stage and the later ones.")
    ] = None,
    stage: Annotated[
        list[str] | None,
        typer.Option(
            metavar="STAGE",
            help="Run only this stage of the plan (repeatable), in a new run that then never reads "
            "QUALIFIED: e.g. --stage build --stage distribution fills the plan's binary cache.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rerun stages that passed with unchanged inputs.")
    ] = False,
    no_gate: Annotated[
        bool, typer.Option("--no-gate", help="Run later stages past a failed gate (marked ungated).")
    ] = False,
    runs_dir: RunsDirOpt = None,
    allow_dirty: Annotated[
        bool,
        typer.Option(
            "--allow-dirty",
            help="Build from a tree with uncommitted changes, or rerun a saved run under a plan that "
            "differs from the one it was made with (both reported).",
        ),
    ] = False,
    override_input: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=FLAKEREF", help="Replace a flake input for the candidate only (repeatable)."
        ),
    ] = None,
    nix_option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=VALUE",
            help="A nix setting for every nix build of the run, e.g. builders or max-jobs (repeatable).",
        ),
    ] = None,
    host_label: Annotated[
        str | None,
        typer.Option(
            metavar="LABEL",
            envvar="QUALIFY_HOST_LABEL",
            help="What this host is called (a CI runner label), kept with the run and shown in reports.",
        ),
    ] = None,
    no_controls: Annotated[
        bool, typer.Option("--no-controls", help="Leave out the controls qualify.toml declares.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build the arms and run the plan's stages in order, each gating the next."""
    from qualify.checks.runoptions import RunOptions
    from qualify.console import ConsoleEvents, badge
    from qualify.pipeline.preflight import require_stage_libraries
    from qualify.pipeline.request import RunRequest, parse_nix_options, parse_overrides
    from qualify.pipeline.runner import execute
    from qualify.report.render import render

    require_stage_libraries()
    console = open_console(stderr=as_json)
    candidates = tuple(candidate or ())
    request = RunRequest(
        project=project,
        candidates=candidates,
        pinned=pinned,
        profile=profile,
        run_id=run_id,
        only=only,
        from_stage=from_stage,
        force=force,
        no_gate=no_gate,
        runs_dir=runs_dir,
        host_label=host_label,
        controls=not no_controls,
        options=RunOptions(
            allow_dirty=allow_dirty,
            override_inputs=parse_overrides(override_input or []),
            nix_options=parse_nix_options(nix_option or []),
            stages=list(stage) if stage else None,
        ),
    )
    outcome = execute(request, ConsoleEvents(console))
    files = render(outcome.run)
    publish_for(outcome.run, files.markdown, to_stderr=as_json)
    verdict = outcome.verdict.value if outcome.verdict else "INTERRUPTED"
    if as_json:
        document = {
            "run_id": outcome.run.run_id,
            "verdict": verdict,
            "exit_code": int(outcome.exit_code),
            "run_dir": str(outcome.run.path),
            "verdict_line": files.verdict_line() or verdict,
            "report": {k: str(v) for k, v in vars(files).items()},
            **outcome_fields(outcome.run),
        }
        print_json(document)
    line = files.verdict_line()
    note = line.partition(" — ")[2] if line.startswith(verdict) else ""
    console.print(
        f"\n{badge(verdict)}{' — ' + safe(note) if note else ''}  run {safe(str(outcome.run.path))}"
    )
    for member in member_rows(outcome.run):
        behaved = {True: ", behaved", False: ", did NOT behave"}.get(member["behaved"], "")
        console.print(f"  {badge(member['verdict'])}  {safe(member['label'])} ({member['role']}{behaved})")
    console.print(f"report: {safe(str(files.html))}\nsummary: {safe(str(files.markdown))}")
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
    from qualify.core.config import load_config
    from qualify.pipeline.plan import load_plan
    from qualify.pipeline.plantext import plan_text
    from qualify.pipeline.preflight import require_flake
    from qualify.pipeline.templates import check_templates

    console = open_console(stderr=as_json)
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
        require_flake(resolved, config)
    if as_json:
        print_json({**resolved.as_json(), "not_configured": list(resolved.not_configured())})
        return
    # Plain lines, not a table: long commands and globs stay whole and copyable at any width.
    console.print(plan_text(resolved), markup=False, emoji=False, highlight=False, soft_wrap=True)


def outcome_fields(run: RunDir) -> dict[str, object]:
    """What `--json` adds for a run: its stages; for a run set, each member's verdict too, and
    why the set's verdict is what it is, derived from its members' folders as the verdict was
    (what its run.json saves of them is for readers of the file)."""
    from qualify.pipeline.ondisk import set_on_disk
    from qualify.records.run import RunRecord
    from qualify.report.model import build_model

    if RunRecord.load(run).kind != "set":
        return {"stages": {s.name: s.outcome for s in build_model(run).stages}}
    derived = set_on_disk(run)
    return {
        "verdict_reason": derived.reason,
        "controls_behaved": derived.controls_behaved,
        "members": member_rows(run),
    }


def member_rows(run: RunDir) -> list[dict[str, Any]]:
    """Each member of a run set: label, arm, role, verdict, behaviour, folder, stages (none for
    a run of one)."""
    from qualify.records.run import RunRecord
    from qualify.report.matrix import build_set_model

    if RunRecord.load(run).kind != "set":
        return []
    model = build_set_model(run)
    return [
        {
            "label": c.key,
            "arm": c.arm,
            "role": c.role,
            "verdict": c.verdict,
            "behaved": c.behaved,
            "run_dir": str(run.path / c.key),
            "stages": {s: model.cells[s][c.key].outcome for s in model.stages},
        }
        for c in model.columns
    ]


def publish_for(run: RunDir, summary: Path, *, to_stderr: bool = False) -> None:
    # Workflow commands go out unformatted (rich would wrap and colour them), on stdout unless
    # stdout carries JSON; the runner reads them from the step's whole output.
    from qualify.console import reader_left
    from qualify.report.annotations import workflow_annotations
    from qualify.report.fleet import FleetModel, fleet_model
    from qualify.report.github import publish
    from qualify.report.matrix import MatrixModel, build_set_model
    from qualify.report.model import ReportModel, build_model

    stream = sys.stderr if to_stderr else sys.stdout
    from qualify.records.run import RunRecord

    kind = RunRecord.load(run).kind
    model: ReportModel | MatrixModel | FleetModel
    if kind == "fleet":
        model = fleet_model(run.path)
    elif kind == "set":
        model = build_set_model(run)
    else:
        model = build_model(run)

    def emit(line: str) -> None:
        try:
            print(line, file=stream, flush=True)
        except BrokenPipeError:
            reader_left(stream)

    # `publish` appends the step summary; the annotations (FAIL/ERROR as errors, WARN and
    # INCONCLUSIVE as warnings, a stage file's check at its line) come from `annotations`.
    environ = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    publish(model, summary, environ, emit)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in workflow_annotations(run, model, os.environ):
            emit(line)

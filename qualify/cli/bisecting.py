"""`qualify bisect`: the first step of a qualify.toml series (an arm, or a revision of a flake
input) at which a gate flips (docs/bisect.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qualify.bisect import DEFAULT_RETRIES
from qualify.cli.app import JsonOpt, ProjectOpt, RunsDirOpt, app, print_json
from qualify.cli.bisectlist import PAGE, STATE, SUMMARY
from qualify.console import open_console, safe

if TYPE_CHECKING:
    from rich.console import Console


@app.command()
def bisect(
    series: Annotated[
        str,
        typer.Argument(
            metavar="SERIES",
            help="A [series.NAME] of qualify.toml: arms, or a flake input's revisions, good end first.",
        ),
    ],
    gate: Annotated[
        str,
        typer.Option(
            "--gate",
            metavar="GATE",
            help="STAGE (the stage's verdict), STAGE/CHECK (one check's) or STAGE/CHECK/METRIC "
            "(one metric against its limit).",
        ),
    ],
    no_gate: Annotated[
        bool,
        typer.Option("--no-gate", help="Run the gate's stage even when an earlier stage fails (ungated)."),
    ] = False,
    retries: Annotated[
        int,
        typer.Option(metavar="N", min=0, help="Measure an INCONCLUSIVE step again up to N times."),
    ] = DEFAULT_RETRIES,
    series_mode: Annotated[
        bool, typer.Option("--series-mode", help="Probe every step in order instead of searching.")
    ] = False,
    run_id: Annotated[
        str | None, typer.Option("--run", metavar="ID", help="Resume this bisect (its folder's name).")
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="Resolve every step's plan with this profile (default: qualify.toml's)."
        ),
    ] = None,
    allow_dirty: Annotated[
        bool,
        typer.Option(
            "--allow-dirty", help="Build the steps from a tree with uncommitted changes (reported)."
        ),
    ] = False,
    project: ProjectOpt = Path(),
    runs_dir: RunsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the first step of a series at which the gate flips: each step a run against the pinned arm."""
    from qualify.bisect.drive import drive
    from qualify.bisect.gate import parse_gate
    from qualify.bisect.outcomes import Measured
    from qualify.bisect.page import html_page
    from qualify.bisect.report import answer_document, answer_line, markdown
    from qualify.bisect.resume import open_state
    from qualify.bisect.state import Step
    from qualify.bisect.steps import StepProber, stages_for
    from qualify.bisect.walks import series_walk
    from qualify.console import ConsoleEvents
    from qualify.core.config import load_config
    from qualify.core.containment import chosen as chosen_containment
    from qualify.core.errors import UsageError
    from qualify.core.runlist import new_run
    from qualify.core.runstore import RunDir, write_atomic, write_json
    from qualify.pipeline.preflight import require_clean_tree, require_stage_libraries
    from qualify.pipeline.request import load_run_plan, runs_dir_for
    from qualify.records.bisect import Mode, SearchContext
    from qualify.report.charts import render_svg

    console = open_console(stderr=as_json)
    # Everything that can be known wrong is refused before a folder is made or a step runs.
    chosen_containment()
    config = load_config(project)
    walk = series_walk(config, series)
    chosen_profile = profile or config.profile
    plan = load_run_plan(config, chosen_profile, from_config=profile is None and config.profile is not None)
    chosen = parse_gate(gate, plan)
    require_stage_libraries()
    require_clean_tree(config, allow_dirty)
    root = runs_dir_for(config, runs_dir)
    if run_id is None:
        folder = new_run(root, f"bisect-{series}").path
    else:
        folder = root / run_id
        if "/" in run_id or not (folder / STATE).is_file():
            raise UsageError(f"no bisect {run_id!r} in {root}", "start one: leave --run out")
    # A resume under another profile asks another question: the profile is part of it.
    profiled = {} if chosen_profile is None else {"profile": chosen_profile}
    searched = SearchContext(series=series, gate=chosen.label, no_gate=no_gate, **walk.context(), **profiled)
    context = searched.model_dump(exclude_unset=True)
    mode = Mode.SERIES if series_mode else Mode.BISECT
    probe = StepProber(
        config.root,
        folder,
        walk,
        chosen,
        stages_for(plan, chosen, no_gate=no_gate),
        no_gate,
        ConsoleEvents(console),
        profile=chosen_profile,
        allow_dirty=allow_dirty,
    )

    def told(step: Step) -> Measured:
        console.print(f"[bold]step {step.index} {safe(step.name)}[/] (attempt {step.attempt})")
        measured = probe(step)
        said = measured.evidence
        if said is not None:
            _render_step(console, Path(said.run))
        verdict, reason = ("None", "") if said is None else (said.verdict, said.reason)
        console.print(
            f"step {step.index} {safe(step.name)}: {measured.outcome.value.upper()} — "
            f"{safe(verdict)} {safe(reason)}",
            highlight=False,
        )
        return measured

    with RunDir(folder).locked():
        state = open_state(folder / STATE, walk.names, mode=mode, retries=retries, context=context)
        try:
            answer = drive(state, told)
        except KeyboardInterrupt:
            console.print(
                f"resume with: qualify bisect {series} --gate {chosen.label} --run {folder.name}",
                highlight=False,
            )
            raise
        document = answer_document(answer, state)
        write_atomic(folder / SUMMARY, markdown(answer, state).encode("utf-8"))
        write_atomic(folder / PAGE, html_page(answer, state, render_svg).encode("utf-8"))
        write_json(folder / STATE, document)
    if as_json:
        print_json({"bisect_dir": str(folder), **document})
    console.print(f"\n{safe(answer_line(answer, state))}", highlight=False)
    console.print(f"bisect {safe(str(folder))}\nsummary: {safe(str(folder / SUMMARY))}", highlight=False)
    raise typer.Exit(int(answer.exit_code))


def _render_step(console: Console, run: Path) -> None:
    """The step's run gets its report.html, summary.md and report.json, as `qualify run` gives
    every run: a reviewer opens any step as a run of its own. A report that cannot be rendered
    is said, and the bisect goes on: its answer comes from the run folder, not the report."""
    from qualify.core.errors import QualifyError
    from qualify.core.runstore import RunDir
    from qualify.report.render import render

    try:
        render(RunDir(run))
    except (QualifyError, OSError) as exc:
        console.print(f"[yellow]the report of {safe(str(run))} was not rendered: {safe(str(exc))}[/]")

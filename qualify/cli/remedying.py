"""`qualify remedy`: the source files whose kernels failed a run's compile stage, rebuilt with
each of the variants qualify.toml declares, compared kernel by kernel with both arms
(docs/remedy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qualify.cli.app import JsonOpt, ProjectOpt, RunsDirOpt, app, print_json
from qualify.console import open_console, safe


@app.command()
def remedy(
    run_id: Annotated[
        str | None,
        typer.Argument(metavar="RUN", help="The run whose compile failures to remedy (default: the latest)."),
    ] = None,
    variant: Annotated[
        list[str] | None,
        typer.Option(
            "--variant", metavar="NAME", help="A [remedies.NAME] of qualify.toml (default: every one)."
        ),
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option("--source", metavar="FILE", help="Only this failing source file (default: every one)."),
    ] = None,
    check: Annotated[
        str | None,
        typer.Option(
            "--check", metavar="STAGE/CHECK", help="The compile check (default: the run's only one)."
        ),
    ] = None,
    no_build: Annotated[
        bool,
        typer.Option("--no-build", help="Build nothing: judge the units the remedy's folder holds again."),
    ] = False,
    flake: Annotated[
        str | None,
        typer.Option(
            "--flake",
            metavar="REF",
            help="Build the project's variants (.#…) from this flake, not from the run's revision "
            "(a run built on another host, or before its variants existed).",
        ),
    ] = None,
    project: ProjectOpt = Path(),
    runs_dir: RunsDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rebuild the failing source files with each remedy variant and say which brings back what."""
    from qualify.checks.remedyreport import REPORT, SUMMARY, folder_of, markdown
    from qualify.core.config import load_config
    from qualify.core.environment import child_env
    from qualify.core.runlist import open_run
    from qualify.core.runstore import RunDir, write_atomic, write_json
    from qualify.pipeline.request import runs_dir_for
    from qualify.remedy.drive import chosen_sources, chosen_variants, run_remedy
    from qualify.remedy.failing import compile_check, failing_sources
    from qualify.remedy.report import document

    console = open_console(stderr=as_json)
    # Everything that can be known wrong is refused before anything is built.
    config = load_config(project)
    root = runs_dir_for(config, runs_dir)
    run = open_run(root, run_id)
    arm = _candidate_arm(run.path)
    variants = chosen_variants(config.remedies, variant or [], arm)
    compiled = compile_check(run.path, check)
    _, failing = failing_sources(compiled)
    sources = chosen_sources(failing, source or [])
    folder = folder_of(run.path)
    folder.mkdir(parents=True, exist_ok=True)
    env = child_env(inherit=config.inherit_env)
    with RunDir(folder).locked():

        def echo(line: str) -> None:
            console.print(safe(line), highlight=False)

        # --no-build: every variant the folder holds is judged again from its saved units.
        asked = ({}, []) if no_build else (variants, sources)
        found = run_remedy(folder, compiled, failing, asked, env, echo, flake)
        said = document(found)
        write_json(folder / REPORT, said.to_json())
        write_atomic(folder / SUMMARY, markdown(said).encode("utf-8"))
    if as_json:
        print_json({"remedy_dir": str(folder), **said.to_json()})
    console.print(f"\n{safe(said.headline)}", highlight=False)
    console.print(f"remedy {safe(str(folder))}\nsummary: {safe(str(folder / SUMMARY))}", highlight=False)


def _candidate_arm(run: Path) -> str:
    """The arm the run qualified as its candidate, as its run.json names it."""
    from qualify.core.errors import UsageError
    from qualify.core.runstore import RunDir
    from qualify.records.run import RunRecord

    role = RunRecord.load(RunDir(run)).roles.get("candidate")
    if role is None:
        raise UsageError(
            f"{run}: its run.json names no candidate arm", "qualify remedy remedies a run's candidate"
        )
    return role.arm

"""`qualify merge`: the runs of several GPU hosts into one fleet report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from qualify.cli.app import JsonOpt, app
from qualify.cli.running import publish_for


@app.command()
def merge(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR...",
            help="Each host's run directory (or run set), or its archive (.tar.gz, .tgz, .tar, .zip).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Where the fleet report goes.")],
    allow_mixed: Annotated[
        bool,
        typer.Option(
            "--allow-mixed",
            help="Merge runs of different revisions, flake locks or plans (the report says which).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge the hosts' runs of one revision into one report: stages × hosts, each host's verdict,
    GPU and driver, and what differs between hosts. QUALIFIED only when every host is."""
    from qualify.console import badge
    from qualify.core.runstore import RunDir
    from qualify.core.verdicts import exit_code_for
    from qualify.report.fleet import fleet_model, merge
    from qualify.report.render import render

    console = Console(stderr=as_json)
    verdict = merge(runs, out, allow_mixed=allow_mixed)
    files = render(RunDir(out))
    publish_for(RunDir(out), files.markdown, to_stderr=as_json)
    if as_json:
        model = fleet_model(out)
        document = {
            "verdict": verdict.value,
            "exit_code": int(exit_code_for(verdict)),
            "out": str(out),
            "report": {k: str(v) for k, v in vars(files).items()},
            "hosts": [{"host": h.key, "verdict": h.verdict, "gpus": h.gpus} for h in model.hosts],
            "differences": model.differences,
        }
        print(json.dumps(document, indent=2))
    console.print(f"{badge(verdict.value)}  fleet report {escape(str(files.html))}")
    console.print(f"summary: {escape(str(files.markdown))}")
    raise typer.Exit(int(exit_code_for(verdict)))

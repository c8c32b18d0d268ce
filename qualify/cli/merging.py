"""`qualify merge`: the runs of several GPU hosts into one fleet report; `qualify comment`: its
summary on the pull request."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from qualify.cli.app import JsonOpt, app, print_json
from qualify.cli.running import publish_for
from qualify.console import open_console, safe


@app.command()
def merge(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR",
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
    max_unpacked: Annotated[
        str | None,
        typer.Option(
            "--max-unpacked",
            metavar="SIZE",
            help="The most one archive may unpack to (default 32G; K, M, G, T are binary units).",
        ),
    ] = None,
    max_file: Annotated[
        str | None,
        typer.Option(
            "--max-file", metavar="SIZE", help="The most one file of an archive may be (default 16G)."
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option(
            "--max-files", metavar="N", min=1, help="The most entries one archive may hold (default 100000)."
        ),
    ] = None,
    pick: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            metavar="ID",
            help="Of an archive or folder holding several runs, the one to merge: its run id or its "
            "folder's path inside it (repeatable: one for each such input).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge the hosts' runs of one revision into one report: stages × hosts, each host's verdict,
    GPU and driver, and what differs between hosts. Every host's checks are re-decided from
    their measurements first. QUALIFIED only when every host is."""
    from qualify.console import badge
    from qualify.core.runstore import RunDir
    from qualify.core.verdicts import exit_code_for
    from qualify.report.fleet import fleet_model
    from qualify.report.fleetmerge import merge
    from qualify.report.render import render
    from qualify.report.unpack import Caps, parse_size

    caps = Caps.default(
        total_bytes=parse_size(max_unpacked, "--max-unpacked") if max_unpacked is not None else None,
        file_bytes=parse_size(max_file, "--max-file") if max_file is not None else None,
        files=max_files,
    )

    console = open_console(stderr=as_json)
    verdict = merge(runs, out, allow_mixed=allow_mixed, caps=caps, pick=tuple(pick or ()))
    files = render(RunDir(out))
    publish_for(RunDir(out), files.markdown, to_stderr=as_json)
    if as_json:
        model = fleet_model(out)
        document = {
            "verdict": verdict.value,
            "exit_code": int(exit_code_for(verdict)),
            "out": str(out),
            "report": {k: str(v) for k, v in vars(files).items()},
            "hosts": [
                {"host": h.key, "verdict": h.verdict, "reason": h.verdict_reason, "gpus": h.gpus}
                for h in model.hosts
            ],
            "differences": model.differences,
        }
        print_json(document)
    for host in fleet_model(out).hosts if not as_json else []:
        if host.verdict_reason.startswith("not re-judged"):
            console.print(f"{safe(host.key)}: {badge(host.verdict)}  {safe(host.verdict_reason)}")
    console.print(f"{badge(verdict.value)}  fleet report {safe(str(files.html))}")
    console.print(f"summary: {safe(str(files.markdown))}")
    raise typer.Exit(int(exit_code_for(verdict)))


@app.command()
def comment(
    summary: Annotated[
        Path,
        typer.Argument(
            metavar="MARKDOWN", help="The Markdown to post: the summary.md `qualify merge --out` wrote."
        ),
    ],
    pr: Annotated[
        int | None,
        typer.Option(
            "--pr",
            metavar="N",
            min=1,
            help="The pull request's number (default: pull_request.number of $GITHUB_EVENT_PATH's event).",
        ),
    ] = None,
    key: Annotated[
        str,
        typer.Option(
            "--key",
            metavar="KEY",
            help="Names this comment among qualify's on the pull request (two workflows: two keys).",
        ),
    ] = "qualify",
    token_env: Annotated[
        str,
        typer.Option("--token-env", metavar="NAME", help="The environment variable holding the token."),
    ] = "GITHUB_TOKEN",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the comment's body as it would be posted; post nothing (no token needed).",
        ),
    ] = False,
    login: Annotated[
        str | None,
        typer.Option(
            "--as",
            metavar="LOGIN",
            help="The account the token posts as, for a GitHub App's token (my-app[bot]); default: "
            "the token's account as GitHub names it, or github-actions[bot] for a workflow's token.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Post MARKDOWN on a pull request as one comment, and on the next push edit that comment
    instead of adding another. Reads GITHUB_API_URL, GITHUB_REPOSITORY and the token
    (GITHUB_TOKEN) from the environment; only a comment carrying this key's marker and written
    by the account the token posts as is ever edited. MARKDOWN must be a summary qualify wrote;
    --dry-run shows what would be posted."""
    from qualify.report.prbody import comment_body, read_summary
    from qualify.report.prcomment import post, target_from_env

    console = open_console(stderr=as_json or dry_run)
    body, cut = comment_body(read_summary(summary), key)
    if dry_run:
        # The body as GitHub would get it, marker line included, and nothing else on stdout:
        # it can be piped to a file and compared, or read before a token is ever set.
        if as_json:
            print_json({"action": "dry-run", "body": body, "cut": cut})
        else:
            typer.echo(body, nl=not body.endswith("\n"))
            if cut:
                console.print(f"[yellow]the summary would be cut to GitHub's limit[/]: {safe(str(summary))}")
        return
    target = target_from_env(os.environ, pr=pr, token_env=token_env)
    posted = post(target, body, key=key, cut=cut, login=login)
    if as_json:
        print_json(posted.as_json())
        return
    what = {"created": "posted", "updated": "updated", "unchanged": "unchanged:"}[posted.action]
    where = f"pull request #{target.number} of {target.repository}"
    console.print(f"{what} comment {posted.comment_id} on {safe(where)}: {safe(posted.url)}")
    if posted.author is not None:
        # Taken for another account, the next push would post again instead of editing this one.
        console.print(
            f"[yellow]GitHub says {safe(posted.author)} wrote it, not {safe(posted.account)}[/]: "
            f"pass --as {safe(posted.author)} to edit it on the next push"
        )
    if cut:
        console.print(
            f"[yellow]the summary was cut to GitHub's limit[/]: the whole of it is {safe(str(summary))}"
        )

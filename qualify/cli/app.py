"""The `qualify` application: where errors become exit codes, the shared options, the entry point.

This is the one place where errors become exit codes (docs/design.md): QualifyError is caught once,
rendered with rich; click's own codes are remapped (usage error 4, Ctrl-C 130). A reader that
leaves early (`qualify kinds | head -1`) ends the command quietly with exit 0; a run goes on and
exits with its verdict's code. The commands are in `qualify.cli.running` and `qualify.cli.reading`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from qualify import __version__
from qualify.checks import registry
from qualify.console import reader_left, safe
from qualify.core.asciitext import fit_streams
from qualify.core.errors import ConfigError, ExitCode, QualifyError

if TYPE_CHECKING:
    from rich.console import Console

    from qualify.checks.base import CheckKind


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
        _plain_argument_help(self)
        fit_streams()  # an ASCII console gets `->` for `→`, not an error
        err = _Stderr()
        try:
            code = super().main(*args, **kwargs)
        except BrokenPipeError:
            reader_left(sys.stdout)
            sys.exit(0)
        except typer.TyperException as exc:
            # Usage errors (click's exit code 2), bad parameters.
            show = getattr(exc, "show", None)
            if callable(show):
                show()
            else:
                err.print(safe(exc.format_message()))
            sys.exit(ExitCode.USAGE_ERROR)
        except (typer.Abort, KeyboardInterrupt):
            err.print("[yellow]interrupted[/]")
            sys.exit(ExitCode.INTERRUPTED)
        except QualifyError as exc:
            if _state["debug"]:
                err.print(safe(traceback.format_exc()))
            if isinstance(exc, ConfigError):
                annotate_config_error(exc, os.environ, lambda line: print(line, flush=True))
            err.print(f"[bold red]error:[/] {safe(exc.message)}", highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {safe(exc.hint)}", highlight=False)
            sys.exit(exc.exit_code)
        except Exception as exc:
            if _state["debug"]:
                err.print(safe(traceback.format_exc()))
            err.print(f"[bold red]internal error:[/] {safe(repr(exc))}", highlight=False)
            err.print("[dim]hint:[/] rerun with --debug for the traceback")
            sys.exit(ExitCode.HARNESS_ERROR)
        sys.exit(int(code or 0))


class _Stderr:
    """Where errors are printed: rich's console on stderr, made when the first error is (rich
    is not imported for a command that ends well)."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self._console is None:
            from rich.console import Console

            # soft_wrap: paths and commands stay copyable
            self._console = Console(stderr=True, soft_wrap=True, emoji=False)
        self._console.print(*objects, **kwargs)


def _plain_argument_help(group: TyperGroup) -> None:
    """Arguments' help without typer's Python types (`RUN_DIR <list[Path]>`): the metavar and
    the help say what to give."""
    for command in group.commands.values():
        for param in command.params:
            if getattr(param, "param_type_name", "") == "argument" and hasattr(param, "display_type_rich"):
                param.display_type_rich = lambda ctx: None


def print_json(document: Any) -> None:
    """A command's JSON on stdout; a reader that stops early does not change the exit code."""
    try:
        print(json.dumps(document, indent=2, default=str), flush=True)
    except BrokenPipeError:
        reader_left(sys.stdout)


# "path/to/file.toml:12: key: message" or "path/to/file.toml: message", as ConfigError says it.
_WHERE = re.compile(r"^(?P<file>[^:\n]+?\.toml)(?::(?P<line>\d+))?: ")


def annotate_config_error(exc: ConfigError, environ: Mapping[str, str], out: Callable[[str], None]) -> None:
    """In GitHub Actions, a stage file or qualify.toml to blame is annotated at its line."""
    match = _WHERE.match(exc.message)
    if environ.get("GITHUB_ACTIONS") != "true" or match is None:
        return
    from qualify.report.github import escape_data, escape_property

    path = Path(match["file"])
    workspace = environ.get("GITHUB_WORKSPACE")
    if workspace and path.is_absolute() and path.is_relative_to(workspace):
        path = path.relative_to(workspace)
    where = f"file={escape_property(str(path))}" + (f",line={match['line']}" if match["line"] else "")
    text = exc.message[match.end() :] + (f" ({exc.hint})" if exc.hint else "")
    out(f"::error {where},title={escape_property('qualify: the plan is refused')}::{escape_data(text)}")


app = typer.Typer(
    cls=QualifyGroup,
    help="Qualify a toolchain move of a GPU inference engine packaged as a Nix flake.",
    no_args_is_help=True,
    # `qualify --install-completion` (bash, zsh, fish), `--show-completion` to print the script.
    add_completion=True,
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
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    _state["debug"] = debug


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point: SIGTERM stops a run as cleanly as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _terminate)
    # `qualify` alone asks for the help: shown, and not an error.
    # prog_name: `python -m qualify` is still `qualify` in its help and completion script.
    app(args=nix_style_overrides(sys.argv[1:]) or ["--help"], prog_name="qualify")


def nix_style_overrides(args: list[str]) -> list[str]:
    """`--override-input NAME FLAKEREF` and `--nix-option NAME VALUE`, spelt as nix spells its
    own (`--option NAME VALUE`), turned into the NAME=VALUE form."""
    out: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        pair = args[i + 1 : i + 3]
        if (
            word in ("--override-input", "--nix-option")
            and len(pair) == 2
            and "=" not in pair[0]
            and not pair[1].startswith("-")
        ):
            out += [word, f"{pair[0]}={pair[1]}"]
            i += 3
            continue
        out.append(word)
        i += 1
    return out

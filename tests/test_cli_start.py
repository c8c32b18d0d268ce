"""The CLI starts without the heavy libraries: `qualify --version`, `--help`, `qualify plan` and
`qualify kinds` read declarations only, and the stages' implementations (pandas, numpy,
matplotlib, scipy, pyarrow, httpx, numba) are imported when a check runs or is judged. The
commands are declared without what their bodies use: importing `qualify.cli` loads neither the
records' models (pydantic), the reports' templates (jinja2) nor rich, and `--version` and
`--help` run without them; `qualify plan` defines none of qualify's record models.

Checked on what a real process has imported when the command returns, not on a time: a timed
assertion fails on a busy machine; `benchmarks/cli_start.py` measures the time.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import PY, REPO, qualify_proc

HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "pyarrow", "httpx", "numba")
#: What only a command's body needs: the records' and evidence's models, the report templates,
#: the console's renderer.
BODIES = ("pydantic", "jinja2", "rich")


def test_help_lists_every_command_with_its_help() -> None:
    """Declared apart from what they run, the commands are all still there, each with the first
    words of its docstring."""
    from typer.main import get_command

    from qualify.cli import app

    done = qualify_proc("--help")
    assert done.returncode == 0, done.stderr
    listed = dict(
        line.split(maxsplit=1) for line in done.stdout.partition("Commands:")[2].splitlines() if line.strip()
    )
    commands = get_command(app).commands  # the group's
    assert sorted(listed) == sorted(commands)
    for name, command in commands.items():
        assert command.help and listed[name].startswith(command.help.split()[0]), name


# The console script's path (qualify.cli.main), then on stderr the libraries imported and the
# pydantic models qualify's own modules define (the records' and the evidence's types).
PROBE = """
import json, sys
from qualify.cli import main
sys.argv = ["qualify", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
base = getattr(sys.modules.get("pydantic"), "BaseModel", None)
models = [
    f"{name}.{k}"
    for name, module in list(sys.modules.items()) if base is not None and name.startswith("qualify.")
    for k, v in vars(module).items()
    if isinstance(v, type) and issubclass(v, base) and v.__module__ == name
]
print("IMPORTED " + json.dumps({"libraries": heavy, "models": sorted(models)}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY + BODIES))


def probed(*args: str) -> dict[str, list[str]]:
    """What a real `qualify ARGS` process has imported when the command returns: `libraries`
    (of HEAVY and BODIES) and `models` (qualify's pydantic models)."""
    done = subprocess.run(
        [PY, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")), None)
    assert line is not None, done.stderr
    found: dict[str, list[str]] = json.loads(line.removeprefix("IMPORTED "))
    return found


def imported_heavy(*args: str, of: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of `of` a real `qualify ARGS` process has imported when the command returns."""
    return [name for name in probed(*args)["libraries"] if name in of]


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("plan", "-C", "examples/llama-cpp"),
        ("plan", "-C", "examples/llama-cpp", "--profile", "quick", "--json"),
        ("kinds",),
    ],
    ids=["version", "help", "plan", "plan-json", "kinds"],
)
def test_start_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    assert imported_heavy(*args) == []


def test_the_commands_are_declared_without_what_their_bodies_import() -> None:
    """Every command registered, in a fresh process: none of the libraries only a command's
    body uses is loaded, nor any stage or record module."""
    code = (
        "import json, sys; import qualify.cli; from typer.main import get_command; "
        "from qualify.cli.app import app; get_command(app); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    loaded = json.loads(done.stdout)
    assert sorted({n.split(".")[0] for n in loaded} & set(HEAVY + BODIES)) == []
    # Nor what a command's body reads: the kinds, the stages, the reports, a run's records.
    bodies = ("kinds", "report", "build", "compile", "numerics", "serving", "soak", "bench")
    ours = [n.split(".") for n in loaded if n.startswith("qualify.")]
    assert [".".join(n) for n in ours if n[1] in bodies] == []
    assert [".".join(n) for n in ours if n[1] == "pipeline" and len(n) > 2] == ["qualify.pipeline.events"]


@pytest.mark.parametrize("args", [("--version",), ("--help",)], ids=["version", "help"])
def test_version_and_help_run_without_what_the_bodies_import(args: tuple[str, ...]) -> None:
    """(A command's own --help is parsed by typer, which converts the options' values through
    pydantic in its version 0.29: that is typer's import, not a command body's.)"""
    assert imported_heavy(*args, of=BODIES) == []


def test_plan_defines_no_record_model() -> None:
    """`qualify plan` reads the project's TOML and qualify's declarations, never a run: no record
    or evidence model of qualify's is built (typer may import pydantic for its own conversion
    of the arguments; that is typer's, not a record's)."""
    assert probed("plan", "-C", "examples/llama-cpp")["models"] == []
    # The probe sees them where they are: `kinds --json` shows each kind's evidence types.
    assert "qualify.checks.evidence.Evidence" in probed("kinds", "--json")["models"]


def test_the_probe_sees_a_stage_implementation() -> None:
    """The check above could pass by looking wrong; a kind's implementation, once loaded, shows."""
    code = (
        "import sys; from qualify.kinds import KINDS; from qualify.bench.check import judge; "
        f"print(sorted({{n.split('.')[0] for n in sys.modules}} & set({HEAVY!r})))"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert "pandas" in done.stdout


def test_every_kind_is_bound_to_its_implementation() -> None:
    from qualify.kinds import KINDS

    for kind in KINDS:
        assert kind.implementation is not None, kind.name
        measure, judge = kind.implementation()
        assert callable(measure) and callable(judge), kind.name

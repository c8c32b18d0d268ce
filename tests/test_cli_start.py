"""The CLI starts without the heavy libraries: `qualify --version`, `--help`, `qualify plan` and
`qualify kinds` read declarations only, and the stages' implementations (pandas, numpy,
matplotlib, scipy, pyarrow, httpx, numba) are imported when a check runs or is judged.

Checked on what a real process has imported when the command returns, not on a time: a timed
assertion fails on a busy machine; `benchmarks/cli_start.py` measures the time.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import PY, REPO

HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "pyarrow", "httpx", "numba")

# The console script's path (qualify.cli.main), then the names of what was imported, on stderr.
PROBE = """
import json, sys
from qualify.cli import main
sys.argv = ["qualify", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
print("IMPORTED " + json.dumps(heavy), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def imported_heavy(*args: str) -> list[str]:
    done = subprocess.run(
        [PY, "-c", PROBE, *args], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("IMPORTED ")), None)
    assert line is not None, done.stderr
    names: list[str] = json.loads(line.removeprefix("IMPORTED "))
    return names


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

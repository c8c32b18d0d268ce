"""The built wheel, installed in a fresh virtual environment, finds stages/ and reports/."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import REPO


@pytest.mark.slow
def test_wheel_ships_the_default_plan_and_report_templates(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("qualify-*.whl"))
    # A fresh venv with the wheel and its dependencies (from pip's cache after set-up): the
    # checkout is not importable from there, so every file found comes from the wheel.
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import json, qualify, qualify.core.resources as r;"
        "print(json.dumps({'pkg': qualify.__file__, 'stages': str(r.data_dir('stages')),"
        " 'reports': str(r.data_dir('reports'))}))"
    )
    out = subprocess.run([str(python), "-c", probe], cwd=tmp_path, check=True, capture_output=True, text=True)
    where = json.loads(out.stdout)
    site = str(env_dir)
    assert where["pkg"].startswith(site), where
    assert where["stages"].startswith(site) and where["reports"].startswith(site)
    assert (Path(where["stages"]) / "20-compile.toml").is_file()
    assert (Path(where["reports"]) / "report.html.j2").is_file()
    plan = subprocess.run(
        [str(env_dir / "bin" / "qualify"), "plan"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    assert plan.returncode == 0, plan.stderr
    assert "operator-tests" in plan.stdout
    for stage in ("10-build", "20-compile", "30-numerics", "40-serving", "50-soak", "60-bench"):
        assert stage in plan.stdout, stage  # the default plan configures every stage
    # The installed qualify runs a plan and renders the report with its own templates.
    project = tmp_path / "proj"
    init = subprocess.run(
        [str(env_dir / "bin" / "qualify"), "init", str(project)], capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    # This project has no flake to build and no engine: one command check is its whole plan.
    for stage in (project / "stages").glob("*.toml"):
        stage.unlink()
    (project / "stages" / "20-compile.toml").write_text(
        '[[check]]\nkind = "command"\nname = "hello"\nrun = "echo hello"\n'
    )
    run = subprocess.run(
        [str(env_dir / "bin" / "qualify"), "run", "--candidate", "candidate", "-C", str(project)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 3, run.stdout + run.stderr
    reports = list((project / "runs").glob("*/report.html"))
    assert len(reports) == 1 and "hello" in reports[0].read_text()


#: A declared distribution's import name, where the two differ.
IMPORT_NAME = {"pyelftools": "elftools"}
#: Declared, used at run time, and never imported by name (with why).
UNNAMED = {"pyarrow": "the Parquet engine pandas reads and writes the run's tables with"}


def test_runtime_dependencies_are_what_qualify_imports() -> None:
    """Every runtime dependency is used by qualify (else it belongs in the test extras), and
    every library qualify imports is declared (not left to arrive with another one)."""
    import ast
    import re
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    imported: set[str] = set()
    for path in (REPO / "qualify").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"qualify", "__future__"}
    assert {IMPORT_NAME.get(d, d) for d in declared - set(UNNAMED)} == third_party

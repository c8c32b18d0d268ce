"""The built wheel, installed in a fresh virtual environment, finds stages/ and reports/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import REPO, built_wheel
from recorded_runs import unpack

#: The user the suite's checked commands run as (tests/conftest.py): its projects lie in root's
#: pytest folders, which `nobody` cannot reach.
SUITE_USER = {k: v for k, v in os.environ.items() if k == "QUALIFY_COMMAND_USER"}


@pytest.mark.slow
def test_wheel_ships_the_default_plan_and_report_templates(tmp_path: Path) -> None:
    wheel = built_wheel(tmp_path / "dist")
    # A fresh venv with the wheel and its dependencies (from pip's cache after set-up): the
    # checkout is not importable from there, so every file found comes from the wheel.
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", f"{wheel}[stages]"],
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
    for stage in (
        "10-build",
        "20-compile",
        "30-numerics",
        "40-serving",
        "50-soak",
        "60-bench",
        "70-distribution",
    ):
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
        env={"PATH": "/usr/bin:/bin", **SUITE_USER},
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
    runtime = [*project["dependencies"], *project["optional-dependencies"]["stages"]]
    declared = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in runtime}
    imported: set[str] = set()
    for path in (REPO / "qualify").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"qualify", "__future__"}
    assert {IMPORT_NAME.get(d, d) for d in declared - set(UNNAMED)} == third_party


def test_the_stages_extra_is_what_a_run_checks_for() -> None:
    import re
    import tomllib

    from qualify.pipeline.preflight import STAGE_LIBRARIES

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["stages"]
    assert {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in extra} == set(STAGE_LIBRARIES)
    assert {IMPORT_NAME.get(d, d) for d in STAGE_LIBRARIES} == set(STAGE_LIBRARIES.values())


@pytest.mark.slow
def test_the_core_alone_shows_reports_and_merges_and_a_run_asks_for_the_stages(tmp_path: Path) -> None:
    """The core alone (no numba, scipy, httpx, pyelftools) shows and renders a run, and merges it:
    but a merge re-judges each host from its measurements with the stages' judges, so without
    them every host is shown as not re-judged (never taken as its files say)."""

    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = next(dist.glob("qualify-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    have = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print([m for m in ('numba', 'scipy', 'httpx', "
         "'elftools', 'jsonschema') if u.find_spec(m)])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert have.stdout.strip() == "[]"
    archive = REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261201-162842-cuda135.tar.xz"
    run = unpack(archive, tmp_path / "runs")
    qualify = str(env_dir / "bin" / "qualify")
    env = {"PATH": "/usr/bin:/bin"}
    for args in (
        ["show", str(run)],
        ["report", str(run)],
        ["merge", str(run), "--out", str(tmp_path / "fleet")],
    ):
        done = subprocess.run([qualify, *args], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode in (0, 1, 3), (args, done.stderr)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, (args, done.stderr)
    assert (run / "report.html").is_file() and (tmp_path / "fleet" / "report.html").is_file()
    fleet = json.loads((tmp_path / "fleet" / "run.json").read_text())
    assert fleet["verdict"] == "INCOMPLETE" and "not re-judged" in json.dumps(fleet), fleet.get("verdict")
    refused = subprocess.run([qualify, "run", "-C", str(tmp_path)], capture_output=True, text=True, env=env)
    assert refused.returncode == 4 and "pip install 'qualify[stages]'" in refused.stderr


def test_the_sdist_holds_what_its_tests_read(tmp_path: Path) -> None:
    """Before, docs/ was left out and tests/test_kinds_doc.py failed from the sdist."""
    import tarfile

    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    [sdist] = tmp_path.glob("qualify-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {"/".join(n.split("/")[1:]) for n in archive.getnames()}
    for needed in (
        "docs/check-kinds.md",
        "docs/qualify-toml.md",
        ".ci/run",
        "LICENSE",
        "benchmarks/cli_start.py",
    ):
        assert needed in names, needed

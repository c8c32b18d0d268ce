"""The build stage against real nix (Debian's nix-bin) and fixture flakes without nixpkgs."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from conftest import qualify_proc
from nixflakes import NIX_CONFIG, git, have_nix, make_rocm_project

from qualify.core.nixbuilders import builders_unprotected

pytestmark = [pytest.mark.nix, pytest.mark.skipif(not have_nix(), reason="nix is not installed")]

PLAN = """
name = "build"
[[check]]
kind = "nix-build"
name = "arms"
"""

LATER = """
name = "compile"
[[check]]
kind = "command"
name = "uses-out"
roles = ["reference", "pinned", "candidate"]
run = "sh -c 'test -s {bin}/runtime-ref && cat {bin}/runtime-ref > {dir}/runtime-ref'"
"""


def run(project: Path, *args: str) -> tuple[int, Path, str]:
    os.environ["NIX_CONFIG"] = NIX_CONFIG
    proc = qualify_proc("run", *args, "--project", str(project))
    runs = sorted((project / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return proc.returncode, runs[-1], proc.stdout + proc.stderr


def result(run_dir: Path, folder: str = "10-build", check: str = "arms") -> dict:
    return json.loads((run_dir / folder / check / "result.json").read_text())


def table(res: dict, title_start: str) -> list[list]:
    return next(t["rows"] for t in res["tables"] if t["title"].startswith(title_start))


@pytest.fixture(scope="module")
def rocm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int, str]:
    project = make_rocm_project(tmp_path_factory.mktemp("rocm"), PLAN)
    (project / "stages" / "20-compile.toml").write_text(LATER)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "later stage")
    code, run_dir, out = run(project, "--candidate", "rocm10")
    return project, run_dir, code, out


def test_arms_are_built_from_one_locked_revision(rocm_run: tuple[Path, Path, int, str]) -> None:
    project, run_dir, code, out = rocm_run
    res = result(run_dir)
    assert res["verdict"] == "PASS", out
    source = json.loads((run_dir / "10-build" / "arms" / "source.json").read_text())
    assert source["revision"] and source["dirty"] is False
    assert f"rev={source['revision']}" in source["locked_url"]
    assert source["nix_version"].startswith("nix (")
    roles = json.loads((run_dir / "run.json").read_text())["roles"]
    for role in ("pinned", "candidate", "reference"):
        measurement = json.loads((run_dir / "10-build" / "arms" / role / "measurement.json").read_text())
        assert measurement["ref"].startswith(source["locked_url"] + "#")
        link = run_dir / "gcroots" / role
        assert link.is_symlink() and link.readlink().exists()
        assert roles[role]["out"] == str(link.readlink()) and roles[role]["drv"].endswith(".drv")
    # How nix ran the flake's builders here, among what the host did not give, as nix says.
    missing = json.loads((run_dir / "run.json").read_text())["containment"].get("missing", "")
    builders = builders_unprotected()
    assert (builders in missing) if builders else ("nix's builders" not in missing), missing
    # The later stage got {bin} from the build.
    later = json.loads((run_dir / "20-compile" / "stage.json").read_text())
    assert later["verdict"] == "PASS", later
    assert (
        "rocm-runtime-10.1.0"
        in (run_dir / "20-compile" / "uses-out" / "candidate" / "runtime-ref").read_text()
    )


def test_derivations_built_are_counted_and_timed(rocm_run: tuple[Path, Path, int, str]) -> None:
    _, run_dir, _, _ = rocm_run
    pinned = json.loads((run_dir / "10-build" / "arms" / "pinned" / "measurement.json").read_text())
    names = [Path(b["drv"]).name.split("-", 1)[1] for b in pinned["built"]]
    # The store is fresh for this nonce: every derivation of the arm was built, once each.
    assert "engine-1.0.drv" in names and "rocm-core-7.2.3.drv" in names
    assert len(names) == len(set(names))
    assert all(b["seconds"] is not None and b["seconds"] >= 0 for b in pinned["built"])
    assert (run_dir / "10-build" / "arms" / "logs" / "pinned-build.log").is_file()


def test_dry_run_reports_shared_and_exclusive_work(rocm_run: tuple[Path, Path, int, str]) -> None:
    _, run_dir, _, _ = rocm_run
    plan = json.loads((run_dir / "10-build" / "arms" / "plan.json").read_text())["roles"]
    shared = {Path(p).name.split("-", 1)[1] for p in plan["candidate"]["shared"]}
    assert "zlib-1.3.drv" in shared  # identical in both package sets
    exclusive = {Path(p).name.split("-", 1)[1] for p in plan["candidate"]["exclusive"]}
    assert "rocm-core-10.1.0.drv" in exclusive and "hipblaslt-10.1.0.drv" in exclusive


def test_closure_diff_classifies_every_change(rocm_run: tuple[Path, Path, int, str]) -> None:
    _, run_dir, _, _ = rocm_run
    with (run_dir / "10-build" / "arms" / "build-closure-diff.csv").open() as handle:
        rows = {(r["pname"], r["output"]): r for r in csv.DictReader(handle)}
    assert rows[("rocm-core", "drv")]["change"] == "upgraded"
    assert rows[("rocm-core", "drv")]["right_versions"] == "10.1.0"
    assert rows[("clang", "drv")]["change"] == "upgraded"  # 20.0.0-rocm -> 22.0.0-rocm
    assert rows[("zlib", "drv")]["change"] == "identical"
    assert rows[("openssl", "drv")]["change"] == "rebuilt"
    assert rows[("rocm-smi", "drv")]["change"] == "removed"
    assert rows[("hipblaslt", "drv")]["change"] == "added"
    with (run_dir / "10-build" / "arms" / "runtime-closure-diff.csv").open() as handle:
        runtime = {r["pname"]: r for r in csv.DictReader(handle)}
    assert runtime["rocm-runtime"]["change"] == "upgraded"
    assert runtime["zlib"]["change"] == "identical"
    assert int(runtime["rocm-runtime"]["right_size"]) > 0


def test_toolchain_versions_and_inputs(rocm_run: tuple[Path, Path, int, str]) -> None:
    _, run_dir, _, _ = rocm_run
    res = result(run_dir)
    toolchain = {row[0]: row[1:] for row in table(res, "Toolchain")}
    assert toolchain["rocm-core"][:2] == ["7.2.3", "10.1.0"]
    assert toolchain["clang-rocm"][:2] == ["20.0.0", "22.0.0"]
    assert toolchain["rocm-runtime"][:2] == ["7.2.3", "10.1.0"]
    inputs = json.loads((run_dir / "10-build" / "arms" / "candidate" / "inputs.json").read_text())
    assert list(inputs["inputs"]) == ["nixpkgs-rocm10"] and inputs["method"].startswith("probe")
    pinned = json.loads((run_dir / "10-build" / "arms" / "pinned" / "inputs.json").read_text())
    assert list(pinned["inputs"]) == ["nixpkgs"]
    assert pinned["inputs"]["nixpkgs"]["narHash"].startswith("sha256-")
    reference = json.loads((run_dir / "10-build" / "arms" / "reference" / "inputs.json").read_text())
    assert reference["method"].startswith("declared")
    rows = {row[0]: row for row in table(res, "Flake inputs")}
    assert rows["narHash"][3] == "differs"


def test_report_has_the_build_tables(rocm_run: tuple[Path, Path, int, str]) -> None:
    _, run_dir, _, _ = rocm_run
    html = (run_dir / "report.html").read_text()
    for text in (
        "Toolchain (build-time closure)",
        "Build-time closure: pinned → candidate",
        "Flake inputs",
        "Build plan (dry run before building)",
    ):
        assert text in html


def test_unchanged_build_is_kept_on_rerun(rocm_run: tuple[Path, Path, int, str]) -> None:
    project, run_dir, _, _ = rocm_run
    os.environ["NIX_CONFIG"] = NIX_CONFIG
    proc = qualify_proc("run", "--run", run_dir.name, "--only", "build", "--project", str(project))
    assert "kept (PASS with unchanged inputs" in proc.stdout, proc.stdout + proc.stderr
    stage = json.loads((run_dir / "10-build" / "stage.json").read_text())
    assert stage["attempt"] == 1


def test_failed_candidate_build_names_the_derivation(rocm_project: Path) -> None:
    (rocm_project / "stages" / "20-compile.toml").write_text(LATER.replace('"reference", ', ""))
    try:
        code, run_dir, out = run(rocm_project, "--candidate", "broken", "--allow-dirty")
    finally:
        (rocm_project / "stages" / "20-compile.toml").unlink()
    assert code == 1, out
    res = result(run_dir)
    assert res["verdict"] == "FAIL"
    failure = next(f for f in res["findings"] if f["role"] == "candidate" and f["verdict"] == "FAIL")
    assert "build failed in" in failure["message"] and "engine-1.0.drv" in failure["message"]
    assert "vgpr overflow" in failure["message"]
    pinned = json.loads((run_dir / "10-build" / "arms" / "pinned" / "measurement.json").read_text())
    assert pinned["ok"] and (run_dir / "gcroots" / "pinned").exists()  # the other arm is kept
    assert json.loads((run_dir / "20-compile" / "stage.json").read_text())["verdict"] == "BLOCKED"


def test_mixed_toolchain_fails_the_candidate(rocm_project: Path) -> None:
    code, run_dir, out = run(rocm_project, "--candidate", "mixed")
    res = result(run_dir)
    assert res["verdict"] == "FAIL", out
    assert any(
        "mixed toolchain: rocm-runtime in 2 versions (10.1.0, 7.2.3)" in f["message"] for f in res["findings"]
    )


def test_dirty_tree_is_refused_unless_allowed(rocm_project: Path) -> None:
    readme = rocm_project / "README"
    readme.write_text("uncommitted\n")
    git(rocm_project, "add", "README")
    try:
        # Refused before anything runs: no run directory, no build.
        runs = rocm_project / "runs"
        before = set(runs.iterdir()) if runs.exists() else set()
        done = qualify_proc("run", "--candidate", "rocm10", "--project", str(rocm_project))
        assert done.returncode == 4, done.stdout + done.stderr
        said = " ".join((done.stdout + done.stderr).split())
        assert "uncommitted changes to tracked files (README)" in said and "--allow-dirty" in said
        assert (set(runs.iterdir()) if runs.exists() else set()) == before
        code, run_dir, out = run(rocm_project, "--candidate", "rocm10", "--allow-dirty")
        res = result(run_dir)
        assert res["verdict"] == "WARN", out
        assert "dirty tree" in res["reason"]
        assert "uncommitted changes" in (run_dir / "report.html").read_text()
    finally:
        git(rocm_project, "rm", "-qf", "README")


def test_override_input_replaces_it_for_the_candidate_only(rocm_project: Path) -> None:
    fixed = rocm_project.parent / "pkgs-rocm10-fix"
    code, run_dir, out = run(
        rocm_project, "--candidate", "rocm10", "--override-input", f"nixpkgs-rocm10=path:{fixed}"
    )
    res = result(run_dir)
    assert res["verdict"] == "PASS", out
    toolchain = {row[0]: row[1:] for row in table(res, "Toolchain")}
    assert toolchain["rocm-core"][:2] == ["7.2.3", "10.1.1"]
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["options"]["override_inputs"] == [["nixpkgs-rocm10", f"path:{fixed}"]]
    candidate = json.loads((run_dir / "10-build" / "arms" / "candidate" / "measurement.json").read_text())
    assert "--override-input" in candidate["extra_args"]
    pinned = json.loads((run_dir / "10-build" / "arms" / "pinned" / "measurement.json").read_text())
    assert "--override-input" not in pinned["extra_args"]

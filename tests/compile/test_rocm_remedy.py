"""`qualify remedy` for real on the compile stage's ROCm slice: ggml's q4_K MMQ instance, `mmvq.cu`
and the head-size-128 tile flash-attention instance, built by ROCm 6.4.3 (pinned) and 7.2.4
(candidate) as in tests/compile/test_rocm_ggml.py, judged by `qualify run`, then rebuilt by the
ROCm example's own `remedy-true16-off` units (flake.nix: each source compiled for gfx1151 by the
7.2.4 root with ggml's flags and real true16 off) through nix and compared kernel by kernel.

Everything is real: the objects, the toolchain roots (the candidate's added to the nix store from
the tree the slice was compiled with), the units' nix builds and the toolchain's own
llvm-objdump. Only the two roles' folders stand in for the arms' out paths, as in the slice's
other tests: they hold the slice's objects, not whole libraries.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from conftest import Project, qualify_proc
from ggml_rocm import EXAMPLE, TARGET, Builds, both_roots, load_toolchain, role_tree, slice_builds
from ggml_sdist import sdist_path
from rocm_store import add_source, add_tree
from test_amdgpu_mix import wrapper

pytestmark = [pytest.mark.slow, pytest.mark.nix]
TOOLCHAIN = load_toolchain()
PINNED, CANDIDATE = TOOLCHAIN.PINNED, TOOLCHAIN.CANDIDATE


@pytest.fixture(scope="module")
def roots() -> dict[str, Path]:
    return both_roots()


@pytest.fixture(scope="module")
def builds(roots: dict[str, Path]) -> Builds:
    return slice_builds(roots)


def without_build_time(answer: dict) -> dict:
    """A remedy's answer per variant, without the seconds its own invocation spent building."""
    return {
        name: {k: v for k, v in variant.items() if k != "build_seconds"}
        for name, variant in answer["variants"].items()
    }


def test_true16_off_is_tried_on_every_failing_source_and_judged(
    roots: dict[str, Path], builds: Builds, tmp_path: Path
) -> None:
    sdist = sdist_path()
    assert sdist is not None  # slice_builds skipped otherwise
    add_tree(f"rocm-root-{CANDIDATE}", roots[CANDIDATE])
    add_source(sdist)
    p = Project(tmp_path / "proj")
    (p.root / "stages").mkdir(parents=True)
    only = {k: b for k, b in builds.items() if k[1] == TARGET}  # the units are gfx1151's
    pinned, candidate = role_tree(tmp_path / "p", PINNED, only), role_tree(tmp_path / "c", CANDIDATE, only)
    (p.root / "qualify.toml").write_text(
        textwrap.dedent(
            f"""
            plan = "stages"
            [arms.pinned]
            installable = ".#default"
            vars = {{ tree = "{pinned}" }}
            [arms.rocm72]
            installable = ".#rocm72"
            vars = {{ tree = "{candidate}" }}
            [remedies.true16-off]
            installable = "{EXAMPLE}#remedy-true16-off"
            flags = "-Xclang -target-feature -Xclang -real-true16"
            """
        )
    )
    p.stage(
        "20-compile.toml",
        f"""
        [[check]]
        kind = "kernel-resources"
        name = "kernels"
        root = "{{tree}}"
        host_patterns = []
        require = ["amdgpu"]
        objdump = "{wrapper(roots, tmp_path)}"
        """,
    )
    proc = qualify_proc("run", "--candidate", "rocm72", "--project", str(p.root))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the compile stage fails
    run = p.run_dirs()[0]
    check = run / "20-compile" / "kernels"
    table = pd.read_parquet(check / "candidate" / "amdgpu.parquet")
    assert set(table["source_file"]) == {b.source.name for b in only.values()}  # tied by the library
    diff = pd.read_parquet(check / "diff.parquet")
    failing = set(diff.loc[diff["severity"] == "FAIL", "key"])
    files_failing = set(table.loc[table["key"].isin(failing), "source_file"])
    assert failing and files_failing

    done = qualify_proc("remedy", run.name, "--json", "--project", str(p.root))
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout)
    assert {f["source_file"] for f in said["failing"]} == files_failing
    variant = said["variants"]["true16-off"]
    assert variant["not_built"] == {}
    outcomes = {o["source_file"]: o for o in variant["sources"]}
    assert set(outcomes) == files_failing
    for file, outcome in outcomes.items():
        own = table[table["source_file"] == file]
        assert outcome["missing"] == outcome["extra"] == 0, outcome  # the unit is the file's kernels
        assert outcome["recovered"] + outcome["still_failing"] == outcome["failing_before"] > 0
        assert outcome["failing_before"] == len(set(own["key"]) & failing)
    # The flag did what it says: the candidate uses high halves of 16-bit registers, the units none.
    folder = Path(said["remedy_dir"])
    units = [pd.read_parquet(p) for p in folder.glob("true16-off/*/1/amdgpu.parquet")]
    assert len(units) == len(files_failing)
    assert table.loc[table["source_file"].isin(files_failing), "high16_operands"].sum() > 0
    assert sum(int(u["high16_operands"].sum()) for u in units) == 0
    print(
        json.dumps(variant["totals"]), {f: (o["recovered"], o["newly_broken"]) for f, o in outcomes.items()}
    )

    # Again: every unit is read from the remedy's folder, none built, and the answer is the same.
    again = qualify_proc("remedy", run.name, "--json", "--project", str(p.root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "building" not in again.stderr
    assert json.loads(again.stdout)["variants"] == said["variants"]
    state = json.loads((folder / "remedy.json").read_text())
    assert {u["attempt"] for u in state["units"]} == {1}
    judged = qualify_proc("remedy", run.name, "--no-build", "--json", "--project", str(p.root))
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert json.loads(judged.stdout)["variants"] == said["variants"]

    # A unit saved from another derivation (the variant's flags changed in the flake since) is
    # built again, never judged by the objects of the flags it had.
    first = state["units"][0]
    first["drv"] = "/nix/store/00000000000000000000000000000000-remedy-unit-of-other-flags.drv"
    (folder / "remedy.json").write_text(json.dumps(state))
    rebuilt = qualify_proc("remedy", run.name, "--json", "--project", str(p.root))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "the variant now gives" in " ".join(rebuilt.stderr.split())
    # The same judgement; only the time this invocation spent building differs (one unit now).
    assert without_build_time(json.loads(rebuilt.stdout)) == without_build_time(said)
    attempts = {
        (u["source_file"], u["attempt"]) for u in json.loads((folder / "remedy.json").read_text())["units"]
    }
    assert (first["source_file"], 2) in attempts
    assert sum(1 for _, a in attempts if a == 2) == 1

"""The compile stage's CUDA path on real ggml kernels: CUDA 13.0.88 (pinned) against 13.5.37
(candidate) for sm_90, judged by the real `kernel-resources` check through `qualify run`.

Everything is real. The sources are llama.cpp's own (`vendor/llama.cpp/ggml` of the
llama-cpp-python 0.3.36 sdist that `make example` puts in the nix store): `mmvq.cu`, one MMQ
and one vector flash-attention template instance. The compilers are NVIDIA's nvcc, ptxas and
cicc from PyPI wheels pinned by sha256 (examples/llama-cpp-cuda/cuda_toolchain.py), run with
ggml's CMake flags; each writes a cubin and its `ptxas -v` report. Both builds' instruction
mix is decoded by the candidate's cuobjdump, with the nvdisasm of its release. Every figure
asserted is read back by a second tool on the same files (cuobjdump, nvdisasm's JSON, and a
regular expression on ptxas's report) or derived from the first judgement; none is written
here. Outputs are cached under test-artifacts/cuda keyed by toolchain, source and flags: the
first run compiles for about two minutes on two idle cores (195 s of CPU), later runs read the
cache.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import Project, qualify_proc
from cuda_wheels import NVDISASM, load_toolchain, nvdisasm_wheel, wheel_tree
from ggml_cuda import TOOLCHAINS, Build, compile_all, ggml_tree
from ggml_sdist import sdist_path
from test_sass_mix import decoded_mix

from qualify.compile.cubin import read_cubin
from qualify.compile.cudanames import display_name
from qualify.compile.instmix import CLASSES
from qualify.compile.ptxaslog import read_ptxas_log

pytestmark = pytest.mark.slow
PINNED, CANDIDATE = TOOLCHAINS
Builds = dict[tuple[str, str], Build]


@pytest.fixture(scope="module")
def trees() -> dict[str, Path]:
    return {version: wheel_tree(version) for version in TOOLCHAINS}


@pytest.fixture(scope="module")
def builds(trees: dict[str, Path]) -> Builds:
    sdist = sdist_path()
    if sdist is None:
        pytest.skip("the llama-cpp-python 0.3.36 sdist is not in the nix store (`make example` adds it)")
    return compile_all(ggml_tree(sdist), trees)


def role_tree(root: Path, version: str, builds: Builds) -> Path:
    """An out-path-like tree of one toolchain's outputs: lib/<stem>.cubin, share/<stem>.log."""
    (root / "lib").mkdir(parents=True)
    (root / "share").mkdir()
    for (v, _), build in sorted(builds.items()):
        if v == version:
            shutil.copy(build.cubin, root / "lib" / f"{build.stem}.cubin")
            shutil.copy(build.log, root / "share" / f"{build.stem}.log")
    return root


@dataclass
class Judge:
    """Runs `qualify run` on plans of one kernel-resources check, each in a project of its own."""

    root: Path
    made: int = 0

    def __call__(
        self, pinned: Path, candidate: Path, limits: str = "", cuobjdump: str = ""
    ) -> tuple[dict[str, Any], Path]:
        """One run; `cuobjdump` the check's decoder for the instruction mix (empty: no mix)."""
        self.made += 1
        p = Project(self.root / f"proj{self.made}")
        (p.root / "stages").mkdir(parents=True)
        arms = f"""
            plan = "stages"
            [arms.pinned]
            installable = ".#cuda13_0"
            vars = {{ tree = "{pinned}" }}
            [arms.cand]
            installable = ".#cuda13_5"
            vars = {{ tree = "{candidate}" }}
            """
        (p.root / "qualify.toml").write_text(textwrap.dedent(arms))
        logs = ", ".join(f'"{{tree}}/share/{log.name}"' for log in sorted((pinned / "share").glob("*.log")))
        p.stage(
            "20-compile.toml",
            f"""
            [[check]]
            kind = "kernel-resources"
            name = "kernels"
            root = "{{tree}}"
            ptxas_logs = [{logs}]
            host_patterns = []
            require = ["cuda"]
            cuobjdump = "{cuobjdump}"
            {limits}
            """,
        )
        proc = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
        assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
        check = p.run_dirs()[0] / "20-compile" / "kernels"
        return json.loads((check / "result.json").read_text()), check


@dataclass
class Judged:
    judge: Judge
    pinned: Path
    candidate: Path
    result: dict[str, Any]
    table: pd.DataFrame
    decoder: Path


def candidate_decoder(folder: Path, tree: Path) -> Path:
    """The candidate toolchain's cuobjdump, given the nvdisasm of its release (which it runs
    for SASS, and which no toolchain wheel carries) through NVDISASM_PATH."""
    assert NVDISASM[1] == CANDIDATE  # the decoder is the candidate's release
    wrapper = folder / "cuobjdump"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"NVDISASM_PATH={shlex.quote(str(nvdisasm_wheel().parent))}\n"
        "export NVDISASM_PATH\n"
        f'exec {shlex.quote(str(tree / "bin" / "cuobjdump"))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture(scope="module")
def judged(builds: Builds, trees: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """13.0.88's outputs as pinned, 13.5.37's as candidate, judged at the default limits, both
    builds' instruction mix decoded by the candidate's cuobjdump."""
    root = tmp_path_factory.mktemp("ggml-judged")
    judge = Judge(root)
    pinned = role_tree(root / "pinned", PINNED, builds)
    candidate = role_tree(root / "candidate", CANDIDATE, builds)
    decoder = candidate_decoder(root, trees[CANDIDATE])
    result, check = judge(pinned, candidate, cuobjdump=str(decoder))
    assert result["verdict"] != "ERROR", result["reason"]
    return Judged(judge, pinned, candidate, result, pd.read_parquet(check / "diff.parquet"), decoder)


def messages(result: dict[str, Any], verdict: str) -> list[str]:
    return [f["message"] for f in result["findings"] if f["verdict"] == verdict]


REPORT = re.compile(
    r"Compiling entry function '(?P<name>[^']+)' for 'sm_90'\n"
    r"ptxas info *: Function properties for (?P=name)\n"
    r" +(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads\n"
    r"ptxas info *: Used (\d+) registers"
)


def report_figures(log: Path) -> dict[str, tuple[int, int, int, int]]:
    """(registers, stack frame, spill stores, spill loads) per entry as ptxas printed them, read
    with a regular expression of its own (every entry of these sources has all four)."""
    found = REPORT.findall(log.read_text())
    return {
        name: (int(regs), int(stack), int(stores), int(loads)) for name, stack, stores, loads, regs in found
    }


def cuobjdump_registers(tree: Path, cubin: Path) -> dict[str, int]:
    """REG per function as the toolchain's own cuobjdump prints it."""
    argv = [str(tree / "bin" / "cuobjdump"), "--dump-resource-usage", str(cubin)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {name: int(count) for name, count in re.findall(r"Function (\S+):\n\s+REG:(\d+)", out)}


def test_the_trees_are_the_pinned_ones(trees: dict[str, Path]) -> None:
    toolchain = load_toolchain()
    for version, tree in trees.items():
        assert toolchain.check(version, tree) is None  # its NAR hash, computed here, is the pinned one
        out = subprocess.run([str(tree / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
        assert f"V{version}" in out.stdout
        assert not list(tree.rglob("libnvvm.so*")) and (tree / "nvvm" / "bin" / "cicc").is_file()
        if shutil.which("nix-hash"):
            argv = ["nix-hash", "--type", "sha256", "--base32", str(tree)]
            nix = subprocess.run(argv, capture_output=True, text=True, check=True)
            assert nix.stdout.strip() == toolchain.TOOLCHAINS[version].nar_sha256


def test_cubins_reports_and_cuobjdump_agree_kernel_by_kernel(builds: Builds, trees: dict[str, Path]) -> None:
    for (version, _), build in sorted(builds.items()):
        kernels = {k.name: k for k in read_cubin(build.cubin.read_bytes(), str(build.cubin))}
        usage = read_ptxas_log(build.log.read_text(), str(build.log))
        report = report_figures(build.log)
        tool = cuobjdump_registers(trees[version], build.cubin)
        assert len(kernels) > 0, build
        assert set(kernels) == set(report) == set(tool) == {n for (_, n), u in usage.items() if u.entry}
        for name, kernel in kernels.items():
            ptxas = usage[("sm_90", name)]
            figures = (ptxas.registers, ptxas.stack_frame, ptxas.spill_stores, ptxas.spill_loads)
            assert figures == report[name], (build, name)
            assert kernel.registers == tool[name] == report[name][0] > 0, (build, name)
            assert kernel.stack == report[name][1], (build, name)


def test_the_candidate_is_judged_kernel_by_kernel(judged: Judged, builds: Builds) -> None:
    result, table = judged.result, judged.table
    counts = result["facts"]["counts"]
    names = {k.name for p in (judged.pinned / "lib").iterdir() for k in read_cubin(p.read_bytes(), p.name)}
    assert counts["pinned"]["cuda"] == counts["candidate"]["cuda"] == len(names) > 300
    # Every kernel matched by name: one row each, with both sides' figures.
    assert sorted(table["key"]) == sorted(names)
    assert table["pinned_registers"].notna().all() and table["candidate_registers"].notna().all()
    # The register changes the judgement lists are the ones ptxas reported for the two builds.
    before: dict[str, tuple[int, int, int, int]] = {}
    after: dict[str, tuple[int, int, int, int]] = {}
    for (version, _), build in builds.items():
        (before if version == PINNED else after).update(report_figures(build.log))
    changed = {name for name in before if before[name][0] != after[name][0]}
    listed = set(table.loc[table["reasons"].str.contains("registers"), "key"])
    assert changed == listed and changed  # nvcc 13.5 allocates registers differently
    # What 13.5 does to these kernels, as measured: some lose occupancy to registers (FAIL at
    # the default max_occupancy_drop of 0), more grow registers in the same occupancy (WARN).
    assert result["verdict"] == "FAIL"
    failed = messages(result, "FAIL")
    assert failed and all("mul_mat_vec_q" in m and "limited by registers" in m for m in failed)
    assert any("registers" in m and "keeps occupancy" in m for m in messages(result, "WARN"))
    # Spill bytes are ptxas's, per side; the one kernel that spills (an MMQ tile) spills alike
    # in both builds, so no spill is a finding.
    for side, figures in (("pinned", before), ("candidate", after)):
        spills = dict(zip(table["key"], table[f"{side}_spill_store_bytes"], strict=True))
        assert spills == {name: f[2] for name, f in figures.items()}, side
    spilling = [name for name, f in before.items() if f[2]]
    assert (
        len(spilling) == 1 and "mul_mat_q" in spilling[0] and after[spilling[0]][2] == before[spilling[0]][2]
    )
    assert not table["reasons"].str.contains("spill").any()


def test_the_occupancy_limit_passes_at_the_measured_drop_and_fails_below(judged: Judged) -> None:
    table = judged.table
    drops = dict(zip(table["key"], table["pinned_occupancy"] - table["candidate_occupancy"], strict=True))
    worst = max(drops.values())
    assert worst > 0
    allowed, _ = judged.judge(judged.pinned, judged.candidate, f"limits = {{ max_occupancy_drop = {worst} }}")
    assert allowed["verdict"] == "WARN", allowed["reason"]
    tight, _ = judged.judge(
        judged.pinned, judged.candidate, f"limits = {{ max_occupancy_drop = {worst - 1} }}"
    )
    assert tight["verdict"] == "FAIL"
    named = {m.split(": ")[0].removeprefix("cuda sm_90 ") for m in messages(tight, "FAIL")}
    assert named == {display_name(key) for key, drop in drops.items() if drop == worst}


def test_a_toolchain_that_cannot_compile_is_an_error_naming_the_file(
    judged: Judged, builds: Builds, trees: dict[str, Path], tmp_path: Path
) -> None:
    candidate = tmp_path / "candidate"
    shutil.copytree(judged.candidate, candidate)
    stem = "fattn-vec-instance-f16-f16"
    (candidate / "lib" / f"{stem}.cubin").unlink()
    source = next(b.source for b in builds.values() if b.stem == stem)
    argv = [str(trees[CANDIDATE] / "bin" / "nvcc"), "--no-such-flag", "-cubin", "-arch=sm_90", str(source)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode != 0 and "--no-such-flag" in proc.stderr
    (candidate / "share" / f"{stem}.log").write_text(proc.stdout + proc.stderr)
    result, _ = judged.judge(judged.pinned, candidate)
    assert result["verdict"] == "ERROR"
    # The measurement's own error names the log and says what to save there; no crash report.
    texts = [result["reason"], *messages(result, "ERROR")]
    assert any(f"candidate/share/{stem}.log" in text for text in texts)
    assert not any("internal error" in text for text in texts), texts


def scratch(table: pd.DataFrame, side: str) -> dict[str, int]:
    """Each kernel's local-memory loads plus stores (LDL, STL) in one side's mix."""
    total = table[f"{side}_scratch_load"] + table[f"{side}_scratch_store"]
    return {str(k): int(v) for k, v in zip(table["key"], total, strict=True)}


def test_every_kernel_of_both_builds_has_a_mix_from_the_candidates_cuobjdump(judged: Judged) -> None:
    facts, table = judged.result["facts"], judged.table
    said = subprocess.run([str(judged.decoder), "--version"], capture_output=True, text=True, check=True)
    lines = [line.strip() for line in said.stdout.splitlines()]
    for role in ("pinned", "candidate"):
        cuda = facts["mix"][role]["cuda"]
        assert cuda["tool"] == [str(judged.decoder)]
        assert cuda["version"] in lines and f"V{CANDIDATE}" in cuda["version"]
        assert cuda["kernels_read"] == cuda["kernels"] == facts["counts"][role]["cuda"] > 0, role
        assert cuda["code_objects"] == len(list((judged.pinned / "lib").glob("*.cubin")))
        assert cuda["code_objects_failed"] == 0, cuda["failed"]
        # Every class counted, none lost; sm_90 code is 16 bytes an instruction.
        summed = table[[f"{role}_{c}" for c in CLASSES]].sum(axis=1)
        assert (summed == table[f"{role}_instructions"]).all() and (summed > 0).all()
        assert (table[f"{role}_code_bytes"] == 16 * summed).all()
    assert f"CUDA mix decoded by {facts['mix']['candidate']['cuda']['version']}" in judged.result["reason"]


def test_scratch_traffic_follows_the_stack_frame_and_its_growth_fails(judged: Judged, builds: Builds) -> None:
    """Local loads and stores against ptxas's report of the same builds; then judged the other
    way round, where the kernels that lost local traffic gain it, which must fail."""
    table = judged.table
    report: dict[str, dict[str, tuple[int, int, int, int]]] = {PINNED: {}, CANDIDATE: {}}
    for (version, _), build in builds.items():
        report[version].update(report_figures(build.log))
    before, after = scratch(table, "pinned"), scratch(table, "candidate")
    for side, version, traffic in (("pinned", PINNED, before), ("candidate", CANDIDATE, after)):
        stores = dict(zip(table["key"], table[f"{side}_scratch_store"], strict=True))
        loads = dict(zip(table["key"], table[f"{side}_scratch_load"], strict=True))
        for name, (_, stack, spill_stores, _) in report[version].items():
            assert (traffic[name] > 0) == (stack > 0), (side, name)  # local memory is the frame
            if spill_stores:
                assert stores[name] > 0 and loads[name] > 0, (side, name)
    # Where the frame grows, shrinks or stays, so does the traffic; where spills grow, it grows.
    frame = {name: report[CANDIDATE][name][1] - report[PINNED][name][1] for name in before}
    moved = {name: after[name] - before[name] for name in before}
    assert all((moved[n] > 0) == (frame[n] > 0) and (moved[n] < 0) == (frame[n] < 0) for n in before)
    spilled_more = {n for n in before if report[CANDIDATE][n][2] > report[PINNED][n][2]}
    grew = {n for n, d in moved.items() if d > 0}
    flagged = set(table.loc[table["reasons"].str.contains("scratch loads\\+stores"), "key"])
    assert spilled_more <= grew == flagged
    assert set(table.loc[table["key"].isin(flagged), "severity"]) <= {"FAIL"}
    shrank = {n for n, d in moved.items() if d < 0}
    assert shrank  # 13.5 drops the frame of some kernels: read the other way, they gain one
    swapped, check = judged.judge(judged.candidate, judged.pinned, cuobjdump=str(judged.decoder))
    reverse = pd.read_parquet(check / "diff.parquet")
    assert set(reverse.loc[reverse["reasons"].str.contains("scratch loads\\+stores"), "key"]) == shrank
    failed = messages(swapped, "FAIL")
    for name in shrank:
        said = f"scratch loads+stores {after[name]} → {before[name]}"
        assert any(m.startswith(f"cuda sm_90 {display_name(name)}: ") and said in m for m in failed), said


def test_the_kernel_families_table_leads_with_failures_and_sums_the_mix(judged: Judged) -> None:
    table = judged.table
    (families,) = [t for t in judged.result["tables"] if t["title"].startswith("Kernel families")]
    rows = [dict(zip(families["columns"], row, strict=True)) for row in families["rows"]]
    fails = [r["FAIL"] for r in rows]
    assert fails[0] > 0 and fails == sorted(fails, reverse=True)  # the families that fail first
    assert sum(fails) == int((table["severity"] == "FAIL").sum())
    assert sum(r["kernels"] for r in rows) == len(table)
    names = [display_name(str(k)) for k in table["key"]]
    for row in rows:
        family = str(row["kernel family"])
        members = table[[n.startswith((f"{family}<", f"{family}(")) for n in names]]
        assert len(members) == row["kernels"], row
        assert int((members["severity"] == "FAIL").sum()) == row["FAIL"], row
        for column, field in (
            ("matrix", "matrix"),
            ("scratch loads", "scratch_load"),
            ("scratch stores", "scratch_store"),
        ):
            cell = [float(x) for x in str(row[column]).split(" → ")]
            sums = [float(members[f"{side}_{field}"].sum()) for side in ("pinned", "candidate")]
            assert sums == (cell * 2 if len(cell) == 1 else cell), (family, column)


@pytest.mark.parametrize("stem", ["fattn-vec-instance-f16-f16", "mmq-instance-q4_0"])
def test_the_mix_matches_nvdisasm_on_the_same_cubins(judged: Judged, builds: Builds, stem: str) -> None:
    """Each kernel's counts per class and its size against nvdisasm's JSON of the same cubin,
    read as tests/compile/test_sass_mix.py reads it."""
    rows: dict[Any, dict[Any, Any]] = judged.table.set_index("key").to_dict("index")
    for side, version in (("pinned", PINNED), ("candidate", CANDIDATE)):
        (build,) = [b for (v, _), b in builds.items() if v == version and b.stem == stem]
        argv = [str(nvdisasm_wheel()), "-json", str(build.cubin)]
        listed = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)[1]
        decoded = {str(f["function-name"]): decoded_mix(f) for f in listed}
        assert sorted(decoded) == sorted(k.name for k in read_cubin(build.cubin.read_bytes(), stem))
        for name, expected in decoded.items():
            got = {column: int(rows[name][f"{side}_{column}"]) for column in expected}
            assert got == expected, (side, name)


def unguarded_traps(cubin: Path) -> dict[str, int]:
    """Each function's traps no predicate guards, from nvdisasm's JSON of the cubin (the
    decoder splits predicate, opcode and modifiers itself)."""
    argv = [str(nvdisasm_wheel()), "-json", str(cubin)]
    listed = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)[1]
    return {
        str(f["function-name"]): sum(
            1 for i in f["sass-instructions"] if i["opcode"] == "BPT.TRAP" and not i.get("predicate")
        )
        for f in listed
    }


def test_ggml_s_no_device_code_kernels_are_stubs_set_apart(judged: Judged, builds: Builds) -> None:
    """ggml compiles a template instance the target does not build as NO_DEVICE_CODE: a printf of
    the reason, then `__trap()`. Those kernels, and only those, are stubs in both builds."""
    table = judged.table
    trapping = set()
    for (version, _), build in builds.items():
        traps = unguarded_traps(build.cubin)
        side = "pinned" if version == PINNED else "candidate"
        counted = dict(zip(table["key"], table[f"{side}_traps"], strict=True))
        assert {name: counted[name] for name in traps} == traps, build.stem
        trapping |= {name for name, n in traps.items() if n}
    stubs = set(table.loc[table["severity"] == "stub", "key"])
    assert stubs == trapping and len(stubs) >= 10  # mmq's and fattn-vec's instances for other targets
    for reason in table.loc[table["severity"] == "stub", "reasons"]:
        assert reason.startswith("stub in both builds (its code does no work"), reason
    # No global, flat or shared memory in them, which no kernel doing work lacks.
    for side in ("pinned", "candidate"):
        stub_rows = table[table["severity"] == "stub"]
        assert (stub_rows[[f"{side}_global", f"{side}_flat", f"{side}_lds"]] == 0).all().all()
        assert (
            table.loc[table["severity"] != "stub", [f"{side}_global", f"{side}_flat"]].sum(axis=1) > 0
        ).all()

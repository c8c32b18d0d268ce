"""`qualify init` writes the compile stage's kernel check for the engine in front of it, and the
kernel check's "no kernels found" says which parameter names the kernels.

Before, init copied the default plan as it is: its kernel check looked for ggml's host function
names, so an engine that is not ggml failed "no kernels found" in its first run, and the finding
named no parameter to change.

The builds are real: an AMDGPU code object made by clang-19 for gfx1100, a CUDA cubin made by
nvcc for sm_90, shared libraries made by gcc (one with ggml's kernel names, one whose functions
start with `ck_`). Each lies outside the project, which reaches it through a `result` link as
`nix build` leaves one, so these need no nix; one test makes the build through real nix from a
flake of one `builtins.derivation`. Nothing stands in for a compiler, nix or qualify.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, qualify_proc
from nixflakes import have_nix, nix_env

from qualify.checks.base import SavedCheck
from qualify.checks.registry import kind_named
from qualify.compile.enginedetect import detect, guess_patterns
from qualify.compile.params import DEFAULT_PATTERNS
from qualify.compile.scan import scan
from qualify.core.groups import KILL_GRACE_S
from qualify.pipeline.plan import load_plan

CK_SOURCE = """
float ck_gemm(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
void ck_softmax(float *x, int n) {
    float m = x[0]; for (int i = 1; i < n; i++) if (x[i] > m) m = x[i];
    for (int i = 0; i < n; i++) x[i] -= m;
}
int ck_conv(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * (i + 1); return s; }
int engine_version(void) { return 3; }
"""
# Kernels named by what they compute and their type: no prefix shared, a suffix.
F32_SOURCE = """
float gemm_f32(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
void softmax_f32(float *x, int n) { float m = x[0]; for (int i = 1; i < n; i++) if (x[i] > m) m = x[i]; x[0] = m; }
void rope_f32(float *x, int n) { for (int i = 1; i < n; i += 2) { float t = x[i]; x[i] = x[i - 1]; x[i - 1] = -t; } }
void add_f32(float *x, const float *y, int n) { for (int i = 0; i < n; i++) x[i] += y[i]; }
int engine_version(void) { return 3; }
"""
# Kernels sharing a word of their names, neither its first nor its last.
GEMM_SOURCE = """
float fused_gemm_relu(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s > 0 ? s : 0;
}
float batched_gemm_strided(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i += 2) s += a[i] * b[i]; return s;
}
float tiled_gemm_bias(const float *a, const float *b, int n) {
    float s = 1; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
void attn_softmax(float *x, int n) { float m = x[0]; for (int i = 1; i < n; i++) if (x[i] > m) m = x[i]; x[0] = m; }
int engine_version(void) { return 3; }
"""
GGML_SOURCE = """
float ggml_vec_dot_f32(const float *a, const float *b, int n) {
    float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s;
}
void ggml_compute_forward_add(float *x, const float *y, int n) { for (int i = 0; i < n; i++) x[i] += y[i]; }
int llama_version(void) { return 1; }
"""
# Built with -nogpulib: no OpenCL library, so the work-item index comes from clang's builtins.
OPENCL = """
#define GID() (__builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x())
__kernel void scale(__global float *x, float a) { x[GID()] *= a; }
__kernel void add(__global float *x, __global const float *y) { unsigned i = GID(); x[i] += y[i]; }
"""
CUDA = """
__global__ void scale(float *x, float a) { x[blockIdx.x * blockDim.x + threadIdx.x] *= a; }
__global__ void add(float *x, const float *y) { int i = blockIdx.x * blockDim.x + threadIdx.x; x[i] += y[i]; }
"""


def _run(*argv: str | Path, cwd: Path | None = None) -> None:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}:\n{done.stderr}"


def gcc_library(tree: Path, source: str, name: str = "libengine.so") -> Path:
    """tree/lib/<name>, a shared library gcc builds from `source`."""
    (tree / "lib").mkdir(parents=True, exist_ok=True)
    c = tree.parent / f"{tree.name}.c"
    c.write_text(source)
    _run("gcc", "-O2", "-shared", "-fPIC", c, "-o", tree / "lib" / name)
    return tree


def project_with_result(tmp_path: Path, tree: Path) -> Path:
    """A project folder whose `result` out-link leads to `tree` (a build outside it)."""
    project = tmp_path / "engine"
    project.mkdir()
    (project / "result").symlink_to(tree)
    return project


def init(project: Path, env: dict[str, str] | None = None) -> str:
    done = qualify_proc("init", str(project), "--force", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return " ".join(done.stdout.split())  # rich may wrap; the words are what count


def kernel_check(project: Path) -> dict[str, Any]:
    """The written plan's kernel-resources check, as `qualify plan` loads it."""
    plan = load_plan(project / "stages")
    compile_stage = next(s for s in plan.stages if s.name == "compile")
    assert compile_stage.file == project / "stages" / "20-compile.toml"
    check = next(c for c in compile_stage.checks if c.kind == "kernel-resources")
    return check.params


def comment_above_check(project: Path) -> str:
    text = (project / "stages" / "20-compile.toml").read_text()
    head = text[: text.index('kind = "kernel-resources"')].rsplit("[[check]]", 1)[0]
    block = re.search(r"((?:^#.*\n)+)\Z", head, re.MULTILINE)
    assert block is not None, head
    return " ".join(line.lstrip("# ") for line in block.group(1).splitlines())


@pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19 to make an AMDGPU code object")
def test_an_amdgpu_build_gets_a_check_requiring_amdgpu(tmp_path: Path) -> None:
    tree = tmp_path / "out"
    (tree / "lib").mkdir(parents=True)
    (tmp_path / "k.cl").write_text(OPENCL)
    _run(
        "clang-19", "-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-O3", "-nogpulib",
        "-mcpu=gfx1100", tmp_path / "k.cl", "-o", tree / "lib" / "kernels.hsaco",
    )  # fmt: skip
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert f"found 2 AMDGPU kernels in {tree} (the out-link result)" in said, said
    params = kernel_check(project)
    assert params["require"] == ["amdgpu"]
    assert params["host_patterns"] == list(DEFAULT_PATTERNS)  # left as the default plan has it
    comment = comment_above_check(project)
    assert "silently lost its GPU code" in comment and "`paths`" in comment and "ptxas" not in comment


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH to make a CUDA cubin")
def test_a_cuda_build_gets_a_check_requiring_cuda(tmp_path: Path) -> None:
    tree = tmp_path / "out"
    (tree / "lib").mkdir(parents=True)
    (tmp_path / "k.cu").write_text(CUDA)
    _run("nvcc", "-cubin", "-arch=sm_90", "-O3", tmp_path / "k.cu", "-o", tree / "lib" / "k.cubin")
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert f"found 2 CUDA kernels in {tree} (the out-link result)" in said, said
    assert kernel_check(project)["require"] == ["cuda"]
    assert "`ptxas_logs`" in comment_above_check(project)


def test_a_host_build_with_other_names_gets_their_prefix_guessed(tmp_path: Path) -> None:
    tree = gcc_library(tmp_path / "out", CK_SOURCE)
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert "no function matching ggml's kernel names" in said and "3 of its 4 exported functions" in said
    assert 'host_patterns = ["ck_*"] (guessed: check them)' in said, said
    params = kernel_check(project)
    assert params["host_patterns"] == ["ck_*"] and params["require"] == []
    comment = comment_above_check(project)
    assert "Edit host_patterns: the globs naming the engine's kernel functions" in comment
    assert "guessed" in comment
    # What was written finds the engine's kernels, and only them, where ggml's found nothing.
    assert not scan(tree, host_patterns=DEFAULT_PATTERNS).counts()["host"]
    found = scan(tree, host_patterns=params["host_patterns"]).tables["host"]
    assert sorted(found["name"]) == ["ck_conv", "ck_gemm", "ck_softmax"]


@pytest.mark.parametrize(
    ("source", "guessed", "words", "kernels"),
    [
        (
            F32_SOURCE,
            "*_f32",
            "4 of its 5 exported functions end with _f32",
            ["add_f32", "gemm_f32", "rope_f32", "softmax_f32"],
        ),
        (
            GEMM_SOURCE,
            "*gemm*",
            "3 of its 5 exported functions contain gemm",
            ["batched_gemm_strided", "fused_gemm_relu", "tiled_gemm_bias"],
        ),
    ],
    ids=["suffix", "word"],
)
def test_a_host_build_sharing_a_suffix_or_a_word_gets_it_guessed(
    tmp_path: Path, source: str, guessed: str, words: str, kernels: list[str]
) -> None:
    """Before: "no prefix shared by its 5 exported functions", and ggml's names written, which
    find none of them."""
    tree = gcc_library(tmp_path / "out", source)
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert words in said and f'host_patterns = ["{guessed}"] (guessed: check them)' in said, said
    params = kernel_check(project)
    assert params["host_patterns"] == [guessed]
    assert "prefixes, suffixes or words" in comment_above_check(project)
    assert not scan(tree, host_patterns=DEFAULT_PATTERNS).counts()["host"]
    assert sorted(scan(tree, host_patterns=params["host_patterns"]).tables["host"]["name"]) == kernels


@pytest.mark.parametrize(
    ("names", "guessed"),
    [
        (["ck_gemm", "ck_conv", "ck_softmax", "engine_version"], ("ck_*",)),
        # A prefix and a suffix naming the same functions: the prefix, once.
        (["ck_gemm_f32", "ck_conv_f32", "ck_rope_f32"], ("ck_*",)),
        # Two groups of kernels: the larger first, each named.
        (["ck_gemm", "ck_conv", "rope_f32", "norm_f32", "add_f32", "mul_f32"], ("*_f32", "ck_*")),
        # A word of names with different prefixes, and a suffix: the one naming more first; of a
        # suffix and a word naming the same functions (`*f32*`), the suffix.
        (["gemm_f32", "fused_gemm_f16", "tiled_gemm_q8", "softmax_f32"], ("*gemm*", "*_f32")),
        # Mangled C++: its namespace, never a "word" of lengths and types.
        (["_ZN2ck4gemmEPfi", "_ZN2ck4convEPfi", "main"], ("_ZN2ck*",)),
        # Nothing named twice.
        (["gemm", "conv_x", "engine_version", "v2_a", "ab_c"], ()),
    ],
)
def test_what_exported_functions_share_is_guessed(names: list[str], guessed: tuple[str, ...]) -> None:
    assert guess_patterns(names) == guessed


def test_a_host_build_with_ggml_names_keeps_ggml_patterns(tmp_path: Path) -> None:
    tree = gcc_library(tmp_path / "out", GGML_SOURCE)
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert "2 host functions match ggml's kernel names" in said, said
    params = kernel_check(project)
    assert params["host_patterns"] == list(DEFAULT_PATTERNS) and params["require"] == []
    assert "These are ggml's kernel names, which the build's functions match" in comment_above_check(project)
    # The written stage file is one `qualify plan` loads, once the project has its flake.
    (project / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    (project / "result").unlink()  # with a flake, init would ask nix; the plan needs neither
    plan = qualify_proc("plan", "-C", str(project))
    assert plan.returncode == 0 and "kernel-resources" in plan.stdout, plan.stdout + plan.stderr


SOURCES: dict[str, tuple[dict[str, str], dict[str, Any], str]] = {
    "cuda": ({"src/gemm.cu": "", "src/gemm.cuh": ""}, {"require": ["cuda"]}, "the sources hold *.cu files"),
    "hip-cmake": (
        {"CMakeLists.txt": "project(ck LANGUAGES CXX)\nenable_language(HIP)\n", "src/gemm.cpp": ""},
        {"require": ["amdgpu"]},
        "the sources hold HIP code (CMakeLists.txt)",
    ),
    "hip-files": ({"src/gemm.hip": ""}, {"require": ["amdgpu"]}, "the sources hold HIP code (src/gemm.hip)"),
    # A CUDA engine built for ROCm through HIP: the sources alone cannot tell which it is.
    "both": (
        {"src/gemm.cu": "", "CMakeLists.txt": "enable_language(HIP)\n"},
        {"require": []},
        "the sources hold *.cu files (src/gemm.cu) and HIP code (CMakeLists.txt)",
    ),
    # ... unless the flake names one of them (an empty flake: nothing for nix to find built).
    "both-rocm-flake": (
        {
            "src/gemm.cu": "",
            "CMakeLists.txt": "enable_language(HIP)\n",
            "flake.nix": "# built with rocmPackages.clr\n{ outputs = { self }: { }; }\n",
        },
        {"require": ["amdgpu"]},
        "and flake.nix names AMDGPU only",
    ),
    # CUDA code only where init must not look: the repository's own files, the runs, a link.
    "host": (
        {"src/gemm.c": "", ".git/x.cu": "", "runs/1/x.cu": "", "Makefile": "CC = gcc\n"},
        {"require": [], "host_patterns": list(DEFAULT_PATTERNS)},
        "the sources hold no CUDA (*.cu) or HIP code",
    ),
}


# init asks nix for a flake's default package first: a case with a flake.nix runs nix.
@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.nix) if "flake.nix" in SOURCES[c][0] else c for c in sorted(SOURCES)],
)
def test_without_a_build_the_sources_decide(case: str, tmp_path: Path) -> None:
    files, expected, words = SOURCES[case]
    project = tmp_path / "engine"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    elsewhere = tmp_path / "vendor"
    elsewhere.mkdir()
    (elsewhere / "other.cu").write_text("")
    (project / "vendored").symlink_to(elsewhere, target_is_directory=True)  # not followed
    said = init(project, nix_env())
    assert said.count("no build found") == 1 and words in said, said
    params = kernel_check(project)
    assert {key: params[key] for key in expected} == expected
    if case == "host":
        assert "replace them with the engine's" in comment_above_check(project)
    if case == "both":
        assert "set `require` to the family the build compiles" in comment_above_check(project)


FLAKE = """
{
  outputs = { self }: {
    packages.x86_64-linux.default = builtins.derivation {
      name = "engine-ck"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/usr/bin:/bin";
      nonce = "NONCE"; library = ./libck.so;
      args = [ "-c" "mkdir -p $out/lib && cp $library $out/lib/libck.so" ];
    };
  };
}
"""


@pytest.mark.nix
@pytest.mark.skipif(not have_nix(), reason="needs nix, to build the flake's default package")
def test_the_flakes_default_package_is_found_once_built_and_never_built_by_init(tmp_path: Path) -> None:
    project = tmp_path / "engine"
    gcc_library(tmp_path / "lib", CK_SOURCE, "libck.so")
    project.mkdir()
    shutil.copy(tmp_path / "lib" / "lib" / "libck.so", project / "libck.so")
    (project / "flake.nix").write_text(FLAKE.replace("NONCE", uuid.uuid4().hex))
    env = nix_env()
    said = init(project, env)
    out = subprocess.run(
        ["nix", "eval", "--raw", ".#default.outPath"], cwd=project, env=env, capture_output=True, text=True
    ).stdout
    assert out.startswith("/nix/store/") and not Path(out).exists(), "init built the package"
    assert f"the flake's default package {out} is not built" in said, said
    assert kernel_check(project)["host_patterns"] == list(DEFAULT_PATTERNS)  # the sources said nothing
    subprocess.run(["nix", "build", "--no-link", ".#default"], cwd=project, env=env, check=True)
    said = init(project, env)
    assert f"in {out} (the flake's default package)" in said, said
    assert kernel_check(project)["host_patterns"] == ["ck_*"]


def kernels_run(make: Callable[..., Project], tree: Path) -> tuple[dict[str, Any], Path]:
    """qualify run of one kernel-resources check reading `tree` for both arms."""
    p = make(
        f'[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n[vars]\ntree = "{tree}"\n'
    )
    stage = p.stage(
        "20-compile.toml", '[[check]]\nkind = "kernel-resources"\nname = "kernels"\nroot = "{tree}"\n'
    )
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 1, done.stdout + done.stderr
    check = p.run_dirs()[0] / "20-compile" / "kernels"
    return json.loads((check / "result.json").read_text()), stage


def test_no_kernels_found_names_host_patterns_and_the_stage_file(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """Before: "no kernels found under … (paths *; 1 files held device code or ELF): nothing was
    measured", naming neither the parameter nor the file to edit."""
    tree = gcc_library(tmp_path / "out", CK_SOURCE)
    result, stage = kernels_run(project, tree)
    assert result["verdict"] == "FAIL"
    fails = [f["message"] for f in result["findings"] if f["verdict"] == "FAIL"]
    assert len(fails) == 2, fails  # one per role
    patterns = ", ".join(DEFAULT_PATTERNS)
    for message in fails:
        assert message.startswith(f"no kernels found under {tree}"), message
        assert f"no host function matches host_patterns ({patterns})" in message
        assert (
            f"set host_patterns in {stage.resolve()} to globs naming the engine's kernel functions" in message
        )
        assert f"`qualify kernels {tree} --host-pattern '*'` lists them" in message
    # What the message says to run lists the engine's functions.
    listed = qualify_proc("kernels", str(tree), "--host-pattern", "*", "--json")
    assert {json.loads(line)["name"] for line in listed.stdout.splitlines()} >= {"ck_gemm", "ck_conv"}


def test_no_kernels_found_without_its_stage_file_names_the_check(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """The judge on a saved measurement whose stage.json is not beside it (a copy of the check's
    folder) says which check to edit instead of a file."""
    tree = gcc_library(tmp_path / "out", CK_SOURCE)
    _, stage = kernels_run(project, tree)
    folder = tmp_path / "copy" / "kernels"
    shutil.copytree(next(stage.parent.parent.glob("runs/*/20-compile/kernels")), folder)
    spec = load_plan(stage.parent).stages[0].checks[0]
    judgement = kind_named("kernel-resources", "test").judge(
        SavedCheck(folder, spec, ("pinned", "candidate"))
    )
    fails = [f.message for f in judgement.findings if f.verdict.value == "FAIL"]
    assert fails and all(
        "set host_patterns in the compile stage's kernel-resources check 'kernels' to globs" in m
        for m in fails
    ), fails


# Evaluates for several seconds (a sum over 30 million numbers) before naming its out path.
SLOW_FLAKE = """
{
  outputs = { self }: {
    packages.x86_64-linux.default = builtins.derivation {
      name = "engine"; system = "x86_64-linux"; builder = "/bin/sh";
      n = builtins.foldl' (a: b: a + b) 0 (builtins.genList (x: x) 30000000);
    };
  };
}
"""


@pytest.mark.nix
@pytest.mark.skipif(not have_nix(), reason="needs nix, to evaluate a slow flake")
def test_a_slow_flake_is_given_up_on_within_the_time_limit(tmp_path: Path) -> None:
    project = tmp_path / "engine"
    project.mkdir()
    (project / "flake.nix").write_text(SLOW_FLAKE)
    (project / "kernels.cu").write_text("")
    started = time.monotonic()
    engine = detect(project, nix_timeout_s=1.0)
    # nix is stopped at the limit: asked to end, then killed after the grace every child gets.
    assert time.monotonic() - started < 1.0 + KILL_GRACE_S + 2, "nix was waited for past the limit"
    assert any("nix took over 1 s" in note for note in engine.notes), engine.notes
    assert engine.require == ("cuda",)  # the sources decided


def test_without_nix_a_flake_project_is_judged_by_its_sources(tmp_path: Path) -> None:
    project = tmp_path / "engine"
    project.mkdir()
    (project / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    (project / "gemm.hip").write_text("")
    said = init(project, {**nix_env(), "PATH": str(tmp_path / "no-tools")})
    assert "nix is not installed" in said and "the sources hold HIP code (gemm.hip)" in said, said
    assert kernel_check(project)["require"] == ["amdgpu"]


def test_stage_files_call_only_the_programs_the_build_holds(tmp_path: Path) -> None:
    """An engine of a library and two programs of its own (no llama.cpp tools, no ctest tree):
    serving and soak are declared not applicable, numerics and bench become skeletons of the
    kinds that take any program's metrics, the operator tests go, and the plan still loads.
    The programs are real: gcc builds them beside the library."""
    tree = gcc_library(tmp_path / "out", F32_SOURCE)
    (tree / "bin").mkdir()
    for program in ("ck-bench", "ck-tests"):
        c = tmp_path / f"{program}.c"
        c.write_text("int main(void) { return 0; }\n")
        _run("gcc", c, "-o", tree / "bin" / program)
    project = project_with_result(tmp_path, tree)
    said = init(project)
    assert "no llama-server in the build: serving declared not applicable" in said, said
    assert "no llama-perplexity in the build: a numerics check skeleton" in said
    assert "the operator-tests check left out" in said
    assert f"edit {project / 'stages' / '30-numerics.toml'}: its run line" in said
    assert f"edit {project / 'stages' / '60-bench.toml'}: its run line" in said
    stages = project / "stages"
    plan = load_plan(stages)
    by_name = {s.name: s for s in plan.stages}
    declared = {n.name: n.reason for n in plan.not_applicable}
    assert sorted(declared) == ["serving", "soak"] and "llama-server not found" in declared["serving"]
    assert "ck-bench, ck-tests" in (stages / "40-serving.toml").read_text()
    assert [c.kind for c in by_name["numerics"].checks] == ["command"]
    [bench] = by_name["bench"].checks
    assert bench.kind == "bench" and bench.params["format"] == "metrics"
    assert [c.kind for c in by_name["compile"].checks] == ["kernel-resources"]
    every = "".join(f.read_text() for f in stages.glob("*.toml"))
    assert not re.search(r"\{bin\}/llama-|^run = \"ctest", every, re.M)


def test_a_llama_cpp_build_keeps_the_default_stage_files(tmp_path: Path) -> None:
    """A build holding llama.cpp's programs and a ctest tree keeps every default stage file as
    qualify ships it."""
    tree = gcc_library(tmp_path / "out", F32_SOURCE)
    (tree / "bin").mkdir()
    for program in ("llama-server", "llama-perplexity", "llama-bench"):
        c = tmp_path / f"{program}.c"
        c.write_text("int main(void) { return 0; }\n")
        _run("gcc", c, "-o", tree / "bin" / program)
    (tree / "share" / "tests").mkdir(parents=True)
    (tree / "share" / "tests" / "CTestTestfile.cmake").write_text("add_test(t /bin/true)\n")
    project = project_with_result(tmp_path, tree)
    init(project)
    from qualify.pipeline.plan import default_plan_dir

    for name in ("30-numerics.toml", "40-serving.toml", "50-soak.toml", "60-bench.toml"):
        assert (project / "stages" / name).read_text() == (default_plan_dir() / name).read_text()
    assert 'kind = "tests"' in (project / "stages" / "20-compile.toml").read_text()

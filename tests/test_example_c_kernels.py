"""The c-kernels example (examples/c-kernels): a small C engine with no server, built by gcc 12,
clang 19 and gcc 12 at -O0 through real nix, its programs run, its plan loaded, and one run set
of it qualified with its controls.

Everything is real: nix builds the flake from a committed git copy of the example (a flake sees
only the files its git tree tracks, so the copy is committed on its own and the test does not
depend on what this checkout has committed), the host's gcc 12 and clang 19 compile the kernels,
and qualify runs as a process. 35 s to 2 minutes on a 2-core machine shared with other jobs, most of
it the run set's bench.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from example_arms import EXAMPLE_MARKS, example_env
from nixflakes import git

from qualify.bench.data import read_metrics_unit
from qualify.checks.junit import PASSED, read_junit
from qualify.checks.metrics import read_metrics
from qualify.compile.hostkernels import host_kernels

pytestmark = [
    *EXAMPLE_MARKS,
    pytest.mark.skipif(
        shutil.which("gcc-12") is None or shutil.which("clang-19") is None,
        reason="the example's arms need the host's gcc-12 and clang-19",
    ),
]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "c-kernels"
#: arm -> flake output, as qualify.toml names them
ATTRS = {"pinned": "default", "clang19": "clang19", "slow": "slow"}
KERNELS = ("ck_axpy_f32", "ck_dot_f32", "ck_gemm_f32", "ck_rmsnorm_f32", "ck_softmax_f32")
DECIDED = ("PASS", "WARN")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example copied into a git repository of its own, every file committed."""
    root = tmp_path_factory.mktemp("c-kernels") / "c-kernels"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("runs", "result", "result-*"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c-kernels")
    return root


@pytest.fixture(scope="module")
def c_kernels_outs(project: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each arm built by `nix build`, kept alive by an out-link; arm -> store path."""
    roots = tmp_path_factory.mktemp("c-kernels-gcroots")
    built: dict[str, Path] = {}
    for arm, attr in ATTRS.items():
        done = subprocess.run(
            ["nix", "build", f"{project}#{attr}", "--json", "--out-link", str(roots / arm)],
            env=example_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"building the {arm} arm failed:\n{done.stderr[-3000:]}"
        built[arm] = Path(json.loads(done.stdout)[0]["outputs"]["out"])
    return built


def run(argv: list[str | Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False, timeout=120)


def test_each_arm_is_built_by_the_toolchain_it_names(c_kernels_outs: dict[str, Path]) -> None:
    assert len(set(c_kernels_outs.values())) == 3, c_kernels_outs  # three different builds of one source
    for arm, (compiler, opt) in {
        "pinned": ("12.2.0", "-O2"),
        "clang19": ("clang version 19.1.7", "-O2"),
        "slow": ("12.2.0", "-O0"),
    }.items():
        out = c_kernels_outs[arm]
        assert compiler in (out / "share" / "compiler-version").read_text(), arm
        assert (out / "share" / "optimisation").read_text().strip() == opt, arm
        for program in ("ck-bench", "ck-accuracy", "ck-tests"):
            assert (out / "bin" / program).is_file(), (arm, program)
    # Each compiler names itself in the .comment section of the objects it compiled.
    pinned, clang = ((c_kernels_outs[arm] / "lib" / "libck.so").read_bytes() for arm in ("pinned", "clang19"))
    assert b"GCC: (Debian 12.2.0" in pinned and b"clang version" not in pinned
    assert b"clang version 19.1.7" in clang


def test_compile_stage_finds_every_kernel_with_its_stack_frame(c_kernels_outs: dict[str, Path]) -> None:
    """What the kernel-resources check reads: the ck_* functions of lib/libck.so, each with a
    frame from the -fstack-usage files; the programs hold no copies of their own."""
    for arm in ("pinned", "clang19"):
        found = host_kernels(c_kernels_outs[arm], ["ck_*"])
        assert sorted(k.name for k in found) == list(KERNELS), (arm, found)
        assert {Path(k.binary).name for k in found} == {"libck.so"}, (arm, found)
        for kernel in found:
            assert kernel.code_size > 0 and kernel.stack_bytes is not None, (arm, kernel)


def test_unit_tests_write_junit_with_every_case_passing(
    c_kernels_outs: dict[str, Path], tmp_path: Path
) -> None:
    for arm, out in c_kernels_outs.items():
        junit = tmp_path / f"{arm}.xml"
        done = run([out / "bin" / "ck-tests", junit])
        assert done.returncode == 0, (arm, done.stdout, done.stderr)
        cases = read_junit(junit)
        assert len(cases) >= 12, (arm, cases)
        assert set(cases.values()) == {PASSED}, (arm, cases)
        assert len({case.split("::")[0] for case in cases}) == len(KERNELS), cases  # every kernel


def test_accuracy_is_within_the_plans_limits(c_kernels_outs: dict[str, Path], tmp_path: Path) -> None:
    """Each max_* limit of stages/30-numerics.toml names a metric ck-accuracy reports, and both
    compilers' builds are inside every one. They also agree exactly: baseline x86-64 has no FMA,
    so gcc and clang round every operation alike (the stage file and the README say so)."""
    plan = tomllib.loads((EXAMPLE / "stages" / "30-numerics.toml").read_text())
    [check] = plan["check"]
    limits: dict[str, float] = check["limits"]
    medians: dict[str, dict[str, float]] = {}
    for arm in ("pinned", "clang19"):
        path = tmp_path / f"{arm}.json"
        done = run([c_kernels_outs[arm] / "bin" / "ck-accuracy", path])
        assert done.returncode == 0, (arm, done.stderr)
        metrics = read_metrics(path)
        assert sorted(f"max_{name}" for name in metrics) == sorted(limits), (arm, list(metrics))
        for key, limit in limits.items():
            metric = metrics[key.removeprefix("max_")]
            assert len(metric.samples) == 3, (arm, metric)  # one per seed
            assert 0 < metric.median <= limit, (arm, key, metric.samples)
        medians[arm] = {name: m.median for name, m in metrics.items()}
    assert medians["pinned"] == medians["clang19"]


def test_bench_output_reads_as_a_metrics_bench_and_the_slow_arm_is_slower(
    c_kernels_outs: dict[str, Path], tmp_path: Path
) -> None:
    """ck-bench's file goes through qualify's own reader of a bench unit; the -O0 arm (the
    negative control) takes more than 1.5 times as long as pinned per call on every test."""
    tests = {}
    for arm, out in c_kernels_outs.items():
        path = tmp_path / f"{arm}.json"
        done = run([out / "bin" / "ck-bench", "--reps", "3", "--rep-ms", "2", path])
        assert done.returncode == 0, (arm, done.stderr)
        tests[arm] = {t.label: t for t in read_metrics_unit(path)}
        assert len(tests[arm]) == 10, (arm, list(tests[arm]))  # five kernels, two sizes each
        for test in tests[arm].values():
            assert (test.unit, test.higher_is_better, len(test.values)) == ("us", False, 3), test
            assert all(v > 0 for v in test.values), test
    assert tests["pinned"].keys() == tests["clang19"].keys() == tests["slow"].keys()
    for label, test in tests["pinned"].items():
        ratio = statistics.median(tests["slow"][label].values) / statistics.median(test.values)
        assert ratio > 1.5, (label, ratio)


@pytest.mark.parametrize(
    ("program", "args", "says"),
    [
        ("ck-bench", ["--reps", "0", "out.json"], "--reps takes a whole number"),
        ("ck-bench", ["--rep-ms"], "a value must follow: --rep-ms"),
        ("ck-bench", [], "name the metrics file to write"),
        ("ck-tests", [], "usage: ck-tests OUT_FILE"),
        ("ck-accuracy", ["no-such-folder/out.json"], "cannot write no-such-folder/out.json"),
    ],
)
def test_programs_refuse_bad_arguments_naming_them(
    c_kernels_outs: dict[str, Path], tmp_path: Path, program: str, args: list[str], says: str
) -> None:
    done = subprocess.run(
        [str(c_kernels_outs["pinned"] / "bin" / program), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and says in done.stderr, (done.returncode, done.stderr)
    assert not (tmp_path / "out.json").exists()  # refused before anything was measured


def test_plan_loads(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "qualify", "plan", "-C", str(project)],
        env=example_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for stage in ("10-build", "20-compile", "30-numerics", "60-bench"):
        assert stage in done.stdout, done.stdout
    assert "serving  NOT APPLICABLE: the engine has no server" in done.stdout
    assert "never qualifies" not in done.stdout
    assert 'host_patterns = ["ck_*"]' in done.stdout


# Alone: its bench must decide microsecond kernels, pinned against itself among them. Its units
# run together on one CPU and time themselves by CPU time, yet with a busy loop on each core
# beside it the A/A's axpy interval reached down to 0.9025, against δ's bound of 0.90.
@pytest.mark.alone
def test_run_with_controls_decides_every_stage_of_the_plan(project: Path, tmp_path: Path) -> None:
    """`qualify run --candidate clang19` with the project's controls: clang19 passes (or WARNs)
    each stage of the plan, pinned against itself passes every stage, and the bench catches the
    -O0 build; serving and soak are declared not applicable (no server), and so is distribution
    (nothing published), so the set qualifies and says so in its first line."""
    runs = tmp_path / "runs"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "qualify", "run", "-C", str(project)),
            *("--runs-dir", str(runs), "--candidate", "clang19"),
        ],
        env=example_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    out = done.stdout + done.stderr
    [run_dir] = [p for p in runs.iterdir() if (p / "run.json").is_file()]
    saved = json.loads((run_dir / "run.json").read_text())
    members = saved["member_results"]
    plan = ("build", "compile", "numerics", "bench")
    clang19 = members["clang19"]["stages"]
    assert all(clang19[stage] in DECIDED for stage in plan), (clang19, out[-3000:])
    aa = members["positive-pinned"]
    assert all(aa["stages"][stage] in DECIDED for stage in plan) and aa["behaved"], (aa, out[-3000:])
    slow = members["negative-slow"]
    assert slow["stages"]["bench"] == "FAIL" and slow["behaved"], (slow, out[-3000:])
    # caught as a slowdown, not as a crash
    bench = json.loads((run_dir / "negative-slow" / "60-bench" / "ck-bench" / "result.json").read_text())
    assert "SLOWER (a regression beyond 10.0%)" in bench["reason"], bench["reason"]
    assert saved["controls_behaved"] is True
    assert done.returncode == 0, out[-3000:]
    line = json.loads((run_dir / "report.json").read_text())["verdict_line"]
    assert line == (
        "QUALIFIED — serving, soak not applicable: the engine has no server; "
        "distribution not applicable: nothing of it is published: each host builds it from its sources"
    ), line
    # The stages measured what they say: every kernel read and every test case run, per role.
    compile_dir = run_dir / "clang19" / "20-compile"
    kernels = json.loads((compile_dir / "kernel-resources" / "result.json").read_text())
    assert kernels["facts"]["counts"]["candidate"]["host"] == len(KERNELS), kernels["facts"]
    tests = json.loads((compile_dir / "kernel-tests" / "result.json").read_text())
    for role in ("pinned", "candidate"):
        assert tests["facts"]["counts"][role]["passed"] >= 12, tests["facts"]

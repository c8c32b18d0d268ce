"""The suite's tiers (tests/tiers.py): a test gets the marks of the fixtures it uses, `make check`
runs the tests with none of the heavy marks first, and a run that leaves nix, the example or the
model out fails a test that needs one but lacks its mark, naming the mark.

The suites here are tiny and run by pytester in a process of their own: the plugin changes PATH
and the environment, which must not leak into this run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression
from tiers import (
    ALONE,
    FIXTURE_MARKS,
    HEAVY,
    QUIET,
    QUIET_PATHS,
    alone_markexpr,
    check_markexpr,
    left_out,
    marks_for,
    phases,
    quiet_markexpr,
    rest_markexpr,
    tier,
)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CHECK = check_markexpr()

INI = """[pytest]
addopts = --strict-markers -p no:cacheprovider
markers =
    nix: real nix
    example: an example built
    model: the example's model
    slow: slow
    alone: with the machine to itself
    quiet: side by side, nothing heavy beside
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder whose runs load tests/tiers.py as the suite does."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makeini(INI)
    pytester.makeconftest(
        """
        import pytest

        pytest_plugins = ["tiers"]

        @pytest.fixture(scope="session")
        def example_outs():
            return {}

        @pytest.fixture
        def pair(example_outs):
            return example_outs
        """
    )
    return pytester


def test_the_makefile_s_check_target_deselects_every_heavy_mark() -> None:
    makefile = (REPO / "Makefile").read_text()
    found = re.search(r'^check:.*\n(?:\t.*\n)*?\t.*pytest .*-m "([^"]+)"', makefile, re.M)
    assert found, "the Makefile has no check target running pytest -m"
    assert found.group(1) == CHECK == "not nix and not example and not model and not slow"


def test_the_makefile_s_test_target_runs_every_tier_and_nothing_twice() -> None:
    """`make test` is the check tier on workers, the rest on workers by module, the tests
    measuring time alone, then those measuring time quietly four at a time: every test in exactly
    one, and the exit status the worst of the four."""
    makefile = (REPO / "Makefile").read_text()
    body = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert body, "the Makefile has no test target"
    found = re.findall(r'pytest (.*?)-m "([^"]+)"([^;]*);', body.group(1))
    written = [
        [w for w in options.split() if w != "-q"] + ["-m", expr, *paths.split()]
        for options, expr, paths in found
    ]
    assert written == list(phases().values())
    runs = [(options, expr) for options, expr, _ in found]
    assert "exit" in body.group(1) and all(f"{v}=$$?" in body.group(1) for v in "abcd")
    singles = [[m] for m in HEAVY]
    for marks in ([], *singles, list(HEAVY), *([m, ALONE] for m in HEAVY), *([m, QUIET] for m in HEAVY),
                  *([m, ALONE, QUIET] for m in HEAVY), [ALONE], [QUIET]):  # fmt: skip
        chosen = [Expression.compile(expr).evaluate(lambda m, s=set(marks): m in s) for _, expr in runs]
        assert chosen.count(True) == 1, marks
        assert list(phases())[chosen.index(True)] == tier(marks), marks


def test_every_quiet_test_is_where_the_quiet_phase_collects() -> None:
    """The quiet phase collects QUIET_PATHS only: a test marked quiet by hand lives there, and no
    fixture gives the mark (its tests could be anywhere)."""
    assert not [name for name, marks in FIXTURE_MARKS.items() if QUIET in marks]
    marked = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "tests").rglob("*.py")
        if re.search(r"mark\.quiet\b", path.read_text()) and path.name != "test_tiers.py"
    }
    assert marked, "no test is marked quiet: the phase would run nothing"
    outside = [p for p in sorted(marked) if not p.startswith(tuple(f"{q}/" for q in QUIET_PATHS))]
    assert not outside, f"marked quiet outside {QUIET_PATHS}: add their folder to tiers.QUIET_PATHS"


def test_the_makefile_s_test_target_exits_with_the_worst_status() -> None:
    """Each phase's status is kept, and `make test` exits with the highest (a failure in one
    tier is not hidden by a pass in the next)."""
    makefile = (REPO / "Makefile").read_text()
    body = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert body
    last = body.group(1).strip().splitlines()[-1].strip().removeprefix("exit ").replace("$$", "$")
    for statuses in ((0, 0, 0, 0), (0, 1, 0, 0), (0, 0, 0, 2), (5, 0, 1, 0), (1, 0, 0, 4)):
        script = "a={};b={};c={};d={}; exit {}".format(*statuses, last)
        done = subprocess.run(["sh", "-c", script], check=False)
        assert done.returncode == max(statuses), (statuses, done.returncode)


def test_the_suite_started_with_sigint_ignored_still_stops_its_runs_with_ctrl_c() -> None:
    """A script that starts the suite in the background (`make test &`) hands it SIGINT ignored,
    which every process it starts would inherit: the tests that stop a run with Ctrl-C still
    pass, because the suite gives SIGINT a handler before it starts anything (tests/conftest.py),
    so its children start with the default again."""
    interrupted = "tests/core/test_process.py::test_interrupt_kills_the_group_and_propagates"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", interrupted],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_each_marked_fixture_is_defined_once_in_the_suite() -> None:
    """Marks go by fixture name: a second fixture of the same name would get them too."""
    sources = "\n".join(p.read_text() for p in TESTS.rglob("*.py"))
    for name in FIXTURE_MARKS:
        defined = re.findall(rf"@pytest\.fixture.*\n(?:async )?def {name}\(", sources)
        assert len(defined) == 1, (name, len(defined))


def test_marks_and_tiers_of_fixtures() -> None:
    assert marks_for(["tmp_path", "llama_pair", "example_outs"]) == {"example", "nix", "model", "slow"}
    assert marks_for(["nix_flakes"]) == {"nix"}
    assert marks_for(["tmp_path", "project"]) == set()
    assert marks_for(["example_runs", "example_outs"]) == {"example", "nix", "model", "slow", ALONE}
    assert tier([]) == tier(["parametrize"]) == tier([ALONE]) == "check"
    assert all(tier([mark]) == "rest" for mark in HEAVY)
    assert all(tier([mark, ALONE]) == ALONE for mark in HEAVY)
    assert all(tier([mark, QUIET]) == tier([mark, ALONE, QUIET]) == QUIET for mark in HEAVY)
    assert tier([QUIET]) == "check"


@pytest.mark.parametrize(
    ("markexpr", "out"),
    [
        ("", set()),
        ("not slow", set()),  # a test marked nix alone would run
        ("example", set()),  # every example test runs nix and reads the model
        ("not nix", {"nix"}),
        ("not example and not model", {"example", "model"}),
        (CHECK, {"nix", "example", "model"}),
        # make test's heavy phases: each keeps every resource (its example tests need them all).
        (rest_markexpr(), set()),
        (alone_markexpr(), set()),
        (quiet_markexpr(), set()),
        ("alone and not nix", {"nix"}),
    ],
)
def test_a_run_leaves_out_what_no_selected_test_may_carry(markexpr: str, out: set[str]) -> None:
    assert left_out(markexpr) == out


def test_a_test_gets_the_marks_of_fixtures_it_uses_through_others(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        def test_on_the_example(pair):
            pass

        def test_plain():
            pass
        """
    )
    heavy = suite.runpytest_subprocess("--collect-only", "-q", "-m", "example and nix and model and slow")
    assert "test_on_the_example" in heavy.stdout.str() and "test_plain" not in heavy.stdout.str()
    check = suite.runpytest_subprocess("--collect-only", "-q", "-m", CHECK)
    assert "test_plain" in check.stdout.str() and "test_on_the_example" not in check.stdout.str()
    # Run together, the check tier comes first.
    listed = suite.runpytest_subprocess("--collect-only", "-q").stdout.str()
    assert listed.index("test_plain") < listed.index("test_on_the_example"), listed


NIX_SUITE = """
import shutil
import subprocess

import pytest


def test_runs_nix_itself():
    subprocess.run(["nix", "eval", "--expr", "1"], check=True)


@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_takes_a_missing_nix_in_its_stride():
    subprocess.run(["nix-store", "--query", "--requisites", "/nix/store/x"], capture_output=True)


@pytest.fixture(scope="module")
def locked():
    subprocess.run(["nix", "flake", "lock"], capture_output=True)


def test_on_a_fixture_that_runs_nix(locked):
    pass


def test_asks_only_its_version():
    subprocess.run(["nix", "--version"], capture_output=True)


def test_needs_the_version_it_asks_for():
    assert subprocess.run(["nix", "--version"], capture_output=True).returncode == 0


@pytest.mark.nix
def test_marked():
    subprocess.run(["nix", "eval", "--expr", "1"], check=True)
"""


def test_the_check_tier_fails_a_test_that_runs_nix_without_the_mark(suite: pytest.Pytester) -> None:
    suite.makepyfile(NIX_SUITE)
    result = suite.runpytest_subprocess("-m", CHECK)
    # The version probe qualify makes in every run passes, unless the test fails after it; the
    # marked test is not run; each other test fails (in its call, or in the setup of its
    # fixture), whether nix is installed or not.
    result.assert_outcomes(passed=1, failed=3, errors=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_on_a_fixture_that_runs_nix*",
            "this test runs `nix flake lock`, but nix is left out of this run (-m excludes nix): mark it nix, *",
            "*_ test_runs_nix_itself _*",
            "Command '['nix', 'eval', '--expr', '1']' returned non-zero exit status 127.",
            "this test runs `nix eval --expr 1`, but nix is left out of this run (-m excludes nix): mark it nix, *",
            "*_ test_takes_a_missing_nix_in_its_stride _*",
            "this test runs `nix-store --query --requisites /nix/store/x`, but nix is left out of this run *",
            "*_ test_needs_the_version_it_asks_for _*",
            "*assert 127 == 0*",
            "this test failed after asking `nix --version`, and nix is left out of this run (-m excludes nix): if *",
        ]
    )


def test_the_check_tier_fails_a_test_that_reads_the_model_without_the_mark(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import os

        from tiers import require


        def test_reads_the_model():
            require("model", "reads the example's model")


        def test_nothing_is_left_out_of_a_full_run():
            assert os.environ["QUALIFY_TESTS_LEFT_OUT"] == ""
        """
    )
    result = suite.runpytest_subprocess("-m", CHECK, "-k", "not nothing_is_left_out")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*this test reads the example's model, which this run leaves out (-m excludes model): mark it model*"
        ]
    )
    suite.runpytest_subprocess("-m", "not slow").assert_outcomes(passed=2)


def test_each_tier_s_time_is_printed_and_written(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest

        def test_plain():
            pass

        @pytest.mark.slow
        @pytest.mark.alone
        def test_slow_and_timed():
            pass

        @pytest.mark.slow
        @pytest.mark.quiet
        def test_slow_and_waiting():
            pass

        @pytest.mark.slow
        def test_slow():
            pass
        """
    )
    times = suite.path / "tiers.json"
    result = suite.runpytest_subprocess(f"--tier-times={times}")
    # Each tier's line as the next starts (a phase of its own in a CI log), then all of them,
    # the tiers in order whatever the order of the tests in their module.
    check = "::: tests: check tier (make check), 1 test, took * s"
    rest = "::: tests: the rest, 1 test, took * s"
    alone = "::: tests: the rest measuring time, alone, 1 test, took * s"
    quiet = "::: tests: the rest measuring time, quiet, side by side, 1 test, took * s"
    result.stdout.fnmatch_lines(
        [check, "*.*", check, rest, "*.*", check, rest, alone, "*.*", check, rest, alone, quiet]
    )
    written = json.loads(times.read_text())
    assert {name: figures["tests"] for name, figures in written.items()} == {
        "check": 1,
        "rest": 1,
        "alone": 1,
        "quiet": 1,
    }


def test_on_two_workers_the_tier_is_read_from_each_report(suite: pytest.Pytester) -> None:
    """Under pytest-xdist the controller collects nothing: each test's tier comes from the marks
    its report carries, and the tier's time is the wall clock, its tests' seconds beside it."""
    # Two modules: loadfile gives each module's tests to one worker.
    plain = """
        import time

        import pytest

        @pytest.mark.parametrize("n", range(2))
        def test_plain(n):
            time.sleep(0.5)
        """
    suite.makepyfile(
        test_first=plain,
        test_second=plain
        + """
        def test_on_the_example(pair):
            pass
        """,
    )
    times = suite.path / "tiers.json"
    result = suite.runpytest_subprocess("-n", "2", "--dist", "loadfile", f"--tier-times={times}")
    result.stdout.fnmatch_lines(
        ["::: tests: check tier (make check), 4 tests, took * s on 2 workers (* s of tests)"]
    )
    written = json.loads(times.read_text())
    assert {name: figures["tests"] for name, figures in written.items()} == {
        "check": 4,
        "rest": 1,
        "alone": 0,
        "quiet": 0,
    }
    assert written["check"]["workers"] == 2
    assert written["check"]["seconds"] < written["check"]["test_seconds"]  # two at once

"""The suite's tiers: the marks a test gets from the fixtures it uses, and a run that leaves a
mark out refusing what that mark stands for.

`make check` runs every test that needs no nix, no bundled example built and no model and is
not slow: about 2 000 of the suite's 2 400 tests, in under 5 minutes of a 2-core machine on two
pytest-xdist workers. `make test` runs them so, then the rest in three phases: the heavy tests
on two workers (`--dist loadfile`: a module's tests go to one worker, so its fixtures are made
once; a session fixture such as the example's builds is made on each worker that needs it, the
second finding nix's store already holding what the first built); then, in one process with
the machine to itself, those marked `alone`, which depend on the timing of real processes (a
bench that must decide, the example's run set with its bench and soak, a hostile command racing
the run's checks); last, four at a time with nothing heavy beside them, those marked `quiet`,
which depend on timing too but whose processes mostly wait on the clock (the soaks of a
stand-in server). A test is slow where it takes more than a few seconds: every test on one of the
examples' recorded runs re-judged (the `rejudge_recorded` fixture), and, marked by hand, the
end-to-end tests of several runs (fleets, bisects over a series of arms, run sets, fault
scenarios that kill, resume and rerun). Each such behaviour keeps one test in `make check`, and
a comparison parametrized over many cases (a compiler's figures, records nested deeply, hostile
labels) keeps some of its cases there, so that `make check` still reaches every part.

A test gets the marks of every fixture it uses, directly or through another fixture
(`item.fixturenames` is the closure), so a new test on `example_runs` is slow without anyone
remembering to say so.

A test that runs nix or reads the model by other means (its own `nix build`, a helper) carries
the mark by hand. Where one forgets it, a run whose -m leaves the mark out catches it: nix on
PATH is a stand-in that answers as if nix were not installed and notes the call, and the helpers
that need the example or its model refuse; either way the test fails naming the mark it lacks,
instead of passing on a machine that has nix and skipping on one that has not.

Loaded by tests/conftest.py as a plugin (`pytest_plugins`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Generator, Iterable
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # what -m is evaluated with; no public name
from tierclock import ALONE, QUIET, TIER_PROPERTY, TierClock

#: A test with any of these marks is out of the check tier: `make check` deselects them (its -m
#: is the one `check_markexpr` writes; tests/test_tiers.py holds the Makefile to it).
HEAVY = ("nix", "example", "model", "slow")

#: The marks whose resource a run can leave out (a slow test needs nothing a machine may lack).
RESOURCES = ("nix", "example", "model")

#: Fixture -> the marks of every test that uses it, directly or through other fixtures. Names
#: are matched across the suite: a fixture listed here has a name no other fixture has.
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    # The llama.cpp example's three arms through nix (about 21 minutes on 2 cores, once per
    # store), after its setup.sh made the model and corpus; example_runs, example_kvq4_run and
    # every fixture built on them (llama_pair) run on them.
    "example_outs": ("example", "nix", "model", "slow"),
    # The example's quick run set: its bench and soak stages measure time.
    "example_runs": (ALONE,),
    # The c-kernels example's arms through nix, and its engine built from its sources alone;
    # the runs on them decide their bench gates.
    "c_kernels_outs": ("example", "nix", "slow", ALONE),
    "built_engine": ("example", "nix", "slow", ALONE),
    # The fixture flakes of tests/nixflakes.py, locked and built by real nix.
    "rocm_project": ("nix",),
    "rocm_run": ("nix",),
    # A nix remote builder on loopback.
    "remote_builder": ("nix",),
    # One of the examples' recorded runs re-decided by `qualify report --rejudge`: from tens of
    # seconds (the CUDA quick run) to minutes (a run set, the bisects' every step) each.
    "rejudge_recorded": ("slow",),
    # Real nix with flakes enabled, for a test that runs it (tests/conftest.py).
    "nix_flakes": ("nix",),
}

#: Debian's nix-bin's commands: each gets a stand-in where nix is left out.
NIX_COMMANDS = (
    "nix",
    "nix-build",
    "nix-channel",
    "nix-collect-garbage",
    "nix-copy-closure",
    "nix-daemon",
    "nix-env",
    "nix-hash",
    "nix-instantiate",
    "nix-prefetch-url",
    "nix-shell",
    "nix-store",
)

#: The marks a run leaves out, space-separated, for the helpers in this process and the
#: processes its tests start.
LEFT_OUT_ENV = "QUALIFY_TESTS_LEFT_OUT"

STAND_IN = """#!/bin/sh
# nix is left out of this test run (-m deselects the tests marked nix): answer as a missing
# command does, and note the call for the test that made it.
printf '%s\\n' "{name} $*" >> '{log}'
echo "{name}: left out of this test run (-m excludes nix): a test that runs nix is marked nix" >&2
exit 127
"""

#: What a test that ran nix with nix left out is told.
NIX_LEFT_OUT = "nix is left out of this run (-m excludes nix)"
MARK_IT = "mark it nix, or give it a fixture tests/tiers.py marks"

_stand_ins = pytest.StashKey[Path]()
_seen = pytest.StashKey[int]()
_tier_of = pytest.StashKey[dict[str, str]]()
_item_tier = pytest.StashKey[str]()
_saved_env = pytest.StashKey[dict[str, str | None]]()


def check_markexpr() -> str:
    """The -m of `make check`."""
    return " and ".join(f"not {mark}" for mark in HEAVY)


def heavy_markexpr() -> str:
    """Every test the check tier leaves out."""
    return " or ".join(HEAVY)


def rest_markexpr() -> str:
    """The -m of `make test`'s second phase, on two workers: the heavy tests but those measuring time."""
    return f"({heavy_markexpr()}) and not {ALONE} and not {QUIET}"


def alone_markexpr() -> str:
    """The -m of `make test`'s third phase, in one process: the heavy tests that measure time
    and need the machine to themselves."""
    return f"({heavy_markexpr()}) and {ALONE} and not {QUIET}"


def quiet_markexpr() -> str:
    """The -m of `make test`'s last phase, four at a time: the heavy tests that measure time
    while their processes mostly wait."""
    return f"({heavy_markexpr()}) and {QUIET}"


#: Where the quiet tests live: the quiet phase collects these folders only, so that its four
#: workers do not each collect the whole suite (about 20 s of its 100 on two cores). A test
#: marked quiet elsewhere would never run: tests/test_tiers.py holds every quiet mark to them.
QUIET_PATHS = ("tests/soak",)


def phases() -> dict[str, list[str]]:
    """How `make test` runs each tier, in order: pytest's workers, -m and the folders collected
    (the quiet phase's only). The Makefile's test target spells them out (tests/test_tiers.py
    holds it to these); benchmarks/suite_time.py runs them."""
    return {
        "check": ["-n", "2", "-m", check_markexpr()],
        "rest": ["-n", "2", "--dist", "loadfile", "-m", rest_markexpr()],
        ALONE: ["-m", alone_markexpr()],
        QUIET: ["-n", "4", "--dist", "worksteal", "-m", quiet_markexpr(), *QUIET_PATHS],
    }


def marks_for(fixturenames: Iterable[str]) -> set[str]:
    """The marks a test using these fixtures gets."""
    return {mark for name in fixturenames for mark in FIXTURE_MARKS.get(name, ())}


def tier(marks: Iterable[str]) -> str:
    """The tier of a test with these marks: `check` (make check runs it), `rest` (make test, on
    two workers), `alone` (make test, then, in one process) or `quiet` (make test, last, four at
    a time). A test marked both alone and quiet is quiet."""
    marks = set(marks)
    if not marks & set(HEAVY):
        return "check"
    if QUIET in marks:
        return QUIET
    return ALONE if ALONE in marks else "rest"


def left_out(markexpr: str) -> set[str]:
    """The resources a run with this -m leaves out: those no test carrying their mark can be
    selected by it, whatever other marks of HEAVY, ALONE and QUIET the test has (`-m example`
    keeps nix, as every example test also runs nix; `make test`'s phases of the tests measuring
    time, `... and alone ...` and `... and quiet`, keep them all)."""
    if not markexpr.strip():
        return set()
    expression = Expression.compile(markexpr)
    out = set()
    for resource in RESOURCES:
        others = [mark for mark in (*HEAVY, ALONE, QUIET) if mark != resource]
        combinations = (
            {resource, *chosen}
            for size in range(len(others) + 1)
            for chosen in itertools.combinations(others, size)
        )
        if not any(
            expression.evaluate(lambda name, /, marks=marks, **_: name in marks) for marks in combinations
        ):
            out.add(resource)
    return out


def require(mark: str, what: str) -> None:
    """Fail the calling test where this run leaves `mark` out: it `what` (reads the model, ...)
    without carrying the mark, and would otherwise do it anyway or skip without saying why."""
    if mark in os.environ.get(LEFT_OUT_ENV, "").split():
        pytest.fail(
            f"this test {what}, which this run leaves out (-m excludes {mark}): mark it {mark}", pytrace=False
        )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier-times",
        metavar="PATH",
        help="write each tier's test count and seconds (setup, call and teardown summed) to PATH as JSON",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_tier_of] = {}
    config.pluginmanager.register(TierClock(config, config.stash[_tier_of]), "tier-clock")
    out = left_out(config.getoption("markexpr", "") or "")
    # Set before collection: a module's `skipif(shutil.which("nix") is None)` then finds the
    # stand-in and the test runs, and fails, rather than skipping on a machine without nix.
    config.stash[_saved_env] = {name: os.environ.get(name) for name in (LEFT_OUT_ENV, "PATH")}
    os.environ[LEFT_OUT_ENV] = " ".join(sorted(out))
    if "nix" in out:
        stand_ins = Path(tempfile.mkdtemp(prefix="no-nix-"))
        log = stand_ins / "calls"
        log.touch()
        for name in NIX_COMMANDS:
            script = stand_ins / name
            script.write_text(STAND_IN.format(name=name, log=log))
            script.chmod(0o755)
        config.stash[_stand_ins] = stand_ins
        config.stash[_seen] = 0
        os.environ["PATH"] = f"{stand_ins}{os.pathsep}{os.environ.get('PATH', '')}"


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in config.stash.get(_saved_env, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if _stand_ins in config.stash:
        shutil.rmtree(config.stash[_stand_ins], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: it reads these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in sorted(marks_for(item.fixturenames)):
            item.add_marker(mark)
        item.stash[_item_tier] = tier(m.name for m in item.iter_markers())
        config.stash[_tier_of][item.nodeid] = item.stash[_item_tier]
    # In one process, the tiers in order (check, rest, alone, quiet), each in collection order: the check
    # tier's failures show in minutes, and each tier's time is a phase of its own. A module with
    # tests of several tiers is visited again; none of them has a module fixture both tiers use.
    order = ("check", "rest", ALONE, QUIET)
    items.sort(key=lambda item: order.index(item.stash[_item_tier]))


def _nix_calls(config: pytest.Config) -> list[str]:
    """The nix commands run since the last look, where nix is left out."""
    if _stand_ins not in config.stash:
        return []
    lines = (config.stash[_stand_ins] / "calls").read_text().splitlines()
    new = lines[config.stash[_seen] :]
    config.stash[_seen] = len(lines)
    return new


def _refusing_nix(item: pytest.Item) -> Generator[None, object, object]:
    """A phase of a test (setup, call, teardown) that fails if it ran nix where nix is left out:
    whatever the test made of the missing command (an error, a skip, a pass), it lacks the mark.
    `nix --version` alone only adds a note where the phase failed: qualify records the tool's
    version in every run's provenance and takes a missing nix there in its stride."""
    try:
        result = yield
    except pytest.skip.Exception:
        _fail_on_nix_calls(item.config, failed=False)
        raise
    except BaseException:
        _fail_on_nix_calls(item.config, failed=True)  # chained: the test's own error shows first
        raise
    _fail_on_nix_calls(item.config, failed=False)
    return result


def _fail_on_nix_calls(config: pytest.Config, failed: bool) -> None:
    calls = _nix_calls(config)
    ran = [call for call in calls if call.split(" ", 1)[1:] != ["--version"]]
    if ran:
        more = f" (and {len(ran) - 1} more nix commands)" if len(ran) > 1 else ""
        pytest.fail(f"this test runs `{ran[0]}`{more}, but {NIX_LEFT_OUT}: {MARK_IT}", pytrace=False)
    if calls and failed:  # a note beside the test's own error, which may have another cause
        pytest.fail(
            f"this test failed after asking `{calls[0]}`, and {NIX_LEFT_OUT}: if it needs nix, {MARK_IT}",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _refusing_nix(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _refusing_nix(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _refusing_nix(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, object, object]:
    report = yield
    # From the item, which a worker's report is made from (the controller collects nothing).
    name = item.stash.get(_item_tier, None)
    if isinstance(report, pytest.TestReport) and name is not None:
        report.user_properties.append((TIER_PROPERTY, name))
    return report

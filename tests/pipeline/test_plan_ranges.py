"""Numbers in a plan are checked against the ranges their kind declares, as the plan is loaded.

Each case is a small project on disk whose plan holds one bad value, loaded by `qualify plan`:
a usage error (exit 4) naming the stage file, the value's line, the key and the allowed range,
before anything runs. A NaN limit would otherwise pass anything (every comparison with NaN is
false), a level of 0 or 2 would crash or mislead at run time, and a timeout of 0 would stop the
candidate before it starts and blame it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest
from conftest import Project
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()


def plan_error(p: Project) -> tuple[int, str]:
    """`qualify plan`'s exit code and its output on one line (a wide terminal: no wrapping)."""
    result = runner.invoke(app, ["plan", "--project", str(p.root)], env={"COLUMNS": "1000"})
    return result.exit_code, " ".join(result.output.split())


def stage_with(p: Project, filename: str, body: str) -> tuple[str, int]:
    """Write a stage file; return its path and the line of the line marked `# bad`."""
    text = textwrap.dedent(body)
    path = p.stage(filename, text)
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if row.endswith("# bad"))
    return str(path), line


def refused(p: Project, where: tuple[str, int], *needles: str) -> str:
    code, out = plan_error(p)
    assert code == 4, out
    path, line = where
    assert f"{path}:{line}:" in out, out
    for needle in needles:
        assert needle in out, (needle, out)
    return out


COMMAND = """
[[check]]
kind = "command"
name = "lat"
run = "true"
[check.limits]
{limit} # bad
"""


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_command_limit_of_nan_or_infinity_is_refused(project: Callable[..., Project], value: str) -> None:
    """`max_lat = nan` passed every candidate: `median > nan` is false."""
    p = project()
    where = stage_with(p, "20-compile.toml", COMMAND.format(limit=f"max_lat = {value}"))
    refused(p, where, "check[0].limits.max_lat", f"max_lat = {value}", "a finite number")


def test_a_margin_of_nan_is_refused(project: Callable[..., Project]) -> None:
    """`lat_margin = nan` used to fail the candidate with a "nan%" margin."""
    p = project()
    where = stage_with(p, "20-compile.toml", COMMAND.format(limit="lat_margin = nan"))
    refused(p, where, "check[0].limits.lat_margin", "lat_margin = nan", "a finite number, at least 0")


def test_a_negative_margin_is_refused(project: Callable[..., Project]) -> None:
    p = project()
    where = stage_with(p, "20-compile.toml", COMMAND.format(limit="lat_margin = -0.1"))
    refused(p, where, "lat_margin = -0.1 is out of range", "at least 0")


BENCH = """
name = "bench"
[[check]]
kind = "bench"
run = "true"
looks = 1
alpha = {alpha} # bad
"""


@pytest.mark.parametrize("alpha", ["2", "0", "nan", "-0.5", "1"])
def test_a_bench_alpha_outside_0_1_is_refused(project: Callable[..., Project], alpha: str) -> None:
    p = project()
    where = stage_with(p, "60-bench.toml", BENCH.format(alpha=alpha))
    refused(p, where, "check[0].alpha", f"alpha = {alpha}", "more than 0 and less than 1")


def test_a_bench_speed_margin_of_one_is_refused(project: Callable[..., Project]) -> None:
    """δ = 1 would make every slowdown "within the margin" (1 − δ = 0)."""
    p = project()
    body = '[[check]]\nkind = "bench"\nrun = "true"\n[check.limits]\nspeed_margin = 1 # bad\n'
    where = stage_with(p, "60-bench.toml", body)
    refused(p, where, "check[0].limits.speed_margin", "at least 0 and less than 1")


def test_a_serving_alpha_of_zero_is_refused(project: Callable[..., Project]) -> None:
    """alpha = 0 asked the timing plan for infinitely many pairs; the judge then read 0.05."""
    p = project()
    body = '[[check]]\nkind = "openai-suite"\nserver = "true {port}"\nalpha = 0 # bad\n'
    where = stage_with(p, "40-serving.toml", body)
    refused(p, where, "check[0].alpha", "alpha = 0 is out of range", "more than 0 and less than 1")


def test_a_kld_confidence_of_two_is_refused(project: Callable[..., Project]) -> None:
    p = project()
    body = """
    [[check]]
    kind = "kld"
    run = "true"
    artifact = "x"
    confidence = 2 # bad
    [check.limits]
    max_mean_kld = 0.01
    """
    where = stage_with(p, "30-numerics.toml", body)
    refused(p, where, "check[0].confidence", "confidence = 2 is out of range", "less than 1")


def test_a_kld_agreement_above_one_is_refused(project: Callable[..., Project]) -> None:
    p = project()
    body = '[[check]]\nkind = "kld"\nrun = "true"\n[check.limits]\nmin_top1_agreement = 99 # bad\n'
    where = stage_with(p, "30-numerics.toml", body)
    refused(p, where, "min_top1_agreement = 99 is out of range", "at least 0 and at most 1")


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(
    project: Callable[..., Project], timeout: str
) -> None:
    """0 or -1 stopped the candidate at once and blamed it; NaN meant no limit at all."""
    p = project()
    body = f'[[check]]\nkind = "command"\nrun = "true"\ntimeout = {timeout} # bad\n'
    where = stage_with(p, "20-compile.toml", body)
    refused(p, where, "check[0].timeout", f"timeout = {timeout}", "more than 0")


def test_a_count_must_be_whole_and_in_range(project: Callable[..., Project]) -> None:
    p = project()
    where = stage_with(p, "60-bench.toml", '[[check]]\nkind = "bench"\nrun = "true"\nmax_pairs = 0 # bad\n')
    refused(p, where, "max_pairs = 0 is out of range", "at least 1")
    where = stage_with(p, "60-bench.toml", '[[check]]\nkind = "bench"\nrun = "true"\nlooks = 1.5 # bad\n')
    refused(p, where, "looks = 1.5", "a whole number")


def test_a_profile_is_checked_like_the_plan(project: Callable[..., Project]) -> None:
    """A profile's override is read with the same ranges, and the error points at the
    override's own line, not the check it overrides."""
    p = project()
    body = """
    [[check]]
    kind = "bench"
    name = "speed"
    run = "true"
    [profiles.quick.check.speed]
    alpha = nan # bad
    """
    where = stage_with(p, "60-bench.toml", body)
    refused(p, where, "profiles.quick.check.speed.alpha", "alpha = nan", "a finite number")


def test_a_variable_of_nan_is_refused_in_the_project_and_the_plan(project: Callable[..., Project]) -> None:
    """A variable fills a command: `--temp {temp}` would run with `--temp nan`."""
    p = project(config='[vars]\ntemp = nan\n[arms.pinned]\ninstallable = ".#a"\n')
    p.stage("20-compile.toml", '[[check]]\nkind = "command"\nrun = "true --temp {temp}"\n')
    code, out = plan_error(p)
    assert code == 4 and "qualify.toml:3:" in out and "temp = nan" in out and "finite" in out, out
    q = project()
    where = stage_with(
        q, "20-compile.toml", '[[check]]\nkind = "command"\nrun = "true"\nvars = { temp = inf } # bad\n'
    )
    refused(q, where, "vars.temp", "temp = inf", "finite")


def test_a_table_parameter_holding_nan_is_refused(project: Callable[..., Project]) -> None:
    """A soak's request `body` goes out as JSON, which has no NaN."""
    p = project()
    body = """
    [[check]]
    kind = "soak"
    server = "true {port}"
    [check.body]
    temperature = nan # bad
    [check.limits]
    max_rss_growth_mib = 64
    """
    where = stage_with(p, "50-soak.toml", body)
    refused(p, where, "check[0].body.temperature", "not a finite number")


def test_in_range_values_and_edges_are_accepted(project: Callable[..., Project]) -> None:
    """The ends a range includes are accepted; a plan of good values loads."""
    p = project()
    p.stage(
        "60-bench.toml",
        """
        [[check]]
        kind = "bench"
        run = "true"
        alpha = 0.5
        discard_reps = 0
        timeout = 0.5
        [check.limits]
        speed_margin = 0
        """,
    )
    p.stage(
        "30-numerics.toml", '[[check]]\nkind = "kld"\nrun = "true"\n[check.limits]\nmin_top1_agreement = 1\n'
    )
    code, out = plan_error(p)
    assert code == 0, out
    assert "speed_margin = 0" in out and "alpha = 0.5" in out, out

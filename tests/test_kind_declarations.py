"""Every kind declares its numbers once: a range for each numeric parameter and limit, defaults
inside them, and the implementations judge by the defaults the kind declares (what
`qualify kinds` and docs/check-kinds.md show)."""

from __future__ import annotations

import json

import pytest
from conftest import qualify_proc

from qualify.checks.base import TIMEOUT, CheckKind
from qualify.kinds import KINDS


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_number_has_a_range_and_its_default_lies_in_it(kind: CheckKind) -> None:
    for param in (*kind.params, TIMEOUT):
        if param.type not in ("number", "integer"):
            assert param.allowed is None, f"{kind.name}.{param.name}: a range on a {param.type}"
            continue
        assert param.allowed is not None, f"{kind.name}.{param.name} declares no range"
        if param.default is not None:
            assert param.default in param.allowed, (kind.name, param.name, param.default)
            assert param.type != "integer" or isinstance(param.default, int), (kind.name, param.name)
    for limit in kind.limits or ():
        if limit.default is not None:
            assert limit.default in limit.allowed, (kind.name, limit.name, limit.default)


def test_the_implementations_judge_by_the_declared_defaults() -> None:
    """One fact, one place: the defaults a judge falls back on are the kind's own."""
    from qualify.bench.schedule import DEFAULT_MARGIN
    from qualify.compile.diff import Limits
    from qualify.numerics.judge import DEFAULT_NI_MARGIN
    from qualify.serving.check import DEFAULT_LIMITS

    kinds = {k.name: k for k in KINDS}
    assert (
        DEFAULT_LIMITS
        == kinds["openai-suite"].limit_defaults()
        == {
            "tie_margin": 0.05,
            "max_slowdown_pct": 5.0,
            "max_slowdown_ms": 3.0,
        }
    )
    assert kinds["bench"].limit_defaults()["speed_margin"] == DEFAULT_MARGIN
    assert kinds["kld"].limit_defaults()["noninferiority_margin"] == DEFAULT_NI_MARGIN
    compile_defaults = kinds["kernel-resources"].limit_defaults()
    limits = Limits()
    assert {
        f"max_{name}": getattr(limits, name)
        for name in (
            "spill_growth",
            "scratch_growth_pct",
            "occupancy_drop",
            "host_code_growth_pct",
            "host_stack_growth_pct",
            "scratch_instruction_growth",
            "code_growth_pct",
        )
    } | {"min_class_shift_pct": limits.class_shift_pct} == compile_defaults


def test_kinds_shows_every_limit_with_its_range_and_default() -> None:
    done = qualify_proc("kinds", "--json")
    assert done.returncode == 0, done.stderr
    listed = {k["name"]: k for k in json.loads(done.stdout)}
    serving = {lim["name"]: lim for lim in listed["openai-suite"]["limits"]}
    assert serving["tie_margin"]["default"] == 0.05 and serving["tie_margin"]["range"] == "≥ 0"
    alpha = next(p for p in listed["bench"]["params"] if p["name"] == "alpha")
    assert alpha["range"] == "(0, 1)" and alpha["default"] == 0.05
    kld = {lim["name"]: lim for lim in listed["kld"]["limits"]}
    assert kld["max_mean_kld"]["default"] is None and kld["noninferiority_margin"]["default"] == 0.1
    text = qualify_proc("kinds", "openai-suite")
    assert text.returncode == 0 and "max_slowdown_ms" in text.stdout and "(0, 1)" in text.stdout

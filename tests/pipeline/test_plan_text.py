"""`qualify plan` shows what a check will use: its timeout, and only the parameters that mean
something for its settings.

Before: a check's `timeout` was not shown at all, and a `metrics` bench listed a server bench's
request sizes and time limits (prompt_tokens = 512, rounds = 10, …), which it never uses."""

from __future__ import annotations

from collections.abc import Callable

from conftest import Project

from qualify.pipeline.plan import load_plan
from qualify.pipeline.plantext import plan_text

METRICS_BENCH = """
name = "bench"
[[check]]
kind = "bench"
name = "kernels"
format = "metrics"
run = "bench --out {out_file}"
timeout = 600
"""

SERVER_BENCH = """
name = "bench"
[[check]]
kind = "bench"
name = "server"
format = "llama-server"
run = "llama-server -m {model} --port {port}"
rounds = 4
"""


def test_a_metrics_bench_shows_its_timeout_and_no_server_parameters(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("60-bench.toml", METRICS_BENCH)
    text = plan_text(load_plan(p.root / "stages"))
    assert "    timeout = 600  (seconds per role)" in text, text
    assert 'format = "metrics"' in text
    for server_only in ("prompt_tokens", "gen_tokens", "rounds", "warmup_requests", "request_timeout"):
        assert server_only not in text, text
    assert "allow_config_diff" not in text  # a llama-bench field list


def test_a_server_bench_still_shows_its_request_parameters(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("60-bench.toml", SERVER_BENCH)
    text = plan_text(load_plan(p.root / "stages"))
    assert "rounds = 4" in text and "prompt_tokens = 512" in text, text
    assert "timeout" not in text.replace("ready_timeout", "").replace("request_timeout", "")

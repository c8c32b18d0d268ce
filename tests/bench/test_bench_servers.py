"""The bench as interleaved requests to resident servers (`format = "llama-server"`), on the
CPU example's real llama-server: a block holds both roles' servers at once, its rounds alternate
between them, and the judge reads the blocks as pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from example_arms import example_marks
from jails import as_nobody

from qualify.bench import check, kind
from qualify.bench.serverblocks import rotated, server_config
from qualify.checks.base import Judgement, SavedCheck
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ArmSpec, ProjectConfig
from qualify.core.context import CheckContext, RoleArm
from qualify.core.verdicts import Verdict

#: Its heavy tests run with the machine to itself (tests/tiers.py): the real engine's servers
#: must decide their bench.
pytestmark = pytest.mark.alone

MODEL = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp" / "data" / "gemma-3-270m-q4_k_m.gguf"
SERVER = (
    "{bin}/llama-server -m {model} --host 127.0.0.1 --port {port} -c 512 -np 1 -b 128 -ub {ub} "
    "-t {threads} --no-webui"
)


def run_bench(
    tmp: Path, arms: dict[str, tuple[Path, dict[str, Any]]], params: dict[str, Any]
) -> tuple[Judgement, SavedCheck]:
    full = {p.name: p.default for p in kind.KIND.params}
    full.update(params)
    spec = CheckSpec("bench", "bench", full, {"speed_margin": 0.03}, tuple(arms))
    config = ProjectConfig(
        path=tmp / "qualify.toml", root=tmp, flake=".", plan_dir=None, pinned="pinned", reference=None,
        runs_dir=tmp / "runs", arms={}, vars={"model": str(MODEL), "threads": 2, "ub": 128}, inherit_env=(),
    )  # fmt: skip
    bound = {
        role: RoleArm(role, ArmSpec(f"{role}-arm", ".#default", vars=dict(v)), out=out)
        for role, (out, v) in arms.items()
    }
    folder = tmp / "bench"
    ctx = CheckContext(spec=spec, folder=folder, run_dir=tmp, config=config, arms=bound, echo=lambda _l: None)
    check.measure(ctx)
    saved = SavedCheck(folder, spec, tuple(arms))
    return check.judge(saved), saved


def test_every_role_leads_a_round_equally_often() -> None:
    rounds = [rotated(["pinned", "a", "b"], i) for i in range(6)]
    assert [r[0] for r in rounds] == ["pinned", "a", "b", "pinned", "a", "b"]
    assert all(sorted(r) == ["a", "b", "pinned"] for r in rounds)


def test_the_servers_command_line_is_the_configuration_compared() -> None:
    argv = [
        "/x/llama-server",
        "-m",
        "m.gguf",
        "-c",
        "4096",
        "-ub",
        "256",
        "--batch-size",
        "2048",
        "-ngl",
        "99",
    ]
    assert server_config(argv) == {
        "n_ctx": "4096",
        "n_ubatch": "256",
        "n_batch": "2048",
        "n_gpu_layers": "99",
    }


def test_a_plan_without_a_port_is_refused_before_anything_starts() -> None:
    params = {p.name: p.default for p in kind.KIND.params} | {
        "format": "llama-server",
        "run": "llama-server -m x",
    }
    problem = kind.KIND.invalid(CheckSpec("bench", "bench", params, {}, ("pinned", "candidate")))
    assert problem is not None and "{port}" in problem


@example_marks
@pytest.mark.parametrize(("ub", "slower"), [(128, False), (1, True)])
def test_blocks_of_resident_servers_decide_on_the_real_engine(
    example_outs: dict[str, Path], tmp_path: Path, ub: int, slower: bool
) -> None:
    """pinned's llama-server against itself (an A/A: never a regression; on a busy 2-core machine
    it may stay undecided), and against itself with a micro-batch of one token instead of 128 (a
    real runtime setting that makes prompt processing run token by token: the bench must call
    pp a regression). Both roles keep the same threads: a server given fewer threads than the
    other is not slower on a busy machine (its peer's idle threads spin on the same cores; one
    thread against two ran 4.5 times faster under a load of 6 on 2 cores). Seven blocks (the
    fewest at which the exact test reaches its level) of four rounds, both servers resident in
    each."""
    judgement, saved = run_bench(
        tmp_path,
        {"pinned": (example_outs["pinned"], {}), "candidate": (example_outs["pinned"], {"ub": ub})},
        {"format": "llama-server", "run": SERVER, "prompt_tokens": 64, "gen_tokens": 4, "rounds": 4,
         "warmup_requests": 1, "alpha": 0.05, "allow_config_diff": ["n_ubatch"], "looks": 1, "max_pairs": 7, "min_pairs": 7, "timeout": 300},
    )  # fmt: skip
    pp = next(f for f in judgement.findings if f.message.startswith("pp64"))
    if slower:
        assert judgement.verdict is Verdict.FAIL and "SLOWER" in pp.message, judgement.reason
    else:
        assert judgement.verdict is not Verdict.FAIL, judgement.reason
    frame = pd.read_parquet(saved.role_dir("pinned") / "samples.parquet")
    assert sorted(frame["test"].unique()) == ["pp64", "tg4"]
    assert frame.groupby(["unit", "test"]).size().eq(4).all()  # four rounds a block, each test
    schedule = pd.read_json(saved.folder / "schedule.json", typ="series")
    units = [u for u in schedule["units"] if u["phase"] == "pair"]
    assert len(units) == 14 and all(u["ok"] for u in units)
    # The two roles of a block were measured over the same span: one start, one duration.
    for block in range(1, 8):
        by_role = {u["role"]: u for u in units if u["pair"] == block}
        pinned, candidate = by_role["pinned"], by_role["candidate"]
        assert pinned["started_at"] == candidate["started_at"]
        assert pinned["duration_s"] == candidate["duration_s"]
        assert pinned["configs"]["pp64"]["n_ubatch"] == "128"
        assert candidate["configs"]["pp64"]["n_ubatch"] == str(ub)


@example_marks
def test_a_candidate_server_that_does_not_start_fails_the_bench_and_stops_it(
    example_outs: dict[str, Path], tmp_path: Path
) -> None:
    """The real llama-server given a thread count it refuses (`-t x`) as the candidate: the
    warm-up block keeps the candidate's unit with the server's own words, the schedule stops,
    and the bench FAILs (a candidate that cannot serve), where pinned's failure would be ERROR."""
    judgement, saved = run_bench(
        tmp_path,
        {"pinned": (example_outs["pinned"], {}), "candidate": (example_outs["pinned"], {"threads": "x"})},
        {
            "format": "llama-server",
            "run": SERVER,
            "prompt_tokens": 32,
            "gen_tokens": 4,
            "rounds": 2,
            "timeout": 120,
        },
    )
    assert judgement.verdict is Verdict.FAIL, judgement.reason
    schedule = pd.read_json(saved.folder / "schedule.json", typ="series")
    [unit] = schedule["units"]
    assert unit["role"] == "candidate" and unit["phase"] == "warmup" and not unit["ok"]
    assert unit["outcome"].startswith("candidate: ") and "error" not in unit
    assert schedule["stop_reason"] == "the warm-up block failed"


@example_marks
def test_blocks_of_resident_servers_run_contained_as_a_run_contains_them(
    example_outs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The servers of a block, started side by side from a pool of threads, each under
    bubblewrap as nobody as `qualify run` starts them, stay up through the block: bubblewrap's
    --die-with-parent follows the thread that started a command, and the pool's threads end
    once every server answers (on a GPU host every server died then, exit −9)."""
    run = tmp_path / "run"
    with as_nobody(run, monkeypatch, "server-blocks", writable="bench"):
        _, saved = run_bench(
            run,
            {"pinned": (example_outs["pinned"], {}), "candidate": (example_outs["pinned"], {})},
            {"format": "llama-server", "run": SERVER, "prompt_tokens": 32, "gen_tokens": 4, "rounds": 2,
             "warmup_requests": 1, "looks": 1, "max_pairs": 2, "min_pairs": 2, "timeout": 120},
        )  # fmt: skip
    schedule = pd.read_json(saved.folder / "schedule.json", typ="series")
    assert schedule["stop_reason"] != "the warm-up block failed", schedule["units"][0]["outcome"]
    units = [u for u in schedule["units"] if u["phase"] == "pair"]
    assert schedule["pairs"] >= 2 and len(units) == 2 * schedule["pairs"]
    assert all(u["ok"] for u in units), [u["outcome"] for u in units]

"""The numerics stage's looks: where they are planned, how the judgement walks them, and the
vectors a look sees (a prefix of the scored chunks, the same as scoring only that many)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qualify.numerics.formats import open_stream
from qualify.numerics.llamalogits import write_llama_logits
from qualify.numerics.looks import look_confidence, planned_looks, sequential
from qualify.numerics.tokenstats import TokenStats, token_stats


@pytest.mark.parametrize(
    ("first", "looks", "total", "planned"),
    [
        (48, 4, 48, ((48,))),
        (48, 4, 40, ((40,))),
        (48, 4, 87, ((48, 87))),
        (48, 4, 96, ((48, 96))),
        (48, 4, 200, ((48, 96, 192, 200))),
        (48, 4, 1000, ((48, 96, 192, 1000))),
        (48, 1, 1000, ((1000,))),
        (32, 3, 100, ((32, 64, 100))),
        (48, 4, 0, ()),
    ],
)
def test_looks_double_from_the_first_and_end_at_the_corpus(
    first: int, looks: int, total: int, planned: tuple[int, ...]
) -> None:
    assert planned_looks(first, looks, total) == planned


@pytest.mark.parametrize("decisive", [1, 2, 3, 4, None])
def test_the_walk_stops_at_the_first_look_that_decides(decisive: int | None) -> None:
    planned = (48, 96, 192, 200)
    seen: list[tuple[int, float]] = []

    def at(chunks: int, confidence: float) -> int:
        seen.append((chunks, confidence))
        return len(seen)

    stop = sequential(planned, 200, 0.95, at, lambda look: look == decisive)
    expected = decisive or 4
    assert stop.look == expected == len(seen) and stop.outcome == expected
    assert stop.chunks == planned[expected - 1] and [c for c, _ in seen] == list(planned[:expected])
    # Every look's bounds at 1 − α/K, K the planned looks, reached or not.
    assert {c for _, c in seen} == {stop.confidence} and stop.confidence == pytest.approx(1 - 0.05 / 4)


def test_scoring_that_ended_between_looks_gets_a_last_look_where_it_ended() -> None:
    seen: list[int] = []
    stop = sequential((48, 96, 192), 150, 0.95, lambda n, c: seen.append(n), lambda _: False)
    assert seen == [48, 96, 150] and stop.look == 3 and stop.chunks == 150
    assert stop.confidence == pytest.approx(1 - 0.05 / 3)


def test_a_result_from_before_looks_is_one_look_at_the_plans_confidence() -> None:
    stop = sequential((), 32, 0.95, lambda n, c: (n, c), lambda _: False)
    assert stop.outcome == (32, 0.95) and stop.planned == (32,) and stop.look == 1
    assert look_confidence(0.9, 1) == pytest.approx(0.9)


def _files(tmp_path: Path, chunks: int) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 40, (chunks, 12)).astype(np.int32)
    ref = rng.normal(0, 3, (chunks, 5, 40)).astype(np.float32)
    out = {}
    for i, role in enumerate(("reference", "pinned", "candidate")):
        logits = ref + rng.normal(0, 0.1 * i, ref.shape).astype(np.float32)
        out[role] = write_llama_logits(tmp_path / f"{role}-{chunks}.kld", tokens, list(logits))
    return out


def _arrays_equal(a: TokenStats, b: TokenStats) -> bool:
    x, y = a.arrays(), b.arrays()
    return x.keys() == y.keys() and all(
        np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f") for k in x
    )


def test_a_prefix_is_what_scoring_only_that_many_chunks_gives(tmp_path: Path) -> None:
    """Two corpora of one text, 30 and 12 chunks (the first 12 identical): the 30-chunk
    vectors cut at 12 equal the 12-chunk ones, array for array."""
    whole = token_stats({r: open_stream(p) for r, p in _files(tmp_path, 30).items()}, threads=1)
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 40, (30, 12)).astype(np.int32)[:12]
    ref = rng.normal(0, 3, (30, 5, 40)).astype(np.float32)
    short: dict[str, Path] = {}
    for i, role in enumerate(("reference", "pinned", "candidate")):
        logits = ref + rng.normal(0, 0.1 * i, ref.shape).astype(np.float32)
        short[role] = write_llama_logits(tmp_path / f"{role}-short.kld", tokens, list(logits[:12]))
    part = token_stats({r: open_stream(p) for r, p in short.items()}, threads=1)
    assert whole.n_chunks == 30 and part.n_chunks == 12
    assert _arrays_equal(whole.prefix(12), part)
    assert whole.prefix(30) is whole and whole.prefix(12).n_tokens == 12 * 5


def test_the_reduction_stops_at_the_look_its_caller_calls_decided(tmp_path: Path) -> None:
    files = _files(tmp_path, 30)
    asked: list[int] = []

    def stop(stats: TokenStats) -> bool:
        asked.append(stats.n_chunks)
        return stats.n_chunks >= 20

    got = token_stats({r: open_stream(p) for r, p in files.items()}, threads=1, looks=(10, 20, 30), stop=stop)
    assert asked == [10, 20] and got.n_chunks == 20
    whole = token_stats({r: open_stream(p) for r, p in files.items()}, threads=1)
    assert _arrays_equal(whole.prefix(20), got)

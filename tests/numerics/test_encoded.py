"""Per-token statistics straight from llama.cpp's uint16 codes (`qualify.numerics.encoded`)
against the float64 path that decodes every row: the same vectors, the same printed figures, on
files shaped like a real model's; the threshold of the KL's floor; the fallback for non-finite
rows; and the reader letting each chunk's pages go."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from qualify.numerics import tokenstats
from qualify.numerics.encoded import N_CODES, kept_from
from qualify.numerics.judge import Settings, judge_stats
from qualify.numerics.llamalogits import LlamaLogitsFile, llama_row_width, write_llama_logits
from qualify.numerics.summary import summarize
from qualify.numerics.tables import stats_tables
from qualify.numerics.tokenstats import PAIR_FIELDS, ROLE_FIELDS, TokenStats, token_stats

GEMMA3_VOCAB = 262_144
LIMITS = {
    "max_mean_kld": 0.01,
    "max_p99_kld": 0.1,
    "min_top1_agreement": 0.95,
    "max_abs_dppl_pct": 1.0,
    "max_confident_flips": 500.0,
}
SETTINGS = Settings(min_chunks=30, resamples=2000, seed=0, confidence=0.95, flip_margin=0.1)


def decoded(path: Path) -> list:
    """A llama.cpp file's chunks without their encoded rows: token_stats decodes them to float64."""
    return [dataclasses.replace(c, encoded=None) for c in LlamaLogitsFile(path).chunks()]


def _model_like(seed: int, tokens: np.ndarray, k: int, n_vocab: int) -> np.ndarray:
    """Chunk k's logits, shaped like a language model's: 64 plausible ids on a Zipf-like slope
    above a bulk, so that about 7 % of the vocabulary is within llama-perplexity's 16-nat window
    (Gemma 3's share); the target is the top id 45 % of the time (mean NLL about 2.4 nats) and
    the top-1/top-2 gap runs from a coin toss to near certainty."""
    n_ctx = tokens.shape[1]
    first = n_ctx // 2
    n_rows = n_ctx - 1 - first
    rng = np.random.default_rng([seed, k])
    x = rng.normal(0.0, 3.0, (n_rows, n_vocab)).astype(np.float32)
    for j in range(n_rows):
        ids = rng.choice(n_vocab, 64, replace=False)
        rank = min(int(rng.geometric(0.45)), 64) - 1
        target = tokens[k, first + j + 1]
        ids = np.concatenate([ids[ids != target][:rank], [target], ids[ids != target][rank:]])[:64]
        slope = rng.uniform(0.1, 4.0) * np.log(np.arange(1, 65))
        x[j, ids] = (19.5 - slope + rng.normal(0.0, 0.3, 64)).astype(np.float32)
    return x


def write_roles(folder: Path, n_vocab: int, n_chunk: int, n_ctx: int, seed: int = 7) -> dict[str, Path]:
    """reference, pinned, pinned.2 (pinned again, one row off by a hair) and candidate: logits
    differing from the reference's by noise of 0.01 and 0.04 nats, the size a toolchain's
    rounding leaves after llama.cpp's encoding (KL around 1e-5 to 1e-4 per token)."""
    tokens = np.random.default_rng(seed).integers(0, n_vocab, (n_chunk, n_ctx), dtype=np.int32)
    noise = {"reference": (0.0, 0), "pinned": (0.01, 1), "pinned.2": (0.01, 1), "candidate": (0.04, 2)}

    def chunks(role: str) -> Iterator[np.ndarray]:
        sigma, stream = noise[role]
        for k in range(n_chunk):
            x = _model_like(seed, tokens, k, n_vocab)
            if sigma:
                rng = np.random.default_rng([seed, k, stream])
                x += sigma * rng.standard_normal(x.shape, dtype=np.float32)
            if role == "pinned.2":
                x[0] += np.float32(1e-3)
            yield x

    return {role: write_llama_logits(folder / f"{role}.kld", tokens, chunks(role)) for role in noise}


@pytest.fixture(scope="module")
def real_shaped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four roles of 30 chunks of -c 8 (90 scored tokens) at Gemma 3's vocabulary, 47 MB each.
    30 chunks, as min_chunks asks: with fewer, a bootstrap resample that is a permutation of all
    chunks is common (8!/8^8 of them for 8), and its mean equals the estimate up to rounding, so
    BCa's bias correction, which counts resamples below the estimate, turns on the last bit of
    any sum (a fragility of few chunks, not of a path)."""
    return write_roles(tmp_path_factory.mktemp("real-shaped"), GEMMA3_VOCAB, 30, 8)


def _assert_same_vectors(got: TokenStats, want: TokenStats, kld_rtol: float = 0.0) -> None:
    for role in want.roles:
        for name in ROLE_FIELDS:
            np.testing.assert_array_equal(
                getattr(got.role[role], name), getattr(want.role[role], name), err_msg=f"{role} {name}"
            )
    for pair in want.pair:
        for name in PAIR_FIELDS:
            a, b = getattr(got.pair[pair], name), getattr(want.pair[pair], name)
            if name == "kld" and kld_rtol:
                # The float64 path rounds b_i - q_i of two log-probs near -16: ~1e-15 nats a term.
                np.testing.assert_allclose(a, b, rtol=kld_rtol, atol=1e-15, err_msg=f"{pair} kld")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{pair} {name}")
    assert got.kld_lower_bound == want.kld_lower_bound


@pytest.mark.slow
def test_encoded_path_prints_what_the_float64_path_prints(
    real_shaped: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every per-token vector but the KL is bitwise the float64 path's; the KL differs by float64
    rounding. So every figure the report prints (the five judged ones — mean KLD, p99 KLD, top-1
    agreement, |ΔPPL|, confident flips — their bounds, the non-inferiority table, the
    distribution tables and llama-perplexity's lines at six significant digits) is the same."""
    want = token_stats({r: decoded(p) for r, p in real_shaped.items()})

    def no_decoding(*args: object) -> None:
        raise AssertionError("a llama.cpp chunk with finite rows was decoded")

    with monkeypatch.context() as m:
        m.setattr(tokenstats, "decoded_stats", no_decoding)
        got = token_stats({r: LlamaLogitsFile(p) for r, p in real_shaped.items()})
    assert got.n_tokens == want.n_tokens == 30 * 3
    _assert_same_vectors(got, want, kld_rtol=1e-9)
    # The data is what it says: about a tenth of the vocabulary above the floor, targets above it.
    rows = LlamaLogitsFile(real_shaped["reference"]).chunk(0).logprobs()
    assert 0.04 < float(np.mean(rows > -16)) < 0.12
    assert not want.role["reference"].target_at_floor.any()
    assert 1 < want.role["reference"].nll.mean() < 4
    assert want.top1_agreement("candidate").mean() >= 0.95

    got_out, want_out = judge_stats(got, LIMITS, SETTINGS), judge_stats(want, LIMITS, SETTINGS)
    got_tables = stats_tables(got, got_out, LIMITS, SETTINGS)
    want_tables = stats_tables(want, want_out, LIMITS, SETTINGS)
    titles = [t.title for t in want_tables]
    assert [t.title for t in got_tables] == titles
    assert any(t.startswith("Against the reference") for t in titles)
    assert any(t.startswith("llama-perplexity's") for t in titles)
    assert any(t.startswith("Non-inferiority") for t in titles)
    for g, w in zip(got_tables, want_tables, strict=True):
        assert g.rows == w.rows, g.title
    assert [f.message for f in got_out.findings] == [f.message for f in want_out.findings]
    for pair in want.pair:
        printed_got, printed_want = summarize(got, *pair).printed(), summarize(want, *pair).printed()
        for line, (value, _) in printed_want.items():
            assert f"{printed_got[line][0]:.6g}" == f"{value:.6g}", (pair, line)


@pytest.mark.slow
def test_threads_do_not_change_a_bit(real_shaped: dict[str, Path]) -> None:
    one = token_stats({r: LlamaLogitsFile(p) for r, p in real_shaped.items()}, threads=1)
    three = token_stats({r: LlamaLogitsFile(p) for r, p in real_shaped.items()}, threads=3)
    for name, value in one.arrays().items():
        np.testing.assert_array_equal(value, three.arrays()[name], err_msg=name)


def _small_roles(tmp_path: Path, n_vocab: int) -> tuple[np.ndarray, dict[str, Path]]:
    rng = np.random.default_rng(11)
    n_chunk, n_ctx = 3, 20
    n_rows = n_ctx - 1 - n_ctx // 2
    tokens = rng.integers(0, n_vocab, (n_chunk, n_ctx), dtype=np.int32)
    ref = rng.normal(0, 4, (n_chunk, n_rows, n_vocab)).astype(np.float32)
    ref[0, 0] = 1.5  # a flat row: scale 0, every code 0
    ref[0, 1, :5] = ref[0, 1].max() + 1  # five ids tie at the top code: the first one is top-1
    ref[1, 2, tokens[1, n_ctx // 2 + 3]] = -60  # a target far below the floor
    paths = {}
    for role, sigma in (("reference", 0.0), ("pinned", 0.05), ("candidate", 0.3)):
        logits = ref + sigma * rng.standard_normal(ref.shape).astype(np.float32)
        paths[role] = write_llama_logits(tmp_path / f"{role}.kld", tokens, list(logits))
    return tokens, paths


@pytest.mark.parametrize("n_vocab", [1000, 3001, 5000])
@pytest.mark.parametrize("kl_floor", [-16.0, -3.0, None])
def test_small_vocabularies_ties_flat_rows_and_floors(
    tmp_path: Path, n_vocab: int, kl_floor: float | None
) -> None:
    """Odd vocabularies (a pad word), vocabularies not a multiple of the tile, ties at the top
    code, a row with scale 0, a target at the floor, and any KL floor: the same as decoding."""
    _, paths = _small_roles(tmp_path, n_vocab)
    got = token_stats({r: LlamaLogitsFile(p) for r, p in paths.items()}, kl_floor=kl_floor)
    want = token_stats({r: decoded(p) for r, p in paths.items()}, kl_floor=kl_floor)
    _assert_same_vectors(got, want, kld_rtol=1e-9)
    assert got.role["reference"].top1[1] == 0 and got.role["reference"].top_margin[1] == 0
    assert got.role["reference"].target_at_floor.sum() >= 1


def _patch_row(path: Path, chunk: int, row: int, field: str, value: float) -> None:
    f = LlamaLogitsFile(path)
    row_bytes = 2 * llama_row_width(f.n_vocab)
    offset = (
        20 + 4 * f.n_chunk * f.n_ctx + (chunk * f.n_rows + row) * row_bytes + (0 if field == "scale" else 4)
    )
    with path.open("r+b") as out:
        out.seek(offset)
        out.write(np.array([value], "<f4").tobytes())


def test_non_finite_rows_are_decoded_and_counted(tmp_path: Path) -> None:
    """A NaN minimum or scale (NaN logits of the engine pass the reader's checks): that chunk is
    decoded, so the NaN counts and NaN vectors are the float64 path's; other chunks are not."""
    _, paths = _small_roles(tmp_path, 1000)
    _patch_row(paths["candidate"], 1, 4, "min_lp", math.nan)
    _patch_row(paths["pinned"], 1, 2, "scale", math.nan)
    _patch_row(paths["pinned"], 1, 3, "min_lp", -math.inf)
    got = token_stats({r: LlamaLogitsFile(p) for r, p in paths.items()})
    want = token_stats({r: decoded(p) for r, p in paths.items()})
    _assert_same_vectors(got, want, kld_rtol=1e-9)
    n_rows = got.chunk_sizes()[0]
    assert got.role["candidate"].nonfinite[n_rows + 4] == 1000
    assert got.role["pinned"].nonfinite.sum() == 2000
    assert np.isnan(got.kld("reference", "candidate")[n_rows + 4])


def test_kl_threshold_is_where_the_float64_decode_crosses_the_floor() -> None:
    rng = np.random.default_rng(3)
    scale = rng.uniform(0, 16 / 65535, 400).astype(np.float32).astype(np.float64)
    min_lp = rng.uniform(-40, 0, 400).astype(np.float32).astype(np.float64)
    scale[:3], min_lp[:3] = 0.0, [-15.0, -16.0, -17.0]  # flat rows: all kept, or none
    step = np.float32(16 / 65535)
    for i, k in enumerate((1, 777, 65535, 65534)):  # the floor exactly on a code: that code is not kept
        scale[3 + i], min_lp[3 + i] = step, -16.0 - float(step) * k
    codes = np.arange(N_CODES, dtype=np.float64)
    for floor in (-16.0, -1.0, -100.0):
        t = kept_from(scale, min_lp, floor)
        for row in range(len(scale)):
            kept = np.flatnonzero(codes * scale[row] + min_lp[row] > floor)
            assert t[row] == (kept[0] if kept.size else N_CODES), (floor, row)
            assert kept.size == 0 or kept.size == N_CODES - kept[0]  # kept codes are contiguous
    assert (kept_from(scale, min_lp, None) == 0).all()


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            inside = line.rstrip().endswith(str(path))
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")
def test_reading_a_file_keeps_about_one_chunk_resident(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n_chunk, n_ctx, n_vocab = 12, 64, 16_384  # 31 rows of 32 KiB a chunk: 1 MiB
    tokens = rng.integers(0, n_vocab, (n_chunk, n_ctx), dtype=np.int32)
    logits = (rng.normal(0, 3, (31, n_vocab)).astype(np.float32) for _ in range(n_chunk))
    path = write_llama_logits(tmp_path / "long.kld", tokens, logits)
    f = LlamaLogitsFile(path)
    chunk_kib = 31 * 2 * (n_vocab + 4) // 1024
    peak, total = 0, 0
    for chunk in f.chunks():
        assert chunk.encoded is not None
        total += int(chunk.encoded(0, chunk.n_rows).sum(dtype=np.uint64))  # every page read
        peak = max(peak, _mapped_kib(path))
    assert total > 0
    assert chunk_kib <= peak <= 2 * chunk_kib + 64
    assert _mapped_kib(path) <= 64  # the last chunk went too
    # A chunk read again after its pages went is read again from the page cache, unchanged.
    again = f.chunk(0).logprobs()
    np.testing.assert_array_equal(again, LlamaLogitsFile(path).chunk(0).logprobs())

"""Per-token statistics: hand-worked tiny vocabularies, llama-perplexity's definitions, top-K
lower bounds, mismatched streams, and the summary against independent formulas."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from qualify.numerics.formats import TopKFile, topk_rows, write_topk
from qualify.numerics.llamalogits import write_llama_logits
from qualify.numerics.stream import DenseChunk, log_softmax
from qualify.numerics.summary import llama_percentile, mean_and_uncertainty, summarize
from qualify.numerics.tokenstats import (
    StreamMismatch,
    TokenStats,
    default_pairs,
    token_stats,
)


def dense(tokens: np.ndarray, rows: Sequence[np.ndarray]) -> list[DenseChunk]:
    """In-memory chunks: tokens [n_chunk, n_ctx], rows[k] = log-probs [n_rows, n_vocab]."""
    first = tokens.shape[1] // 2
    out = []
    for k, block in enumerate(rows):
        r = np.asarray(block, np.float64)
        out.append(DenseChunk(k, tokens[k], first, r.shape[1], r.shape[0], lambda a, b, r=r: r[a:b].copy()))
    return out


def ln(*p: float) -> list[float]:
    return [math.log(x) if x > 0 else -math.inf for x in p]


TOKENS = np.array([[0, 1, 2, 1, 0]])  # n_ctx 5: rows at positions 2 and 3 predict tokens 1 and 0
REF = [[ln(0.7, 0.2, 0.1), ln(0.5, 0.3, 0.2)]]
CAND = [[ln(0.6, 0.3, 0.1), ln(0.2, 0.5, 0.3)]]
PINNED = [[ln(0.7, 0.25, 0.05), ln(0.4, 0.4, 0.2)]]


def test_hand_worked_pair() -> None:
    stats = token_stats({"reference": dense(TOKENS, REF), "candidate": dense(TOKENS, CAND)})
    assert stats.n_tokens == 2 and stats.n_chunks == 1
    assert stats.position.tolist() == [2, 3] and stats.target.tolist() == [1, 0]
    pair = stats.pair[("reference", "candidate")]
    kl0 = 0.7 * math.log(0.7 / 0.6) + 0.2 * math.log(0.2 / 0.3)
    kl1 = 0.5 * math.log(0.5 / 0.2) + 0.3 * math.log(0.3 / 0.5) + 0.2 * math.log(0.2 / 0.3)
    np.testing.assert_allclose(pair.kld, [kl0, kl1], rtol=1e-12)
    np.testing.assert_allclose(stats.role["reference"].nll, [-math.log(0.2), -math.log(0.5)], rtol=1e-12)
    np.testing.assert_allclose(stats.role["candidate"].nll, [-math.log(0.3), -math.log(0.2)], rtol=1e-12)
    assert pair.same_top.tolist() == [True, False]
    np.testing.assert_allclose(pair.dp_target, [0.3 - 0.2, 0.2 - 0.5], atol=1e-12)
    np.testing.assert_allclose(pair.dp_base_top, [0.6 - 0.7, 0.2 - 0.5], atol=1e-12)
    np.testing.assert_allclose(stats.role["reference"].top_margin, [math.log(0.7 / 0.2), math.log(0.5 / 0.3)])
    # Row 1 flips with a reference margin of ln(5/3) = 0.51 nats: confident at 0.1, not at 0.6.
    assert stats.confident_flips("candidate", 0.1).tolist() == [False, True]
    assert stats.confident_flips("candidate", 0.6).tolist() == [False, False]
    assert stats.role["candidate"].nonfinite.tolist() == [0, 0]


def test_three_roles_make_three_pairs_in_order() -> None:
    streams = {
        "reference": dense(TOKENS, REF),
        "pinned": dense(TOKENS, PINNED),
        "candidate": dense(TOKENS, CAND),
    }
    stats = token_stats(streams)
    assert list(stats.pair) == [("reference", "pinned"), ("reference", "candidate"), ("pinned", "candidate")]
    assert default_pairs(["reference", "pinned", "pinned.2", "candidate"], "reference")[3:] == [
        ("pinned", "pinned.2"),
        ("pinned", "candidate"),
        ("pinned.2", "candidate"),
    ]
    kl_pc0 = 0.7 * math.log(0.7 / 0.6) + 0.25 * math.log(0.25 / 0.3) + 0.05 * math.log(0.05 / 0.1)
    assert stats.kld("pinned", "candidate")[0] == pytest.approx(kl_pc0, rel=1e-12)
    # Row 1 of pinned ties 0.4/0.4: the first index wins, as in llama-perplexity.
    assert stats.role["pinned"].top1.tolist() == [0, 0]
    assert stats.role["pinned"].top_margin[1] == 0.0


def test_llama_kl_is_truncated_at_minus_16_and_not_renormalised() -> None:
    tokens = np.array([[0, 0, 0, 0, 0]])
    ref = [[[math.log1p(-1e-8), math.log(1e-8)]] * 2]  # ln 1e-8 = -18.4: below the -16 cut
    cand = [[[math.log1p(-1e-9), math.log(1e-9)]] * 2]
    llama = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)})
    full = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)}, kl_floor=None)
    truncated = (1 - 1e-8) * (math.log1p(-1e-8) - math.log1p(-1e-9))
    assert truncated < 0  # the truncated sum can go below zero
    np.testing.assert_allclose(llama.kld("reference", "candidate"), [truncated] * 2, rtol=1e-9)
    expected_full = truncated + 1e-8 * math.log(10)
    np.testing.assert_allclose(full.kld("reference", "candidate"), [expected_full] * 2, rtol=1e-9)


def test_mismatched_tokens_name_the_first_difference() -> None:
    tokens = np.arange(30).reshape(3, 10) % 7
    rows = [np.log(np.full((4, 7), 1 / 7))] * 3
    other = tokens.copy()
    other[1, 3], other[2, 0] = 5, 6
    with pytest.raises(
        StreamMismatch, match="chunk 1, position 3: reference has token 6, candidate has token 5"
    ) as e:
        token_stats({"reference": dense(tokens, rows), "candidate": dense(other, rows)})
    assert (e.value.chunk, e.value.position) == (1, 3)
    with pytest.raises(StreamMismatch, match="candidate has 2 chunks, reference has more"):
        token_stats({"reference": dense(tokens, rows), "candidate": dense(tokens[:2], rows[:2])})
    with pytest.raises(StreamMismatch, match="reference has n_vocab 7, candidate has 6"):
        token_stats({"reference": dense(tokens, rows), "candidate": dense(tokens, [r[:, :6] for r in rows])})


def test_nonfinite_log_probs_are_counted() -> None:
    cand = [[ln(0.6, 0.3, 0.1), [math.nan, math.log(0.5), -math.inf]]]
    stats = token_stats({"reference": dense(TOKENS, REF), "candidate": dense(TOKENS, cand)})
    assert stats.role["candidate"].nonfinite.tolist() == [0, 2]
    s = summarize(stats, "reference", "candidate")
    assert (s.nonfinite_base, s.nonfinite_other) == (0, 2)


def test_target_at_a_llama_files_floor_is_flagged(tmp_path: Path) -> None:
    tokens = np.array([[0, 0, 0, 0, 1, 2]])  # n_ctx 6: rows at 3 and 4 predict tokens 1 and 2
    logits = np.array([[5.0, 4.0, -30.0, 0.0], [5.0, -30.0, 4.0, 0.0]], np.float32)
    path = write_llama_logits(tmp_path / "f.kld", tokens, [logits])
    from qualify.numerics.llamalogits import LlamaLogitsFile

    f = LlamaLogitsFile(path)
    stats = token_stats({"reference": f, "candidate": f})
    floor = f.chunk(0).floors()
    assert stats.role["reference"].target_at_floor.tolist() == [False, False]
    logits[0, 1] = -30.0  # the first target now sits 35 nats below the maximum
    g = LlamaLogitsFile(write_llama_logits(tmp_path / "g.kld", tokens, [logits]))
    stats = token_stats({"reference": g, "candidate": f})
    assert stats.role["reference"].target_at_floor.tolist() == [True, False]
    assert stats.role["reference"].nll[0] == pytest.approx(-g.chunk(0).floors()[0])  # a lower bound, ~16 nats
    assert floor is not None and summarize(stats, "reference", "candidate").target_at_floor_base == 1


def _random_streams(
    seed: int, n_chunk: int = 4, n_vocab: int = 200, n_ctx: int = 16
) -> tuple[np.ndarray, list, list]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, n_vocab, (n_chunk, n_ctx))
    n_rows = n_ctx - 1 - n_ctx // 2
    ref = rng.normal(0, 3, (n_chunk, n_rows, n_vocab))
    cand = ref + rng.normal(0, 0.3, ref.shape)
    return tokens, [log_softmax(x) for x in ref], [log_softmax(x) for x in cand]


def test_block_size_does_not_change_results() -> None:
    tokens, ref, cand = _random_streams(1)
    big = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)})
    one_row = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)}, block_bytes=1)
    for name, value in big.arrays().items():
        np.testing.assert_array_equal(value, one_row.arrays()[name], err_msg=name)


def test_summary_matches_independent_formulas() -> None:
    tokens, ref, cand = _random_streams(2, n_chunk=5, n_ctx=32)
    stats = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)})
    s = summarize(stats, "reference", "candidate", margin=0.2)
    nq, nb = stats.role["candidate"].nll, stats.role["reference"].nll
    pv = stats.pair[("reference", "candidate")]
    n = stats.n_tokens
    assert n == 5 * 15
    assert s.ppl_q == pytest.approx(math.exp(nq.mean()), rel=1e-12)
    assert s.ppl_base == pytest.approx(math.exp(nb.mean()), rel=1e-12)
    assert s.ppl_q_unc == pytest.approx(s.ppl_q * nq.std() / math.sqrt(n - 1), rel=1e-9)
    assert s.cor_ln_ppl == pytest.approx(np.corrcoef(nq, nb)[0, 1], rel=1e-9)  # Pearson r of the NLLs
    assert s.ln_ppl_ratio_unc == pytest.approx((nq - nb).std() / math.sqrt(n - 1), rel=1e-9)
    assert s.dppl_pct == pytest.approx(100 * (math.exp(nq.mean() - nb.mean()) - 1), rel=1e-12)
    assert s.kld_mean == pytest.approx(pv.kld.mean(), rel=1e-12)
    for name, f in (("99.0%", 0.99), ("90.0%", 0.9), ("Median", 0.5), ("0.1%", 0.001)):
        assert s.kld_percentiles[name] == pytest.approx(np.quantile(pv.kld, f), rel=1e-12)
    assert s.kld_median == pytest.approx(np.median(pv.kld), rel=1e-12)
    assert (s.kld_max, s.kld_percentiles["Minimum"]) == (pv.kld.max(), pv.kld.min())
    assert s.rms_dp == pytest.approx(math.sqrt((pv.dp_target**2).mean()), rel=1e-12)
    assert s.same_top_p == pv.same_top.mean()
    assert s.same_top_p_unc == pytest.approx(math.sqrt(s.same_top_p * (1 - s.same_top_p) / (n - 1)))
    flips = (~pv.same_top & (stats.role["reference"].top_margin > 0.2)).sum()
    assert (s.confident_flips, s.confident_flips_per_1e5) == (flips, pytest.approx(1e5 * flips / n))
    printed = s.printed()
    assert printed["Same top p"] == (100 * s.same_top_p, 100 * s.same_top_p_unc)
    assert printed["99.0% KLD"] == (s.kld_p99, None)
    assert printed["RMS Δp"][0] == 100 * s.rms_dp


def test_mean_and_uncertainty_and_percentile_rules() -> None:
    assert mean_and_uncertainty([1.0, 2.0, 3.0]) == (2.0, 0.0)  # N <= 10: no ±
    x = np.arange(11.0)
    assert mean_and_uncertainty(x) == pytest.approx((5.0, x.std() / math.sqrt(10)))
    assert llama_percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5  # even N: mean of the middle two
    assert llama_percentile([1.0, 2.0, 3.0, 4.0], 0.9) == pytest.approx(3.7)  # 0.9*(4-1) = 2.7
    assert llama_percentile([1.0, 5.0], 1.0) == 5.0


def test_arrays_round_trip_through_npz() -> None:
    tokens, ref, cand = _random_streams(3)
    stats = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)})
    buf = io.BytesIO()
    np.savez(buf, **stats.arrays())
    buf.seek(0)
    with np.load(buf) as z:
        back = TokenStats.from_arrays({k: z[k] for k in z.files})
    assert back.roles == stats.roles and back.kld_lower_bound == stats.kld_lower_bound
    assert summarize(back, "reference", "candidate") == summarize(stats, "reference", "candidate")


def test_topk_kl_is_a_lower_bound_and_exact_when_k_covers_the_vocabulary(tmp_path: Path) -> None:
    tokens, ref, cand = _random_streams(4, n_vocab=64)
    targets = [t[8 + 1 :] for t in tokens]
    full = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)}, kl_floor=None)
    rows = [topk_rows(c, t, 64) for c, t in zip(cand, targets, strict=True)]
    top = TopKFile(write_topk(tmp_path / "c.npz", tokens, rows, n_vocab=64))
    coarse = token_stats({"reference": dense(tokens, ref), "candidate": top})
    assert coarse.kld_lower_bound[("reference", "candidate")]
    np.testing.assert_allclose(
        coarse.kld("reference", "candidate"), full.kld("reference", "candidate"), atol=2e-6
    )

    tokens, ref, cand = _random_streams(5, n_vocab=400)
    targets = [t[8 + 1 :] for t in tokens]
    exact = token_stats({"reference": dense(tokens, ref), "candidate": dense(tokens, cand)}, kl_floor=None)
    ref_top = [topk_rows(r, t, 64) for r, t in zip(ref, targets, strict=True)]
    with_ref = [topk_rows(c, t, 64, ref_ids=rt.ids) for c, t, rt in zip(cand, targets, ref_top, strict=True)]
    plain = [topk_rows(c, t, 64) for c, t in zip(cand, targets, strict=True)]
    r_file = TopKFile(write_topk(tmp_path / "r.npz", tokens, ref_top, n_vocab=400))
    kl_with_ref = token_stats(
        {
            "reference": r_file,
            "candidate": TopKFile(write_topk(tmp_path / "w.npz", tokens, with_ref, n_vocab=400)),
        }
    ).kld("reference", "candidate")
    kl_plain = token_stats(
        {
            "reference": r_file,
            "candidate": TopKFile(write_topk(tmp_path / "p.npz", tokens, plain, n_vocab=400)),
        }
    ).kld("reference", "candidate")
    kl = exact.kld("reference", "candidate")
    # A coarser partition (ids known to both) can only lose divergence (data processing).
    assert (kl_plain <= kl_with_ref + 1e-6).all() and (kl_with_ref <= kl + 1e-6).all()
    assert kl_with_ref.mean() > 0.5 * kl.mean()  # and the reference's top-64 hold most of it here


def test_reference_top_token_unknown_to_a_topk_stream_is_nan(tmp_path: Path) -> None:
    tokens, ref, _ = _random_streams(6, n_chunk=1, n_vocab=300)
    reverse = [-r for r in ref]  # the candidate ranks the vocabulary upside down
    rows = [topk_rows(reverse[0], tokens[0, 9:], 64)]
    top = TopKFile(write_topk(tmp_path / "rev.npz", tokens, rows, n_vocab=300))
    stats = token_stats({"reference": dense(tokens, ref), "candidate": top})
    assert np.isnan(stats.pair[("reference", "candidate")].dp_base_top).all()
    assert math.isnan(summarize(stats, "reference", "candidate").dp_base_top_mean)

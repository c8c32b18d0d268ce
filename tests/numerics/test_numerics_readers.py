"""Readers of log-prob artifacts: llama.cpp `_logits_` files (written here by an encoder that
follows llama-perplexity's arithmetic, and by the real llama-perplexity of the example's arms),
`qualify.logprobs/v1` directories and `qualify.topk/v1` files."""

from __future__ import annotations

import json
import math
import mmap
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qualify.numerics.formats import (
    LogprobDir,
    TopKFile,
    open_stream,
    topk_rows,
    write_logprob_dir,
    write_topk,
)
from qualify.numerics.llamalogits import (
    LLAMA_MAGIC,
    LlamaLogitsFile,
    encode_llama_rows,
    llama_file_size,
    llama_row_width,
    write_llama_logits,
)
from qualify.numerics.stream import DenseChunk, LogprobFileError, TopKChunk, log_softmax
from qualify.numerics.summary import DP_PERCENTILES, KLD_PERCENTILES, summarize
from qualify.numerics.tokenstats import token_stats

RNG_SEED = 20260528


def _logits(
    rng: np.random.Generator, n_chunk: int, n_rows: int, n_vocab: int, sigma: float = 4.0
) -> np.ndarray:
    return (rng.normal(0, sigma, (n_chunk, n_rows, n_vocab))).astype(np.float32)


def _tokens(rng: np.random.Generator, n_chunk: int, n_ctx: int, n_vocab: int) -> np.ndarray:
    return rng.integers(0, n_vocab, (n_chunk, n_ctx)).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# llama.cpp _logits_ files, written by the encoder


def test_row_width_and_file_size_follow_the_layout() -> None:
    assert llama_row_width(1000) == 1004
    assert llama_row_width(1001) == 1006  # one zero pad keeps rows 4-byte aligned
    # -c 512, 262 144 vocab, 3 chunks: 255 rows of 262 148 words per chunk
    assert llama_file_size(512, 262144, 3) == 20 + 4 * 3 * 512 + 2 * 3 * 255 * 262148


def test_encoder_codes_a_hand_worked_row() -> None:
    logits = np.array([[0.0, 1.0, 2.0, -20.0]], np.float32)
    [row] = encode_llama_rows(logits)
    scale = np.float32(16) / np.float32(65535)  # mx - mn = 2 - max(-20, 2 - 16) = 16
    lse = math.log(math.exp(-2) + math.exp(-1) + 1 + math.exp(-22))
    assert row["scale"] == pytest.approx(scale, rel=1e-7)
    assert row["min_lp"] == pytest.approx(-14 - 2 - lse, abs=1e-6)
    # (l - mn)/scale = 14*65535/16 = 57343.1, 15*65535/16 = 61439.1, 65535; -20 is below mn: 0
    assert row["q"].tolist() == [57343, 61439, 65535, 0]


def test_encoder_zero_scale_row_decodes_to_uniform(tmp_path: Path) -> None:
    tokens = np.zeros((1, 5), np.int32)
    path = write_llama_logits(tmp_path / "flat.kld", tokens, [np.full((2, 8), 3.0, np.float32)])
    rows = LlamaLogitsFile(path).chunk(0).logprobs()
    np.testing.assert_allclose(rows, np.full((2, 8), -math.log(8)), atol=1e-6)


@pytest.mark.parametrize("n_vocab", [1000, 1001])
def test_llama_round_trip_within_half_a_code_step(tmp_path: Path, n_vocab: int) -> None:
    rng = np.random.default_rng(RNG_SEED)
    n_chunk, n_ctx = 3, 9  # first = 4, 4 scored rows per chunk
    tokens, logits = _tokens(rng, n_chunk, n_ctx, n_vocab), _logits(rng, n_chunk, 4, n_vocab)
    path = write_llama_logits(tmp_path / "base.kld", tokens, list(logits))
    assert path.stat().st_size == llama_file_size(n_ctx, n_vocab, n_chunk)
    raw = path.read_bytes()
    assert raw[:8] == LLAMA_MAGIC
    f = LlamaLogitsFile(path)
    assert (f.n_ctx, f.n_vocab, f.n_chunk, f.first, f.n_rows) == (n_ctx, n_vocab, n_chunk, 4, 4)
    assert isinstance(f._map, mmap.mmap) and f._records is not None  # rows are mapped, not read
    assert not f._records.flags.owndata and not f._records.flags.writeable
    np.testing.assert_array_equal(f.tokens, tokens)
    chunks = list(f.chunks())
    assert [c.index for c in chunks] == [0, 1, 2]
    for k, chunk in enumerate(chunks):
        assert isinstance(chunk, DenseChunk)
        np.testing.assert_array_equal(chunk.targets, tokens[k, 5:9])
        true = log_softmax(logits[k])
        got, floor = chunk.logprobs(), chunk.floors()
        assert floor is not None
        step = f.row_scales()[k][:, None]
        above = logits[k] > logits[k].max(axis=1, keepdims=True) - 16
        # Half a code step, plus float32 rounding of min_log_prob (|x| < 32 nats).
        assert (np.abs(got - true)[above] <= (step / 2 * 1.001 + 4e-6).repeat(n_vocab, 1)[above]).all()
        assert (got[~above] == np.broadcast_to(floor[:, None], got.shape)[~above]).all()
        np.testing.assert_array_equal(chunk.logprobs(1, 3), got[1:3])  # a block decodes the same rows
    if n_vocab % 2:
        # The pad word after the codes of every row is zero.
        nv = llama_row_width(n_vocab)
        words = np.frombuffer(raw, "<u2", offset=20 + 4 * n_chunk * n_ctx).reshape(-1, nv)
        assert (words[:, -1] == 0).all()


def test_llama_truncated_file_names_file_sizes_and_offset(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    tokens = _tokens(rng, 3, 9, 100)
    path = write_llama_logits(tmp_path / "cut.kld", tokens, list(_logits(rng, 3, 4, 100)))
    full = path.stat().st_size
    record = 2 * 4 * llama_row_width(100)
    with path.open("r+b") as f:
        f.truncate(full - 100)
    with pytest.raises(LogprobFileError) as err:
        LlamaLogitsFile(path)
    text = str(err.value)
    assert str(path) in text
    assert f"{full - 100} bytes" in text and f"needs {full}" in text
    assert f"chunk 2's record starts at offset {20 + 4 * 27 + 2 * record}" in text
    assert "interrupted" in (err.value.hint or "")


def test_llama_overflow_hint_for_large_context(tmp_path: Path) -> None:
    # A header claiming -c 8192 with a 262 144 vocabulary: n_ctx*(n_vocab+4) >= 2^31, the size
    # at which older llama.cpp builds wrote corrupt files. Only the header and tokens exist.
    path = tmp_path / "big.kld"
    header = LLAMA_MAGIC + np.array([8192], "<u4").tobytes() + np.array([262144, 1], "<i4").tobytes()
    path.write_bytes(header + np.zeros(8192, "<i4").tobytes())
    with pytest.raises(LogprobFileError) as err:
        LlamaLogitsFile(path)
    assert f"needs {llama_file_size(8192, 262144, 1)}" in str(err.value)
    assert "2^31" in (err.value.hint or "") and "#23496" in (err.value.hint or "")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"_logitz_" + bytes(12), "offset 0 holds b'_logitz_'"),
        (b"_logits_\x09\x00", "shorter than the 20-byte header"),
        (b"", "0 bytes, shorter"),
        (LLAMA_MAGIC + np.array([9, 0, 1], "<i4").tobytes(), "n_vocab at offset 12 is 0"),
        (LLAMA_MAGIC + np.array([2, 10, 1], "<i4").tobytes(), "n_ctx at offset 8 is 2"),
    ],
)
def test_llama_corrupt_headers(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.kld"
    path.write_bytes(content)
    with pytest.raises(LogprobFileError, match=re.escape(expected)):
        LlamaLogitsFile(path)


def test_llama_extra_bytes_and_bad_token_ids(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    tokens = _tokens(rng, 2, 9, 50)
    path = write_llama_logits(tmp_path / "a.kld", tokens, list(_logits(rng, 2, 4, 50)))
    with path.open("ab") as f:
        f.write(b"\0" * 6)
    with pytest.raises(LogprobFileError, match="6 extra"):
        LlamaLogitsFile(path)
    tokens[1, 3] = 50  # outside the vocabulary
    path = write_llama_logits(tmp_path / "b.kld", tokens, list(_logits(rng, 2, 4, 50)))
    with pytest.raises(LogprobFileError, match="id 50 at chunk 1, position 3"):
        LlamaLogitsFile(path)


def test_llama_corrupt_row_names_chunk_row_and_offset(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    path = write_llama_logits(tmp_path / "c.kld", _tokens(rng, 2, 9, 50), list(_logits(rng, 2, 4, 50)))
    offset = 20 + 4 * 2 * 9 + (1 * 4 + 2) * 2 * llama_row_width(50)  # chunk 1, row 2
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(np.array([-1.0], "<f4").tobytes())
    f = LlamaLogitsFile(path)
    f.chunk(0)  # the corruption is found when its chunk is opened
    with pytest.raises(LogprobFileError, match=f"chunk 1, row 2 \\(offset {offset}\\): scale -1.0"):
        f.chunk(1)


# ---------------------------------------------------------------------------------------------
# qualify.logprobs/v1 directories and qualify.topk/v1 files


def test_logprob_dir_round_trip_of_logprobs_and_logits(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    tokens, logits = _tokens(rng, 2, 10, 70), _logits(rng, 2, 4, 70)
    lp = [log_softmax(x).astype(np.float32) for x in logits]
    d1 = write_logprob_dir(tmp_path / "lp", tokens, lp, settings={"-c": 10, "-b": 2048})
    d2 = write_logprob_dir(tmp_path / "logits", tokens, list(logits), values="logits")
    meta = json.loads((d1 / "meta.json").read_text())
    assert meta == {
        "format": "qualify.logprobs/v1", "n_ctx": 10, "n_vocab": 70, "n_chunk": 2, "first": 5,
        "values": "logprobs", "settings": {"-c": 10, "-b": 2048},
    }  # fmt: skip
    a, b = LogprobDir(d1), LogprobDir(d2)
    assert a.settings == {"-c": 10, "-b": 2048}
    for k in range(2):
        np.testing.assert_array_equal(a.chunk(k).logprobs(), lp[k].astype(np.float64))
        np.testing.assert_allclose(b.chunk(k).logprobs(), log_softmax(logits[k]), atol=1e-12)
        np.testing.assert_array_equal(a.chunk(k).targets, tokens[k, 6:10])
    (d1 / "logprobs_c00001.npy").unlink()
    with pytest.raises(LogprobFileError, match="logprobs_c00001.npy"):
        a.chunk(1)
    np.save(d2 / "logprobs_c00000.npy", np.zeros((4, 69), np.float32))
    with pytest.raises(LogprobFileError, match=r"expected shape \(4, 70\)"):
        b.chunk(0)


def test_topk_round_trip_and_validation(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    tokens, logits = _tokens(rng, 2, 8, 200), _logits(rng, 2, 3, 200)
    rows = [
        topk_rows(logits[k], tokens[k, 5:8], 64, ref_ids=np.tile(np.arange(64), (3, 1))) for k in range(2)
    ]
    path = write_topk(tmp_path / "top.npz", tokens, rows, n_vocab=200, settings={"-c": 8})
    f = TopKFile(path)
    assert (f.n_ctx, f.n_vocab, f.n_chunk, f.first, f.settings) == (8, 200, 2, 4, {"-c": 8})
    chunk = f.chunk(1)
    assert isinstance(chunk, TopKChunk)
    true = log_softmax(logits[1])
    np.testing.assert_array_equal(chunk.ids, np.argsort(-true, axis=1, kind="stable")[:, :64])
    np.testing.assert_allclose(chunk.logp, np.take_along_axis(true, chunk.ids, 1), atol=1e-6)
    np.testing.assert_allclose(chunk.target_logp, true[np.arange(3), tokens[1, 5:8]], atol=1e-6)
    assert chunk.logp_at_ref_ids is not None
    np.testing.assert_allclose(chunk.logp_at_ref_ids, true[:, :64], atol=1e-6)

    small = [topk_rows(logits[k], tokens[k, 5:8], 63) for k in range(2)]
    with pytest.raises(LogprobFileError, match="K >= 64"):
        TopKFile(write_topk(tmp_path / "small.npz", tokens, small, n_vocab=200))
    unsorted = [r._replace(logp=r.logp[:, ::-1].copy()) for r in rows]
    with pytest.raises(LogprobFileError, match="chunk 0, row 0: log-probs not sorted"):
        TopKFile(write_topk(tmp_path / "unsorted.npz", tokens, unsorted, n_vocab=200))
    with pytest.raises(LogprobFileError, match="ids outside the vocabulary"):
        TopKFile(write_topk(tmp_path / "vocab.npz", tokens % 100, rows, n_vocab=100))


def test_open_stream_recognises_each_format(tmp_path: Path) -> None:
    rng = np.random.default_rng(RNG_SEED)
    tokens, logits = _tokens(rng, 1, 8, 100), _logits(rng, 1, 3, 100)
    llama = write_llama_logits(tmp_path / "x.kld", tokens, list(logits))
    folder = write_logprob_dir(tmp_path / "dir", tokens, list(logits), values="logits")
    top = write_topk(tmp_path / "t.npz", tokens, [topk_rows(logits[0], tokens[0, 5:8], 64)], n_vocab=100)
    assert isinstance(open_stream(llama), LlamaLogitsFile)
    assert isinstance(open_stream(folder), LogprobDir)
    assert isinstance(open_stream(top), TopKFile)
    with pytest.raises(LogprobFileError, match="cannot read"):
        open_stream(tmp_path / "missing.kld")


# ---------------------------------------------------------------------------------------------
# Real llama-perplexity files from the example's arms


LLAMA_ARGS = ["-c", "128", "--chunks", "4", "-t", "2"]  # 4 chunks x 63 scored tokens: fast, >= 100 tokens


def _perplexity(out: Path, workdir: Path, *args: str) -> str:
    from example_arms import EXAMPLE
    from tiers import require

    require("model", "reads the example's model")
    data = EXAMPLE / "data"
    cmd = [str(out / "bin" / "llama-perplexity"), "-m", str(data / "gemma-3-270m-q4_k_m.gguf")]
    cmd += ["-f", str(data / "corpus.txt"), *LLAMA_ARGS, *args]
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def parse_kld_summary(text: str) -> dict[str, tuple[float, float | None]]:
    """llama-perplexity's summary lines `label : value [± unc] [%]`, labels whitespace-collapsed."""
    found: dict[str, tuple[float, float | None]] = {}
    start = text.index("====== Perplexity statistics ======")
    line_re = re.compile(r"^(?P<label>[^:]+?)\s*:\s*(?P<v>-?[\d.]+)\s*%?\s*(?:±\s*(?P<u>-?[\d.]+)\s*%?)?\s*$")
    for line in text[start:].splitlines():
        m = line_re.match(line.strip())
        if m:
            found[" ".join(m["label"].split())] = (float(m["v"]), float(m["u"]) if m["u"] else None)
    return found


@pytest.fixture(scope="module")
def llama_pair(example_outs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Base files of the pinned (gcc) and clang19 arms, and each arm's --kl-divergence run
    against the other's base file. Two files of 132 MB each (4 chunks x 63 rows x 262 148 words)."""
    work = tmp_path_factory.mktemp("llama-kld")
    files = {arm: work / f"{arm}.kld" for arm in ("pinned", "clang19")}
    logs = {
        arm: _perplexity(example_outs[arm], work, "--kl-divergence-base", str(files[arm])) for arm in files
    }
    # forward: base = pinned's file, Q = clang19 at full precision; reverse: the other way round
    forward = _perplexity(
        example_outs["clang19"], work, "--kl-divergence-base", str(files["pinned"]), "--kl-divergence"
    )
    reverse = _perplexity(
        example_outs["pinned"], work, "--kl-divergence-base", str(files["clang19"]), "--kl-divergence"
    )
    return {
        "files": files,
        "base_logs": logs,
        "forward": parse_kld_summary(forward),
        "reverse": parse_kld_summary(reverse),
    }


needs_nix = pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")


@pytest.mark.nix
@pytest.mark.example
@pytest.mark.slow
@needs_nix
@pytest.mark.parametrize("arm", ["pinned", "clang19"])
def test_real_llama_file_header_tokens_and_rows(llama_pair: dict, arm: str) -> None:
    path = llama_pair["files"][arm]
    f = LlamaLogitsFile(path)
    assert (f.n_ctx, f.n_chunk, f.first, f.n_rows) == (128, 4, 64, 63)
    assert path.stat().st_size == llama_file_size(128, f.n_vocab, 4)
    other = LlamaLogitsFile(llama_pair["files"]["clang19" if arm == "pinned" else "pinned"])
    np.testing.assert_array_equal(f.tokens, other.tokens)  # same tokenizer, same text
    steps = f.row_scales()
    for chunk in f.chunks():
        rows, floor = chunk.logprobs(), chunk.floors()
        assert floor is not None
        step = steps[chunk.index][:, None]
        # Each row's maximum carries the top code 65535, i.e. floor + 65535 steps.
        np.testing.assert_allclose(rows.max(axis=1), floor + 65535 * step[:, 0], rtol=0, atol=1e-5)
        # Decoded rows are distributions: entries above the floor hold the mass to within their
        # rounding; the floor entries stand for at most n_floor * e^floor.
        above = rows > floor[:, None]
        mass = np.where(above, np.exp(rows), 0).sum(axis=1)
        n_floor = (~above).sum(axis=1)
        assert (mass <= 1 + step[:, 0]).all()
        assert (mass >= 1 - step[:, 0] - n_floor * np.exp(floor)).all()
        assert (floor <= -16 + 1e-5).all()  # min_log_prob = mn - mx - lse <= -16
    # The mean NLL of the decoded targets is ln(PPL) of llama-perplexity's own base run up to
    # the targets it stored at the floor (their NLL there is only a lower bound).
    printed = float(re.search(r"Final estimate: PPL = ([\d.]+)", llama_pair["base_logs"][arm])[1])
    nll, at_floor, bound = [], 0, 0.0
    for chunk in f.chunks():
        lp = chunk.logprobs()[np.arange(63), chunk.targets]
        floor = chunk.floors()
        at_floor += int((lp <= floor).sum())
        bound += float((steps[chunk.index] / 2).sum())
        nll.append(-lp)
    mean_nll = float(np.concatenate(nll).mean())
    assert math.log(printed) >= mean_nll - bound / 252 - 5e-5 / printed
    if at_floor == 0:
        assert math.log(printed) <= mean_nll + bound / 252 + 5e-5 / printed


# How far a figure computed from Q's *decoded* rows (ours) can be from the same figure computed
# from Q's full-precision logits (llama-perplexity's --kl-divergence), per scored token:
#  - a decoded log-prob above Q's floor is within half a code step s/2 of the exact one (s <= 16/65535);
#  - one at Q's floor (code 0) is at or above the exact one (the encoding clamps there);
#  - llama-perplexity computes in float32: a few roundings at magnitudes <= 32 nats (F32).
# Hence, with p the base's weights (b > -16):
#  - mean KLD: the rounding errors, modelled as independent and uniform on +-s/2, give the mean an
#    error of SD sigma = sqrt(sum_t s_t^2/12 sum_i p_i^2)/N; allowed: 6 sigma + F32, plus, on the
#    side where llama-perplexity's value is larger, 16 nats times the weight of Q's clamped entries;
#  - KLD percentiles: order statistics move no further than the worst token, s_t/2 sum_i p_i + F32;
#  - Δp: |e^q - e^q~| <= e^q~ (e^{s/2} - 1) above the floor and <= e^floor at it; mean, RMS (by
#    Minkowski) and percentiles follow;
#  - same top p: the argmaxes can differ only where Q's decoded row ties at its top code.
F32 = 4 * 32 * 2.0**-24
CLAMP_NATS = 16.0  # allowance for how far below Q's floor a clamped log-prob lies (the encoding's window)
PRINTED_KLD = 5e-7  # half a unit of the 6 printed decimals
PRINTED_PCT = 5e-4  # half a unit of the 3 printed decimals of a percentage


def _decoding_noise(base: LlamaLogitsFile, q: LlamaLogitsFile) -> dict[str, np.ndarray]:
    """Per-token bounds for the pair (base, Q) from the two files (see the comment above)."""
    steps = q.row_scales()
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("sigma2", "kl_det", "kl_clamp", "dp", "ties", "step")}
    for cb, cq in zip(base.chunks(), q.chunks(), strict=True):
        for start in range(0, cb.n_rows, 16):
            stop = min(start + 16, cb.n_rows)
            b, qq, fq = cb.logprobs(start, stop), cq.logprobs(start, stop), cq.floors(start, stop)
            s = steps[cb.index, start:stop]
            pb = np.where(b > -16, np.exp(b), 0.0)  # llama-perplexity's weights
            clamped = (pb > 0) & (qq <= fq[:, None])
            rows, target = np.arange(stop - start), cb.targets[start:stop]
            q_y = qq[rows, target]
            out["step"].append(s)
            # Rounding errors modelled as independent, uniform on +-s/2: variance of sum_i p_i e_i.
            out["sigma2"].append(s**2 / 12 * (pb**2).sum(axis=1))
            out["kl_det"].append(s / 2 * pb.sum(axis=1) + F32)
            out["kl_clamp"].append(CLAMP_NATS * np.where(clamped, pb, 0.0).sum(axis=1))
            out["dp"].append(np.exp(q_y) * (np.expm1(s / 2) + F32) + np.where(q_y <= fq, np.exp(fq), 0.0))
            out["ties"].append((qq == qq.max(axis=1, keepdims=True)).sum(axis=1) > 1)
    return {k: np.concatenate(v) for k, v in out.items()}


@pytest.mark.nix
@pytest.mark.example
@pytest.mark.slow
@needs_nix
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_our_statistics_reproduce_llama_perplexity(llama_pair: dict, direction: str) -> None:
    """Our KL(base || Q) etc. from two base files against llama-perplexity's --kl-divergence of
    the same pair. llama-perplexity sees Q's exact logits where we see Q's uint16 encoding, so
    each figure gets a tolerance computed from the files (see `_decoding_noise`)."""
    files = llama_pair["files"]
    base_arm, q_arm = ("pinned", "clang19") if direction == "forward" else ("clang19", "pinned")
    base, q = LlamaLogitsFile(files[base_arm]), LlamaLogitsFile(files[q_arm])
    printed = llama_pair[direction]
    stats = token_stats({"reference": base, "candidate": q})
    ours = summarize(stats, "reference", "candidate").printed()
    noise = _decoding_noise(base, q)
    n = stats.n_tokens
    assert n == 4 * 63

    report = []

    def check(label: str, low: float, high: float) -> None:
        """printed - ours must lie in [-low, high]."""
        diff = printed[label][0] - ours[label][0]
        report.append(
            f"{label:28s} llama {printed[label][0]:12.6f}  ours {ours[label][0]:12.6f}  tol [-{low:.1e}, {high:.1e}]"
        )
        assert -low <= diff <= high, report[-1]

    # Base side: decoded from the same file by both, float32 there, float64 here.
    nll_b = stats.role["reference"].nll
    ppl_b = printed["Mean PPL(base)"][0]
    check("Mean PPL(base)", *(2 * [ppl_b * 2.0**-24 * (16 + float(nll_b.mean())) + PRINTED_KLD]))
    # Q side: the same decoded NLLs are what the other direction's run prints as PPL(base) ...
    other = llama_pair["reverse" if direction == "forward" else "forward"]
    tol = (
        other["Mean PPL(base)"][0] * 2.0**-24 * (16 + float(stats.role["candidate"].nll.mean())) + PRINTED_KLD
    )
    assert abs(other["Mean PPL(base)"][0] - ours["Mean PPL(Q)"][0]) <= tol
    # ... while this run's PPL(Q) is exact: our decoded NLL is lower where Q stored the target at its floor.
    ppl_q = printed["Mean PPL(Q)"][0]
    rounding = ppl_q * (float(noise["step"].mean()) / 2 + F32) + PRINTED_KLD
    at_floor = int(stats.role["candidate"].target_at_floor.sum())
    check("Mean PPL(Q)", rounding, math.inf if at_floor else rounding)

    ln_tol = float(noise["step"].mean()) / 2 + F32 + PRINTED_KLD
    check("Mean ln(PPL(Q)/PPL(base))", ln_tol, math.inf if at_floor else ln_tol)
    sigma = math.sqrt(float(noise["sigma2"].sum())) / n
    low = 6 * sigma + F32 + PRINTED_KLD
    check("Mean KLD", low, low + float(noise["kl_clamp"].mean()))
    worst = float(noise["kl_det"].max()) + PRINTED_KLD
    for name, _ in KLD_PERCENTILES:  # order statistics move no further than the worst token
        check(f"{name} KLD", worst, worst + float(noise["kl_clamp"].max()))
    dp = noise["dp"]
    check("Mean Δp", *(2 * [100 * float(dp.mean()) + PRINTED_PCT]))
    check("RMS Δp", *(2 * [100 * math.sqrt(float((dp**2).mean())) + PRINTED_PCT]))
    for name, _ in DP_PERCENTILES:
        check(f"{name} Δp", *(2 * [100 * float(dp.max()) + PRINTED_PCT]))
    # Same top: argmaxes can differ only where Q's decoded row ties at the top code.
    check("Same top p", *(2 * [100 * float(noise["ties"].mean()) + PRINTED_PCT]))
    # The stage's acceptance figures for this comparison: 2e-4 absolute, 0.5 percentage points.
    assert abs(printed["Mean KLD"][0] - ours["Mean KLD"][0]) <= 2e-4
    assert abs(printed["Same top p"][0] - ours["Same top p"][0]) <= 0.5
    print(
        f"\n{direction}: base {base_arm}, Q {q_arm}; sigma(mean KLD) {sigma:.2e}; Q targets at floor {at_floor}"
    )
    print("\n".join(report))

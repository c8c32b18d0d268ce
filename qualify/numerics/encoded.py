"""Per-token statistics straight from llama.cpp's uint16 codes, compiled and spread over the cores.

``qualify.numerics.tokenstats`` takes this path for a chunk when every role's rows come encoded
(``DenseChunk.encoded``: llama.cpp ``--kl-divergence-base`` files) with a finite scale and minimum
in every row; otherwise it decodes the rows to float64. The definitions are tokenstats' own; here
is how each figure is had without decoding a row, and how far it is from the float64 path:

- Top-1 and top-2 are found on the codes. Decoding ``scale*q + min_log_prob`` in float64 is
  strictly increasing in q (scale*q is exact in float64; only a row whose logits all lie within a
  few float32 steps of each other near zero could round two codes together), so the first index of
  the largest code is the decoded row's argmax (first index on ties, as llama-perplexity) and the
  largest code of the rest is the top-2. Those codes, the target's and the base's top token's are
  then decoded exactly as the float64 path decodes them, so NLL, top-1, margins, same-top, Δp and
  floors are bitwise the float64 path's.
- KL(a‖b): the kept entries b_i > floor are the codes at or above a threshold per row (the
  smallest code whose float64 decode is above the floor), and e^{b_i} = e^{min_a + s_a·256·h} ·
  e^{s_a·l} for the code's high and low bytes h and l: two 256-entry tables per row instead of an
  exp per entry. The terms e^{b_i}·(s_a(q_a - q_b) + (s_a - s_b)q_b + (min_a - min_b)) are float64,
  summed per tile: the KL differs from the float64 path's by rounding (about 1e-15 nats a token),
  and every figure the report prints is the same (``tests/numerics/test_encoded.py``, on files
  shaped like a real model's). Float32 terms make this loop 15 to 20 % faster but are not exact
  enough: the KL is a small sum of terms of either sign, so float32's 6e-8 per term becomes 1e-6
  to 1e-5 of a token's KL, which moves the sixth significant digit of the KLD lines of the
  report's llama-perplexity table. All the rest is integer work on the codes.
- Each row goes through the vocabulary a tile at a time (4 KiB of codes per role, within the L1
  cache), every role's top-2 and every pair's KL on the same tile, so each byte of the files is
  read from memory once and nothing the size of a row is allocated. A chunk's rows are split in
  blocks over a thread pool: the compiled loop (numba) releases the GIL, and the results do not
  depend on the number of threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.numerics.stream import U16, DenseChunk

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
Bools = npt.NDArray[np.bool_]
Vectors = tuple[npt.NDArray[Any], ...]

TILE = 2048  # codes per role and tile: 4 KiB, so every role of a pass stays in the L1 cache
N_CODES = 65536
HEADER_WORDS = 4  # float32 scale and min_log_prob ahead of each row's codes


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _rows(
    codes: tuple[U16, ...],
    n_vocab: int,
    scale: F64,
    min_lp: F64,
    threshold: I32,
    pair_a: I64,
    pair_b: I64,
    r0: int,
    r1: int,
    top1: I64,
    code1: I32,
    code2: I32,
    kld: F64,
) -> None:
    """Rows r0..r1 of a chunk: each role's top-1 index, largest and second code; each pair's KL.

    codes[k] holds role k's encoded rows [n_rows, width]; scale, min_lp and threshold are [roles,
    n_rows] (threshold: the smallest code kept in the KL when the role is the base). Compiled by
    numba (``_compiled``); written in the subset of Python and numpy it compiles.
    """
    n_roles = len(codes)
    n_pairs = pair_a.shape[0]
    hi = np.empty((n_roles, 256), np.float64)
    lo = np.empty((n_roles, 256), np.float64)
    best = np.empty(n_roles, np.int32)
    second = np.empty(n_roles, np.int32)
    where = np.empty(n_roles, np.int64)
    acc = np.empty(n_pairs, np.float64)
    for r in range(r0, r1):
        for k in range(n_roles):
            s, m = scale[k, r], min_lp[k, r]
            for j in range(256):
                hi[k, j] = math.exp(s * (256 * j) + m)
                lo[k, j] = math.exp(s * j)
            best[k], second[k], where[k] = -1, -1, 0
        acc[:] = 0.0
        for t0 in range(0, n_vocab, TILE):
            t1 = min(t0 + TILE, n_vocab)
            for k in range(n_roles):
                row = codes[k][r, HEADER_WORDS + t0 : HEADER_WORDS + t1]
                top = np.int32(0)
                for i in range(row.size):
                    top = max(top, np.int32(row[i]))
                if top > second[k]:  # this tile may hold a new top-1 or top-2: look entry by entry
                    b1, b2, at = best[k], second[k], where[k]
                    for i in range(row.size):
                        x = np.int32(row[i])
                        if x > b1:
                            b1, b2, at = x, b1, t0 + i
                        elif x > b2:
                            b2 = x
                    best[k], second[k], where[k] = b1, b2, at
            for p in range(n_pairs):
                a, b = pair_a[p], pair_b[p]
                qa = codes[a][r, HEADER_WORDS + t0 : HEADER_WORDS + t1]
                qb = codes[b][r, HEADER_WORDS + t0 : HEADER_WORDS + t1]
                keep = threshold[a, r]
                sa, ds, dm = scale[a, r], scale[a, r] - scale[b, r], min_lp[a, r] - min_lp[b, r]
                ha, la = hi[a], lo[a]
                part = 0.0
                for i in range(qa.size):
                    x, y = np.int32(qa[i]), np.int32(qb[i])
                    weight = ha[x >> 8] * la[x & 255]  # e^{b_i}
                    diff = sa * np.float64(x - y) + (ds * np.float64(y) + dm)  # b_i - q_i
                    part += weight * diff if x >= keep else 0.0
                acc[p] += part
        for k in range(n_roles):
            top1[k, r], code1[k, r], code2[k, r] = where[k], best[k], second[k]
        for p in range(n_pairs):
            kld[p, r] = acc[p]


@cache
def _compiled() -> Callable[..., None]:
    """``_rows`` compiled (cached on disk by numba; the first use in a fresh tree takes seconds)."""
    import numba

    # reassoc lets the sums vectorise; no other fast-math freedom (NaN never reaches here).
    jit = numba.njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
    kernel: Callable[..., None] = jit(_rows)
    return kernel


def kept_from(scale: F64, min_lp: F64, floor: float | None) -> I32:
    """Per row, the smallest code whose float64 decode ``code*scale + min_lp`` is above ``floor``
    (65536: none is); 0 for ``floor=None`` (every finite entry counts)."""
    if floor is None:
        return np.zeros(scale.shape, np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.where(scale > 0, np.ceil((floor - min_lp) / scale), np.where(min_lp > floor, 0, N_CODES))
    t = np.clip(guess, 0, N_CODES).astype(np.int64)

    def above(code: I64) -> Bools:
        kept: Bools = code.astype(np.float64) * scale + min_lp > floor
        return kept

    # The division may be a code off either way; step to where the decode itself crosses.
    while True:
        down = (t > 0) & above(t - 1)
        up = (t < N_CODES) & ~above(np.minimum(t, N_CODES - 1))
        if not (down.any() or up.any()):
            return t.astype(np.int32)
        t = t - down + up


def encoded_stats(
    chunks: Mapping[str, DenseChunk],
    pairs: Sequence[tuple[str, str]],
    kl_floor: float | None,
    pool: Executor,
    threads: int,
) -> tuple[dict[str, Vectors], dict[tuple[str, str], Vectors]] | None:
    """One chunk's per-token vectors, in tokenstats' field order (``RoleVectors``,
    ``PairVectors``), from encoded rows; None when a row's scale or minimum is not finite (NaN
    logits of the engine: the float64 path counts them)."""
    roles = list(chunks)
    ref = chunks[roles[0]]
    n_rows, n_vocab = ref.n_rows, ref.n_vocab
    words: list[U16] = []
    for ch in chunks.values():
        assert ch.encoded is not None
        words.append(np.ascontiguousarray(ch.encoded(0, n_rows)))
    header = [np.ascontiguousarray(w[:, :HEADER_WORDS]).view("<f4") for w in words]
    scale = np.array([h[:, 0] for h in header], np.float64)
    min_lp = np.array([h[:, 1] for h in header], np.float64)
    if not (np.isfinite(scale).all() and np.isfinite(min_lp).all()):
        return None
    index = {r: i for i, r in enumerate(roles)}
    pair_a = np.array([index[a] for a, _ in pairs], np.int64)
    pair_b = np.array([index[b] for _, b in pairs], np.int64)
    threshold = kept_from(scale, min_lp, kl_floor)
    top1 = np.zeros((len(roles), n_rows), np.int64)
    code1 = np.zeros((len(roles), n_rows), np.int32)
    code2 = np.zeros((len(roles), n_rows), np.int32)
    kld = np.zeros((len(pairs), n_rows), np.float64)
    kernel = _compiled()
    codes = tuple(words)
    step = max(1, math.ceil(n_rows / (4 * threads)))  # a few blocks per thread evens out their ends

    def block(r0: int) -> None:
        r1 = min(r0 + step, n_rows)
        kernel(codes, n_vocab, scale, min_lp, threshold, pair_a, pair_b, r0, r1, top1, code1, code2, kld)

    for _ in pool.map(block, range(0, n_rows, step)):
        pass
    rix = np.arange(n_rows)
    targets = ref.targets.astype(np.int64)

    def decoded(k: int, at: I64) -> F64:
        """Role k's log-probs at one index per row, decoded as the float64 path decodes."""
        out: F64 = np.multiply(words[k][rix, HEADER_WORDS + at], scale[k]) + min_lp[k]
        return out

    role_out: dict[str, Vectors] = {}
    target_lp, top_lp = {}, {}
    for k, r in enumerate(roles):
        target_lp[r] = decoded(k, targets)
        top_lp[r] = np.multiply(code1[k], scale[k]) + min_lp[k]
        margin = top_lp[r] - (np.multiply(code2[k], scale[k]) + min_lp[k])
        nonfinite = np.zeros(n_rows, np.int64)
        role_out[r] = (-target_lp[r], top1[k], margin, nonfinite, target_lp[r] <= min_lp[k])
    pair_out: dict[tuple[str, str], Vectors] = {}
    for p, (a, b) in enumerate(pairs):
        ia, ib = index[a], index[b]
        same_top = top1[ia] == top1[ib]
        dp_target = np.exp(target_lp[b]) - np.exp(target_lp[a])
        dp_top = np.exp(decoded(ib, top1[ia])) - np.exp(top_lp[a])
        pair_out[(a, b)] = (kld[p], same_top, dp_target, dp_top)
    return role_out, pair_out

"""The float64 path of ``qualify.numerics.tokenstats``: rows decoded a block at a time.

Any stream goes this way: dense rows (decoded from a file, or held in memory) and top-K rows,
whose KL is the coarse-grained lower bound tokenstats defines. ``block_bytes`` bounds the
decoded rows held at once. llama.cpp files with finite rows take ``qualify.numerics.encoded``
instead, which works on their codes and gives the same vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.numerics.stream import DenseChunk, LogprobChunk

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Vectors = tuple[npt.NDArray[Any], ...]

TAIL_EPS = 1e-6  # tail masses of top-K rows below this are float32 rounding (K log-probs summed)


class _Rows:
    """One role's rows [start, stop) of a chunk, dense or top-K, with the lookups the pairs need."""

    def __init__(self, chunk: LogprobChunk, start: int, stop: int) -> None:
        self.targets = chunk.targets[start:stop].astype(np.int64)
        self.rix = np.arange(stop - start)
        self.dense: F64 | None = None
        self.floor: F64 | None = None
        self.sources: list[tuple[I64, F64]] = []  # top-K: (ids, log-probs) pairs to look ids up in
        if isinstance(chunk, DenseChunk):
            self.dense = chunk.logprobs(start, stop)
            self.floor = chunk.floors(start, stop)
        else:
            self.sources.append((chunk.ids[start:stop].astype(np.int64), chunk.logp[start:stop]))
            self.sources.append((self.targets[:, None], chunk.target_logp[start:stop, None]))
            if chunk.ref_ids is not None and chunk.logp_at_ref_ids is not None:
                self.sources.append(
                    (chunk.ref_ids[start:stop].astype(np.int64), chunk.logp_at_ref_ids[start:stop])
                )

    @property
    def topk_ids(self) -> I64:
        return self.sources[0][0]

    def at(self, ids: I64) -> F64:
        """Log-probs at ids [n, m] (one row of ids per row); NaN where a top-K row does not know."""
        if self.dense is not None:
            found: F64 = np.take_along_axis(self.dense, ids, axis=1)
            return found
        out = np.full(ids.shape, np.nan)
        for own_ids, own_lp in self.sources:
            eq = ids[:, :, None] == own_ids[:, None, :]
            hit = eq.any(axis=2) & np.isnan(out)
            out = np.where(hit, np.take_along_axis(own_lp, eq.argmax(axis=2), axis=1), out)
        return out

    def target_logp(self) -> F64:
        return self.at(self.targets[:, None])[:, 0]

    def top(self) -> tuple[I64, F64, F64]:
        """Top-1 id, its log-prob, and the top-1 minus top-2 margin."""
        if self.dense is not None:
            # Not np.partition: decoded llama.cpp rows hold long runs of equal codes (the floor),
            # on which its selection degrades by orders of magnitude. Mask the top-1 and take the max.
            d = self.dense if self.dense.flags.writeable else self.dense.copy()
            top1 = np.argmax(d, axis=1)
            best = d[self.rix, top1]
            d[self.rix, top1] = -np.inf
            second = d.max(axis=1)
            d[self.rix, top1] = best
            with np.errstate(invalid="ignore"):  # -inf - -inf: a row of NaN/Inf has no margin
                return top1, best, best - second
        ids, lp = self.sources[0]
        return ids[:, 0], lp[:, 0], lp[:, 0] - lp[:, 1]

    def nonfinite(self) -> I64:
        arrays = [self.dense] if self.dense is not None else [lp for _, lp in self.sources]
        count = np.zeros(len(self.rix), np.int64)
        for a in arrays:
            count += (~np.isfinite(a)).sum(axis=1)
        return count

    def target_at_floor(self) -> Bools:
        if self.floor is None:
            return np.zeros(len(self.rix), bool)
        at: Bools = self.target_logp() <= self.floor
        return at


def _kld(base: _Rows, other: _Rows, kl_floor: float | None) -> F64:
    if base.dense is not None and other.dense is not None:
        b, q = base.dense, other.dense
        # Gather the kept entries first: with the -16 floor they are a small share of a large
        # vocabulary (7 % for Gemma 3), and exp() over the rest is most of the cost.
        rows, cols = np.nonzero(b > kl_floor if kl_floor is not None else np.isfinite(b))
        kept_b = b[rows, cols]
        with np.errstate(invalid="ignore", over="ignore"):
            terms = np.exp(kept_b) * (kept_b - q[rows, cols])
        kld: F64 = np.bincount(rows, terms, len(b)).astype(np.float64)
        return kld
    # Coarse-grained lower bound over the ids both sides know plus one tail bucket.
    ids = base.topk_ids if base.dense is None else other.topk_ids
    lb, lq = base.at(ids), other.at(ids)
    known = ~np.isnan(lb) & ~np.isnan(lq)
    pb = np.where(known, np.exp(np.where(known, lb, 0.0)), 0.0)
    pq = np.where(known, np.exp(np.where(known, lq, 0.0)), 0.0)
    with np.errstate(invalid="ignore"):
        body = np.where(known & (pb > 0), pb * (lb - lq), 0.0).sum(axis=1)
    # Tail masses within float32 rounding of zero (TAIL_EPS) count as zero on the base side and
    # as TAIL_EPS on the other: a larger t_Q only lowers the term, so the bound stays a bound.
    tb = 1.0 - pb.sum(axis=1)
    tb = np.where(tb > TAIL_EPS, tb, 0.0)
    tq = np.maximum(1.0 - pq.sum(axis=1), TAIL_EPS)
    tail = np.where(tb > 0, tb * (np.log(np.maximum(tb, TAIL_EPS)) - np.log(tq)), 0.0)
    out: F64 = body + tail
    return out


def decoded_stats(
    chunks: Mapping[str, LogprobChunk],
    pairs: Sequence[tuple[str, str]],
    kl_floor: float | None,
    block_bytes: int,
) -> tuple[dict[str, Vectors], dict[tuple[str, str], Vectors]]:
    """One chunk's per-token vectors, in tokenstats' field order (``RoleVectors``,
    ``PairVectors``), from rows decoded to float64 a block at a time."""
    role_parts: dict[str, list[Vectors]] = {r: [] for r in chunks}
    pair_parts: dict[tuple[str, str], list[Vectors]] = {p: [] for p in pairs}
    n_rows, n_vocab = next(iter(chunks.values())).n_rows, next(iter(chunks.values())).n_vocab
    # Decoded rows are float64 [rows, n_vocab]; the KL needs a few temporaries of that size.
    step = max(1, block_bytes // (8 * n_vocab * (len(chunks) + 4)))
    for start in range(0, n_rows, step):
        rows = {r: _Rows(ch, start, min(start + step, n_rows)) for r, ch in chunks.items()}
        tops = {r: rv.top() for r, rv in rows.items()}
        tlp = {r: rv.target_logp() for r, rv in rows.items()}
        for r, rv in rows.items():
            role_parts[r].append((-tlp[r], tops[r][0], tops[r][2], rv.nonfinite(), rv.target_at_floor()))
        for a, b in pairs:
            base, other = rows[a], rows[b]
            btop, btop_lp, _ = tops[a]
            same_top = btop == tops[b][0]
            dp_target = np.exp(tlp[b]) - np.exp(tlp[a])
            dp_top = np.exp(other.at(btop[:, None])[:, 0]) - np.exp(btop_lp)
            pair_parts[(a, b)].append((_kld(base, other, kl_floor), same_top, dp_target, dp_top))
    return _joined(role_parts), _joined(pair_parts)


def _joined(parts: Mapping[Any, list[Vectors]]) -> dict[Any, Vectors]:
    """Each key's blocks joined into one vector per field (no key for a chunk without rows)."""
    return {
        key: tuple(np.concatenate(field) for field in zip(*blocks, strict=True))
        for key, blocks in parts.items()
        if blocks
    }

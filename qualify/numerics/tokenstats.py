"""Per-token statistics between roles' log-prob streams (reference, pinned, candidate).

Contract: ``token_stats`` walks the streams in lockstep, one chunk at a time, so memory does not
grow with the number of chunks. Where every role is a llama.cpp file, ``qualify.numerics.encoded``
reduces a chunk's uint16 codes as they are, on ``threads`` cores, at about the speed the files can
be read; otherwise (other formats, or a row of NaN/Inf) ``qualify.numerics.decoded`` decodes the
rows to float64 a block at a time (``block_bytes`` bounds the decoded rows held at once). Both
give the same vectors, the KL to float64 rounding. All streams must score the same tokens: same
``n_ctx``, ``first`` and vocabulary, and identical token windows, else ``StreamMismatch`` names
the first difference (chunk, position, the two ids). It returns per-token vectors
(``TokenStats``), grouped by chunk through ``offsets``.

Definitions, for a pair (base B, other Q) and a scored token with target y; b and q are B's
and Q's log-probs (llama-perplexity's ``--kl-divergence``, tools/perplexity/perplexity.cpp
@0c1e570 lines 191-252 per token and 1910-2005 for the summary; numerics.md §1.2):

- ``kld`` = sum over i with b_i > -16 of e^{b_i} (b_i - q_i). This is KL(B || Q) truncated at
  -16 nats and *not renormalised* (llama-perplexity's definition; its files cannot represent
  log-probs below about -16 anyway), so tiny negative values occur when B and Q nearly agree.
  ``kl_floor=None`` sums over every finite b_i instead (the exact KL for exact inputs).
  When either side is a top-K stream, the vocabulary is coarse-grained into the ids known on
  both sides (the base's top-K, or the other's when the base is dense) plus one tail bucket:
  sum over known i of p_i (b_i - q_i) + t_B log(t_B / t_Q), with t the tail masses. By the data
  processing inequality this is a lower bound on the full KL; the pair is flagged
  ``kld_lower_bound`` and no floor applies. Tail masses below 1e-6 are taken as float32
  rounding of the stored log-probs, not as mass.
- ``nll`` = -(log-prob of y), per role. ``target_at_floor``: a llama.cpp file stores y at its
  floor (its logit 16 nats or more below the row's maximum), so the NLL is only a lower bound
  there; llama-perplexity's own "Mean PPL(base)" has the same bias.
- ``same_top`` = [argmax q == argmax b], first index on ties (as llama-perplexity; the uint16
  encoding can create ties). Top-1 agreement of a role is ``same_top`` against the reference.
- ``confident flip``: a top-1 change where the reference's top-1/top-2 log-prob gap
  (``top_margin``) exceeds a margin, 0.1 nats by default (numerics.md §4).
- ``dp_target`` = e^{q_y} - e^{b_y} (llama-perplexity's Δp), ``dp_base_top`` = e^{q_t} - e^{b_t}
  with t = argmax b (the Δp of the base's top token; NaN where a top-K stream does not know t).
- ``nonfinite``: NaN and ±Inf log-probs per row (−Inf counts: plain scoring has no masked ids).

``qualify.numerics.summary`` reduces a pair of roles to llama-perplexity's summary figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.core.errors import QualifyError
from qualify.numerics.decoded import decoded_stats
from qualify.numerics.encoded import default_threads, encoded_stats
from qualify.numerics.stream import DenseChunk, LogprobChunk, LogprobFileError, RoleStreamError

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

ROLE_REFERENCE = "reference"
LLAMA_KL_FLOOR = -16.0
DEFAULT_FLIP_MARGIN = 0.1  # nats
DEFAULT_BLOCK_BYTES = 64 * 2**20  # measured fastest for a 262 144 vocabulary (16 and 256 MiB are slower)


class StreamMismatch(QualifyError):
    """The roles did not score the same tokens (or the same shape); names the first difference."""

    def __init__(self, message: str, chunk: int | None = None, position: int | None = None) -> None:
        super().__init__(
            message, hint="every role must score the same text with the same -c, chunks and BOS policy"
        )
        self.chunk = chunk
        self.position = position


@dataclass(frozen=True, eq=False)
class RoleVectors:
    """One role's per-token vectors."""

    nll: F64
    top1: I64
    top_margin: F64  # top-1 minus top-2 log-prob, nats
    nonfinite: I64
    target_at_floor: Bools


@dataclass(frozen=True, eq=False)
class PairVectors:
    """One pair's (base, other) per-token vectors."""

    kld: F64
    same_top: Bools
    dp_target: F64
    dp_base_top: F64


ROLE_FIELDS = tuple(f.name for f in fields(RoleVectors))
PAIR_FIELDS = tuple(f.name for f in fields(PairVectors))


@dataclass(frozen=True, eq=False)
class TokenStats:
    """Per-token vectors of every role and pair; token t of chunk c is at offsets[c] + t."""

    reference: str
    roles: tuple[str, ...]
    n_ctx: int
    first: int
    n_vocab: int
    kl_floor: float | None
    chunk_index: I64  # [C] the streams' chunk numbers
    offsets: I64  # [C + 1]
    position: I64  # [N] position in the chunk whose logits made the row
    target: I64  # [N]
    role: Mapping[str, RoleVectors]
    pair: Mapping[tuple[str, str], PairVectors]
    kld_lower_bound: Mapping[tuple[str, str], bool]  # the pair's KL is a top-K lower bound

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_index)

    def chunk_sizes(self) -> I64:
        return np.diff(self.offsets)

    def unit(self) -> I64:
        """Chunk number (0..C-1) of every token: the resampling unit."""
        return np.repeat(np.arange(self.n_chunks, dtype=np.int64), self.chunk_sizes())

    def chunk_sums(self, values: npt.ArrayLike) -> F64:
        sums: F64 = np.bincount(self.unit(), np.asarray(values, np.float64), self.n_chunks).astype(np.float64)
        return sums

    def by_chunk(self, values: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
        return np.split(values, self.offsets[1:-1])

    def kld(self, base: str, other: str) -> F64:
        return self.pair[(base, other)].kld

    def top1_agreement(self, role: str) -> Bools:
        return self.pair[(self.reference, role)].same_top

    def confident_flips(self, role: str, margin: float = DEFAULT_FLIP_MARGIN) -> Bools:
        flips: Bools = ~self.top1_agreement(role) & (self.role[self.reference].top_margin > margin)
        return flips

    def prefix(self, chunks: int) -> TokenStats:
        """The first `chunks` chunks: what a look at that many sees (`qualify.numerics.looks`)."""
        if chunks >= self.n_chunks:
            return self
        end = int(self.offsets[chunks])

        def cut(vectors: Any) -> Any:
            return replace(vectors, **{f.name: getattr(vectors, f.name)[:end] for f in fields(vectors)})

        return replace(
            self,
            chunk_index=self.chunk_index[:chunks],
            offsets=self.offsets[: chunks + 1],
            position=self.position[:end],
            target=self.target[:end],
            role={r: cut(v) for r, v in self.role.items()},
            pair={p: cut(v) for p, v in self.pair.items()},
        )

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Everything as named arrays (for ``np.savez``); ``from_arrays`` reads them back."""
        meta = {"reference": self.reference, "roles": list(self.roles), "n_ctx": self.n_ctx}
        meta |= {"first": self.first, "n_vocab": self.n_vocab, "kl_floor": self.kl_floor}
        meta["pairs"] = [[a, b, lb] for (a, b), lb in self.kld_lower_bound.items()]
        out: dict[str, npt.NDArray[Any]] = {"meta": np.array(json.dumps(meta))}
        out |= {"chunk_index": self.chunk_index, "offsets": self.offsets, "position": self.position}
        out["target"] = self.target
        for r, rv in self.role.items():
            out |= {f"role:{r}:{name}": getattr(rv, name) for name in ROLE_FIELDS}
        for (a, b), pv in self.pair.items():
            out |= {f"pair:{a}:{b}:{name}": getattr(pv, name) for name in PAIR_FIELDS}
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, npt.NDArray[Any]]) -> TokenStats:
        meta = json.loads(str(arrays["meta"]))
        role = {r: RoleVectors(**{n: arrays[f"role:{r}:{n}"] for n in ROLE_FIELDS}) for r in meta["roles"]}
        pairs = {(a, b): bool(lb) for a, b, lb in meta["pairs"]}
        pair = {
            (a, b): PairVectors(**{n: arrays[f"pair:{a}:{b}:{n}"] for n in PAIR_FIELDS}) for a, b in pairs
        }
        return cls(
            reference=meta["reference"],
            roles=tuple(meta["roles"]),
            n_ctx=meta["n_ctx"],
            first=meta["first"],
            n_vocab=meta["n_vocab"],
            kl_floor=meta["kl_floor"],
            chunk_index=arrays["chunk_index"],
            offsets=arrays["offsets"],
            position=arrays["position"],
            target=arrays["target"],
            role=role,
            pair=pair,
            kld_lower_bound=pairs,
        )


def _check_same(chunks: Mapping[str, LogprobChunk], reference: str) -> None:
    ref = chunks[reference]
    for role, ch in chunks.items():
        for what, mine, theirs in (
            ("n_ctx", len(ch.tokens), len(ref.tokens)),
            ("first scored position", ch.first, ref.first),
            ("n_vocab", ch.n_vocab, ref.n_vocab),
            ("scored rows", ch.n_rows, ref.n_rows),
        ):
            if mine != theirs:
                raise StreamMismatch(
                    f"chunk {ref.index}: {reference} has {what} {theirs}, {role} has {mine}", ref.index
                )
        diff = np.flatnonzero(ch.tokens != ref.tokens)
        if diff.size:
            pos = int(diff[0])
            raise StreamMismatch(
                f"chunk {ref.index}, position {pos}: {reference} has token {int(ref.tokens[pos])}, "
                f"{role} has token {int(ch.tokens[pos])}",
                ref.index,
                pos,
            )


def _lockstep(streams: Mapping[str, Iterable[LogprobChunk]]) -> Iterator[dict[str, LogprobChunk]]:
    iters = {role: iter(s) for role, s in streams.items()}
    n = 0
    while True:
        got = {role: _next(role, it) for role, it in iters.items()}
        ended = [role for role, ch in got.items() if ch is None]
        if len(ended) == len(got):
            return
        if ended:
            more = next(role for role, ch in got.items() if ch is not None)
            raise StreamMismatch(f"{ended[0]} has {n} chunks, {more} has more", n)
        yield {role: ch for role, ch in got.items() if ch is not None}
        n += 1


def _next(role: str, chunks: Iterator[LogprobChunk]) -> LogprobChunk | None:
    """The next chunk of `role`'s stream; a reader's error comes out naming the role."""
    try:
        return next(chunks, None)
    except RoleStreamError:
        raise
    except LogprobFileError as exc:
        raise RoleStreamError(role, exc) from exc


def default_pairs(roles: Sequence[str], reference: str) -> list[tuple[str, str]]:
    """(reference, r) for every other role, then every later pair of the others in order."""
    others = [r for r in roles if r != reference]
    return [(reference, r) for r in others] + [(a, b) for i, a in enumerate(others) for b in others[i + 1 :]]


def token_stats(
    streams: Mapping[str, Iterable[LogprobChunk]],
    *,
    reference: str = ROLE_REFERENCE,
    pairs: Sequence[tuple[str, str]] | None = None,
    kl_floor: float | None = LLAMA_KL_FLOOR,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    threads: int | None = None,
    looks: Sequence[int] = (),
    stop: Callable[[TokenStats], bool] | None = None,
) -> TokenStats:
    """Per-token vectors for every role and every pair (base, other) of ``pairs``; ``threads``
    (default: every core this process may use) reduce llama.cpp files' chunks. After each chunk
    count in ``looks`` the vectors so far go to ``stop``; when it answers True the reduction ends
    there, the rest of the streams unread (`qualify.numerics.looks`)."""
    roles = tuple(streams)
    if reference not in roles:
        raise ValueError(f"no stream for the reference role {reference!r} among {roles}")
    pairs = list(pairs) if pairs is not None else default_pairs(roles, reference)
    if (reference, reference) in pairs or any(r not in roles for p in pairs for r in p):
        raise ValueError(f"pairs {pairs} name a role without a stream (roles: {roles})")
    threads = threads or default_threads()
    role_parts: dict[str, dict[str, list[npt.NDArray[Any]]]] = {r: _parts(ROLE_FIELDS) for r in roles}
    pair_parts = {p: _parts(PAIR_FIELDS) for p in pairs}
    lower_bound = dict.fromkeys(pairs, False)
    chunk_index: list[int] = []
    positions: list[I64] = [np.zeros(0, np.int64)]
    targets: list[I64] = [np.zeros(0, np.int64)]
    shape = (0, 0, 0)

    def built() -> TokenStats:
        sizes = [len(p) for p in positions]
        return TokenStats(
            reference=reference,
            roles=roles,
            n_ctx=shape[0],
            first=shape[1],
            n_vocab=shape[2],
            kl_floor=kl_floor,
            chunk_index=np.array(chunk_index, np.int64),
            offsets=np.cumsum(sizes, dtype=np.int64),
            position=np.concatenate(positions),
            target=np.concatenate(targets),
            role={r: RoleVectors(**_joined(parts)) for r, parts in role_parts.items()},
            pair={p: PairVectors(**_joined(parts)) for p, parts in pair_parts.items()},
            kld_lower_bound=dict(lower_bound),
        )

    with ThreadPoolExecutor(threads, thread_name_prefix="token-stats") as pool:  # threads start on use
        for chunks in _lockstep(streams):
            _check_same(chunks, reference)
            ref = chunks[reference]
            shape = (len(ref.tokens), ref.first, ref.n_vocab)
            if ref.n_vocab < 2:
                raise StreamMismatch(
                    f"chunk {ref.index}: a vocabulary of {ref.n_vocab} has no top-2", ref.index
                )
            chunk_index.append(ref.index)
            positions.append(ref.first + np.arange(ref.n_rows, dtype=np.int64))
            targets.append(ref.targets.astype(np.int64))
            encoded = {r: ch for r, ch in chunks.items() if isinstance(ch, DenseChunk) and ch.encoded}
            got = (
                encoded_stats(encoded, pairs, kl_floor, pool, threads)
                if len(encoded) == len(chunks)
                else None
            )
            role_values, pair_values = got or decoded_stats(chunks, pairs, kl_floor, block_bytes)
            for r, values in role_values.items():
                _add(role_parts[r], *values)
            for (a, b), values in pair_values.items():
                _add(pair_parts[(a, b)], *values)
                lower_bound[(a, b)] |= not isinstance(chunks[a], DenseChunk) or not isinstance(
                    chunks[b], DenseChunk
                )
            if stop is not None and len(chunk_index) in looks and stop(built()):
                break
    return built()


def _parts(names: Sequence[str]) -> dict[str, list[npt.NDArray[Any]]]:
    return {name: [] for name in names}


def _add(parts: dict[str, list[npt.NDArray[Any]]], *values: npt.NDArray[Any]) -> None:
    for values_of, value in zip(parts.values(), values, strict=True):
        values_of.append(value)


def _joined(parts: Mapping[str, list[npt.NDArray[Any]]]) -> dict[str, npt.NDArray[Any]]:
    # Bool vectors stay bool and ids int64 even when there is no chunk at all.
    empty = {"top1": np.int64, "nonfinite": np.int64, "target_at_floor": np.bool_, "same_top": np.bool_}
    return {n: np.concatenate(v) if v else np.zeros(0, empty.get(n, np.float64)) for n, v in parts.items()}

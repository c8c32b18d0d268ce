"""Per-token log-probability artifacts, streamed chunk by chunk: the shapes every reader yields.

Every format holds the same thing: for each chunk of ``n_ctx`` tokens, the model's distribution at
positions ``first .. n_ctx-2`` (``n_rows = n_ctx - 1 - first`` rows), row ``j`` predicting token
``tokens[first + j + 1]``. Every reader validates what it can before the first chunk is read, and
yields chunks whose rows are decoded on demand (a block of rows at a time), so only the rows being
worked on are ever in memory. A llama.cpp file's chunks also hand out their rows still encoded
(``DenseChunk.encoded``), which ``qualify.numerics.tokenstats`` reduces without decoding. The
readers: ``qualify.numerics.llamalogits`` (llama.cpp's ``--kl-divergence-base`` files) and
``qualify.numerics.formats`` (qualify's own formats, and ``open_stream`` for any of them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.core.errors import QualifyError

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
U16 = npt.NDArray[np.uint16]


class LogprobFileError(QualifyError):
    """A log-prob artifact is missing, truncated or corrupt; the message names file and offset."""


class RoleStreamError(LogprobFileError):
    """A role's log-prob stream failed while it was read: the reader's error, and the role it was
    read for (so a caller names the role from this, not from the message's path)."""

    def __init__(self, role: str, error: LogprobFileError) -> None:
        super().__init__(error.message, error.hint)
        self.role = role


@dataclass(frozen=True, eq=False)
class DenseChunk:
    """One chunk with full-vocabulary rows, decoded on demand by ``logprobs(start, stop)``."""

    index: int
    tokens: I32  # [n_ctx], the chunk's whole window (the model saw all of it)
    first: int
    n_vocab: int
    n_rows: int
    decode: Callable[[int, int], F64]  # rows [start, stop) -> float64 [stop - start, n_vocab]
    floor: Callable[[int, int], F64] | None = None  # lowest representable log-prob per row
    #: Rows [start, stop) as llama.cpp stores them, without decoding: uint16 words
    #: [stop - start, 2*ceil(n_vocab/2) + 4], each row's float32 scale and min_log_prob in its
    #: first four words, then the codes q (log p = scale*q + min_log_prob). None for other formats.
    encoded: Callable[[int, int], U16] | None = None

    @property
    def targets(self) -> I32:
        return self.tokens[self.first + 1 : self.first + 1 + self.n_rows]

    def logprobs(self, start: int = 0, stop: int | None = None) -> F64:
        return self.decode(start, self.n_rows if stop is None else stop)

    def floors(self, start: int = 0, stop: int | None = None) -> F64 | None:
        return None if self.floor is None else self.floor(start, self.n_rows if stop is None else stop)


@dataclass(frozen=True, eq=False)
class TopKChunk:
    """One chunk with each row's top-K ids and log-probs (and the target's log-prob)."""

    index: int
    tokens: I32
    first: int
    n_vocab: int
    ids: I32  # [n_rows, K], by log-prob descending
    logp: F64  # [n_rows, K]
    target_logp: F64  # [n_rows]
    lse: F64  # [n_rows]
    ref_ids: I32 | None = None  # [n_rows, R]
    logp_at_ref_ids: F64 | None = None

    @property
    def n_rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def targets(self) -> I32:
        return self.tokens[self.first + 1 : self.first + 1 + self.n_rows]


LogprobChunk = DenseChunk | TopKChunk


class LogprobStream(ABC):
    """A validated artifact: header fields, the token table, and its chunks in order."""

    format: str
    path: Path
    n_ctx: int
    n_vocab: int
    n_chunk: int
    first: int
    tokens: I32  # [n_chunk, n_ctx]
    settings: Mapping[str, Any]

    @property
    def n_rows(self) -> int:
        return self.n_ctx - 1 - self.first

    @abstractmethod
    def chunk(self, k: int) -> LogprobChunk: ...

    def chunks(self) -> Iterator[LogprobChunk]:
        for k in range(self.n_chunk):
            yield self.chunk(k)

    def __iter__(self) -> Iterator[LogprobChunk]:
        return self.chunks()

    def _check_tokens(self) -> None:
        bad = np.flatnonzero((self.tokens < 0) | (self.tokens >= self.n_vocab))
        if bad.size:
            k, pos = divmod(int(bad[0]), self.n_ctx)
            raise LogprobFileError(
                f"{self.path}: token table holds id {int(self.tokens[k, pos])} at chunk {k}, "
                f"position {pos}, outside the vocabulary of {self.n_vocab}",
                hint="the file is corrupt or was written by another model",
            )


def log_softmax(logits: npt.NDArray[np.floating[Any]]) -> F64:
    """Row-wise log-softmax in float64."""
    x = np.asarray(logits, dtype=np.float64)
    mx = x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(x - mx).sum(axis=1, keepdims=True))
    out: F64 = x - mx - lse
    return out

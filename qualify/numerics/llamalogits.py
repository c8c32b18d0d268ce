"""llama.cpp ``--kl-divergence-base`` files: read memory-mapped chunk by chunk, and written.

**llama.cpp ``--kl-divergence-base`` files** (magic ``_logits_``), native little-endian::

    offset 0   8 bytes   b"_logits_"
    offset 8   uint32    n_ctx       (the -c value; llama.cpp reads it as uint32)
    offset 12  int32     n_vocab
    offset 16  int32     n_chunk
    offset 20  int32     tokens[n_chunk * n_ctx]
    then       n_chunk records of n_rows rows of nv = 2*ceil(n_vocab/2) + 4 uint16:
               float32 scale, float32 min_log_prob, n_vocab uint16 codes q_i, one zero pad
               when n_vocab is odd

``first = n_ctx // 2``; file size = 20 + 4*n_chunk*n_ctx + 2*n_chunk*n_rows*nv. Decoding is
``log p_i = scale*q_i + min_log_prob`` (here in float64). The encoding clamps logits more than
16 nats below the maximum to the floor ``min_log_prob``, so a row's floor is reported with it
(an NLL read at the floor is a lower bound). Sources: llama.cpp ``tools/perplexity/
perplexity.cpp``, commit 0c1e570 (the example's tree): encoder ``log_softmax`` lines 79-107,
writer ``perplexity`` 455-530, reader ``kl_divergence`` 1675-1745; upstream aba3d4de has the
same layout (numerics.md §1.1). Builds from before May 2026 (#23496/#23623) computed record
offsets in 32-bit int and wrote corrupt files once ``n_ctx*nv >= 2**31``.

The file is mapped, never read whole: a chunk's rows are decoded a block at a time
(``DenseChunk.logprobs``) or handed out still encoded (``DenseChunk.encoded``, views of the
mapping), and once ``chunks()`` moves past a chunk its pages leave the process's memory (the page
cache keeps them), so resident memory stays at about a chunk per file however long the file.

Errors name the file and, where it applies, the byte offset or chunk, and say the likely cause:
a size that does not match the header (truncated, appended, or an old build's 32-bit overflow),
a bad magic or header field, token ids outside the vocabulary, and (checked as each chunk is
opened) a row whose scale or minimum the encoder cannot produce.
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.numerics.stream import F64, U16, DenseChunk, LogprobChunk, LogprobFileError, LogprobStream

LLAMA_MAGIC = b"_logits_"
LLAMA_HEADER_BYTES = 20
LLAMA_FLOOR_NATS = 16.0  # the encoder keeps logits within 16 nats of the maximum
LLAMA_MAX_SCALE = 16 / 65535 * (1 + 1e-6)  # float32 rounding of (mx - mn)/65535


def llama_row_width(n_vocab: int) -> int:
    """uint16 words per row: scale and min (4 words), the codes, a pad when n_vocab is odd."""
    return 2 * ((n_vocab + 1) // 2) + 4


def llama_file_size(n_ctx: int, n_vocab: int, n_chunk: int) -> int:
    n_rows = n_ctx - 1 - n_ctx // 2
    return LLAMA_HEADER_BYTES + 4 * n_chunk * n_ctx + 2 * n_chunk * n_rows * llama_row_width(n_vocab)


def _llama_dtype(n_vocab: int) -> np.dtype[np.void]:
    return np.dtype([("scale", "<f4"), ("min_lp", "<f4"), ("q", "<u2", (llama_row_width(n_vocab) - 4,))])


def header_fields(path: Path, head: bytes) -> tuple[int, int, int]:
    """n_ctx, n_vocab and n_chunk from a whole header, each checked against its least value."""
    n_ctx = int(np.frombuffer(head, "<u4", 1, 8)[0])
    n_vocab, n_chunk = (int(v) for v in np.frombuffer(head, "<i4", 2, 12))
    for offset, name, value, low in (
        (8, "n_ctx", n_ctx, 3),
        (12, "n_vocab", n_vocab, 1),
        (16, "n_chunk", n_chunk, 0),
    ):
        if value < low:
            raise LogprobFileError(
                f"{path}: header field {name} at offset {offset} is {value}, expected >= {low}"
            )
    return n_ctx, n_vocab, n_chunk


class LlamaLogitsFile(LogprobStream):
    """A llama.cpp ``--kl-divergence-base`` file, memory-mapped; rows decoded per block."""

    format = "llama.cpp _logits_"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.settings = {}
        try:
            size = self.path.stat().st_size
            with self.path.open("rb") as f:
                head = f.read(LLAMA_HEADER_BYTES)
        except OSError as e:
            raise LogprobFileError(f"{self.path}: cannot read: {e.strerror}") from e
        if head[:8] != LLAMA_MAGIC[: len(head)]:
            raise LogprobFileError(
                f"{self.path}: offset 0 holds {head[:8]!r}, not the magic {LLAMA_MAGIC!r}",
                hint="not a file written by llama-perplexity --kl-divergence-base",
            )
        if len(head) < LLAMA_HEADER_BYTES:
            raise LogprobFileError(
                f"{self.path}: {size} bytes, shorter than the {LLAMA_HEADER_BYTES}-byte header",
                hint="the file is truncated: the run that wrote it was interrupted",
            )
        n_ctx, n_vocab, n_chunk = header_fields(self.path, head)
        self.n_ctx, self.n_vocab, self.n_chunk, self.first = n_ctx, n_vocab, n_chunk, n_ctx // 2
        expected = llama_file_size(n_ctx, n_vocab, n_chunk)
        if size != expected:
            raise LogprobFileError(self._size_message(size, expected), hint=self._size_hint(size, expected))
        self.tokens = np.zeros((0, n_ctx), np.int32)
        if n_chunk:  # the token table is small (4 bytes a token): read it whole
            self.tokens = np.fromfile(self.path, "<i4", n_chunk * n_ctx, offset=LLAMA_HEADER_BYTES).reshape(
                n_chunk, n_ctx
            )
        self._check_tokens()
        # Records are 4-byte aligned (2*nv bytes each, nv even), so one structured dtype maps them,
        # and plain uint16 words map the same bytes for the encoded rows.
        self._map: mmap.mmap | None = None
        self._records: npt.NDArray[np.void] | None = None
        self._words: U16 | None = None
        if n_chunk:
            try:
                with self.path.open("rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except OSError as e:
                raise LogprobFileError(f"{self.path}: cannot map: {e.strerror}") from e
            rows, width = n_chunk * self.n_rows, llama_row_width(n_vocab)
            data0 = self._data_offset
            self._records = np.frombuffer(self._map, _llama_dtype(n_vocab), rows, data0).reshape(
                n_chunk, self.n_rows
            )
            self._words = np.frombuffer(self._map, "<u2", rows * width, data0).reshape(
                n_chunk, self.n_rows, width
            )

    @property
    def _data_offset(self) -> int:
        return LLAMA_HEADER_BYTES + 4 * self.n_chunk * self.n_ctx

    @property
    def _record_bytes(self) -> int:
        return 2 * self.n_rows * llama_row_width(self.n_vocab)

    def _size_message(self, size: int, expected: int) -> str:
        data0, record = self._data_offset, self._record_bytes
        shape = f"n_ctx={self.n_ctx}, n_vocab={self.n_vocab}, n_chunk={self.n_chunk}"
        if size < expected:
            whole = max(0, (size - data0) // record)
            where = f"chunk {whole}'s record starts at offset {data0 + whole * record}"
            return (
                f"{self.path}: {size} bytes, but its header ({shape}) needs {expected}: "
                f"the file holds {whole} whole chunk record(s) of {self.n_chunk}; {where}"
            )
        return (
            f"{self.path}: {size} bytes, but its header ({shape}) needs {expected} ({size - expected} extra)"
        )

    def _size_hint(self, size: int, expected: int) -> str:
        causes = ["the run that wrote it was interrupted or the disk filled up"] if size < expected else []
        if self.n_ctx * llama_row_width(self.n_vocab) >= 2**31:
            causes.append(
                "llama.cpp builds from before May 2026 (#23496, #23623) overflow 32-bit offsets at "
                f"n_ctx*(n_vocab+4) >= 2^31 (here {self.n_ctx * llama_row_width(self.n_vocab)}): "
                "rebuild with a newer llama.cpp or use a smaller -c"
            )
        if size > expected:
            causes.append("the file was appended to or is not one llama-perplexity run")
        return "; or ".join(causes)

    def row_scales(self) -> F64:
        """Every row's code step in nats, [n_chunk, n_rows]: the rounding of a decoded log-prob
        is at most half of it (for log-probs above the row's floor)."""
        if self._records is None:
            return np.zeros((0, self.n_rows))
        return np.asarray(self._records["scale"], np.float64)

    def _check_rows(self, k: int, rec: npt.NDArray[np.void]) -> None:
        # The encoder gives 0 <= scale <= 16/65535 and min_log_prob <= -lse <= 0; anything else is
        # corruption. NaN passes: NaN logits of the engine are counted by the statistics instead.
        scale, min_lp = rec["scale"], rec["min_lp"]
        bad = np.flatnonzero((scale < 0) | (scale > LLAMA_MAX_SCALE) | (min_lp > 0))
        if bad.size:
            j = int(bad[0])
            row_bytes = 2 * llama_row_width(self.n_vocab)
            offset = self._data_offset + (k * self.n_rows + j) * row_bytes
            raise LogprobFileError(
                f"{self.path}: chunk {k}, row {j} (offset {offset}): scale {float(scale[j])} and "
                f"min_log_prob {float(min_lp[j])} cannot come from llama-perplexity "
                "(0 <= scale <= 16/65535, min_log_prob <= 0)",
                hint="the file is corrupt",
            )

    def chunks(self) -> Iterator[LogprobChunk]:
        """The chunks in order; a chunk's pages are let go when the next one is asked for."""
        for k in range(self.n_chunk):
            yield self.chunk(k)
            self._release(k)

    def _release(self, k: int) -> None:
        """Drop chunk k's pages from this process's memory (MADV_DONTNEED on a read-only file
        mapping: the page cache keeps them, and a later read maps them again). The range starts
        at chunk k-1: the kernel maps pages around a faulting one, some of them behind it."""
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = self._data_offset + max(k - 1, 0) * self._record_bytes
        stop = self._data_offset + (k + 1) * self._record_bytes
        page = start - start % mmap.PAGESIZE
        self._map.madvise(mmap.MADV_DONTNEED, page, stop - page)

    def chunk(self, k: int) -> DenseChunk:
        if not 0 <= k < self.n_chunk or self._records is None or self._words is None:
            raise IndexError(f"{self.path}: chunk {k} out of range 0..{self.n_chunk - 1}")
        rec, words = self._records[k], self._words[k]
        n_vocab = self.n_vocab
        self._check_rows(k, rec)

        def decode(start: int, stop: int) -> F64:
            rows = rec[start:stop]
            out: F64 = np.multiply(rows["q"][:, :n_vocab], rows["scale"].astype(np.float64)[:, None])
            out += rows["min_lp"].astype(np.float64)[:, None]
            return out

        def floor(start: int, stop: int) -> F64:
            return np.asarray(rec[start:stop]["min_lp"], np.float64)

        def encoded(start: int, stop: int) -> U16:
            rows: U16 = words[start:stop]
            return rows

        # The encoded rows are read as native uint16 and float32 (little-endian, like the file).
        native = encoded if sys.byteorder == "little" else None
        return DenseChunk(k, self.tokens[k], self.first, n_vocab, self.n_rows, decode, floor, native)


def encode_llama_rows(logits: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.void]:
    """Encode float32 logits rows [n, n_vocab] exactly as llama-perplexity does (float32 math).

    mx = max, mn = max(min, mx - 16), lse = log sum exp(l - mx) (summed in double),
    scale = (mx - mn)/65535, min_log_prob = mn - mx - lse, q = round-half-even(
    (l - mn)/scale) where l > mn else 0; all codes 0 when scale == 0.
    """
    x = np.asarray(logits, np.float32)
    n, n_vocab = x.shape
    out = np.zeros(n, _llama_dtype(n_vocab))
    mx = x.max(axis=1)
    mn = np.maximum(x.min(axis=1), mx - np.float32(LLAMA_FLOOR_NATS))
    lse = np.log(np.exp(x - mx[:, None]).astype(np.float64).sum(axis=1)).astype(np.float32)
    scale = (mx - mn) / np.float32(65535)
    out["scale"] = scale
    out["min_lp"] = (mn - mx) - lse
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.float32(1) / scale
        codes = np.rint(inv[:, None] * (x - mn[:, None]))  # rint: round half to even, like nearest_int
    codes = np.where((x > mn[:, None]) & (scale[:, None] != 0), codes, 0)
    out["q"][:, :n_vocab] = codes.astype(np.uint16)
    return out


def write_llama_logits(path: Path | str, tokens: npt.ArrayLike, logits: Iterable[npt.ArrayLike]) -> Path:
    """Write a ``_logits_`` file: tokens int [n_chunk, n_ctx], then per chunk the float32 logits
    [n_rows, n_vocab] of positions first..n_ctx-2, encoded by ``encode_llama_rows``."""
    path = Path(path)
    tok = np.ascontiguousarray(tokens, dtype="<i4")
    n_chunk, n_ctx = tok.shape
    n_rows = n_ctx - 1 - n_ctx // 2
    n_vocab = -1
    with path.open("wb") as f:
        f.write(LLAMA_MAGIC + np.array([n_ctx], "<u4").tobytes())
        header_end = f.tell()
        f.write(b"\0" * 8 + tok.tobytes())
        written = 0
        for rows in logits:
            x = np.asarray(rows, np.float32)
            if x.shape[0] != n_rows:
                raise ValueError(f"chunk {written}: {x.shape[0]} rows, expected {n_rows}")
            n_vocab = x.shape[1] if n_vocab < 0 else n_vocab
            f.write(encode_llama_rows(x).tobytes())
            written += 1
        if written != n_chunk:
            raise ValueError(f"{written} chunks of logits for a token table of {n_chunk} chunks")
        f.seek(header_end)
        f.write(np.array([max(n_vocab, 0), n_chunk], "<i4").tobytes())
    return path

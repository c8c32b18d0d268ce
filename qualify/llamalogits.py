"""Readers (and writers) of per-token log-probability artifacts, streamed chunk by chunk.

Three formats, all holding the same thing: for each chunk of ``n_ctx`` tokens, the model's
distribution at positions ``first .. n_ctx-2`` (``n_rows = n_ctx - 1 - first`` rows), row ``j``
predicting token ``tokens[first + j + 1]``. Every reader validates what it can before the first
chunk is read, and yields chunks whose rows are decoded on demand (a block of rows at a time), so
only the rows being worked on are ever in memory.

1. **llama.cpp ``--kl-divergence-base`` files** (magic ``_logits_``), native little-endian::

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

2. **Full-vocabulary directory** (``qualify.logprobs/v1``), memory-mapped ``.npy`` files::

       meta.json          {"format": "qualify.logprobs/v1", "n_ctx": int, "n_vocab": int,
                           "n_chunk": int, "first": int, "values": "logprobs" | "logits",
                           "settings": {...}}      (settings: free-form, recorded for comparison)
       tokens.npy         int32 [n_chunk, n_ctx]
       logprobs_c00000.npy, logprobs_c00001.npy, ...
                          float32 or float64 [n_rows, n_vocab], one file per chunk: log-softmax
                          rows, or raw logits when values == "logits" (log-softmax is then taken
                          here, in float64)

3. **Top-K ``.npz``** (``qualify.topk/v1``), K >= 64, one file::

       format             str, "qualify.topk/v1"
       n_vocab, first     int64 scalars
       tokens             int32   [n_chunk, n_ctx]
       ids                int32   [n_chunk, n_rows, K]  top-K ids, by log-prob descending
       logp               float32 [n_chunk, n_rows, K]  their normalised log-probs
       target_logp        float32 [n_chunk, n_rows]     log-prob of the target token
       lse                float32 [n_chunk, n_rows]     log-sum-exp of the raw logits
       ref_ids            int32   [n_chunk, n_rows, R]  optional: the reference's top ids
       logp_at_ref_ids    float32 [n_chunk, n_rows, R]  optional: this arm's log-probs there
       settings           str, JSON object (optional)

   A KL computed from top-K rows is a coarse-grained lower bound (see ``tokenstats``).

Errors name the file and, where it applies, the byte offset or chunk, and say the likely cause:
a size that does not match the header (truncated, appended, or an old build's 32-bit overflow),
a bad magic or header field, token ids outside the vocabulary, and (checked as each chunk is
opened) a row whose scale or minimum the encoder cannot produce.
"""

from __future__ import annotations

import json
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from qualify.errors import QualifyError

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]

LLAMA_MAGIC = b"_logits_"
LLAMA_HEADER_BYTES = 20
LLAMA_FLOOR_NATS = 16.0  # the encoder keeps logits within 16 nats of the maximum
LLAMA_MAX_SCALE = 16 / 65535 * (1 + 1e-6)  # float32 rounding of (mx - mn)/65535
LOGPROB_DIR_FORMAT = "qualify.logprobs/v1"
TOPK_FORMAT = "qualify.topk/v1"
MIN_TOPK = 64


class LogprobFileError(QualifyError):
    """A log-prob artifact is missing, truncated or corrupt; the message names file and offset."""


# ---------------------------------------------------------------------------------------------
# Chunks


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


# ---------------------------------------------------------------------------------------------
# llama.cpp _logits_ files


def llama_row_width(n_vocab: int) -> int:
    """uint16 words per row: scale and min (4 words), the codes, a pad when n_vocab is odd."""
    return 2 * ((n_vocab + 1) // 2) + 4


def llama_file_size(n_ctx: int, n_vocab: int, n_chunk: int) -> int:
    n_rows = n_ctx - 1 - n_ctx // 2
    return LLAMA_HEADER_BYTES + 4 * n_chunk * n_ctx + 2 * n_chunk * n_rows * llama_row_width(n_vocab)


def _llama_dtype(n_vocab: int) -> np.dtype[np.void]:
    return np.dtype([("scale", "<f4"), ("min_lp", "<f4"), ("q", "<u2", (llama_row_width(n_vocab) - 4,))])


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
        n_ctx = int(np.frombuffer(head, "<u4", 1, 8)[0])
        n_vocab, n_chunk = (int(v) for v in np.frombuffer(head, "<i4", 2, 12))
        for offset, name, value, low in (
            (8, "n_ctx", n_ctx, 3),
            (12, "n_vocab", n_vocab, 1),
            (16, "n_chunk", n_chunk, 0),
        ):
            if value < low:
                raise LogprobFileError(
                    f"{self.path}: header field {name} at offset {offset} is {value}, expected >= {low}"
                )
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
        # Records are 4-byte aligned (2*nv bytes each, nv even), so one structured dtype maps them.
        self._records: np.memmap[Any, np.dtype[np.void]] | None = None
        if n_chunk:
            offset = LLAMA_HEADER_BYTES + 4 * n_chunk * n_ctx
            self._records = np.memmap(self.path, _llama_dtype(n_vocab), "r", offset, (n_chunk, self.n_rows))

    def _size_message(self, size: int, expected: int) -> str:
        data0 = LLAMA_HEADER_BYTES + 4 * self.n_chunk * self.n_ctx
        record = 2 * self.n_rows * llama_row_width(self.n_vocab)
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
            offset = LLAMA_HEADER_BYTES + 4 * self.n_chunk * self.n_ctx + (k * self.n_rows + j) * row_bytes
            raise LogprobFileError(
                f"{self.path}: chunk {k}, row {j} (offset {offset}): scale {float(scale[j])} and "
                f"min_log_prob {float(min_lp[j])} cannot come from llama-perplexity "
                "(0 <= scale <= 16/65535, min_log_prob <= 0)",
                hint="the file is corrupt",
            )

    def chunk(self, k: int) -> DenseChunk:
        if not 0 <= k < self.n_chunk or self._records is None:
            raise IndexError(f"{self.path}: chunk {k} out of range 0..{self.n_chunk - 1}")
        rec = self._records[k]
        n_vocab = self.n_vocab
        self._check_rows(k, rec)

        def decode(start: int, stop: int) -> F64:
            rows = rec[start:stop]
            out: F64 = np.multiply(rows["q"][:, :n_vocab], rows["scale"].astype(np.float64)[:, None])
            out += rows["min_lp"].astype(np.float64)[:, None]
            return out

        def floor(start: int, stop: int) -> F64:
            return np.asarray(rec[start:stop]["min_lp"], np.float64)

        return DenseChunk(k, self.tokens[k], self.first, n_vocab, self.n_rows, decode, floor)


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


# ---------------------------------------------------------------------------------------------
# qualify.logprobs/v1 directories


class LogprobDir(LogprobStream):
    """A ``qualify.logprobs/v1`` directory; each chunk's ``.npy`` is memory-mapped when read."""

    format = LOGPROB_DIR_FORMAT

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        meta_path = self.path / "meta.json"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as e:
            raise LogprobFileError(f"{meta_path}: cannot read the format's meta.json: {e}") from e
        if not isinstance(meta, dict) or meta.get("format") != LOGPROB_DIR_FORMAT:
            raise LogprobFileError(f"{meta_path}: format is not {LOGPROB_DIR_FORMAT!r}")
        try:
            self.n_ctx, self.n_vocab = int(meta["n_ctx"]), int(meta["n_vocab"])
            self.n_chunk, self.first = int(meta["n_chunk"]), int(meta["first"])
        except (KeyError, TypeError, ValueError) as e:
            raise LogprobFileError(f"{meta_path}: needs integer n_ctx, n_vocab, n_chunk, first ({e})") from e
        self.values = str(meta.get("values", "logprobs"))
        if self.values not in ("logprobs", "logits"):
            raise LogprobFileError(f"{meta_path}: values is {self.values!r}, expected 'logprobs' or 'logits'")
        if not 0 <= self.first < self.n_ctx - 1:
            raise LogprobFileError(
                f"{meta_path}: first={self.first} leaves no scored row in n_ctx={self.n_ctx}"
            )
        self.settings = dict(meta.get("settings") or {})
        self.tokens = _load_npy(self.path / "tokens.npy", (self.n_chunk, self.n_ctx), "iu").astype(np.int32)
        self._check_tokens()

    def chunk(self, k: int) -> DenseChunk:
        if not 0 <= k < self.n_chunk:
            raise IndexError(f"{self.path}: chunk {k} out of range 0..{self.n_chunk - 1}")
        rows = _load_npy(self.path / f"logprobs_c{k:05d}.npy", (self.n_rows, self.n_vocab), "f")
        as_logits = self.values == "logits"

        def decode(start: int, stop: int) -> F64:
            block = rows[start:stop]
            return log_softmax(block) if as_logits else np.asarray(block, np.float64)

        return DenseChunk(k, self.tokens[k], self.first, self.n_vocab, self.n_rows, decode)


def _load_npy(path: Path, shape: tuple[int, ...], kinds: str) -> npt.NDArray[Any]:
    try:
        arr: npt.NDArray[Any] = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise LogprobFileError(f"{path}: cannot read as .npy: {e}") from e
    if arr.shape != shape or arr.dtype.kind not in kinds:
        raise LogprobFileError(
            f"{path}: holds {arr.dtype} {arr.shape}, expected shape {shape} of kind {kinds!r}"
        )
    return arr


def write_logprob_dir(
    path: Path | str,
    tokens: npt.ArrayLike,
    rows: Iterable[npt.ArrayLike],
    *,
    first: int | None = None,
    values: str = "logprobs",
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Write a ``qualify.logprobs/v1`` directory (rows per chunk: [n_rows, n_vocab], float32/64)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = np.asarray(tokens, np.int32)
    n_chunk, n_ctx = tok.shape
    first = n_ctx // 2 if first is None else first
    n_vocab = 0
    for k, block in enumerate(rows):
        arr = np.asarray(block)
        n_vocab = arr.shape[1]
        np.save(path / f"logprobs_c{k:05d}.npy", arr)
    np.save(path / "tokens.npy", tok)
    meta = {"format": LOGPROB_DIR_FORMAT, "n_ctx": n_ctx, "n_vocab": n_vocab, "n_chunk": n_chunk}
    meta |= {"first": first, "values": values, "settings": dict(settings or {})}
    (path / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# qualify.topk/v1 files


class TopKRows(NamedTuple):
    """One chunk's top-K arrays, as stored in a ``qualify.topk/v1`` file."""

    ids: I32
    logp: npt.NDArray[np.float32]
    target_logp: npt.NDArray[np.float32]
    lse: npt.NDArray[np.float32]
    ref_ids: I32 | None = None
    logp_at_ref_ids: npt.NDArray[np.float32] | None = None


def topk_rows(
    logits: npt.ArrayLike, targets: npt.ArrayLike, k: int, ref_ids: npt.ArrayLike | None = None
) -> TopKRows:
    """Reduce raw logits rows [n, n_vocab] (log-probs work too: their lse is 0) to top-K rows."""
    x = np.asarray(logits, np.float64)
    mx = x.max(axis=1, keepdims=True)
    lse = (mx + np.log(np.exp(x - mx).sum(axis=1, keepdims=True)))[:, 0]
    lp = x - lse[:, None]
    ids = np.argsort(-lp, axis=1, kind="stable")[:, :k].astype(np.int32)
    rows = np.arange(x.shape[0])
    tgt = lp[rows, np.asarray(targets)]
    f32 = np.float32
    at_ref = None if ref_ids is None else np.take_along_axis(lp, np.asarray(ref_ids), 1).astype(f32)
    ref = None if ref_ids is None else np.asarray(ref_ids, np.int32)
    return TopKRows(
        ids, np.take_along_axis(lp, ids, 1).astype(f32), tgt.astype(f32), lse.astype(f32), ref, at_ref
    )


def write_topk(
    path: Path | str,
    tokens: npt.ArrayLike,
    rows: Sequence[TopKRows],
    *,
    n_vocab: int,
    first: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Write a ``qualify.topk/v1`` file from one ``TopKRows`` per chunk."""
    path = Path(path)
    tok = np.asarray(tokens, np.int32)
    first = tok.shape[1] // 2 if first is None else first
    arrays: dict[str, Any] = {
        "format": np.array(TOPK_FORMAT),
        "n_vocab": np.int64(n_vocab),
        "first": np.int64(first),
    }
    arrays["tokens"] = tok
    for name in ("ids", "logp", "target_logp", "lse"):
        arrays[name] = np.stack([getattr(r, name) for r in rows])
    with_ref = [r for r in rows if r.ref_ids is not None and r.logp_at_ref_ids is not None]
    if with_ref and len(with_ref) != len(rows):
        raise ValueError("ref_ids and logp_at_ref_ids must be given for every chunk or for none")
    if with_ref:
        arrays["ref_ids"] = np.stack([r.ref_ids for r in with_ref if r.ref_ids is not None])
        arrays["logp_at_ref_ids"] = np.stack(
            [r.logp_at_ref_ids for r in with_ref if r.logp_at_ref_ids is not None]
        )
    arrays["settings"] = np.array(json.dumps(dict(settings or {})))
    with path.open("wb") as f:
        np.savez(f, **arrays)
    return path


class TopKFile(LogprobStream):
    """A ``qualify.topk/v1`` file: compact (K ids per row), so it is loaded whole and validated."""

    format = TOPK_FORMAT

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            with np.load(self.path, allow_pickle=False) as z:
                data = {name: z[name] for name in z.files}
        except (OSError, ValueError, zipfile.BadZipFile) as e:
            raise LogprobFileError(f"{self.path}: cannot read as .npz: {e}") from e
        missing = {"format", "n_vocab", "first", "tokens", "ids", "logp", "target_logp", "lse"} - set(data)
        if missing or str(data["format"]) != TOPK_FORMAT:
            raise LogprobFileError(
                f"{self.path}: not a {TOPK_FORMAT} file (missing {sorted(missing) or 'format'})"
            )
        self.n_vocab, self.first = int(data["n_vocab"]), int(data["first"])
        self.tokens = np.asarray(data["tokens"], np.int32)
        self.n_chunk, self.n_ctx = (int(v) for v in self.tokens.shape)
        self.settings = json.loads(str(data["settings"])) if "settings" in data else {}
        self._data = data
        ids = data["ids"]
        k = ids.shape[-1] if ids.ndim == 3 else 0
        rows3 = (self.n_chunk, self.n_rows)
        if ids.shape != (*rows3, k) or data["logp"].shape != ids.shape or k < MIN_TOPK:
            raise LogprobFileError(
                f"{self.path}: ids {ids.shape} and logp {data['logp'].shape} must both be "
                f"[n_chunk, n_rows, K] = [{self.n_chunk}, {self.n_rows}, K] with K >= {MIN_TOPK}"
            )
        for name in ("target_logp", "lse"):
            if data[name].shape != rows3:
                raise LogprobFileError(f"{self.path}: {name} is {data[name].shape}, expected {rows3}")
        if ("ref_ids" in data) != ("logp_at_ref_ids" in data) or (
            "ref_ids" in data and data["ref_ids"].shape != data["logp_at_ref_ids"].shape
        ):
            raise LogprobFileError(f"{self.path}: ref_ids and logp_at_ref_ids come together, with one shape")
        self._check_tokens()
        self._check_rows(ids, data["logp"])

    def _check_rows(self, ids: npt.NDArray[Any], logp: npt.NDArray[Any]) -> None:
        flat_ids = ids.reshape(-1, ids.shape[-1])
        problems = {
            "ids outside the vocabulary": ((flat_ids < 0) | (flat_ids >= self.n_vocab)).any(axis=1),
            "log-probs not sorted descending": (np.diff(logp.reshape(flat_ids.shape), axis=1) > 0).any(
                axis=1
            ),
            "repeated ids": (np.diff(np.sort(flat_ids, axis=1), axis=1) == 0).any(axis=1),
        }
        for what, bad in problems.items():
            if bad.any():
                k, j = divmod(int(np.flatnonzero(bad)[0]), self.n_rows)
                raise LogprobFileError(f"{self.path}: chunk {k}, row {j}: {what}")

    def chunk(self, k: int) -> TopKChunk:
        if not 0 <= k < self.n_chunk:
            raise IndexError(f"{self.path}: chunk {k} out of range 0..{self.n_chunk - 1}")
        d = self._data
        f64 = np.float64
        ref = d.get("ref_ids")
        return TopKChunk(
            k,
            self.tokens[k],
            self.first,
            self.n_vocab,
            np.asarray(d["ids"][k], np.int32),
            np.asarray(d["logp"][k], f64),
            np.asarray(d["target_logp"][k], f64),
            np.asarray(d["lse"][k], f64),
            None if ref is None else np.asarray(ref[k], np.int32),
            None if ref is None else np.asarray(d["logp_at_ref_ids"][k], f64),
        )


def open_stream(path: Path | str) -> LogprobStream:
    """Open any of the three formats: a directory, a ``_logits_`` file, or a top-K ``.npz``."""
    path = Path(path)
    if path.is_dir():
        return LogprobDir(path)
    try:
        with path.open("rb") as f:
            magic = f.read(8)
    except OSError as e:
        raise LogprobFileError(f"{path}: cannot read: {e.strerror}") from e
    if magic[:4] == b"PK\x03\x04":
        return TopKFile(path)
    return LlamaLogitsFile(path)

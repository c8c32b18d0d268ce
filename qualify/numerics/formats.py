"""qualify's own log-prob formats, their writers, and ``open_stream`` (any supported artifact).

1. **Full-vocabulary directory** (``qualify.logprobs/v1``), memory-mapped ``.npy`` files::

       meta.json          {"format": "qualify.logprobs/v1", "n_ctx": int, "n_vocab": int,
                           "n_chunk": int, "first": int, "values": "logprobs" | "logits",
                           "settings": {...}}      (settings: free-form, recorded for comparison)
       tokens.npy         int32 [n_chunk, n_ctx]
       logprobs_c00000.npy, logprobs_c00001.npy, ...
                          float32 or float64 [n_rows, n_vocab], one file per chunk: log-softmax
                          rows, or raw logits when values == "logits" (log-softmax is then taken
                          here, in float64)

2. **Top-K ``.npz``** (``qualify.topk/v1``), K >= 64, one file::

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

The layout of rows and chunks is ``qualify.numerics.stream``'s; llama.cpp's files are read by
``qualify.numerics.llamalogits``. Errors name the file (and the chunk and row where it applies) and what
was expected.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from qualify.checks.evidence import validated
from qualify.core import jsontext
from qualify.core.errors import RunStoreError
from qualify.numerics.llamalogits import LlamaLogitsFile
from qualify.numerics.stream import (
    F64,
    I32,
    DenseChunk,
    LogprobFileError,
    LogprobStream,
    TopKChunk,
    log_softmax,
)

LOGPROB_DIR_FORMAT = "qualify.logprobs/v1"
TOPK_FORMAT = "qualify.topk/v1"
MIN_TOPK = 64


class LogprobDirMeta(BaseModel):
    """A ``qualify.logprobs/v1`` directory's meta.json: its shape, what its rows hold, and the
    settings its writer recorded. The format's version is in ``format``; a key it does not
    know, or one of the wrong type, is refused naming the file and the key."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal["qualify.logprobs/v1"]
    n_ctx: int
    n_vocab: int
    n_chunk: int
    first: int = Field(description="the first scored position of each chunk")
    values: Literal["logprobs", "logits"] = Field(
        "logprobs", description="log-softmax rows, or raw logits (absent: logprobs)"
    )
    settings: dict[str, JsonValue] = Field(
        default_factory=dict, description="free-form, recorded for comparison between roles"
    )

    @classmethod
    def load(cls, document: object, where: Path) -> LogprobDirMeta:
        try:
            return validated(cls, document, where)
        except RunStoreError as exc:
            raise LogprobFileError(exc.message) from None

    @classmethod
    def read(cls, path: Path) -> LogprobDirMeta:
        try:
            document = jsontext.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise LogprobFileError(f"{path}: cannot read the format's meta.json: {e}") from e
        return cls.load(document, path)


class LogprobDir(LogprobStream):
    """A ``qualify.logprobs/v1`` directory; each chunk's ``.npy`` is memory-mapped when read."""

    format = LOGPROB_DIR_FORMAT

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        meta = LogprobDirMeta.read(self.path / "meta.json")
        self.n_ctx, self.n_vocab, self.n_chunk, self.first = (
            meta.n_ctx,
            meta.n_vocab,
            meta.n_chunk,
            meta.first,
        )
        self.values = meta.values
        if not 0 <= self.first < self.n_ctx - 1:
            raise LogprobFileError(
                f"{self.path / 'meta.json'}: first={self.first} leaves no scored row in n_ctx={self.n_ctx}"
            )
        self.settings = dict(meta.settings)
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
    meta = LogprobDirMeta.load(
        {"format": LOGPROB_DIR_FORMAT, "n_ctx": n_ctx, "n_vocab": n_vocab, "n_chunk": n_chunk}
        | {"first": first, "values": values, "settings": dict(settings or {})},
        path / "meta.json",
    )
    (path / "meta.json").write_text(
        json.dumps(meta.model_dump(mode="json"), indent=1) + "\n", encoding="utf-8"
    )
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
        # Every chunk's arrays at once (the chunk first), as the checks above found them.
        with_ref = "ref_ids" in data
        self._rows = TopKRows(
            ids,
            data["logp"],
            data["target_logp"],
            data["lse"],
            data["ref_ids"] if with_ref else None,
            data["logp_at_ref_ids"] if with_ref else None,
        )

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
        rows, f64 = self._rows, np.float64
        ref, at_ref = rows.ref_ids, rows.logp_at_ref_ids
        return TopKChunk(
            k,
            self.tokens[k],
            self.first,
            self.n_vocab,
            np.asarray(rows.ids[k], np.int32),
            np.asarray(rows.logp[k], f64),
            np.asarray(rows.target_logp[k], f64),
            np.asarray(rows.lse[k], f64),
            None if ref is None else np.asarray(ref[k], np.int32),
            None if at_ref is None else np.asarray(at_ref[k], f64),
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

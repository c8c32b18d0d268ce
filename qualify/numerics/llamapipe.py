"""A llama.cpp ``_logits_`` stream read from a named pipe as llama-perplexity writes it.

llama-perplexity writes its ``--kl-divergence-base`` file front to back without seeking: the
magic and n_ctx, n_vocab and n_chunk, the token table of every chunk, then each chunk's rows as
it scores them. Pointed at a FIFO, it blocks on each write until the reader takes the bytes, so
the reader can reduce every chunk as it comes and nothing reaches the disk. Only one chunk's
rows are in memory (about 134 MB for a 262 144-entry vocabulary at 255 rows).

A writer that ends early leaves the pipe at end of file: the reader's error names the offset,
the chunk and how many of its bytes came, so the caller can say which role died where.
"""

from __future__ import annotations

import io
import os
import select
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from qualify.numerics.llamalogits import (
    LLAMA_HEADER_BYTES,
    LLAMA_MAGIC,
    LlamaLogitsFile,
    _llama_dtype,
    header_fields,
    llama_file_size,
    llama_row_width,
)
from qualify.numerics.stream import DenseChunk, LogprobChunk, LogprobFileError

#: How long to wait for the writer to open its end, checking that it still lives.
POLL_S = 0.2


def make_fifo(path: Path) -> None:
    """A fresh named pipe at `path` (whatever was there before is removed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        if path.is_dir():
            raise LogprobFileError(f"{path}: a directory is in the way of the pipe")
        path.unlink()
    os.mkfifo(path, 0o600)


def is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(path.lstat().st_mode)
    except OSError:
        return False


class LlamaLogitsPipe(LlamaLogitsFile):
    """A ``_logits_`` stream read once, in order, from a FIFO; `alive` says whether its writer
    still runs (a writer that dies before opening the pipe would otherwise be waited for)."""

    def __init__(self, path: Path | str, alive: Callable[[], bool]) -> None:
        self.path = Path(path)
        self.settings = {}
        self._offset = 0
        self._handle = self._open(alive)
        head = bytes(self._read_exactly(LLAMA_HEADER_BYTES, "the header"))
        if head[:8] != LLAMA_MAGIC:
            raise LogprobFileError(
                f"{self.path}: offset 0 holds {head[:8]!r}, not the magic {LLAMA_MAGIC!r}",
                hint="not written by llama-perplexity --kl-divergence-base",
            )
        n_ctx, n_vocab, n_chunk = header_fields(self.path, head)
        self.n_ctx, self.n_vocab, self.n_chunk, self.first = n_ctx, n_vocab, n_chunk, n_ctx // 2
        table = self._read_exactly(4 * n_chunk * n_ctx, "the token table")
        self.tokens = np.frombuffer(table, "<i4").reshape(n_chunk, n_ctx).astype(np.int32)
        self._check_tokens()
        self._map = None
        self._records = None
        self._words = None
        self._next = 0
        self._buffer = bytearray(self._record_bytes)
        self._scales: list[npt.NDArray[np.float64]] = []

    def _open(self, alive: Callable[[], bool]) -> io.FileIO:
        # Opened without blocking (open would wait for a writer forever), then polled until the
        # first bytes come or the writer is gone; reads block from then on.
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise LogprobFileError(f"{self.path}: cannot open the pipe: {e.strerror}") from e
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(int(POLL_S * 1000)):
            if not alive():
                os.close(fd)
                raise LogprobFileError(
                    f"{self.path}: offset 0: the writer ended before it wrote anything",
                    hint="see the role's log for why the scoring command stopped",
                )
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)

    def _read_exactly(self, size: int, what: str, into: bytearray | None = None) -> bytes | bytearray:
        buffer = into if into is not None else bytearray(size)
        view = memoryview(buffer)[:size]
        got = 0
        while got < size:
            n = self._handle.readinto(view[got:])
            if not n:
                raise LogprobFileError(
                    f"{self.path}: the writer stopped at offset {self._offset + got}, in {what} "
                    f"({got} of {size} bytes came)",
                    hint="the scoring command ended early: see its log",
                )
            got += n
        self._offset += size
        return buffer

    def _expected(self) -> int:
        return llama_file_size(self.n_ctx, self.n_vocab, self.n_chunk)

    def row_scales(self) -> npt.NDArray[np.float64]:
        """The code step of every row read so far (a pipe is read once)."""
        if not self._scales:
            return np.zeros((0, self.n_rows))
        return np.stack(self._scales)

    def chunks(self) -> Iterator[LogprobChunk]:
        for k in range(self.n_chunk):
            yield self.chunk(k)
        if self._handle.read(1):
            raise LogprobFileError(
                f"{self.path}: more bytes after the {self._expected()} its header announces",
                hint="the pipe was written by more than one run",
            )
        self.close()

    def chunk(self, k: int) -> DenseChunk:
        if k != self._next:
            raise LogprobFileError(
                f"{self.path}: a pipe is read in order: chunk {k} asked, {self._next} next"
            )
        self._read_exactly(self._record_bytes, f"chunk {k} of {self.n_chunk}", self._buffer)
        self._next += 1
        n_vocab, width = self.n_vocab, llama_row_width(self.n_vocab)
        rec = np.frombuffer(self._buffer, _llama_dtype(n_vocab), self.n_rows)
        words = np.frombuffer(self._buffer, "<u2", self.n_rows * width).reshape(self.n_rows, width)
        # Read-only like a mapped file's rows: the reducers compile one version for both.
        words.flags.writeable = False
        rec.flags.writeable = False
        self._check_rows(k, rec)
        self._scales.append(np.asarray(rec["scale"], np.float64))

        def decode(start: int, stop: int) -> npt.NDArray[np.float64]:
            rows = rec[start:stop]
            out: npt.NDArray[np.float64] = np.multiply(
                rows["q"][:, :n_vocab], rows["scale"].astype(np.float64)[:, None]
            )
            out += rows["min_lp"].astype(np.float64)[:, None]
            return out

        def floor(start: int, stop: int) -> npt.NDArray[np.float64]:
            return np.asarray(rec[start:stop]["min_lp"], np.float64)

        def encoded(start: int, stop: int) -> npt.NDArray[np.uint16]:
            rows: npt.NDArray[np.uint16] = words[start:stop]
            return rows

        # The encoded rows are read as native uint16 and float32 (little-endian, like the stream).
        native = encoded if sys.byteorder == "little" else None
        return DenseChunk(k, self.tokens[k], self.first, n_vocab, self.n_rows, decode, floor, native)

    def close(self) -> None:
        self._handle.close()

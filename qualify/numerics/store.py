"""What the numerics stage keeps on disk: per-token vectors per role, the reference's cached
artifact, the roles' recorded settings, and the free-space check before an artifact is written.

Per-token vectors (``TokenStats``) are split by role so each role's folder holds its own:

    <check>/tokens.npz               meta (roles, pairs, kl_floor), chunk_index, offsets,
                                     position, target
    <check>/<role>/pertoken.npz      role:<role>:* (nll, top1, top_margin, nonfinite,
                                     target_at_floor) and pair:<base>:<role>:* (kld, same_top,
                                     dp_target, dp_base_top) for every pair whose other is <role>

``load_stats`` reassembles them. Files are written atomically.

The reference cache: every KL(reference || ·) needs the reference's full rows, and the reference
build rarely changes, so its artifact is kept under ``<cache>/<key>/`` where the key hashes the
reference arm's out path, the command with the role's folders blanked, the artifact template,
the environment given to it, and the size and mtime of every file the command names (model,
corpus). A second run with the same key reuses it instead of scoring the text again.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from qualify.core import jsontext
from qualify.core.errors import QualifyError
from qualify.core.runstore import write_atomic
from qualify.numerics.llamalogits import LlamaLogitsFile
from qualify.numerics.stream import LogprobStream
from qualify.numerics.tokenstats import StreamMismatch, TokenStats

TOKENS_FILE = "tokens.npz"
ROLE_FILE = "pertoken.npz"
CACHED_ARTIFACT = "artifact"
CACHED_MEASUREMENT = "measurement.json"
# llama-perplexity's own line: "calculating perplexity over 32 chunks, n_ctx=128, batch_size=2048, n_seq=16"
_LLAMA_SETTINGS = re.compile(
    r"calculating perplexity over (?P<chunks>\d+) chunks, n_ctx=(?P<n_ctx>\d+), "
    r"batch_size=(?P<batch_size>\d+), n_seq=(?P<n_seq>\d+)"
)
_UBATCH_FLAGS = ("-ub", "--ubatch-size")


class DiskSpaceError(QualifyError):
    """Not enough free space for the next artifact; the message gives both figures."""


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


@dataclass(frozen=True)
class DiskPlan:
    """What the stage will store at its peak: whose artifacts, each of `one_file` bytes."""

    stored: tuple[str, ...]  # the roles whose artifacts are on disk at once (written now)
    one_file: int | None  # None: unknown until the first artifact is written
    free: int
    where: Path
    streamed: bool

    @property
    def bytes(self) -> int | None:
        if not self.stored:
            return 0
        return None if self.one_file is None else len(self.stored) * self.one_file

    def describe(self) -> str:
        whose = ", ".join(self.stored) or "nothing (the reference comes from the cache)"
        size = (
            f"{gib(self.bytes)} ({self.bytes} bytes)"
            if self.bytes is not None
            else "a size known once the reference is scored (artifact_bytes states it beforehand)"
        )
        how = "; the other roles stream through pipes" if self.streamed else ""
        return f"the stage will store {whose}: {size}{how}; {gib(self.free)} free in {self.where}"


def disk_plan(
    where: Path, one_file: int | None, *, cached: bool, streamed: bool, others: list[str], keep: bool
) -> DiskPlan:
    """The artifacts on disk at the stage's peak. Streamed: the reference only. Otherwise also two
    roles' at once (pinned with pinned.2, then pinned with the candidate), or all with `keep`."""
    stored = [] if cached else ["reference"]
    if not streamed:
        stored += others if keep else others[:2]
    return DiskPlan(tuple(stored), one_file, shutil.disk_usage(where).free, where, streamed)


def artifact_bytes(path: Path) -> int:
    """Bytes an artifact takes (a file, or a directory's files)."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def check_free_space(where: Path, needed: int | None, what: str) -> None:
    """Refuse to start writing ``needed`` bytes into ``where``'s file system when it lacks them."""
    if needed is None:
        return
    free = shutil.disk_usage(where).free
    if free < needed:
        raise DiskSpaceError(
            f"{what} needs {gib(needed)} ({needed} bytes) free in {where}, but only {gib(free)} is free",
            "free disk space, score fewer chunks (--chunks) or a smaller context, or point the "
            "check's `cache` and the run directory at a larger disk",
        )


def remove_artifact(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Settings


def settings_of(stream: LogprobStream, output: Sequence[str], argv: Sequence[str]) -> dict[str, Any]:
    """The settings that change numerics, as this role ran: the artifact's header (context,
    scored window, vocabulary, chunks; not its format: a reference may be more precise),
    llama-perplexity's batch line, the ubatch flag, and the artifact's own recorded settings."""
    settings: dict[str, Any] = {
        "n_ctx": stream.n_ctx,
        "first": stream.first,
        "n_vocab": stream.n_vocab,
        "n_chunk": stream.n_chunk,
    }
    for line in output:
        m = _LLAMA_SETTINGS.search(line)
        if m:
            settings.update(batch_size=int(m["batch_size"]), n_seq=int(m["n_seq"]))
    for i, arg in enumerate(argv[:-1]):
        if arg in _UBATCH_FLAGS:
            settings["ubatch_size"] = argv[i + 1]
    settings.update({f"artifact.{k}": v for k, v in stream.settings.items()})
    return settings


def settings_mismatch(settings: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The first setting two roles disagree on, as a sentence; None when all agree."""
    roles = list(settings)
    if not roles:
        return None
    first = roles[0]
    for role in roles[1:]:
        for key in [*settings[first], *(k for k in settings[role] if k not in settings[first])]:
            a, b = settings[first].get(key, "(not recorded)"), settings[role].get(key, "(not recorded)")
            if a != b:
                return f"{key} differs: {first} {a}, {role} {b}"
    return None


def kl_floor_for(streams: Sequence[LogprobStream]) -> float | None:
    """-16 (llama-perplexity's truncation) when any input is a llama.cpp file, else exact KL."""
    return -16.0 if any(isinstance(s, LlamaLogitsFile) for s in streams) else None


# ---------------------------------------------------------------------------------------------
# The reference cache


def cache_key(out: str | None, argv: Sequence[str], artifact: str, env: Mapping[str, str]) -> str:
    files = {}
    for arg in argv:
        try:
            st = Path(arg).stat()
        except (OSError, ValueError):
            continue
        if Path(arg).is_file():
            files[arg] = [st.st_size, st.st_mtime_ns]
    document = {"out": out, "argv": list(argv), "artifact": artifact, "env": dict(env), "files": files}
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:32]


def cached_reference(cache: Path, key: str) -> tuple[Path, dict[str, Any]] | None:
    """The cached artifact and its measurement, if a complete entry exists."""
    entry = cache / key
    artifact, measurement = entry / CACHED_ARTIFACT, entry / CACHED_MEASUREMENT
    if not artifact.exists() or not measurement.is_file():
        return None
    try:
        saved: dict[str, Any] = jsontext.loads(measurement.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return artifact, saved


def store_reference(cache: Path, key: str, artifact: Path, measurement: Mapping[str, Any]) -> Path:
    """Move the reference's artifact into the cache (the measurement last: it marks completion)."""
    entry = cache / key
    entry.mkdir(parents=True, exist_ok=True)
    target = entry / CACHED_ARTIFACT
    remove_artifact(target)
    (entry / CACHED_MEASUREMENT).unlink(missing_ok=True)
    shutil.move(str(artifact), target)
    write_atomic(entry / CACHED_MEASUREMENT, json.dumps(dict(measurement), default=str).encode())
    return target


# ---------------------------------------------------------------------------------------------
# Per-token vectors


def merge_stats(a: TokenStats, b: TokenStats) -> TokenStats:
    """One ``TokenStats`` from two passes over the same chunks (roles and pairs united)."""
    if not (
        np.array_equal(a.chunk_index, b.chunk_index)
        and np.array_equal(a.offsets, b.offsets)
        and np.array_equal(a.target, b.target)
    ):
        raise StreamMismatch("the two passes over the artifacts did not read the same chunks and tokens")
    roles = a.roles + tuple(r for r in b.roles if r not in a.roles)
    return replace(
        a,
        roles=roles,
        role={**b.role, **a.role},
        pair={**a.pair, **b.pair},
        kld_lower_bound={**a.kld_lower_bound, **b.kld_lower_bound},
    )


def _npz_bytes(arrays: Mapping[str, npt.NDArray[Any]]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub wants a positional array
    return buffer.getvalue()


def save_stats(stats: TokenStats, folder: Path) -> None:
    arrays = stats.arrays()
    shared = {k: v for k, v in arrays.items() if not k.startswith(("role:", "pair:"))}
    write_atomic(folder / TOKENS_FILE, _npz_bytes(shared))
    for role in stats.roles:
        mine = {
            k: v
            for k, v in arrays.items()
            if k.startswith(f"role:{role}:") or (k.startswith("pair:") and k.split(":")[2] == role)
        }
        write_atomic(folder / role / ROLE_FILE, _npz_bytes(mine))


def load_stats(folder: Path) -> TokenStats | None:
    """The saved per-token vectors, or None when none were saved."""
    if not (folder / TOKENS_FILE).is_file():
        return None
    arrays: dict[str, npt.NDArray[Any]] = {}
    with np.load(folder / TOKENS_FILE, allow_pickle=False) as z:
        arrays.update({k: z[k] for k in z.files})
    for role in json.loads(str(arrays["meta"]))["roles"]:
        with np.load(folder / role / ROLE_FILE, allow_pickle=False) as z:
            arrays.update({k: z[k] for k in z.files})
    return TokenStats.from_arrays(arrays)

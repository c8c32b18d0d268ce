"""How fast the numerics stage reads llama.cpp logits files and computes per-token statistics.

    python benchmarks/numerics_throughput.py [--chunks 6] [--ctx 128] [--vocab 262144] [--threads N]

Writes three `--kl-divergence-base` files (reference, pinned, candidate) for a vocabulary of
Gemma 3's size with the exact llama.cpp encoding, from seeded random logits whose candidate and
pinned differ from the reference by small noise. Then prints, best of --repeat, in one run:
- a plain numpy read of the three files (np.fromfile, summed so nothing is skipped): this
  machine's streaming bandwidth from the page cache, the ceiling for any reader;
- `token_stats` over the three streams (every role's NLL, top-1, margins; KL for the reference
  against each role and pinned against candidate), in tokens/s, bytes/s and as a share of the
  plain read;
and each one's peak resident memory (VmHWM, reset before each; the plain read holds a whole file,
token_stats about a chunk per file). token_stats' first call, which loads or compiles its loops,
is timed apart. Then the same statistics with pinned and the candidate read through named
pipes as `cat` writes them (the stage's `stream = true`: only the reference is a file).
Random logits put 38 % of the vocabulary above llama-perplexity's −16-nat
floor where Gemma 3 leaves about 7 %; the compiled loops take the same time either way.
The figures are printed, never judged.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qualify.numerics.llamalogits import LlamaLogitsFile, write_llama_logits
from qualify.numerics.llamapipe import LlamaLogitsPipe, make_fifo
from qualify.numerics.tokenstats import token_stats


def _write(folder: Path, chunks: int, ctx: int, vocab: int, seed: int) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=(chunks, ctx), dtype=np.int32)
    rows = ctx - 1 - ctx // 2
    base = [rng.standard_normal((rows, vocab), dtype=np.float32) * 3 for _ in range(chunks)]
    paths = {}
    for role, noise in (("reference", 0.0), ("pinned", 0.02), ("candidate", 0.03)):
        noisy = (b + noise * rng.standard_normal(b.shape, dtype=np.float32) for b in base)
        paths[role] = write_llama_logits(folder / f"{role}.bin", tokens, noisy)
    return paths


def _best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def _reset_peak() -> bool:
    """Reset this process's peak resident memory (Linux: clear_refs 5); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _memory_mib(field: str) -> float:
    """VmHWM (peak) or VmRSS (now) of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=6, help="chunks per file (default 6)")
    parser.add_argument("--ctx", type=int, default=128, help="context per chunk, as -c (default 128)")
    parser.add_argument("--vocab", type=int, default=262_144, help="vocabulary (default: Gemma 3's)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (default 3)")
    parser.add_argument("--threads", type=int, help="token_stats' threads (default: every core)")
    parser.add_argument("--workdir", type=Path, help="where the files go (default: a temporary dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.workdir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        paths = _write(folder, args.chunks, args.ctx, args.vocab, seed=0)
        total = sum(p.stat().st_size for p in paths.values())
        tokens = args.chunks * (args.ctx - 1 - args.ctx // 2)

        def plain() -> None:
            for path in paths.values():
                float(np.fromfile(path, dtype=np.uint16).sum(dtype=np.uint64))

        def qualify_stats() -> None:
            token_stats({role: LlamaLogitsFile(path) for role, path in paths.items()}, threads=args.threads)

        plain()  # warm the page cache so both sides read from memory
        start = time.perf_counter()
        qualify_stats()  # loads (or compiles, in a fresh tree) the compiled loops
        t_first = time.perf_counter() - start
        peaks = _reset_peak()
        rss = _memory_mib("VmRSS")
        t_plain = _best(args.repeat, plain)
        rss_plain = _memory_mib("VmHWM")
        _reset_peak()
        t_stats = _best(args.repeat, qualify_stats)
        rss_stats = _memory_mib("VmHWM")
        mib = total / 2**20
        print(f"3 files, {mib:.0f} MiB, vocab {args.vocab}, {tokens} scored tokens per role")
        print(f"  resident memory before either: {rss:.0f} MiB; peak resident memory of each below")
        if not peaks:
            print("  (the peak could not be reset: both peaks are the whole run's)")
        print(f"  plain numpy read   {t_plain:7.3f} s  {mib / t_plain:8.1f} MiB/s  peak {rss_plain:6.0f} MiB")
        print(
            f"  token_stats        {t_stats:7.3f} s  {mib / t_stats:8.1f} MiB/s  peak {rss_stats:6.0f} MiB"
            f"  {tokens / t_stats:8.1f} tokens/s (per role, 3 roles, 3 pairs)"
        )
        print(f"  token_stats / plain read: {t_plain / t_stats:.2f}; first call {t_first:.2f} s")

        def piped() -> None:
            writers, streams = [], {"reference": LlamaLogitsFile(paths["reference"])}
            for role in ("pinned", "candidate"):
                fifo = folder / f"{role}.pipe"
                make_fifo(fifo)
                writers.append(subprocess.Popen(["sh", "-c", 'cat "$0" > "$1"', str(paths[role]), str(fifo)]))
                streams[role] = LlamaLogitsPipe(fifo, lambda w=writers[-1]: w.poll() is None)
            token_stats(streams, threads=args.threads)
            for writer in writers:
                writer.wait()

        _reset_peak()
        t_piped = _best(args.repeat, piped)
        rss_piped = _memory_mib("VmHWM")
        print(
            f"  through pipes      {t_piped:7.3f} s  {mib / t_piped:8.1f} MiB/s  peak {rss_piped:6.0f} MiB"
            f"  {tokens / t_piped:8.1f} tokens/s; / plain read: {t_plain / t_piped:.2f}"
        )


if __name__ == "__main__":
    main()

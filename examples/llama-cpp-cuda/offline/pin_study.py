"""Does a fixed set of cores take away pp2048's two per-process speeds? (README.md, "Noise")

Run on the GPU host once `offline/host.sh` has built the arms, before the qualification:

    python3 examples/llama-cpp-cuda/offline/pin_study.py [PROCESSES]

For each of PROCESSES rounds it runs pinned's llama-bench (the decide profile's unit: -p 2048
-n 256 -r 6) once in each placement, in turn: as the bench runs it today, under `taskset` on
cores 0-7, and with llama-bench's own `--cpu-mask 0xff --cpu-strict 1` (its compute threads
only). It prints, per placement, the spread of the processes' pp2048 and tg256 medians (each
process's first repetition left out) and how many fall in the slow mode, and writes every
process's output under $OUT (or /tmp/qualify-host/pin-study). The GPU's settings are not touched.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

STATE = Path("/tmp/qualify-host")
PLACEMENTS: dict[str, tuple[list[str], list[str]]] = {
    "as today": ([], []),
    "taskset 0-7": (["taskset", "-c", "0-7"], []),
    "cpu-strict 0xff": ([], ["--cpu-mask", "0xff", "--cpu-strict", "1"]),
}


def pinned_arm() -> Path:
    built = json.loads((STATE / "build-default.json").read_text())
    return Path(built[0]["outputs"]["out"])


def one_process(prefix: list[str], extra: list[str], out: Path) -> dict[str, float]:
    model = STATE / "data" / "gemma-3-270m-q4_k_m.gguf"
    argv = [*prefix, str(pinned_arm() / "bin" / "llama-bench"), "-m", str(model), "-t", "8"]
    argv += ["-p", "2048", "-n", "256", "-r", "6", "-o", "jsonl", "-ngl", "99", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
    out.write_text(done.stdout)
    medians = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            test = f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}"
            medians[test] = statistics.median(row["samples_ts"][1:])
    return medians


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    out = Path(os.environ.get("OUT", STATE / "pin-study"))
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in PLACEMENTS}
    for i in range(rounds):
        for n, (name, (prefix, extra)) in enumerate(PLACEMENTS.items()):
            seen[name].append(one_process(prefix, extra, out / f"p{n}-{i:02d}.jsonl"))
    header = ("placement", "processes", "pp2048 min/median/max", "slow", "tg256 median")
    print(f"{header[0]:<16} {header[1]:>9} {header[2]:>26} {header[3]:>5} {header[4]:>12}")
    for name, units in seen.items():
        pp = [u["pp2048"] for u in units]
        tg = [u["tg256"] for u in units]
        # The recorded run's slow mode sat near 46 000 t/s, the fast near 61 000.
        slow = sum(1 for p in pp if p < 52_000)
        spread = f"{min(pp):,.0f} / {statistics.median(pp):,.0f} / {max(pp):,.0f}"
        print(f"{name:<16} {len(units):>9} {spread:>26} {slow:>5} {statistics.median(tg):>12,.1f}")


if __name__ == "__main__":
    main()

"""Where do pp2048's two per-process speeds come from, and which bench unit takes them away?
(README.md, "Noise")

Run on the GPU host once `offline/host.sh` has built the arms, before the qualification:

    python3 examples/llama-cpp-cuda/offline/pin_study.py [ROUNDS]

For each of ROUNDS rounds it runs pinned's llama-bench once in each variant, in turn (so that a
drift of the host falls on every variant alike), each a short process that measures pp2048 and
tg128 four times (-p 2048 -n 128 -r 4; the first repetition left out). The recorded processes
say the speed is the process's own (one of two, about 25 % apart, kept through a process's 3 s)
and that neighbouring processes land independently, and that pinning threads changes the
shares but does not remove it (2026-12-02 and -03). So the variants change what a process is
given once, at its start:

- as today: the bench's unit;
- ASLR off (`setarch -R`): every process gets the same addresses, so a speed that follows
  where code and buffers land in the address space makes every process land alike;
- eager modules (`CUDA_MODULE_LOADING=EAGER`): every kernel loaded at the start rather than at
  its first launch;
- no pinned memory (`GGML_CUDA_NO_PINNED=1`): ggml's host buffers pageable;
- no fusion (`GGML_CUDA_DISABLE_FUSION=1`): fewer launches, differently laid out;
- cuBLAS (`GGML_CUDA_FORCE_CUBLAS=1`): the quantised matrix products by dequantisation and
  cuBLAS rather than ggml's own kernels;
- one micro-batch (`-b 2048 -ub 2048`): the whole prompt in one graph rather than four, so a
  quarter of the launches carry the same GPU work; where the CPU's speed enters through the
  launches, its share of the prompt's time falls.

`PIN_STUDY_VARIANTS` (names, comma-separated) runs only those variants.

It prints, per variant, the spread of the processes' pp2048 and tg128 medians and how many fall
in the slow mode, writes every process's output and `study.json` under $OUT (or
/tmp/qualify-host/pin-study), and names in `profile` the plan profile whose bench unit varied
least from process to process (the variants that have one), for host.sh's QUALIFY_PROFILE. The
GPU's settings are not touched.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

STATE = Path("/tmp/qualify-host")
# name: (command prefix, llama-bench arguments, the plan profile whose bench unit this is)
VARIANTS: dict[str, tuple[list[str], list[str], str | None]] = {
    "as today": ([], [], "decide"),
    "ASLR off": (["setarch", "x86_64", "-R"], [], "decide-aslr-off"),
    "eager modules": (["env", "CUDA_MODULE_LOADING=EAGER"], [], "decide-eager"),
    "no pinned memory": (["env", "GGML_CUDA_NO_PINNED=1"], [], "decide-no-pinned"),
    "no fusion": (["env", "GGML_CUDA_DISABLE_FUSION=1"], [], "decide-no-fusion"),
    "cuBLAS": (["env", "GGML_CUDA_FORCE_CUBLAS=1"], [], "decide-cublas"),
    "one micro-batch": ([], ["-b", "2048", "-ub", "2048"], None),
}
TG = "tg128"


def pinned_arm() -> Path:
    built = json.loads((STATE / "build-default.json").read_text())
    return Path(built[0]["outputs"]["out"])


def one_process(prefix: list[str], extra: list[str], out: Path) -> dict[str, float]:
    model = STATE / "data" / "gemma-3-270m-q4_k_m.gguf"
    argv = [*prefix, str(pinned_arm() / "bin" / "llama-bench"), "-m", str(model), "-t", "8"]
    argv += ["-p", "2048", "-n", "128", "-r", "4", "-o", "jsonl", "-ngl", "99", *extra]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
    out.write_text(done.stdout)
    medians = {"wall_s": time.monotonic() - start}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            test = f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}"
            medians[test] = statistics.median(row["samples_ts"][1:])
            medians[f"{test}_rep_cv"] = statistics.stdev(row["samples_ts"][1:]) / medians[test]
    return medians


def log_sd(values: list[float]) -> float:
    """The SD of the logs: how far one process's median lands from another's (a mixture of two
    speeds counts in full, as it does in the bench's pairs)."""
    return statistics.stdev(math.log(v) for v in values)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    out = Path(os.environ.get("OUT", STATE / "pin-study"))
    out.mkdir(parents=True, exist_ok=True)
    wanted = [n for n in os.environ.get("PIN_STUDY_VARIANTS", "").split(",") if n]
    unknown = [n for n in wanted if n not in VARIANTS]
    if unknown:
        sys.exit(f"PIN_STUDY_VARIANTS: no variant {unknown!r}; the variants are {list(VARIANTS)}")
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in wanted or VARIANTS}
    for i in range(rounds):
        for n, name in enumerate(seen):
            prefix, extra, _ = VARIANTS[name]
            seen[name].append(one_process(prefix, extra, out / f"p{n}-{i:02d}.jsonl"))
    header = ("variant", "processes", "pp2048 min/median/max", "slow", "pp SD", f"{TG} median", "tg SD")
    widths = (16, 9, 26, 5, 6, 12, 6)
    print(
        " ".join(
            f"{h:>{w}}" if k else f"{h:<{w}}" for k, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    summary: dict[str, dict[str, object]] = {}
    spreads: dict[str, float] = {}
    for name, units in seen.items():
        pp = [u["pp2048"] for u in units]
        tg = [u[TG] for u in units]
        median = statistics.median(pp)
        # Slow: more than 12 % under the variant's fastest process (the recorded modes were 25 %
        # apart, and the slow one can be the more common, so not under its median).
        slow = sum(1 for p in pp if p < 0.88 * max(pp))
        spread = f"{min(pp):,.0f} / {median:,.0f} / {max(pp):,.0f}"
        summary[name] = {
            "pp2048": pp, TG: tg, "pp_log_sd": log_sd(pp), "tg_log_sd": log_sd(tg), "slow": slow,
            "wall_s": statistics.median(u["wall_s"] for u in units),
            "pp_rep_cv": statistics.median(u["pp2048_rep_cv"] for u in units),
            "profile": VARIANTS[name][2],
        }  # fmt: skip
        spreads[name] = log_sd(pp)
        print(
            f"{name:<16} {len(units):>9} {spread:>26} {slow:>5} {spreads[name]:>6.1%} "
            f"{statistics.median(tg):>12,.1f} {log_sd(tg):>6.1%}"
        )
    (out / "study.json").write_text(json.dumps({"variants": summary}, indent=1))
    with_profile = [n for n in spreads if VARIANTS[n][2]]
    if with_profile:
        best = min(with_profile, key=spreads.__getitem__)
        profile = str(VARIANTS[best][2])
        (out / "study.json").write_text(json.dumps({"variants": summary, "chosen": best}, indent=1))
        (out / "profile").write_text(profile + "\n")
        print(f"least process-to-process spread of pp2048: {best!r} -> profile {profile}")


if __name__ == "__main__":
    main()

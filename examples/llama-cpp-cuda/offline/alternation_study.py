"""Is pp2048's noise a state of the process or a state of the machine that changes over seconds?
(README.md, "Noise")

Run on the GPU host once `offline/host.sh` has built the arms, before the qualification:

    python3 examples/llama-cpp-cuda/offline/alternation_study.py [LIFETIMES] [SECONDS]

The recorded units of the decide-strict run set show a unit's pp2048 speed correlated with the
next unit's (lag-1 autocorrelation 0.3 over units of 3 s, none beyond 12 s), and speed switching
between repetitions of one process. If a machine state that lasts seconds sets the speed, two
arms measured within a fraction of a second of each other see the same state, and their ratio
is steady where whole processes seconds apart are not.

So this starts llama-server for pinned, for pinned again (the A/A) and for cuda135, all resident
on the GPU at once, and sends them requests in turn, rotating which goes first: each round one
prompt of 2 048 tokens (prompt processing, the server's own `prompt_per_second`) to each, then 128
generated tokens from a short prompt (`predicted_per_second`) to each. That for SECONDS seconds
(60), then the servers are stopped and started afresh, LIFETIMES times (3), so that a state of
the process shows as a difference between lifetimes. Meanwhile a probe on the last core times a
fixed piece of CPU work every few milliseconds: if the host's CPU speed sets the state, the
probe follows pp.

It prints per lifetime and role the median speeds, the SD of the per-round log ratios (cuda135
and the A/A against pinned; adjacent in time) against the SD of the log ratios of lifetime
medians, and the correlation of the probe with pp; and writes every request and probe sample
under $OUT/alternation (or /tmp/qualify-host/alternation). The GPU's settings are not touched.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

STATE = Path("/tmp/qualify-host")
ROLES = {"pinned": "default", "aa": "default", "cuda135": "cuda135"}
PROBE = """
import sys, time
out = open(sys.argv[1], "w", buffering=1)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    t0 = time.perf_counter_ns()
    x = 0
    for i in range(20000):
        x += i
    out.write(f"{time.time():.4f} {time.perf_counter_ns() - t0}\\n")
"""


def arm(attr: str) -> Path:
    built = json.loads((STATE / f"build-{attr}.json").read_text())
    return Path(built[0]["outputs"]["out"])


def post(port: int, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=120) as answer:
        result: dict[str, object] = json.loads(answer.read())
    return result


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_servers(model: Path, logs: Path, lifetime: int) -> dict[str, tuple[subprocess.Popen[bytes], int]]:
    servers = {}
    for n, (role, attr) in enumerate(ROLES.items()):
        port = 18180 + n
        argv = [str(arm(attr) / "bin" / "llama-server"), "-m", str(model), "--host", "127.0.0.1",
                "--port", str(port), "-c", "4096", "-np", "1", "-b", "2048", "-ub", "512", "-t", "8",
                "-ngl", "99", "--no-webui"]  # fmt: skip
        log = (logs / f"server-{role}-{lifetime}.log").open("wb")
        servers[role] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), port)
    deadline = time.monotonic() + 180
    for role, (proc, port) in servers.items():
        while not healthy(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"llama-server for {role} did not start: see {logs}/server-{role}-{lifetime}.log")
            time.sleep(0.2)
    return servers


def measure(port: int, kind: str, prompt: list[int]) -> dict[str, float]:
    body: dict[str, object] = {"prompt": prompt, "cache_prompt": False, "temperature": 0.0, "seed": 1}
    body |= {"n_predict": 1} if kind == "pp" else {"n_predict": 128, "ignore_eos": True}
    t0 = time.time()
    timings = post(port, body)["timings"]
    assert isinstance(timings, dict)
    rate = timings["prompt_per_second"] if kind == "pp" else timings["predicted_per_second"]
    return {"t0": t0, "t1": time.time(), "tps": float(rate), "n": float(timings["prompt_n" if kind == "pp" else "predicted_n"])}


def corr(a: list[float], b: list[float]) -> float:
    return statistics.correlation(a, b) if len(a) > 2 else math.nan


def main() -> None:
    lifetimes = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    out = Path(os.environ.get("OUT", STATE)) / "alternation"
    out.mkdir(parents=True, exist_ok=True)
    model = STATE / "data" / "gemma-3-270m-q4_k_m.gguf"
    rng = random.Random(42)
    long_prompt = [rng.randrange(1000, 200000) for _ in range(int(os.environ.get("STUDY_PROMPT", "2048")))]
    short_prompt = [rng.randrange(1000, 200000) for _ in range(16)]
    cores = os.cpu_count() or 1
    probe = subprocess.Popen(
        ["taskset", "-c", str(cores - 1), sys.executable, "-c", PROBE, str(out / "probe.txt"),
         str(lifetimes * (seconds + 40) + 60)]
    )  # fmt: skip
    rows: list[dict[str, object]] = []
    orders = [list(ROLES), list(reversed(ROLES))]
    try:
        for life in range(lifetimes):
            servers = start_servers(model, out, life)
            try:
                for role, (_, port) in servers.items():  # warm-up, thrown away
                    for _ in range(3):
                        measure(port, "pp", long_prompt)
                    measure(port, "tg", short_prompt)
                end = time.monotonic() + seconds
                rnd = 0
                while time.monotonic() < end:
                    order = orders[rnd % 2] if rnd % 4 < 2 else orders[(rnd + 1) % 2]
                    for kind, prompt in (("pp", long_prompt), ("tg", short_prompt)):
                        for role in order:
                            row = measure(servers[role][1], kind, prompt)
                            rows.append({"life": life, "round": rnd, "role": role, "kind": kind, **row})
                    rnd += 1
            finally:
                for proc, _ in servers.values():
                    proc.terminate()
                for proc, _ in servers.values():
                    proc.wait(timeout=30)
    finally:
        probe.terminate()
        probe.wait(timeout=10)
        (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summarise(rows, out)


def summarise(rows: list[dict[str, object]], out: Path) -> None:
    def rate(life: int, rnd: int, role: str, kind: str) -> float | None:
        for r in rows:
            if (r["life"], r["round"], r["role"], r["kind"]) == (life, rnd, role, kind):
                return float(r["tps"])  # type: ignore[arg-type]
        return None

    probe = []
    for line in (out / "probe.txt").read_text().splitlines():
        t, ns = line.split()
        probe.append((float(t), int(ns)))
    lives = sorted({int(r["life"]) for r in rows})  # type: ignore[call-overload]
    lines = []
    for kind in ("pp", "tg"):
        lines.append(f"== {kind}: per lifetime, median t/s (min-max)")
        medians: dict[str, list[float]] = {role: [] for role in ROLES}
        for life in lives:
            cells = []
            for role in ROLES:
                v = [float(r["tps"]) for r in rows if r["life"] == life and r["role"] == role and r["kind"] == kind]  # type: ignore[arg-type]
                medians[role].append(statistics.median(v))
                cells.append(f"{role} {statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}, n {len(v)})")
            lines.append(f"  life {life}: " + "; ".join(cells))
        for other in ("aa", "cuda135"):
            per_round = []
            for life in lives:
                rounds = sorted({int(r["round"]) for r in rows if r["life"] == life})  # type: ignore[call-overload]
                for rnd in rounds:
                    a, b = rate(life, rnd, "pinned", kind), rate(life, rnd, other, kind)
                    if a and b:
                        per_round.append(math.log(b / a))
            life_ratios = [math.log(b / a) for a, b in zip(medians["pinned"], medians[other], strict=True)]
            lines.append(
                f"  {other}/pinned: per-round log ratio mean {statistics.fmean(per_round):+.2%} SD {statistics.stdev(per_round):.2%}"
                f" (n {len(per_round)}); per-lifetime median ratios {', '.join(f'{math.exp(x):.3f}' for x in life_ratios)}"
            )
        # Does a state of the machine move all three servers together? Correlation across rounds.
        for life in lives:
            rounds = sorted({int(r["round"]) for r in rows if r["life"] == life})  # type: ignore[call-overload]
            p = [rate(life, k, "pinned", kind) or math.nan for k in rounds]
            a = [rate(life, k, "aa", kind) or math.nan for k in rounds]
            c = [rate(life, k, "cuda135", kind) or math.nan for k in rounds]
            speed = []
            for k in rounds:
                t0s = [float(r["t0"]) for r in rows if r["life"] == life and r["round"] == k and r["kind"] == kind]  # type: ignore[arg-type]
                near = [ns for t, ns in probe if min(t0s) - 0.5 <= t <= max(t0s) + 0.5]
                speed.append(1e9 / statistics.median(near) if near else math.nan)
            lines.append(
                f"  life {life}: corr pinned~aa {corr(p, a):.2f}, pinned~cuda135 {corr(p, c):.2f}, "
                f"pinned~probe {corr(p, speed):.2f}; probe spread {min(speed):.1f}-{max(speed):.1f} /s"
            )
    text = "\n".join(lines)
    print(text)
    (out / "summary.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()

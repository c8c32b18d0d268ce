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

`--recorded DIR_OR_ARCHIVE` summarises a recorded study again
(`recorded/noise-study-20261203/alternation.tar.xz`).

It prints per lifetime and role the median speeds, the SD of the per-round log ratios (cuda135
and the A/A against pinned; adjacent in time) against the SD of the log ratios of lifetime
medians, and the correlation of the probe with pp; and writes every request and probe sample
under $OUT/alternation (or /tmp/qualify-host/alternation). The GPU's settings are not touched.
"""

from __future__ import annotations

import itertools
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
# Only the arms built so far (the A/A alone answers whether the state is the process's).
ROLES = {role: attr for role, attr in ROLES.items() if (STATE / f"build-{attr}.json").exists()}
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
                raise SystemExit(
                    f"llama-server for {role} did not start: see {logs}/server-{role}-{lifetime}.log"
                )
            time.sleep(0.2)
    return servers


def measure(port: int, kind: str, prompt: list[int]) -> dict[str, float]:
    body: dict[str, object] = {"prompt": prompt, "cache_prompt": False, "temperature": 0.0, "seed": 1}
    body |= {"n_predict": 1} if kind == "pp" else {"n_predict": 128, "ignore_eos": True}
    t0 = time.time()
    timings = post(port, body)["timings"]
    assert isinstance(timings, dict)
    rate = timings["prompt_per_second"] if kind == "pp" else timings["predicted_per_second"]
    return {
        "t0": t0,
        "t1": time.time(),
        "tps": float(rate),
        "n": float(timings["prompt_n" if kind == "pp" else "predicted_n"]),
    }


def corr(a: list[float], b: list[float]) -> float:
    return statistics.correlation(a, b) if len(a) > 2 else math.nan


def main() -> None:
    if sys.argv[1:2] == ["--recorded"]:
        # Summarise a recorded study again: its requests.jsonl and probe.txt, in a folder or
        # in the archive recorded/noise-study-*/alternation.tar.xz.
        import tarfile
        import tempfile

        source = Path(sys.argv[2])
        if source.is_file():
            unpacked = Path(tempfile.mkdtemp())
            with tarfile.open(source) as archive:
                archive.extractall(unpacked, filter="data")
            source = unpacked / "alternation"
        rows = [json.loads(line) for line in (source / "requests.jsonl").read_text().splitlines()]
        summarise(rows, source, write=False)
        return
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
                for _, port in servers.values():  # warm-up, thrown away
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


def probe_lines(rows: list[dict[str, object]], probe: list[tuple[float, int]]) -> list[str]:
    """What the CPU probe saw: its speed's distribution (two modes, on this host), how long a
    speed lasts (lag-1 autocorrelation of its means over windows), and how often it was fast
    while a request ran against while none did."""
    speeds = [1e9 / ns for _, ns in probe]
    period = statistics.median(b[0] - a[0] for a, b in itertools.pairwise(probe))
    ordered = sorted(speeds)
    pct = {q: ordered[int(q / 100 * (len(ordered) - 1))] for q in (5, 25, 50, 75, 95)}
    # The two modes lie either side of the midpoint between the 5th and the 95th percentile.
    cut = (pct[5] + pct[95]) / 2
    slow = [v for v in speeds if v < cut]
    fast = [v for v in speeds if v >= cut]
    lines = [
        f"== CPU probe (a fixed loop on the last core, back to back, {period * 1000:.1f} ms a loop; "
        f"{len(probe)} samples)",
        "  speed percentiles 5/25/50/75/95: "
        + " / ".join(f"{pct[q]:.0f}" for q in (5, 25, 50, 75, 95))
        + " loops/s",
        f"  two modes: slow median {statistics.median(slow):.0f} ({len(slow) / len(speeds):.0%} of samples), "
        f"fast median {statistics.median(fast):.0f} ({len(fast) / len(speeds):.0%}); "
        f"ratio {statistics.median(fast) / statistics.median(slow):.2f}",
    ]
    start = probe[0][0]
    for window in (0.2, 1.0, 5.0):
        means: dict[int, list[float]] = {}
        for (t, _), v in zip(probe, speeds, strict=True):
            means.setdefault(int((t - start) / window), []).append(math.log(v))
        series = [statistics.fmean(v) for _, v in sorted(means.items())]
        lag1 = corr(series[:-1], series[1:])
        lines.append(
            f"  windows of {window:g} s: SD of the log mean {statistics.stdev(series):.1%}, "
            f"lag-1 autocorrelation {lag1:.2f}"
        )
    spans = sorted((float(r["t0"]), float(r["t1"])) for r in rows)  # type: ignore[arg-type]
    busy_fast = busy_all = idle_fast = idle_all = 0
    k = 0
    for (t, _), v in zip(probe, speeds, strict=True):
        while k < len(spans) and spans[k][1] < t:
            k += 1
        busy = k < len(spans) and spans[k][0] <= t
        if busy:
            busy_all += 1
            busy_fast += v >= cut
        else:
            idle_all += 1
            idle_fast += v >= cut
    lines.append(
        f"  fast while a request ran: {busy_fast / max(busy_all, 1):.0%} of {busy_all} samples; "
        f"while none did: {idle_fast / max(idle_all, 1):.0%} of {idle_all}"
    )
    return lines


def summarise(rows: list[dict[str, object]], out: Path, *, write: bool = True) -> None:
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
    roles = [role for role in ("pinned", "aa", "cuda135") if any(r["role"] == role for r in rows)]
    lines = []
    for kind in ("pp", "tg"):
        lines.append(f"== {kind}: per lifetime, median t/s (min-max)")
        medians: dict[str, list[float]] = {role: [] for role in roles}
        for life in lives:
            cells = []
            for role in roles:
                v = [
                    float(r["tps"])
                    for r in rows
                    if r["life"] == life and r["role"] == role and r["kind"] == kind
                ]  # type: ignore[arg-type]
                medians[role].append(statistics.median(v))
                cells.append(f"{role} {statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}, n {len(v)})")
            lines.append(f"  life {life}: " + "; ".join(cells))
        for other in [r for r in roles if r != "pinned"]:
            per_round = []
            for life in lives:
                rounds = sorted({int(r["round"]) for r in rows if r["life"] == life})  # type: ignore[call-overload]
                for rnd in rounds:
                    a, b = rate(life, rnd, "pinned", kind), rate(life, rnd, other, kind)
                    if a and b:
                        per_round.append(math.log(b / a))
            life_ratios = [math.log(b / a) for a, b in zip(medians["pinned"], medians[other], strict=True)]
            lines.append(
                f"  {other}/pinned: per-round log ratio mean {statistics.fmean(per_round):+.2%} "
                f"SD {statistics.stdev(per_round):.2%} (n {len(per_round)}); per-lifetime median ratios "
                + ", ".join(f"{math.exp(x):.3f}" for x in life_ratios)
            )
        # Does a state of the machine move all three servers together? Correlation across rounds.
        for life in lives:
            rounds = sorted({int(r["round"]) for r in rows if r["life"] == life})  # type: ignore[call-overload]
            p = [rate(life, k, "pinned", kind) or math.nan for k in rounds]
            a = [rate(life, k, "aa", kind) or math.nan for k in rounds]
            c = [rate(life, k, "cuda135", kind) or math.nan for k in rounds] if "cuda135" in roles else p
            speed = []
            for k in rounds:
                t0s = [
                    float(r["t0"])
                    for r in rows
                    if r["life"] == life and r["round"] == k and r["kind"] == kind
                ]  # type: ignore[arg-type]
                near = [ns for t, ns in probe if min(t0s) - 0.5 <= t <= max(t0s) + 0.5]
                speed.append(1e9 / statistics.median(near) if near else math.nan)
            with_candidate = f"pinned~cuda135 {corr(p, c):.2f}, " if "cuda135" in roles else ""
            lines.append(
                f"  life {life}: corr pinned~aa {corr(p, a):.2f}, {with_candidate}"
                f"pinned~probe {corr(p, speed):.2f}; probe spread {min(speed):.1f}-{max(speed):.1f} /s"
            )
    lines += probe_lines(rows, probe)
    text = "\n".join(lines)
    print(text)
    if write:
        (out / "summary.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()

"""Telemetry during a soak: one row every `interval_s` seconds, saved as a Parquet time series.

Columns (present when the machine has them; a missing source leaves its columns out):
- `t_s`: seconds after the role's load started;
- `rss_bytes`, `pss_bytes`, `anon_bytes`: the server's process group, from `/proc/<pid>/smaps_rollup`
  (kernel Documentation/ABI/testing/procfs-smaps_rollup), summed over the group;
- `psi_some_avg10`, `psi_some_total_us`, `psi_full_total_us`: `/proc/pressure/memory`
  (kernel Documentation/accounting/psi);
- `compact_*`: the compaction counters of `/proc/vmstat`;
- `gpu_vram_bytes`, `gpu_gtt_bytes`, `gpu_total_bytes` (their sum: on an APU both are system
  RAM): amdgpu sysfs `mem_info_{vram,gtt}_used`, summed over cards;
- `proc_vram_bytes`, `proc_gtt_bytes`: the server's `drm-memory-*` / `drm-resident-*` keys in
  `/proc/<pid>/fdinfo` (kernel Documentation/gpu/drm-usage-stats.rst);
- `nvidia_used_bytes`, `nvidia_proc_bytes`: `nvidia-smi` (device, and the server's own) when
  the host has the tool; the server's own only in rows where nvidia-smi listed its processes.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pandas as pd

from qualify.core import process
from qualify.core.groups import group_members
from qualify.core.runstore import write_parquet

_DRM_KEY = re.compile(r"^drm-(memory|resident)-(vram|gtt|system)\s*:\s*(\d+)\s*(KiB|MiB|GiB)?", re.M)
_UNITS = {None: 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def smaps_rollup(pid: int) -> dict[str, int]:
    """Rss, Pss and Anonymous (heap, stacks, anonymous mappings) of one process in bytes ({} when
    it is gone). A model file mapped with mmap grows Rss as its pages are read, which is not a
    leak; Anonymous is where a leak shows."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss", "Anonymous"):
            values[name] = int(rest.split()[0]) * 1024
    return values


def memory_psi(path: Path = Path("/proc/pressure/memory")) -> dict[str, float]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, *pairs = line.split() or [""]
        if kind not in ("some", "full"):
            continue
        # A field that is missing or not a number is left out, never guessed.
        fields = dict(p.split("=", 1) for p in pairs if "=" in p)
        with suppress(KeyError, ValueError):
            if kind == "some":
                out["psi_some_avg10"] = float(fields["avg10"])
        with suppress(KeyError, ValueError):
            out[f"psi_{kind}_total_us"] = float(fields["total"])
    return out


def compaction_counters(path: Path = Path("/proc/vmstat")) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {
        name: int(value)
        for name, value in (line.split() for line in text.splitlines() if line.startswith("compact_"))
    }


def amdgpu_memory(root: Path = Path("/sys/class/drm")) -> dict[str, int]:
    """VRAM and GTT in use, summed over amdgpu cards ({} when there is none)."""
    vram = gtt = 0
    found = False
    for card in sorted(root.glob("card[0-9]*")):
        device = card / "device"
        try:
            vram += int((device / "mem_info_vram_used").read_text())
            gtt += int((device / "mem_info_gtt_used").read_text())
        except (OSError, ValueError):
            continue
        found = True
    if not found:
        return {}
    return {"gpu_vram_bytes": vram, "gpu_gtt_bytes": gtt, "gpu_total_bytes": vram + gtt}


def fdinfo_memory(pids: list[int], proc: Path = Path("/proc")) -> dict[str, int]:
    """The processes' GPU memory from DRM fdinfo, each client counted once (a client's file can be
    open on several descriptors and shared with children).

    Newer kernels (amdgpu's fdinfo through `drm_print_memory_stats`) print the standard
    `drm-resident-<region>` and the old `drm-memory-<region>` as an alias of it; counting both
    would double the figure, so the resident key wins and the old one is read only when it is
    alone (older kernels).
    """
    totals: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    for pid in pids:
        for fd in (proc / str(pid) / "fdinfo").glob("*"):
            try:
                text = fd.read_text()
            except OSError:
                continue
            client = re.search(r"^drm-client-id:\s*(\d+)", text, re.M)
            pdev = re.search(r"^drm-pdev:\s*(\S+)", text, re.M)
            key = (pdev.group(1) if pdev else "", client.group(1)) if client else None
            if key is None or key in seen:
                continue
            seen.add(key)
            found: dict[tuple[str, str], int] = {}
            for match in _DRM_KEY.finditer(text):
                kind, region = match.group(1), match.group(2)
                if region != "system":
                    found[(kind, region)] = int(match.group(3)) * _UNITS[match.group(4)]
            for region in ("vram", "gtt"):
                amount = found.get(("resident", region), found.get(("memory", region)))
                if amount is not None:
                    name = f"proc_{region}_bytes"
                    totals[name] = totals.get(name, 0) + amount
    return totals


def nvidia_memory(pids: list[int], tool: str) -> dict[str, int]:
    """The device's used memory and the server's own, from `tool` (nvidia-smi).

    The driver names each compute process by its PID in the namespace of whoever asks, and a
    contained nvidia-smi, in a PID namespace of its own, would see none of the server's; so it
    runs beside the containment. The server's own memory is recorded only when one of its
    processes is listed: 0 would read as "flat, no leak" for memory that was never seen."""
    out: dict[str, int] = {}
    code, text = process.host_capture([tool, "--query-gpu=memory.used", "--format=csv,noheader,nounits"])
    if code == 0 and text.strip():
        out["nvidia_used_bytes"] = sum(int(float(v)) for v in text.split()) * 1024**2
    code, text = process.host_capture(
        [tool, "--query-compute-apps=pid,used_gpu_memory", "--format=csv,noheader,nounits"]
    )
    if code == 0:
        mine: list[int] = []
        for line in text.splitlines():
            pid, _, used = line.partition(",")
            if pid.strip().isdigit() and int(pid) in pids and used.strip().isdigit():
                mine.append(int(used) * 1024**2)
        if mine:
            out["nvidia_proc_bytes"] = sum(mine)
    return out


class Sampler:
    """Samples the server's group every `interval_s` on a thread; `rows` and `save()` give them.

    The table is also written every `flush_s` seconds, so a soak cut short keeps its data. A
    soak in blocks hands every block's sampler the same `rows` (each row tagged with `block`)
    and stops sampling at the block's end (`until_s`), so the role's time axis never runs back.
    """

    def __init__(
        self,
        pgid: int,
        t0: float,
        interval_s: float,
        path: Path,
        flush_s: float = 60.0,
        *,
        rows: list[dict[str, Any]] | None = None,
        block: int = 0,
        until_s: float | None = None,
    ) -> None:
        self.pgid = pgid
        self.t0 = t0
        self.interval_s = interval_s
        self.path = path
        self.flush_s = flush_s
        self.rows: list[dict[str, Any]] = [] if rows is None else rows
        self.block = block
        self.until_s = until_s
        self.pids: set[int] = set()  # every process seen in the group (a fault may name any)
        # The host's nvidia-smi, from qualify's own PATH: it runs outside the containment, so the
        # check's environment (the plan's) must not choose the program.
        self.nvidia = shutil.which("nvidia-smi")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict[str, Any]:
        pids = group_members(self.pgid)
        self.pids.update(pids)
        row: dict[str, Any] = {"t_s": round(time.monotonic() - self.t0, 3), "block": self.block}
        rollups = [smaps_rollup(pid) for pid in pids]
        for column, field in (("rss_bytes", "Rss"), ("pss_bytes", "Pss"), ("anon_bytes", "Anonymous")):
            read = [r[field] for r in rollups if field in r]
            # Memory that could not be read (no process, smaps_rollup unreadable) is missing,
            # never 0: a flat zero would read as "no leak".
            row[column] = sum(read) if read else None
        row.update(memory_psi())
        row.update(compaction_counters())
        row.update(amdgpu_memory())
        row.update(fdinfo_memory(pids))
        if self.nvidia:
            row.update(nvidia_memory(pids, self.nvidia))
        return row

    def _run(self) -> None:
        next_at = time.monotonic()
        last_flush = next_at
        while not self._stop.is_set():
            if self.until_s is not None and time.monotonic() - self.t0 >= self.until_s:
                break
            self.rows.append(self.sample())
            if time.monotonic() - last_flush > self.flush_s:
                self.save()
                last_flush = time.monotonic()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def save(self) -> None:
        write_parquet(self.path, pd.DataFrame(list(self.rows)))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.save()

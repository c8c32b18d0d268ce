"""The machine's state around every bench unit: load, CPU governor, GPU holders, clocks.

Read from /proc and /sys only, so it costs a few milliseconds and needs no vendor tool: the
processes holding a GPU are those with an open descriptor on /dev/kfd (ROCm), /dev/nvidia*
(CUDA) or /dev/dri/renderD* (any DRM compute client). Clocks and temperatures come from the
amdgpu hwmon files where the kernel exposes them. What cannot be read is left out, never
guessed.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

_GPU_DEVICES = ("/dev/kfd", "/dev/nvidia", "/dev/dri/renderD")


def snapshot(proc: Path = Path("/proc"), sys: Path = Path("/sys")) -> dict[str, Any]:
    """The state now: `load` (1-minute average), `governor`, `gpu_processes`, `gpu` sensors."""
    state: dict[str, Any] = {"time": round(time.time(), 3)}
    with contextlib.suppress(OSError, ValueError, IndexError):
        state["load"] = float((proc / "loadavg").read_text().split()[0])
    governor = sys / "devices/system/cpu/cpu0/cpufreq/scaling_governor"
    with contextlib.suppress(OSError):
        state["governor"] = governor.read_text().strip()
    state["gpu_processes"] = gpu_processes(proc)
    sensors = _gpu_sensors(sys)
    if sensors:
        state["gpu"] = sensors
    return state


def gpu_processes(proc: Path = Path("/proc")) -> list[str]:
    """`pid:command` of every other process with a GPU device open, sorted."""
    own = os.getpid()
    found: list[str] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            targets = [str(fd.readlink()) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue  # gone, or not ours to read
        if any(t.startswith(_GPU_DEVICES) for t in targets):
            try:
                command = (entry / "comm").read_text().strip()
            except OSError:
                command = "?"
            found.append(f"{entry.name}:{command}")
    return sorted(found)


def _gpu_sensors(sys: Path) -> dict[str, Any]:
    sensors: dict[str, Any] = {}
    for card in sorted((sys / "class/drm").glob("card[0-9]*")):
        if "-" in card.name:
            continue  # connectors (card0-DP-1), not devices
        values: dict[str, Any] = {}
        for hwmon in (card / "device/hwmon").glob("hwmon*"):
            for name, key in (("temp1_input", "temp_c"), ("freq1_input", "sclk_mhz")):
                try:
                    raw = int((hwmon / name).read_text())
                except (OSError, ValueError):
                    continue
                values[key] = raw / 1000 if key == "temp_c" else raw / 1e6
        if values:
            sensors[card.name] = values
    return sensors


def changes(before: dict[str, Any], after: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """What changed during a unit (`before` → `after`) or since the run began (`baseline`):
    GPU holders that came or went, a governor switch. Load and sensors are context only."""
    notes: list[str] = []
    start = set(baseline.get("gpu_processes", []))
    for label, state in (("before", before), ("after", after)):
        now = set(state.get("gpu_processes", []))
        if now - start:
            notes.append(f"GPU co-tenant {label} the unit: {', '.join(sorted(now - start))}")
        if start - now:
            notes.append(f"GPU process gone {label} the unit: {', '.join(sorted(start - now))}")
    governors = {str(s["governor"]) for s in (baseline, before, after) if s.get("governor")}
    if len(governors) > 1:
        notes.append(f"CPU governor changed: {' → '.join(sorted(governors))}")
    return sorted(set(notes))

"""The machine's state around every bench unit: load, CPU governor, GPU holders, clocks, and
the CPU time other processes took while the unit ran.

Read from /proc and /sys only, so it costs a few milliseconds and needs no vendor tool: the
processes holding a GPU are those with an open descriptor on /dev/kfd (ROCm), /dev/nvidia*
(CUDA) or /dev/dri/renderD* (any DRM compute client). Clocks and temperatures come from the
amdgpu hwmon files where the kernel exposes them (the GPU's state during a unit is
`qualify.bench.gputelemetry`'s). What cannot be read is left out, never guessed.

The load average counts the unit's own threads (llama-bench -t 8 makes it 8), so it is context
only. What competes with a unit is the CPU time of everyone else: the machine's busy time from
/proc/stat over the unit, less the run's own, is the CPU other processes took (`foreign_cores`,
in cores on average); the processes that took most are named from /proc/<pid>/stat. The run's
own is this process's and its commands': in a run with a cgroup, the cgroup's CPU time, which
holds every process of a command; without one, the children this process waited for, which
misses a command's processes no one waits for (bubblewrap's first process in its box), so that
there a contained unit's CPU can count as other processes'.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path
from typing import Any

from qualify.core import containment
from qualify.records.bench import CpuCounters, HostLoad, MachineState

_GPU_DEVICES = ("/dev/kfd", "/dev/nvidia", "/dev/dri/renderD")


def snapshot(proc: Path = Path("/proc"), sys: Path = Path("/sys")) -> MachineState:
    """The state now: `load` (1-minute average), `governor`, `gpu_processes`, `gpu` sensors;
    what could not be read is left unset, and stays out of the unit's record."""
    state: dict[str, Any] = {"time": round(time.time(), 3)}
    with contextlib.suppress(OSError, ValueError, IndexError):
        state["load"] = float((proc / "loadavg").read_text().split()[0])
    governor = sys / "devices/system/cpu/cpu0/cpufreq/scaling_governor"
    with contextlib.suppress(OSError):
        state["governor"] = governor.read_text().strip()
    state["gpu_processes"] = gpu_processes(proc)
    cpu = cpu_counters(proc)
    if cpu is not None:
        state["cpu"] = cpu
    sensors = _gpu_sensors(sys)
    if sensors:
        state["gpu"] = sensors
    return MachineState.model_validate(state)


def cpu_counters(proc: Path = Path("/proc")) -> CpuCounters | None:
    """Cumulative CPU seconds now: the machine's busy and steal time (all CPUs), this process's
    and its waited-for children's, this process's alone, the run's commands' (from its cgroup,
    where it has one), and a monotonic clock to take intervals on."""
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu" or len(fields) < 9:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system = (int(v) for v in fields[1:4])
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuCounters(
        clock_s=round(time.monotonic(), 3),
        busy_s=(user + nice + system) / tick,
        steal_s=int(fields[8]) / tick,
        own_s=round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
        cpus=os.cpu_count() or 1,
        qualify_s=round(own.ru_utime + own.ru_stime, 3),
        commands_s=containment.commands_cpu_s(),
    )


def process_times(proc: Path = Path("/proc")) -> dict[str, float]:
    """CPU seconds so far of every process but this one, by "pid:command"."""
    tick, own = os.sysconf("SC_CLK_TCK"), os.getpid()
    found: dict[str, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone
        # The command is in parentheses and may hold spaces; the fields after it are fixed.
        command, _, rest = text.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        with contextlib.suppress(IndexError, ValueError):
            found[f"{entry.name}:{command}"] = (int(fields[11]) + int(fields[12])) / tick
    return found


def foreign_load(
    before: MachineState,
    after: MachineState,
    procs_before: dict[str, float] | None = None,
    procs_after: dict[str, float] | None = None,
) -> HostLoad:
    """The host's load over one unit (`before` → `after`, two snapshots): the 1-minute load at
    its end, the CPU other processes took in cores on average, steal time, and the three
    processes seen at both ends that took most. Empty when /proc/stat could not be read."""
    start, end = before.cpu, after.cpu
    if start is None or end is None or end.clock_s <= start.clock_s:
        return HostLoad()
    wall = end.clock_s - start.clock_s
    foreign = (end.busy_s - start.busy_s) - own_cpu(start, end)
    load: dict[str, Any] = {
        "interval_s": round(wall, 3),
        "load_1m": after.load,
        "foreign_cores": round(max(foreign, 0.0) / wall, 3),
        "steal_cores": round(max(end.steal_s - start.steal_s, 0.0) / wall, 3),
        "cpus": end.cpus,
    }
    if procs_before is not None and procs_after is not None:
        used = {
            name: procs_after[name] - procs_before[name]
            for name in procs_after.keys() & procs_before.keys()
            if procs_after[name] - procs_before[name] > 0
        }
        top = sorted(used.items(), key=lambda item: -item[1])[:3]
        load["top"] = [f"{name} {seconds / wall:.2f} cores" for name, seconds in top]
    return HostLoad.model_validate(load)


def own_cpu(start: CpuCounters, end: CpuCounters) -> float:
    """The run's own CPU seconds from `start` to `end`: this process's and its waited-for
    children's, or this process's and its commands' by the run's cgroup where that is more (it
    is wherever a command's processes were not waited for; a child waited for outside the
    cgroup, a probe beside the run's containment, is the less that is then left out)."""
    own = end.own_s - start.own_s
    q0, c0, q1, c1 = start.qualify_s, start.commands_s, end.qualify_s, end.commands_s
    if q0 is not None and c0 is not None and q1 is not None and c1 is not None:
        own = max(own, (q1 - q0) + (c1 - c0))
    return own


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


#: How each note of `changes` begins: the bench's one line of why counts the units by them.
CO_TENANT = "GPU co-tenant"
GPU_GONE = "GPU process gone"
GOVERNOR = "CPU governor changed"


def changes(before: MachineState, after: MachineState, baseline: MachineState) -> list[str]:
    """What changed during a unit (`before` → `after`) or since the run began (`baseline`):
    GPU holders that came or went, a governor switch. Load and sensors are context only."""
    notes: list[str] = []
    start = set(baseline.gpu_processes)
    for label, state in (("before", before), ("after", after)):
        now = set(state.gpu_processes)
        if now - start:
            notes.append(f"{CO_TENANT} {label} the unit: {', '.join(sorted(now - start))}")
        if start - now:
            notes.append(f"{GPU_GONE} {label} the unit: {', '.join(sorted(start - now))}")
    governors = {s.governor for s in (baseline, before, after) if s.governor}
    if len(governors) > 1:
        notes.append(f"{GOVERNOR}: {' → '.join(sorted(governors))}")
    return sorted(set(notes))

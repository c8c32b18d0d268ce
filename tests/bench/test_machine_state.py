"""The machine's state around a bench unit is a typed `MachineState` from the moment it is read,
and what is derived from two of them (`foreign_load`, `changes`) reads their fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.bench import machine
from qualify.core import containment, process
from qualify.records.bench import CpuCounters, HostLoad, MachineState


def fake_host(
    root: Path, *, governor: str | None = "performance", temp: int | None = 45000
) -> tuple[Path, Path]:
    proc, sys = root / "proc", root / "sys"
    proc.mkdir(parents=True)
    (proc / "loadavg").write_text("1.50 1.20 1.00 2/300 4242\n")
    (proc / "stat").write_text("cpu  1000 0 500 9000 0 0 0 25 0 0\n")
    if governor is not None:
        cpufreq = sys / "devices/system/cpu/cpu0/cpufreq"
        cpufreq.mkdir(parents=True)
        (cpufreq / "scaling_governor").write_text(governor + "\n")
    hwmon = sys / "class/drm/card0/device/hwmon/hwmon0"
    hwmon.mkdir(parents=True)
    if temp is not None:
        (hwmon / "temp1_input").write_text(f"{temp}\n")
    return proc, sys


def test_a_snapshot_is_typed_and_leaves_out_what_it_could_not_read(tmp_path: Path) -> None:
    state = machine.snapshot(*fake_host(tmp_path))
    assert (state.load, state.governor, state.gpu_processes) == (1.5, "performance", [])
    assert state.cpu is not None and state.cpu.busy_s > 0 and state.cpu.cpus >= 1
    assert state.gpu == {"card0": {"temp_c": 45.0}}
    bare = machine.snapshot(*fake_host(tmp_path / "bare", governor=None, temp=None))
    assert bare.governor is None and bare.gpu is None
    assert not {"governor", "gpu"} & set(bare.to_json())  # unread: not saved as null either


def test_the_load_of_a_unit_is_read_from_its_two_states() -> None:
    def at(clock: float, busy: float, own: float) -> MachineState:
        cpu = CpuCounters(clock_s=clock, busy_s=busy, steal_s=0.0, own_s=own, cpus=8)
        return MachineState(load=2.0, cpu=cpu)

    load = machine.foreign_load(at(10.0, 100.0, 5.0), at(12.0, 106.0, 7.0), {"1:cc": 1.0}, {"1:cc": 2.0})
    assert load == HostLoad(
        interval_s=2.0, load_1m=2.0, foreign_cores=2.0, steal_cores=0.0, cpus=8, top=["1:cc 0.50 cores"]
    )
    # Without /proc/stat at either end there is nothing to say, and nothing is saved.
    assert machine.foreign_load(MachineState(), at(12.0, 106.0, 7.0)).to_json() == {}


def test_a_contained_command_s_cpu_is_the_run_s_own_not_other_processes(tmp_path: Path) -> None:
    """A unit's command run as a run runs it, in its cgroup and (where the host has bubblewrap)
    in its box: the CPU it took counts as the run's own. In bubblewrap the box's first process
    is waited for by no one, so its CPU never reached qualify's RUSAGE_CHILDREN, and every
    contained unit was flagged for "other processes" taking the CPU it took itself. The command
    says its CPU seconds with the shell's `times` (its own, then its children's)."""
    root = tmp_path / "run"
    (root / "stage").mkdir(parents=True)
    spin = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; times"
    with containment.contained(root, "own-cpu") as jail, containment.writing(root / "stage"):
        if jail.cell is None:
            pytest.skip(f"this host gives a run no cgroup ({jail.describe()})")
        before = machine.cpu_counters()
        done = process.run(["/bin/sh", "-c", spin], env={"PATH": "/usr/bin:/bin"}, log=None, timeout_s=120)
        after = machine.cpu_counters()
    assert done.ok, done.output_tail
    own_line = done.output_tail[-2]  # e.g. "0m0.412000s 0m0.001000s"
    took = sum(
        float(part.split("m")[0]) * 60 + float(part.split("m")[1].rstrip("s")) for part in own_line.split()
    )
    assert took > 0.1, done.output_tail
    assert before is not None and after is not None
    assert after.commands_s is not None and before.commands_s is not None
    assert machine.own_cpu(before, after) >= 0.9 * took, (before, after, took)


def test_changes_name_a_gpu_co_tenant_and_a_governor_switch() -> None:
    baseline = MachineState(governor="performance", gpu_processes=["7:llama"])
    after = MachineState(governor="powersave", gpu_processes=["7:llama", "9:python3"])
    assert machine.changes(baseline, after, baseline) == [
        f"{machine.GOVERNOR}: performance → powersave",
        f"{machine.CO_TENANT} after the unit: 9:python3",
    ]

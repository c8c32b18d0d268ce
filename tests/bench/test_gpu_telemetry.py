"""GPU telemetry for bench units: the vendor tools' output formats read, NVML where a GPU is,
the host's CPU accounting on real processes, and the flags a reviewer reads.

This machine has no GPU, so nvidia-smi's, amd-smi's and rocm-smi's output is given as text in
each tool's own format (the fields and order the bench asks for, as the tools print them):
those samples stand in for hardware that cannot exist here. NVML runs for real where
nvidia-ml-py and a GPU are present, and is skipped elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchsim import saved_check, steady
from conftest import Project
from typer.testing import CliRunner

from qualify.bench import check as bench
from qualify.bench import conditions, gputelemetry, machine
from qualify.bench.gputelemetry import Reading, parse_amd_smi, parse_nvidia_smi, parse_rocm_smi, summarise
from qualify.cli import app
from qualify.core.runstore import read_json, write_json
from qualify.core.verdicts import Verdict
from qualify.records.bench import BenchUnit

# `nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu,
# clocks_event_reasons.active --format=csv,noheader,nounits` on a two-GPU H200 host (stand-in:
# no NVIDIA GPU here; the layout is the one nvidia-smi gives the recorded host's query).
NVIDIA_SMI_IDLE = """\
0, 345, 3201, 78.41, 28, 0x0000000000000001
1, 345, 3201, 77.02, 27, 0x0000000000000001
"""
NVIDIA_SMI_THROTTLED = """\
0, 1755, 3201, 699.87, 84, 0x0000000000000064
1, [N/A], 3201, [Not Supported], 27, [N/A]
"""


def unit_flags(unit: dict[str, Any]) -> list[str]:
    """`conditions.unit_flags` of a unit as saved (one that ran, unless it says)."""
    return conditions.unit_flags(BenchUnit.model_validate({"ok": True, **unit}))


def test_nvidia_smi_csv_is_read_with_its_reason_bits() -> None:
    """Stand-in: nvidia-smi's CSV for an H200 pair (see the module docstring)."""
    idle = parse_nvidia_smi(NVIDIA_SMI_IDLE)
    assert idle == [
        Reading("0", 345.0, 3201.0, 78.41, 28.0, ("gpu_idle",)),
        Reading("1", 345.0, 3201.0, 77.02, 27.0, ("gpu_idle",)),
    ]
    busy = parse_nvidia_smi(NVIDIA_SMI_THROTTLED)
    # 0x64 = sw_power_cap (0x4) + sw_thermal_slowdown (0x20) + hw_thermal_slowdown (0x40)
    assert busy[0].reasons == ("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown")
    assert busy[0].sm_mhz == 1755.0 and busy[0].power_w == 699.87
    # A field the GPU does not report is None, never 0.
    assert busy[1] == Reading("1", None, 3201.0, None, 27.0, ())


def test_an_unnamed_reason_bit_is_kept_as_hex() -> None:
    assert gputelemetry.decode_reasons(0x0) == ()
    assert gputelemetry.decode_reasons(0x201) == ("gpu_idle", "0x200")


# `amd-smi metric --power --clock --temperature --json` (ROCm 6.4 and later: under gpu_data)
# on an MI300X with its throttle block; stand-in: no AMD GPU here.
AMD_SMI = {
    "gpu_data": [
        {
            "gpu": 0,
            "power": {
                "socket_power": {"value": 742, "unit": "W"},
                "gfx_voltage": "N/A",
                "throttle_status": "THROTTLED",
                "power_management": "ENABLED",
            },
            "clock": {
                "gfx_0": {"clk": {"value": 1412, "unit": "MHz"}, "min_clk": "N/A", "max_clk": "N/A"},
                "gfx_1": {"clk": "N/A", "min_clk": "N/A", "max_clk": "N/A"},
                "mem_0": {"clk": {"value": 1300, "unit": "MHz"}, "min_clk": "N/A", "max_clk": "N/A"},
            },
            "temperature": {
                "edge": "N/A",
                "hotspot": {"value": 88, "unit": "C"},
                "mem": {"value": 71, "unit": "C"},
            },
            "throttle": {
                "accumulation_counter": 31405,
                "ppt_violation_status": "ACTIVE",
                "socket_thermal_violation_status": "NOT ACTIVE",
                "low_utilization_violation_status": "N/A",
            },
        }
    ]
}


def test_amd_smi_json_is_read_with_its_throttle_state() -> None:
    """Stand-in: amd-smi's JSON for an MI300X (see the module docstring)."""
    (reading,) = parse_amd_smi(json.dumps(AMD_SMI))
    assert reading == Reading("0", 1412.0, 1300.0, 742.0, 88.0, ("throttled", "ppt"))
    # Before ROCm 6.4 the GPUs were a bare list, and a GPU at rest reports UNTHROTTLED.
    older = [{"gpu": 1, "power": {"socket_power": 35, "throttle_status": "UNTHROTTLED"}, "clock": {}}]
    assert parse_amd_smi(json.dumps(older)) == [Reading("1", None, None, 35.0, None, ())]


def test_rocm_smi_json_is_read_without_throttle_state() -> None:
    """Stand-in: rocm-smi's JSON for a Radeon card (see the module docstring)."""
    text = json.dumps(
        {
            "card0": {
                "sclk clock speed:": "(2482Mhz)",
                "mclk clock speed:": "(1249Mhz)",
                "Temperature (Sensor edge) (C)": "52.0",
                "Temperature (Sensor junction) (C)": "61.0",
                "Current Socket Graphics Package Power (W)": "212.0",
            },
            "system": {"Driver version": "6.10.5"},
        }
    )
    assert parse_rocm_smi(text) == [Reading("0", 2482.0, 1249.0, 212.0, 61.0, ())]


def test_nvml_reads_this_machines_gpus() -> None:
    """Real NVML; skipped where nvidia-ml-py or an NVIDIA driver is missing."""
    nvml = pytest.importorskip("pynvml")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        pytest.skip(f"no NVIDIA driver here: {exc}")
    source, why = gputelemetry.probe()
    assert source is not None and source.name == "nvml", why
    sampler = gputelemetry.UnitSampler(source)
    sampler.start()
    time.sleep(1.0)
    record = sampler.stop()
    assert record is not None and record["samples"] >= 2
    first = record["gpus"]["0"]
    assert first["sm_mhz"][0] > 0 and first["mem_mhz"][0] > 0 and first["temp_c"][2] > 0


def test_without_any_gpu_tool_the_probe_says_why_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No vendor tool on PATH and no NVML library: one reason per source, nothing sampled."""
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as on a host without it
    source, why = gputelemetry.probe()
    assert source is None
    assert why.startswith("not available: ")
    for part in ("pynvml", "nvidia-smi not found", "amd-smi not found", "rocm-smi not found"):
        assert part in why
    sampler = gputelemetry.UnitSampler(None)
    sampler.start()
    assert sampler.stop() is None


def throttled_unit(index: int, pair: int, role: str, mask: int) -> dict:
    """A pair unit whose GPU samples carry NVML reason bits `mask` in two of three samples."""
    samples = [
        [Reading("0", 1980.0, 3201.0, 410.0, 60.0, gputelemetry.decode_reasons(mask))],
        [Reading("0", 1755.0, 3201.0, 699.0, 84.0, gputelemetry.decode_reasons(mask))],
        [Reading("0", 1980.0, 3201.0, 400.0, 61.0, ())],
    ]
    return {
        "index": index,
        "pair": pair,
        "role": role,
        "phase": "pair",
        "gpu": summarise(samples, "nvml"),
        "host": {"foreign_cores": 0.02, "load_1m": 1.0},
    }


def test_a_unit_with_slowdown_bits_is_flagged_and_idle_is_not() -> None:
    unit = throttled_unit(5, 2, "candidate", 0x4)
    assert unit["gpu"]["gpus"]["0"]["sm_mhz"] == [1755.0, 1980.0, 1980.0]
    assert unit_flags(unit) == ["GPU 0 throttled (sw_power_cap in 2 of 3 samples)"]
    # The GPU idles between kernels of a small model: idle, sync boost and an administrator's
    # application clocks are settings, not slowdowns.
    assert unit_flags(throttled_unit(5, 2, "candidate", 0x1 | 0x2 | 0x10)) == []
    thermal = unit_flags(throttled_unit(5, 2, "candidate", 0x40 | 0x80))
    assert thermal == [
        "GPU 0 throttled (hw_power_brake_slowdown in 2 of 3 samples, hw_thermal_slowdown in 2 of 3 samples)"
    ]


def test_foreign_load_is_flagged_with_the_processes_named() -> None:
    unit = throttled_unit(3, 1, "pinned", 0)
    assert unit_flags(unit) == []
    unit["host"] = {"foreign_cores": 1.3, "top": ["4242:cc1plus 1.10 cores"]}
    assert unit_flags(unit) == ["other processes took 1.30 CPU cores: 4242:cc1plus 1.10 cores"]


def test_the_cpu_of_a_process_that_is_not_the_unit_is_counted_and_named() -> None:
    """A real busy process beside this one: its CPU is foreign (it is not a waited-for child
    when the interval closes), and it is named among the processes that took most."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before, procs_before = machine.snapshot(), machine.process_times()
        time.sleep(1.5)
        after, procs_after = machine.snapshot(), machine.process_times()
    finally:
        spin.kill()
        spin.wait()
    load = machine.foreign_load(before, after, procs_before, procs_after)
    assert load.interval_s == pytest.approx(1.5, abs=0.3)
    assert load.foreign_cores is not None and load.foreign_cores > 0.1
    key = next(k for k in procs_after if k.startswith(f"{spin.pid}:"))
    assert procs_after[key] - procs_before[key] > 0.1
    assert before.cpu is not None and before.cpu.busy_s > 0


def test_a_flagged_unit_is_a_named_warn_and_the_tests_keep_their_findings(tmp_path: Path) -> None:
    saved = saved_check(tmp_path, {"pp64": steady(9, 100, 100, 0.002)}, looks=[9, 16])
    clean = bench.judge(saved)
    assert clean.verdict is Verdict.PASS
    schedule = read_json(tmp_path / "schedule.json")
    schedule.pop("schema_version", None)
    unit = next(u for u in schedule["units"] if u["index"] == 5)
    unit.update(gpu=throttled_unit(5, unit["pair"], unit["role"], 0x40)["gpu"])
    schedule["gpu_telemetry"] = {"source": "nvml", "described": "NVML (13.615.71), 1 GPU(s)"}
    write_json(tmp_path / "schedule.json", schedule)
    judged = bench.judge(saved)
    assert judged.verdict is Verdict.WARN
    (warn,) = [f for f in judged.findings if f.verdict is Verdict.WARN]
    assert f"unit 5 (pair {unit['pair']}, {unit['role']})" in warn.message
    assert "hw_thermal_slowdown in 2 of 3 samples" in warn.message
    assert judged.facts.tests == clean.facts.tests  # the pairs are judged as before
    table = next(t for t in judged.tables if t.title.startswith("Machine state"))
    row = next(r for r in table.rows if r[0] == 5)
    assert row[3] == "1755–1980" and row[7] == "hw_thermal_slowdown 2/3" and row[-1]
    assert not table.collapsed and "NVML" in table.title
    assert judged.facts.machine.flagged


ZLIB_UNIT = """
import json, sys, time, zlib
# One unit: zlib level 6 over 4 MiB of a repeating text, 3 repetitions, in MiB/s.
data = b"the quick brown fox jumps over the lazy dog " * 95000
samples = []
for _ in range(3):
    start = time.perf_counter()
    zlib.compress(data, 6)
    samples.append(len(data) / 2**20 / (time.perf_counter() - start))
json.dump({"schema_version": 1, "metrics": [{"name": "zlib6", "unit": "MiB/s",
           "higher_is_better": True, "samples": samples}]}, open(sys.argv[1], "w"))
"""


def test_the_bench_runs_here_and_records_what_telemetry_there_is(project: Callable[..., Project]) -> None:
    """A real small command (zlib over 4 MiB) as the bench unit, pinned against itself, on
    this machine: the schedule says once whether GPU telemetry answered, and every unit keeps
    the host's load."""
    p = project(
        """
        [arms.pinned]
        installable = ".#default"
        [arms.again]
        installable = ".#default"
        """
    )
    script = p.script("unit.py", ZLIB_UNIT)
    p.stage(
        "60-bench.toml",
        f"""
        [[check]]
        kind = "bench"
        name = "zlib"
        format = "metrics"
        run = "{{py}} {script} {{out_file}}"
        looks = 1
        max_pairs = 6
        limits = {{ speed_margin = 0.5 }}
        """,
    )
    result = CliRunner().invoke(app, ["run", "--candidate", "again", "--project", str(p.root)])
    assert result.exit_code in (0, 1, 3), result.output
    folder = p.run_dirs()[0] / "60-bench" / "zlib"
    schedule = read_json(folder / "schedule.json")
    units = [u for u in schedule["units"] if u["phase"] in ("warmup", "pair")]
    assert len(units) >= 14  # two warm-ups, six pairs
    assert all(isinstance(u["host"]["foreign_cores"], float) for u in units)
    source, _ = gputelemetry.probe()
    if source is None:
        assert schedule["gpu_telemetry"]["source"] is None
        assert schedule["gpu_telemetry"]["reason"].startswith("not available: ")
        assert result.output.count("GPU telemetry not available") == 1
        assert not any("gpu" in u for u in units)
    else:
        assert schedule["gpu_telemetry"]["source"] == source.name
        assert all(u["gpu"]["samples"] >= 1 for u in units)
    saved = read_json(folder / "result.json")
    titles = [t["title"] for t in saved["tables"]]
    assert any(t.startswith("Machine state during each unit") for t in titles), titles
    assert saved["facts"]["machine"]["gpu_telemetry"] == schedule["gpu_telemetry"]


def test_the_sampler_summarises_every_reading_taken_while_the_unit_ran() -> None:
    """Stand-in source: nvidia-smi's throttled sample (no GPU here) read on the sampler's thread."""
    source = gputelemetry.Source("nvidia-smi", lambda: parse_nvidia_smi(NVIDIA_SMI_THROTTLED), 0.05)
    sampler = gputelemetry.UnitSampler(source)
    sampler.start()
    time.sleep(0.4)
    record = sampler.stop()
    assert record is not None and record["source"] == "nvidia-smi"
    n = record["samples"]
    assert n >= 3 and record["gpus"]["0"]["samples"] == n
    assert record["gpus"]["0"]["reasons"] == {
        "hw_thermal_slowdown": n,
        "sw_power_cap": n,
        "sw_thermal_slowdown": n,
    }
    assert record["gpus"]["0"]["power_w"] == [699.9, 699.9, 699.9]
    assert "power_w" not in record["gpus"]["1"]  # never reported: left out, not 0

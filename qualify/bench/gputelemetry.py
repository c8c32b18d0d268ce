"""The GPU's clocks, power, temperature and throttle reasons while a bench unit runs.

One source serves a whole bench, the first that answers when it starts: NVML in this process
through nvidia-ml-py (`pynvml`), else `nvidia-smi --query-gpu`, else `amd-smi metric --json`,
else `rocm-smi --json` (clocks, power and temperature; no throttle state). They are only read:
the GPU's settings are left as they are. Where none answers (a host without a GPU, CI) the
bench says so once and runs as before, with no GPU record on its units.

Between two units a GPU sits at its idle clock (345 MHz on an H200), so a reading there says
nothing about the unit: the state is sampled on a thread while the unit runs and kept as one
summary per unit and GPU (clock ranges, the highest power and temperature, and in how many
samples each throttle reason was active). NVML costs microseconds a reading; a vendor tool is a
process each time, so those are read less often.

Throttle reasons use NVML's names (`sw_power_cap`, `hw_thermal_slowdown`, ...; nvidia-smi's
`clocks_event_reasons.*` are the same bits) and, for AMD, `throttled` (amd-smi's
`throttle_status`) and the `*_violation_status` names of amd-smi's throttle block without the
suffix (`ppt`, `socket_thermal`, ...). `SLOWDOWN` names those that mean the clock was held
down by heat or power: a unit measured under one of them is flagged in the judgement.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import re
import shutil
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from qualify.core import process

#: NVML's clocks event (throttle) reason bits, as nvidia-ml-py and nvidia-smi name them.
NVML_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: Reasons that mean the clock was held down by heat or power during the unit. Idle, sync
#: boost and a clock set by an administrator are the GPU's settings, not a slowdown.
SLOWDOWN = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "throttled",
        "prochot",
        "ppt",
        "socket_thermal",
        "vr_thermal",
        "hbm_thermal",
    }
)

#: nvidia-smi's fields, in the order `parse_nvidia_smi` reads them. Drivers before the
#: "clocks event" naming call the last one `clocks_throttle_reasons.active`.
NVIDIA_SMI_FIELDS = ("index", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu")
NVIDIA_SMI_REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
AMD_SMI_ARGV = ("amd-smi", "metric", "--power", "--clock", "--temperature", "--json")
ROCM_SMI_ARGV = ("rocm-smi", "--showclocks", "--showpower", "--showtemp", "--json")


@dataclass(frozen=True)
class Reading:
    """One GPU at one moment; None where the source does not report a value."""

    gpu: str
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    reasons: tuple[str, ...] = ()


def decode_reasons(mask: int) -> tuple[str, ...]:
    """NVML's reason bitmask as names; a bit NVML's table does not name is kept as hex."""
    names = [name for bit, name in NVML_REASONS.items() if mask & bit]
    unknown = mask & ~sum(NVML_REASONS)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)


def _number(text: Any) -> float | None:
    """A reading as a float: nvidia-smi's "[N/A]" / "[Not Supported]", amd-smi's "N/A" and
    the like are None; "1980 MHz" or "(1980Mhz)" keep their number."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text) if math.isfinite(text) else None
    if isinstance(text, dict):
        return _number(text.get("value"))
    match = re.search(r"-?\d+(?:\.\d+)?", str(text))
    return float(match.group()) if match else None


def parse_nvidia_smi(text: str) -> list[Reading]:
    """`nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS>,clocks_event_reasons.active
    --format=csv,noheader,nounits`: one line per GPU, e.g.
    `0, 1980, 3201, 412.35, 41, 0x0000000000000000`."""
    readings: list[Reading] = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(NVIDIA_SMI_FIELDS) + 1 or not values[0].isdigit():
            continue
        mask = values[-1]
        reasons = decode_reasons(int(mask, 16)) if re.fullmatch(r"0x[0-9a-fA-F]+", mask) else ()
        sm, mem, power, temp = (_number(v) for v in values[1:5])
        readings.append(Reading(values[0], sm, mem, power, temp, reasons))
    return readings


def _amd_gpus(data: Any) -> list[dict[str, Any]]:
    """amd-smi's GPU entries: under "gpu_data" (ROCm 6.4 and later) or a bare list (before)."""
    entries = data.get("gpu_data", []) if isinstance(data, dict) else data
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def parse_amd_smi(text: str) -> list[Reading]:
    """`amd-smi metric --power --clock --temperature --json` (or the whole `metric --json`):
    the graphics clock `clock.gfx_0.clk`, memory clock `clock.mem_0.clk`, `power.socket_power`,
    the hotspot (else edge) temperature, `power.throttle_status` and, on GPUs that report it,
    the `throttle` block's `*_violation_status` entries that are ACTIVE."""
    readings: list[Reading] = []
    for entry in _amd_gpus(json.loads(text)):
        clock = entry.get("clock") or {}
        power = entry.get("power") or {}
        temperature = entry.get("temperature") or {}
        reasons = []
        if str(power.get("throttle_status", "")).upper() == "THROTTLED":
            reasons.append("throttled")
        for key, value in (entry.get("throttle") or {}).items():
            if key.endswith("_violation_status") and str(value).upper() == "ACTIVE":
                reasons.append(key.removesuffix("_violation_status"))
        readings.append(
            Reading(
                str(entry.get("gpu", len(readings))),
                _number((clock.get("gfx_0") or {}).get("clk")),
                _number((clock.get("mem_0") or {}).get("clk")),
                _number(power.get("socket_power", power.get("average_socket_power"))),
                _number(temperature.get("hotspot", temperature.get("edge"))),
                tuple(reasons),
            )
        )
    return readings


def parse_rocm_smi(text: str) -> list[Reading]:
    """`rocm-smi --showclocks --showpower --showtemp --json`: per card, "sclk clock speed:"
    "(1900Mhz)", "mclk clock speed:", a "... Graphics Package Power (W)" and the junction
    (else edge) temperature. rocm-smi reports no throttle state."""
    readings: list[Reading] = []
    for card, values in json.loads(text).items():
        if not (isinstance(values, dict) and card.startswith("card")):
            continue

        def find(pattern: str, fields: dict[str, Any] = values) -> float | None:
            return next((_number(v) for k, v in fields.items() if re.search(pattern, k, re.I)), None)

        readings.append(
            Reading(
                card.removeprefix("card"),
                find(r"^sclk clock speed"),
                find(r"^mclk clock speed"),
                find(r"Graphics Package Power \(W\)"),
                find(r"Temperature \(Sensor junction\)") or find(r"Temperature \(Sensor edge\)"),
            )
        )
    return readings


@dataclass
class Source:
    """Where readings come from: `read` returns one Reading per GPU (empty when a read fails)."""

    name: str
    read: Callable[[], list[Reading]]
    interval_s: float
    described: str = ""


def _nvml() -> tuple[Source | None, str]:
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception as exc:  # NVMLError and its many subclasses: no driver, no library
        return None, f"NVML: {exc}"
    if not handles:
        return None, "NVML: no GPU"
    reasons_of = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )

    def value(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception:  # a field this GPU does not support is an NVMLError; leave it out
            return None

    def read() -> list[Reading]:
        readings: list[Reading] = []
        for index, h in enumerate(handles):
            power_mw = value(nvml.nvmlDeviceGetPowerUsage, h)
            mask = value(reasons_of, h)
            readings.append(
                Reading(
                    str(index),
                    _number(value(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)),
                    _number(value(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM)),
                    power_mw / 1000 if isinstance(power_mw, (int, float)) else None,
                    _number(value(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)),
                    decode_reasons(int(mask)) if isinstance(mask, int) else (),
                )
            )
        return readings

    version = getattr(nvml, "__version__", None) or "nvidia-ml-py"
    return Source("nvml", read, 0.25, f"NVML ({version}), {len(handles)} GPU(s)"), ""


def _tool(
    argv: Sequence[str], parse: Callable[[str], list[Reading]], interval_s: float
) -> tuple[Source | None, str]:
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found"

    def attempt() -> tuple[list[Reading], str]:
        code, text = process.capture(list(argv), timeout_s=10)
        if code != 0:
            return [], (text.strip().splitlines() or [f"exit code {code}"])[-1][:200]
        try:
            return parse(text), "no GPU in its output"
        except (ValueError, AttributeError, TypeError) as exc:
            return [], f"unreadable output ({exc})"

    first, why = attempt()
    if not first:
        return None, f"{argv[0]}: {why}"
    return Source(argv[0], lambda: attempt()[0], interval_s, f"{argv[0]}, {len(first)} GPU(s)"), ""


def _nvidia_smi() -> tuple[Source | None, str]:
    reasons = ""
    for field_name in NVIDIA_SMI_REASONS:
        argv = ["nvidia-smi", f"--query-gpu={','.join((*NVIDIA_SMI_FIELDS, field_name))}"]
        source, reasons = _tool([*argv, "--format=csv,noheader,nounits"], parse_nvidia_smi, 1.0)
        if source is not None or shutil.which("nvidia-smi") is None:
            return source, reasons
    return None, reasons


def probe() -> tuple[Source | None, str]:
    """The first source that answers, or None and why none did (one reason per source)."""
    why = []
    for attempt in (
        _nvml,
        _nvidia_smi,
        lambda: _tool(AMD_SMI_ARGV, parse_amd_smi, 2.0),
        lambda: _tool(ROCM_SMI_ARGV, parse_rocm_smi, 2.0),
    ):
        source, reason = attempt()
        if source is not None:
            return source, ""
        why.append(reason)
    return None, "not available: " + "; ".join(why)


@dataclass
class UnitSampler:
    """Samples `source` on a thread from `start` to `stop`; `summary` is the unit's record."""

    source: Source | None
    readings: list[list[Reading]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        if self.source is None:
            return
        self._thread = threading.Thread(target=self._run, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self.source is not None
        while True:
            started = time.monotonic()
            with contextlib.suppress(Exception):  # a failed read loses one sample, not the unit
                got = self.source.read()
                if got:
                    self.readings.append(got)
            if self._stop.wait(max(0.0, self.source.interval_s - (time.monotonic() - started))):
                return

    def stop(self) -> dict[str, Any] | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=15)
        return summarise(self.readings, self.source.name if self.source else "")


def _span(values: list[float]) -> list[float] | None:
    """[min, median, max], rounded to what the sources resolve."""
    if not values:
        return None
    return [round(min(values), 1), round(statistics.median(values), 1), round(max(values), 1)]


def summarise(readings: Sequence[Sequence[Reading]], source: str) -> dict[str, Any]:
    """One unit's record: per GPU the [min, median, max] of each quantity and in how many of
    the samples each throttle reason was active."""
    gpus: dict[str, dict[str, Any]] = {}
    by_gpu: dict[str, list[Reading]] = {}
    for sample in readings:
        for reading in sample:
            by_gpu.setdefault(reading.gpu, []).append(reading)
    for gpu, series in sorted(by_gpu.items()):
        reasons: dict[str, int] = {}
        for reading in series:
            for reason in reading.reasons:
                reasons[reason] = reasons.get(reason, 0) + 1
        record: dict[str, Any] = {"samples": len(series), "reasons": dict(sorted(reasons.items()))}
        for key in ("sm_mhz", "mem_mhz", "power_w", "temp_c"):
            span = _span([v for r in series if (v := getattr(r, key)) is not None])
            if span is not None:
                record[key] = span
        gpus[gpu] = record
    return {"source": source, "samples": len(readings), "gpus": gpus}

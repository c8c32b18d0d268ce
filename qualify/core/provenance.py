"""Where and from what a run was made: host, source revision, tools, other GPU users."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from qualify.core.gitstatus import tree_changes
from qualify.core.process import capture
from qualify.core.recordredaction import redact_argv


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def host() -> dict[str, Any]:
    os_release = _read("/etc/os-release") or ""
    pretty = next(
        (
            line.split("=", 1)[1].strip('"')
            for line in os_release.splitlines()
            if line.startswith("PRETTY_NAME=")
        ),
        None,
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in (_read("/proc/cpuinfo") or "").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or None,
    )
    mem_kib = next(
        (
            int(line.split()[1])
            for line in (_read("/proc/meminfo") or "").splitlines()
            if line.startswith("MemTotal:")
        ),
        None,
    )
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "os": pretty,
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1) if mem_kib else None,
        "loadavg": list(os.getloadavg()),
        "python": platform.python_version(),
    }


def git(root: Path) -> dict[str, Any]:
    """The revision, and whether the tree is dirty as nix sees it: tracked files changed. The
    untracked files are listed apart (nix never sees them; `qualify.core.gitstatus`)."""
    code, rev = capture(["git", "-C", str(root), "rev-parse", "HEAD"], timeout_s=20)
    changes = tree_changes(root, timeout_s=20) if code == 0 else None
    if changes is None:
        return {"rev": None, "dirty": None, "note": "not a git checkout (or git missing)"}
    return {
        "rev": rev.strip(),
        "dirty": changes.dirty,
        "changed": list(changes.changed),
        "untracked": list(changes.untracked),
        "untracked_count": changes.untracked_count,
    }


def flake_lock(root: Path) -> dict[str, Any]:
    lock = root / "flake.lock"
    if not lock.is_file():
        return {"path": None, "sha256": None}
    return {"path": str(lock), "sha256": hashlib.sha256(lock.read_bytes()).hexdigest()}


def tool_version(argv: list[str]) -> str | None:
    code, text = capture(argv, timeout_s=20)
    return text.strip().splitlines()[0] if code == 0 and text.strip() else None


#: nvidia-smi's query fields -> our keys. compute_cap "9.0" becomes the target "sm_90".
_NVIDIA_FIELDS = {
    "index": "index",
    "name": "name",
    "driver_version": "driver",
    "compute_cap": "compute_cap",
    "memory.total": "memory_mib",
    "vbios_version": "vbios",
    "pci.bus_id": "pci",
    "uuid": "uuid",
}


def nvidia_gpus(nvidia_smi: str = "nvidia-smi") -> list[dict[str, Any]]:
    """NVIDIA GPUs as the driver names them: model, target (sm_XY), driver, the CUDA version the
    driver supports, memory, VBIOS, PCI address. Empty without nvidia-smi or a working driver."""
    code, text = capture(
        [nvidia_smi, f"--query-gpu={','.join(_NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"],
        timeout_s=20,
    )
    if code != 0:
        return []
    _, banner = capture([nvidia_smi], timeout_s=20)
    version = re.search(r"CUDA Version:\s*([\d.]+)", banner)
    cuda = version.group(1) if version else None
    found = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(_NVIDIA_FIELDS):
            continue
        gpu: dict[str, Any] = {"vendor": "NVIDIA", **dict(zip(_NVIDIA_FIELDS.values(), values, strict=True))}
        major, _, minor = str(gpu.pop("compute_cap")).partition(".")
        gpu["target"] = f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None
        gpu["cuda_driver"] = cuda
        gpu["memory_mib"] = int(gpu["memory_mib"]) if str(gpu["memory_mib"]).isdigit() else None
        gpu["source"] = "nvidia-smi"
        found.append(gpu)
    return found


class RecordedGpu(BaseModel):
    """A GPU as a run recorded it (`nvidia_gpus`, `sysfs_gpus`): frozen, every field declared,
    no coercion; a field the probe did not find is None."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    vendor: str | None = None
    #: nvidia-smi's: the model, its index, PCI address, UUID, the CUDA version the driver supports.
    name: str | None = None
    index: str | None = None
    pci: str | None = None
    uuid: str | None = None
    cuda_driver: str | None = None
    memory_mib: int | None = None
    source: str | None = None
    #: sysfs's: the DRM card, the PCI device id, the firmware versions amdgpu lists.
    card: str | None = None
    device: str | None = None
    firmware: dict[str, str | None] | None = None
    driver: str | None = None
    vbios: str | None = None
    #: sm_90, gfx1151.
    target: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The GPU as it was recorded: the fields it was read with."""
        return self.model_dump(mode="json", exclude_unset=True)


def describe_gpu(gpu: RecordedGpu | Mapping[str, Any]) -> str:
    """One line for a GPU record, as reports and `doctor` print it (a probe's own dict is read
    as the record it becomes)."""
    if not isinstance(gpu, RecordedGpu):
        gpu = RecordedGpu.model_validate(dict(gpu))
    if gpu.name:
        parts = [f"{gpu.name} ({gpu.target or '?'})", f"driver {gpu.driver or '?'}"]
        if gpu.cuda_driver:
            parts.append(f"CUDA {gpu.cuda_driver} (driver)")
        if gpu.memory_mib:
            parts.append(f"{gpu.memory_mib} MiB")
        if gpu.vbios:
            parts.append(f"VBIOS {gpu.vbios}")
        return ", ".join(parts)
    line = f"{gpu.card or '?'}: {gpu.vendor or '?'} {gpu.device or '?'}"
    line += f" ({gpu.target})" if gpu.target else ""
    line += f", driver {gpu.driver or '?'}"
    if gpu.vbios:
        line += f", VBIOS {gpu.vbios}"
    if gpu.firmware:
        line += ", firmware " + " ".join(f"{k} {v}" for k, v in sorted(gpu.firmware.items()))
    return line


def gpus() -> list[dict[str, Any]]:
    """The GPUs of this machine: NVIDIA's from nvidia-smi where it answers, the others (and
    NVIDIA's without it) from sysfs (vendor, device id, driver)."""
    nvidia = nvidia_gpus()
    return nvidia + [g for g in sysfs_gpus() if not (nvidia and g["vendor"] == "NVIDIA")]


def sysfs_gpus(sys_root: Path = Path("/sys")) -> list[dict[str, Any]]:
    """GPUs visible through sysfs (vendor, device id, driver, VBIOS), without vendor tools; for
    AMD also the target (gfx1151) from the KFD topology and the firmware versions amdgpu lists."""
    vendors = {"0x1002": "AMD", "0x10de": "NVIDIA", "0x8086": "Intel"}
    targets = _kfd_targets(sys_root)
    found = []
    for card in sorted((sys_root / "class" / "drm").glob("card[0-9]*")):
        if "-" in card.name:
            continue  # connectors such as card0-DP-1
        device = card / "device"
        vendor = _read(str(device / "vendor"))
        if vendor is None:
            continue
        driver = device / "driver"
        gpu: dict[str, Any] = {
            "card": card.name,
            "vendor": vendors.get(vendor, vendor),
            "device": _read(str(device / "device")),
            "driver": driver.resolve().name if driver.exists() else None,
            "vbios": _read(str(device / "vbios_version")),
        }
        minors = [int(p.name[len("renderD") :]) for p in (device / "drm").glob("renderD[0-9]*")]
        target = next((targets[m] for m in minors if m in targets), None)
        if target:
            gpu["target"] = target
        firmware = {
            f.name.removesuffix("_fw_version"): _read(str(f))
            for f in sorted((device / "fw_version").glob("*_fw_version"))
        }
        if firmware:
            gpu["firmware"] = firmware
        found.append(gpu)
    return found


def _kfd_targets(sys_root: Path) -> dict[int, str]:
    """DRM render minor -> gfx target, from /sys/class/kfd/kfd/topology/nodes/*/properties.

    `gfx_target_version` is major * 10000 + minor * 100 + stepping, the last two written in
    hex in the target's name: 110501 is gfx1151, 90010 gfx90a. CPU nodes have 0.
    """
    targets = {}
    for props in (sys_root / "class" / "kfd" / "kfd" / "topology" / "nodes").glob("*/properties"):
        values = dict(
            line.split(maxsplit=1) for line in (_read(str(props)) or "").splitlines() if " " in line
        )
        try:
            version, minor = int(values.get("gfx_target_version", "0")), int(values["drm_render_minor"])
        except (KeyError, ValueError):
            continue
        if version:
            targets[minor] = f"gfx{version // 10000}{(version // 100) % 100:x}{version % 100:x}"
    return targets


_GPU_NODES = ("/dev/kfd", "/dev/dri/renderD", "/dev/nvidia")


def gpu_processes(exclude: set[int] | None = None) -> list[dict[str, Any]]:
    """Processes holding a GPU device open (co-tenants that can disturb a measurement).

    Only processes whose /proc/<pid>/fd we may read are seen; run as root for all of them.
    """
    skip = exclude or {os.getpid()}
    holders = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            targets = {str(fd.readlink()) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        devices = sorted(t for t in targets if t.startswith(_GPU_NODES))
        if devices:
            holders.append(
                {
                    "pid": int(entry.name),
                    "command": _command(entry),
                    "devices": devices,
                }
            )
    return holders


def _command(entry: Path) -> str:
    """Another process's command line as run.json keeps it: its secrets (an API key passed to a
    server that holds the GPU) redacted, argument by argument."""
    argv = (_read(str(entry / "cmdline")) or "").split("\0")
    return shlex.join(redact_argv([a for a in argv if a])) if any(argv) else ""


def collect(root: Path, label: str | None = None) -> dict[str, Any]:
    return {
        "host": {**host(), "label": label},
        "git": git(root),
        "flake_lock": flake_lock(root),
        "tools": {"nix": tool_version(["nix", "--version"])},
        "gpus": gpus(),
        "gpu_processes": gpu_processes(),
    }

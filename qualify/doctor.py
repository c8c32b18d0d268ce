"""`qualify doctor`: what this machine offers a qualification run, and what is missing."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from qualify.core import provenance


@dataclass(frozen=True)
class Probe:
    what: str
    ok: bool
    detail: str
    needed_for: str
    #: A run cannot go without it (the rest narrows what a run can measure).
    required: bool = False


def _version(argv: list[str]) -> tuple[bool, str]:
    if shutil.which(argv[0]) is None:
        return False, "not found on PATH"
    text = provenance.tool_version(argv)
    return (text is not None), text or "found, but `--version` failed"


def _kernel_log() -> tuple[bool, str]:
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return False, f"/dev/kmsg: {exc.strerror}"
    os.close(fd)
    return True, "/dev/kmsg readable"


def _compact_memory() -> tuple[bool, str]:
    path = Path("/proc/sys/vm/compact_memory")
    if not path.exists():
        return False, "kernel has no /proc/sys/vm/compact_memory"
    if os.access(path, os.W_OK):
        return True, "writable"
    return False, "not writable (run as root to apply memory pressure)"


def probes() -> list[Probe]:
    out: list[Probe] = []
    ok, detail = _version(["nix", "--version"])
    out.append(Probe("nix", ok, detail, "building arms (build stage)", required=True))
    for compiler in ("gcc", "clang", "clang-19", "nvcc"):
        ok, detail = _version([compiler, "--version"])
        out.append(Probe(compiler, ok, detail, "example builds, kernel objects"))
    gpus = provenance.gpus()
    out.append(
        Probe(
            "GPUs",
            bool(gpus),
            "; ".join(provenance.describe_gpu(g) for g in gpus) or "none visible",
            "GPU stages",
        )
    )
    holders = provenance.gpu_processes()
    out.append(
        Probe(
            "GPU co-tenants",
            not holders,
            f"{len(holders)} process(es) hold a GPU device" if holders else "none seen",
            "clean measurements",
        )
    )
    ok, detail = _kernel_log()
    out.append(Probe("kernel log", ok, detail, "soak: amdgpu/KFD/Xid watch"))
    ok, detail = _compact_memory()
    out.append(Probe("compact_memory", ok, detail, "soak: memory pressure"))
    return out

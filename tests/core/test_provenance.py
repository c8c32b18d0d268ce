"""GPU identity for the run's provenance, from nvidia-smi.

No NVIDIA GPU exists on the machines the tests run on, so a stand-in `nvidia-smi` prints what
the real one printed on the H200 of the recorded CUDA run (examples/llama-cpp-cuda/recorded/
host/host.txt): its banner and its CSV answer to the query qualify sends. The parsing, the
target and the line the reports print are qualify's own.
"""

from __future__ import annotations

from pathlib import Path

from qualify.core.provenance import describe_gpu, nvidia_gpus

RECORDED = (
    Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda" / "recorded" / "host" / "host.txt"
)


def stand_in(tmp_path: Path, csv: str, exit_code: int = 0) -> str:
    lines = RECORDED.read_text().splitlines()
    banner = "\n".join(line for line in lines if line.startswith(("|", "+")))
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) printf '%s\\n' '{csv}'; exit {exit_code} ;;\n"
        f"  *) cat <<'EOF'\n{banner}\nEOF\n"
        "esac\n"
    )
    script.chmod(0o755)
    return str(script)


def test_the_h200_is_named_with_its_target_driver_and_cuda(tmp_path: Path) -> None:
    csv = next(line for line in RECORDED.read_text().splitlines() if line.startswith("0, NVIDIA H200"))
    (gpu,) = nvidia_gpus(stand_in(tmp_path, csv))
    assert gpu["name"] == "NVIDIA H200" and gpu["target"] == "sm_90"
    assert (gpu["driver"], gpu["cuda_driver"], gpu["memory_mib"]) == ("580.159.04", "13.0", 143771)
    assert describe_gpu(gpu) == (
        "NVIDIA H200 (sm_90), driver 580.159.04, CUDA 13.0 (driver), 143771 MiB, VBIOS 96.00.A5.00.1A"
    )


def test_no_driver_or_no_tool_is_no_gpu(tmp_path: Path) -> None:
    assert nvidia_gpus(stand_in(tmp_path, "", exit_code=9)) == []
    assert nvidia_gpus(str(tmp_path / "absent" / "nvidia-smi")) == []


def test_a_sysfs_card_is_described_without_vendor_tools() -> None:
    card = {"card": "card0", "vendor": "AMD", "device": "0x1586", "driver": "amdgpu"}
    assert describe_gpu(card) == "card0: AMD 0x1586 (amdgpu)"

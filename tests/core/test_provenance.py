"""GPU identity for the run's provenance, from nvidia-smi.

No NVIDIA GPU exists on the machines the tests run on, so a stand-in `nvidia-smi` prints what
the real one printed on the H200 of the recorded CUDA run (examples/llama-cpp-cuda/recorded/
host/host.txt): its banner and its CSV answer to the query qualify sends. The parsing, the
target and the line the reports print are qualify's own.
"""

from __future__ import annotations

from pathlib import Path

from qualify.core.provenance import _kfd_targets, describe_gpu, nvidia_gpus, sysfs_gpus

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
    assert describe_gpu(card) == "card0: AMD 0x1586, driver amdgpu"


def test_an_amd_gpus_target_and_firmware_come_from_sysfs(tmp_path: Path) -> None:
    """No AMD GPU exists here: a sysfs tree laid out as amdgpu and KFD lay it out stands in
    (a Strix Halo iGPU, gfx1151, on render minor 128; a CPU node with target 0)."""
    device = tmp_path / "devices" / "0000:c3:00.0"
    (device / "drm" / "renderD128").mkdir(parents=True)
    (device / "fw_version").mkdir()
    (device / "vendor").write_text("0x1002\n")
    (device / "device").write_text("0x1586\n")
    (device / "vbios_version").write_text("113-STRXLGEN-001\n")
    (device / "fw_version" / "mec_fw_version").write_text("0x0000001f\n")
    (device / "fw_version" / "sos_fw_version").write_text("0x00480d66\n")
    drm = tmp_path / "class" / "drm"
    (drm / "card1").mkdir(parents=True)
    (drm / "card1" / "device").symlink_to(device)
    (drm / "card1-eDP-1").mkdir()
    nodes = tmp_path / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for node, props in {
        "0": "gfx_target_version 0\ndrm_render_minor 0\n",
        "1": "cpu_cores_count 0\ngfx_target_version 110501\ndrm_render_minor 128\n",
    }.items():
        (nodes / node).mkdir(parents=True)
        (nodes / node / "properties").write_text(props)
    (gpu,) = sysfs_gpus(tmp_path)
    assert (gpu["vendor"], gpu["target"], gpu["vbios"]) == ("AMD", "gfx1151", "113-STRXLGEN-001")
    assert gpu["firmware"] == {"mec": "0x0000001f", "sos": "0x00480d66"}
    assert describe_gpu(gpu) == (
        "card1: AMD 0x1586 (gfx1151), driver ?, VBIOS 113-STRXLGEN-001, firmware mec 0x0000001f sos 0x00480d66"
    )


def test_kfd_target_versions_name_their_targets(tmp_path: Path) -> None:
    nodes = tmp_path / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for minor, version in ((128, 90010), (129, 90402), (130, 100300), (131, 120001)):
        (nodes / str(minor)).mkdir(parents=True)
        (nodes / str(minor) / "properties").write_text(
            f"gfx_target_version {version}\ndrm_render_minor {minor}\n"
        )
    assert sysfs_gpus(tmp_path) == []  # no DRM cards: targets alone name no GPU
    assert _kfd_targets(tmp_path) == {128: "gfx90a", 129: "gfx942", 130: "gfx1030", 131: "gfx1201"}

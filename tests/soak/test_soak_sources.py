"""The soak's telemetry and kernel-log sources that this machine lacks the hardware for.

Stand-ins, because there is no GPU here: an amdgpu sysfs tree (`mem_info_*_used` files as the
driver writes them), DRM fdinfo files in the formats amdgpu prints (kernel 6.6's
`amdgpu_show_fdinfo`, and newer kernels' standard `drm-resident-*` keys with the old `drm-memory-*`
alias), and an `nvidia-smi` script answering the two queries the sampler makes in the CSV form
the real tool prints. The kernel-log fallback is the real `dmesg --follow-new` on the real
kernel log, reached by pointing the watcher at a kmsg path that does not exist.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from qualify.core import containment, process, redaction
from qualify.soak.kernellog import KernelLogWatcher
from qualify.soak.telemetry import amdgpu_memory, fdinfo_memory, nvidia_memory

GIB = 1024**3
MIB = 1024**2

# amdgpu_show_fdinfo, kernel 6.6: KiB, legacy keys only.
FDINFO_6_6 = """pos:\t0
flags:\t02100002
mnt_id:\t26
ino:\t1054
pasid:\t32770
drm-driver:\tamdgpu
drm-pdev:\t0000:03:00.0
drm-client-id:\t17
drm-memory-vram:\t524288 KiB
drm-memory-gtt: \t2048 KiB
drm-memory-cpu: \t0 KiB
amd-memory-visible-vram:\t0 KiB
amd-evicted-vram:\t0 KiB
drm-engine-compute:\t5123456 ns
"""

# Newer kernels: drm_print_memory_stats per region (sizes in the largest whole unit), then the
# legacy keys as aliases of drm-resident-*.
FDINFO_NEWER = """pos:\t0
flags:\t02100002
drm-driver:\tamdgpu
drm-client-id:\t23
drm-pdev:\t0000:03:00.0
pasid:\t32771
drm-total-vram:\t1024 MiB
drm-shared-vram:\t0
drm-resident-vram:\t1024 MiB
drm-purgeable-vram:\t0
drm-total-gtt:\t4 MiB
drm-shared-gtt:\t0
drm-resident-gtt:\t4 MiB
drm-purgeable-gtt:\t0
drm-total-cpu:\t0
drm-resident-cpu:\t0
drm-memory-vram:\t1048576 KiB
drm-memory-gtt: \t4096 KiB
drm-memory-cpu: \t0 KiB
amd-evicted-vram:\t0 KiB
amd-requested-vram:\t1048576 KiB
amd-requested-gtt:\t4096 KiB
"""


def _fdinfo(proc: Path, pid: int, files: dict[str, str]) -> None:
    folder = proc / str(pid) / "fdinfo"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_amdgpu_sysfs_sums_cards_and_skips_the_rest(tmp_path: Path) -> None:
    """Two amdgpu cards summed; a connector directory and a non-amdgpu card (no mem_info files)
    left out; nothing at all when there is no amdgpu card."""
    for card, vram, gtt in (("card0", 3 * GIB, 64 * MIB), ("card1", 1 * GIB, 16 * MIB)):
        device = tmp_path / card / "device"
        device.mkdir(parents=True)
        (device / "mem_info_vram_used").write_text(f"{vram}\n")
        (device / "mem_info_gtt_used").write_text(f"{gtt}\n")
    (tmp_path / "card0-DP-1").mkdir()
    (tmp_path / "card2" / "device").mkdir(parents=True)
    assert amdgpu_memory(tmp_path) == {
        "gpu_vram_bytes": 4 * GIB,
        "gpu_gtt_bytes": 80 * MIB,
        "gpu_total_bytes": 4 * GIB + 80 * MIB,
    }
    assert amdgpu_memory(tmp_path / "card2") == {}


def test_fdinfo_reads_the_old_keys_alone(tmp_path: Path) -> None:
    _fdinfo(tmp_path, 100, {"5": FDINFO_6_6, "0": "pos:\t0\nflags:\t02\n"})
    assert fdinfo_memory([100], tmp_path) == {"proc_vram_bytes": 512 * MIB, "proc_gtt_bytes": 2 * MIB}


def test_fdinfo_counts_the_resident_key_not_its_alias_too(tmp_path: Path) -> None:
    """Newer kernels print drm-resident-vram and drm-memory-vram for the same memory: 1 GiB, not 2."""
    _fdinfo(tmp_path, 100, {"7": FDINFO_NEWER})
    assert fdinfo_memory([100], tmp_path) == {"proc_vram_bytes": GIB, "proc_gtt_bytes": 4 * MIB}


def test_fdinfo_counts_each_client_once(tmp_path: Path) -> None:
    """The same client open on two descriptors and inherited by a child process counts once;
    the same client id on another device is another client."""
    other_device = FDINFO_NEWER.replace("0000:03:00.0", "0000:04:00.0")
    _fdinfo(tmp_path, 100, {"7": FDINFO_NEWER, "8": FDINFO_NEWER})
    _fdinfo(tmp_path, 101, {"3": FDINFO_NEWER, "4": other_device})
    assert fdinfo_memory([100, 101], tmp_path) == {"proc_vram_bytes": 2 * GIB, "proc_gtt_bytes": 8 * MIB}
    assert fdinfo_memory([999], tmp_path) == {}


def test_nvidia_smi_device_and_own_process_memory(tmp_path: Path) -> None:
    """Two GPUs' memory.used summed; of the compute apps, only the server's pids count (MiB);
    an app whose memory reads [N/A] (as under MIG or in some containers) is skipped; where none
    of the server's pids is listed its own memory is missing, not 0. The script stands in for
    nvidia-smi, which needs an NVIDIA GPU."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=memory.used) printf '1200\\n800\\n' ;;\n"
        "  --query-compute-apps=pid,used_gpu_memory) printf '4242, 700\\n4243, [N/A]\\n77, 300\\n' ;;\n"
        "  *) exit 2 ;;\n"
        "esac\n"
    )
    tool.chmod(0o755)
    assert nvidia_memory([4242, 4243], str(tool)) == {
        "nvidia_used_bytes": 2000 * MIB,
        "nvidia_proc_bytes": 700 * MIB,
    }
    assert nvidia_memory([5000, 5001], str(tool)) == {"nvidia_used_bytes": 2000 * MIB}
    tool.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert nvidia_memory([4242], str(tool)) == {}


def test_nvidia_smi_runs_outside_the_containment(tmp_path: Path) -> None:
    """Inside a run's containment a command has a PID namespace of its own, where the driver
    names none of the host's processes: qualify's nvidia-smi runs outside it, in the PID
    namespace where the sampler found the server's pids. The stand-in writes its own pid as its
    namespace shows it: 1 or 2 inside a new one, the host's pid outside."""
    tool = tmp_path / "nvidia-smi"
    marker = tmp_path / "pid"
    tool.write_text(f"#!/bin/sh\necho $$ > {marker}\necho 10\n")
    tool.chmod(0o755)
    root = tmp_path / "run"
    (root / "stage").mkdir(parents=True)
    with containment.contained(root, "nvidia-outside") as jail, containment.writing(root / "stage"):
        process.capture([str(tool)])
        contained = int(marker.read_text())
        nvidia_memory([], str(tool))
        outside = int(marker.read_text())
    if contained > 2:
        pytest.skip(f"this host gives commands no PID namespace of their own ({jail.describe()})")
    assert outside > 2, "qualify's nvidia-smi ran in the commands' PID namespace"


def _wait_for(path: Path, text: str, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.skipif(not os.access("/dev/kmsg", os.W_OK), reason="writing the kernel log needs root")
@pytest.mark.skipif(shutil.which("dmesg") is None, reason="dmesg is not installed")
@pytest.mark.parametrize("kmsg", ["/dev/kmsg", "/nonexistent/kmsg"])
def test_the_kernel_log_is_followed_from_kmsg_or_dmesg(
    tmp_path: Path, kmsg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line written to the kernel log while the watcher runs reaches its file, through
    /dev/kmsg or, when that cannot be opened, through `dmesg --follow-new`; a line written before
    it started does not. The marker is a benign line that matches no driver pattern.

    The secrets earlier tests of this process remembered are set aside: a line of dmesg's ending
    in what could begin one of their encoded forms is held until the next line (redaction across
    lines), and the kernel may write none before the watch ends."""
    for name, empty in (("_known", ()), ("_forms", ()), ("_starts", frozenset()), ("_alphabet", frozenset())):
        monkeypatch.setattr(redaction, name, empty)
    before = f"qualify kernel-log test, before the watcher: {uuid.uuid4()}"
    during = f"qualify kernel-log test, during the watch: {uuid.uuid4()}"
    Path("/dev/kmsg").write_text(before + "\n")
    out = tmp_path / "kernel.log"
    watcher = KernelLogWatcher(out, dmesg_log=tmp_path / "dmesg.log", env=dict(os.environ), kmsg=Path(kmsg))
    with watcher:
        time.sleep(0.5)  # dmesg has started following
        Path("/dev/kmsg").write_text(during + "\n")
        assert _wait_for(out, during), (watcher.source, watcher.unavailable)
    assert watcher.source == ("/dev/kmsg" if kmsg == "/dev/kmsg" else "dmesg --follow-new")
    assert before not in out.read_text() and watcher.lines >= 1
    if kmsg != "/dev/kmsg":
        assert "# server stopped" in (tmp_path / "dmesg.log").read_text()  # dmesg is not left running


def test_without_kmsg_or_dmesg_the_log_is_not_watched(tmp_path: Path) -> None:
    watcher = KernelLogWatcher(
        tmp_path / "kernel.log", dmesg_log=tmp_path / "dmesg.log", env={"PATH": str(tmp_path)},
        kmsg=tmp_path / "no-kmsg",
    )  # fmt: skip
    with watcher:
        pass
    assert watcher.source is None
    assert watcher.unavailable is not None and "dmesg not found" in watcher.unavailable

"""Whether a GPU host contains qualify's commands as a CPU host does, and whether the GPU is
still reached from inside: run on the GPU host, from the repository root, once an arm is built.

    python3 examples/llama-cpp-cuda/offline/gpu_contained.py ARM_OUT MODEL [REPORT.json]

Inside one run's containment (`qualify.core.containment`, exactly as `qualify run` sets it up,
with `QUALIFY_CONTAINMENT` as the host's environment gives it) it starts, each as a checked
command: `nvidia-smi -L`; NVML from Python (what the bench's telemetry reads); the arm's
`llama-bench` on the model with every layer on the GPU (a 64-token prompt, one repetition);
and a write into the run's folder outside the check's own, which the mount namespace must
refuse. It prints what each did and writes the same as JSON, and exits 1 if any expectation
failed: the GPU named from inside, llama-bench on the CUDA backend, the stray write refused
where a mount namespace was made (and found by the seal where none was).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from qualify.core import containment


def contained_output(argv: list[str], timeout: float = 120) -> tuple[int, str]:
    # PYTHONPATH as the host's step gives it: NVML's Python binding may be a bundled wheel.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    wrapped = containment.wrap(argv, env)
    done = subprocess.run(
        wrapped.argv, env=wrapped.env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def main(arm: Path, model: Path, report: Path | None) -> int:
    results: dict[str, object] = {}
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="qualify-gpu-contained-") as where:
        # A temporary folder is its owner's alone; commands run as another user (nobody) and
        # must reach their check's folder inside it, as they reach a run's.
        Path(where).chmod(0o755)
        root = Path(where) / "run"
        own = root / "60-bench" / "llama-bench"
        own.mkdir(parents=True)
        with containment.contained(root, "gpu-contained") as jail, containment.writing(own):
            results["containment"] = jail.describe()
            rc, out = contained_output(["nvidia-smi", "-L"])
            results["nvidia-smi"] = {"rc": rc, "output": out}
            if rc != 0 or "GPU 0" not in out:
                failed.append("nvidia-smi did not list the GPU from inside")
            nvml = (
                "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); "
                "print(pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))"
            )
            rc, out = contained_output([sys.executable, "-c", nvml])
            results["nvml"] = {"rc": rc, "output": out}
            if rc != 0:
                failed.append("NVML did not answer from inside")
            bench = [str(arm / "bin" / "llama-bench"), "-m", str(model), "-p", "64", "-n", "0", "-r", "1"]
            rc, out = contained_output([*bench, "-ngl", "99", "-o", "jsonl"], timeout=300)
            rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            results["llama-bench"] = {"rc": rc, "rows": rows, "tail": [] if rows else out.splitlines()[-5:]}
            if rc != 0 or not rows or "CUDA" not in str(rows[0].get("backends", "")):
                failed.append("llama-bench did not run on the CUDA backend from inside")
            stray = root / "run.json"
            rc, out = contained_output(["sh", "-c", f"echo forged > {stray}"])
            own_write = contained_output(["sh", "-c", f"echo kept > {own / 'unit.out'}"])[0]
            results["stray write"] = {"rc": rc, "output": out, "landed": stray.exists()}
            results["own folder write"] = {"rc": own_write}
            if jail.box.read_only and stray.exists():
                failed.append("a command wrote the run's folder outside its check's, mount namespace and all")
            if own_write != 0:
                failed.append("a command could not write its own check's folder")
    results["failed"] = failed
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if report is not None:
        report.write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) == 4 else None))

"""The example's run set, its bench's units together and one after another, in turns: how often
the A/A control passes and at how many pairs the bench decides (README.md, "A host of two
speeds").

Two committed copies of this folder, one as it is (`together = true`, 20 samples of 1.25 ms)
and one with its units in turn (5 samples of 5 ms, valued by their median, the design before),
each `qualify run --candidate clang19` N times, alternating. Needs nix and the host's gcc 12
and clang 19, as the example does; about a minute a run set.

    .venv/bin/python examples/c-kernels/designs.py 6
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
IN_TURN = {"together = true\n": "", "vars = { reps = 20, rep_ms = 1.25 }": "vars = { reps = 5, rep_ms = 5 }"}


def copy(root: Path, name: str, edits: dict[str, str]) -> Path:
    folder = root / name
    shutil.copytree(HERE, folder, ignore=shutil.ignore_patterns("runs", "result", "result-*", "__pycache__"))
    stage = folder / "stages" / "60-bench.toml"
    text = stage.read_text()
    for old, new in edits.items():
        if old not in text:
            sys.exit(f"{stage}: {old!r} is not in the plan any more: update IN_TURN")
        text = text.replace(old, new)
    stage.write_text(text)
    who = ["-c", "user.name=q", "-c", "user.email=q@q"]
    for args in (["init", "-q"], ["add", "-A"], [*who, "commit", "-qm", name]):
        subprocess.run(["git", *args], cwd=folder, check=True)
    return folder


def summary(run: Path) -> str:
    schedule = json.loads((run / "60-bench" / "ck-bench" / "schedule.json").read_text())
    control = json.loads((run / "positive-pinned" / "60-bench" / "ck-bench" / "result.json").read_text())
    return (
        f"A/A {control['verdict']:12} {schedule['pairs']:2} pairs, bench {schedule['duration_s']:5.1f} s; "
        f"{schedule['stop_reason'][:60]}"
    )


def main(sets: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # as root, qualify's commands run as nobody, who must reach the copies
        designs = {"together": copy(root, "together", {}), "in turn": copy(root, "in-turn", IN_TURN)}
        for n in range(1, sets + 1):
            for name, folder in designs.items():
                runs = root / f"runs-{folder.name}"
                command = [sys.executable, "-m", "qualify", "run", "-C", str(folder), "--runs-dir", str(runs)]
                done = subprocess.run([*command, "--candidate", "clang19"], check=False, capture_output=True)
                made = [p for p in runs.iterdir() if (p / "run.json").is_file()] if runs.is_dir() else []
                if not made:
                    sys.exit(f"{name}: no run set was made:\n{done.stderr.decode(errors='replace')[-3000:]}")
                latest = max(made)
                print(f"{n} {name:9} exit {done.returncode}: {summary(latest)}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)

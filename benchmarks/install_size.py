"""The installed size of qualify's core and of the core with the stages' libraries.

Builds the wheel from this checkout, installs it into two fresh virtual environments (the core:
what `show`, `runs`, `report` and `merge` need; `qualify[stages]`: what `qualify run` needs too)
and prints each environment's size on disk. The baseline is what every install took before the
stages' libraries became an extra: the size of `qualify[stages]`.

    python benchmarks/install_size.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def install(wheel: Path, extra: str, where: Path) -> float:
    venv.EnvBuilder(with_pip=False).create(where)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install", "-q", target],
        check=True,
    )
    # `qualify show` must start in the core alone.
    subprocess.run([str(where / "bin" / "qualify"), "--version"], check=True, capture_output=True)
    return size_mb(where)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dist = Path(tmp) / "dist"
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
            check=True,
            capture_output=True,
        )
        wheel = next(dist.glob("qualify-*.whl"))
        empty = Path(tmp) / "empty"
        venv.EnvBuilder(with_pip=False).create(empty)
        base = size_mb(empty)
        core = install(wheel, "", Path(tmp) / "core")
        full = install(wheel, "stages", Path(tmp) / "stages")
    print(f"an empty venv:           {base:7.0f} MB")
    print(f"qualify (core):          {core:7.0f} MB   show, runs, report, merge, plan, kinds, doctor")
    print(f"qualify[stages]:         {full:7.0f} MB   + run (baseline: every install before the split)")
    saved = full - core
    print(f"the core saves           {saved:7.0f} MB ({saved / full:.0%}) for a job that only merges")


if __name__ == "__main__":
    main()

"""A checked command that tries every way out of its containment qualify knows of, each for real,
and writes what became of each try (a JSON object: try -> "done" or "refused: why").

    hostile.py SAID RUN_DIR QUALIFY_PID_FILE ROOT_CGROUP SEAL_KEY TOKEN

It stands in for an engine's test gone hostile (there is no such engine to run). Every try
aims at the compile stage's records, which a run of tests/faults/test_privilege.py leaves FAIL:
- cgroup: a child writes its pid into the root cgroup's cgroup.procs, leaves its session, and
  keeps trying to rewrite the records for a minute (after qualify's end, if it outlives it);
- nsenter: enters qualify's mount namespace (/proc/<qualify>/ns/mnt) to write the records;
- proc-root: writes the records through /proc/<qualify>/root;
- remount: a mount namespace of its own (unshare -m, then unshare -Urm) where the run folder
  is remounted read-write;
- ptrace: attaches to qualify (PTRACE_ATTACH), as a debugger reading its memory would;
- core-pattern: writes /proc/sys/kernel/core_pattern (its own value back: nothing changes);
- seal-key: reads the key that authenticates the run's seal;
- record: writes the compile stage's stage.json directly.
"""

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

said_dir, run_dir, pid_file, root_cgroup, seal_key, token = sys.argv[1:7]
target = Path(run_dir) / "20-compile" / "stage.json"
said: dict[str, str] = {}


def tried(name: str, ok: bool, why: str = "") -> None:
    said[name] = "done" if ok else f"refused: {why}"


def forge(path: Path) -> None:
    """The compile stage's FAIL made PASS, in the file at `path` (the stage.json, reached some way)."""
    text = path.read_text()
    path.write_text(text.replace('"FAIL"', '"PASS"'))


deadline = time.monotonic() + 20
while not Path(pid_file).is_file() and time.monotonic() < deadline:
    time.sleep(0.05)
qualify = Path(pid_file).read_text().strip()

# cgroup: out of the command's cgroup, out of its session, and on at forging.
child = os.fork()
if child == 0:
    moved = "moved"
    try:
        Path(root_cgroup, "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        moved = f"refused: {exc}"
    Path(said_dir, f"{token}-cgroup").write_text(moved)
    os.setsid()
    os.execv(
        sys.executable,
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\n"
            "end = time.monotonic() + 60\n"
            "while time.monotonic() < end:\n"
            "    try:\n"
            "        p = pathlib.Path(sys.argv[1]); p.write_text(p.read_text().replace('\"FAIL\"', '\"PASS\"'))\n"
            "        pathlib.Path(sys.argv[2]).write_text('the escaped child wrote the records')\n"
            "    except OSError:\n"
            "        pass\n"
            "    time.sleep(0.2)\n",
            str(target),
            str(Path(said_dir, f"{token}-escapee")),
            token,
        ],
    )
deadline = time.monotonic() + 10
while not Path(said_dir, f"{token}-cgroup").is_file() and time.monotonic() < deadline:
    time.sleep(0.05)
moved = Path(said_dir, f"{token}-cgroup").read_text()
tried("cgroup", moved == "moved", moved)

done = subprocess.run(
    ["nsenter", f"--mount=/proc/{qualify}/ns/mnt", "--", "/bin/sh", "-c", f"echo >> {target}"],
    capture_output=True,
    text=True,
    check=False,
)
tried("nsenter", done.returncode == 0, done.stderr.strip())

try:
    forge(Path(f"/proc/{qualify}/root{target}"))
    tried("proc-root", True)
except OSError as exc:
    tried("proc-root", False, str(exc))

for name, unshare in (("remount", ["unshare", "-m"]), ("remount-userns", ["unshare", "-Urm"])):
    script = (
        f"mount -o remount,bind,rw {run_dir} 2>/dev/null; mount -o remount,rw {run_dir}; echo >> {target}"
    )
    done = subprocess.run([*unshare, "/bin/sh", "-c", script], capture_output=True, text=True, check=False)
    tried(name, done.returncode == 0, done.stderr.strip()[-200:])

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(16, int(qualify), None, None) == 0:  # PTRACE_ATTACH
    time.sleep(0.1)
    libc.ptrace(17, int(qualify), None, None)  # PTRACE_DETACH: let it go on
    tried("ptrace", True)
else:
    tried("ptrace", False, os.strerror(ctypes.get_errno()))

try:
    pattern = Path("/proc/sys/kernel/core_pattern")
    pattern.write_text(pattern.read_text())
    tried("core-pattern", True)
except OSError as exc:
    tried("core-pattern", False, str(exc))

try:
    tried("seal-key", bool(Path(seal_key).read_bytes()))
except OSError as exc:
    tried("seal-key", False, str(exc))

try:
    forge(target)
    tried("record", True)
except OSError as exc:
    tried("record", False, str(exc))

Path(said_dir, f"{token}.json").write_text(json.dumps(said))

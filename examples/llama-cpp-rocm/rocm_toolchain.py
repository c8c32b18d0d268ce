#!/usr/bin/env python3
"""A ROCm toolchain root from Debian's packages pinned by sha256, for the nix store.

    python rocm_toolchain.py make VERSION DEST [--cache DIR]   # make DEST (or reuse it), print its NAR hash
    python rocm_toolchain.py check VERSION DEST                # verify DEST against the pinned NAR hash
    python rocm_toolchain.py pin VERSION ROOT                  # write debs/rocm-VERSION.txt from a root

VERSION is a HIP release pinned below: 6.4.3 (Debian sid: hipcc 7.0.2 on clang 21, rocBLAS and
hipBLAS 6.4.4, the pinned toolchain) or 7.2.4 (Debian experimental: hipcc, rocBLAS and hipBLAS
7.2.4 on clang 22, the candidate). Both need a newer glibc than the build host's, so each is a
whole root (sid's libc, libstdc++, cmake, ninja, clang and ROCm), entered by the builder with
bubblewrap (enter-root.sh).

Pinning. `pin` reads a root that `debootstrap --variant=minbase sid ROOT` and apt made (the
README gives the commands) and lists every installed package with its version, its pool file
and the sha256 the archive's Packages index gives for it, in debs/rocm-VERSION.txt. `make`
downloads exactly those files from the archive (or takes them from `--cache`), checks each
sha256 and unpacks them with `dpkg-deb --fsys-tarfile` into DEST: no maintainer script runs, so
the tree is a function of the .debs alone. Debian's archive keeps only current versions: when
one of the pinned files is gone, `make` says which, and the pins are remade from a new root.

Trimmed (what no build reads): rocBLAS's per-target kernel library
(usr/lib/x86_64-linux-gnu/rocblas/VERSION/library: 2.9 GB of Tensile code objects in 6.4.4, 0.7 GB in
7.2.4, loaded by rocBLAS at run time, never by a compiler or linker), documentation, manual
pages, translations and lintian overrides. A run on an AMD host that calls rocBLAS must give it
those kernels (ROCBLAS_TENSILE_LIBPATH) from its own ROCm of the same version.

The tree is deterministic: every mtime 1 (the store's), folders 0755, files 0755/0644 from their
executable bit, the merged-/usr links (bin, lib, lib64, sbin -> usr/...) and DEBS, the pinned
list it was made of, written last. Its NAR hash is pinned here; add it to the store with

    nix-store --add-fixed --recursive sha256 DEST
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ARCHIVE = "http://deb.debian.org/debian"


class Deb(NamedTuple):
    name: str
    version: str
    arch: str
    sha256: str
    filename: str  # the pool path, relative to the archive's root


class Toolchain(NamedTuple):
    suite: str  # where its ROCm packages come from
    nar_sha256: str  # nix base32, as `nix-hash --type sha256 --base32 DEST` prints it


TOOLCHAINS: dict[str, Toolchain] = {
    "6.4.3": Toolchain("sid", "0j6vwh4cx4iv94y5fb3ry3c6skvr9qfdlqz7la7ksqpnsnanq5h5"),
    "7.2.4": Toolchain("experimental", "0b63y2z1ny31fmvz0r6hn7899yxv90f64krwjxzbkqhgx443cmif"),
}
PINNED, CANDIDATE = "6.4.3", "7.2.4"

# Paths (relative, as dpkg-deb's tar stream names them) that no build reads.
TRIMMED = (
    "./usr/lib/x86_64-linux-gnu/rocblas/*/library",
    "./usr/share/doc",
    "./usr/share/man",
    "./usr/share/info",
    "./usr/share/locale",
    "./usr/share/lintian",
)
_MERGED_USR = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
_MTIME = 1
_ATTEMPTS = 4  # per file: resolvers and mirrors drop a few of many parallel requests
_MANIFEST = "DEBS"


class ToolchainError(RuntimeError):
    """The packages could not be had, or a tree is not the pinned one."""


def pins_file(version: str) -> Path:
    return HERE / "debs" / f"rocm-{version}.txt"


def debs(version: str) -> list[Deb]:
    """The pinned .debs of `version`, from debs/rocm-VERSION.txt (`name version arch sha256 pool-path`)."""
    _toolchain(version)
    path = pins_file(version)
    if not path.is_file():
        raise ToolchainError(f"{path}: missing; make it with `rocm_toolchain.py pin {version} ROOT`")
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 5 or not re.fullmatch(r"[0-9a-f]{64}", fields[3]):
            raise ToolchainError(f"{path}:{number}: expected `name version arch sha256 pool-path`")
        found.append(Deb(*fields))
    return found


def manifest(version: str) -> str:
    """The DEBS file of a complete tree of `version`."""
    return "".join(f"{d.name} {d.version} {d.arch} sha256:{d.sha256}\n" for d in debs(version))


def is_complete(version: str, tree: Path) -> bool:
    marker = tree / _MANIFEST
    return marker.is_file() and marker.read_text() == manifest(version) and check(version, tree) is None


def ensure_tree(version: str, dest: Path, cache: Path | None = None) -> Path:
    """DEST as the pinned tree of `version`: reused when it is, else made anew from the .debs
    (downloaded to `cache` unless there already). One process makes it; others wait."""
    if is_complete(version, dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with (dest.parent / f".{dest.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(version, dest):
            return dest
        files = download(version, cache or default_cache())
        partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            unpack(version, files, partial)
            if dest.exists():
                _remove(dest)
            partial.rename(dest)
        finally:
            if partial.exists():
                _remove(partial)
    # The .debs had their pinned sha256; a different tree means the unpacking is not what it was.
    problem = check(version, dest)
    if problem:
        raise ToolchainError(problem)
    return dest


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qualify" / "rocm-debs"


def download(version: str, cache: Path, jobs: int = 4) -> list[Path]:
    """The pinned .debs of `version` in `cache`: files already there with the pinned sha256 are
    used as they are; the others are fetched from the archive, `jobs` at a time (one stream from
    the archive's mirrors runs at a few MB/s), retried on network errors, and checked."""
    cache.mkdir(parents=True, exist_ok=True)
    pinned = debs(version)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda deb: _fetch(version, deb, cache), pinned))


def _fetch(version: str, deb: Deb, cache: Path) -> Path:
    path = cache / Path(deb.filename).name
    if path.is_file() and _sha256(path) == deb.sha256:
        return path
    url = f"{ARCHIVE}/{deb.filename}"
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    for attempt in range(_ATTEMPTS):
        try:
            with urllib.request.urlopen(url, timeout=60) as response, part.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
            break
        except urllib.error.HTTPError as exc:  # the archive answered: the file is not there
            part.unlink(missing_ok=True)
            raise ToolchainError(
                f"{deb.name} {deb.version}: {url}: {exc}. Debian's archive keeps current versions "
                f"only: it has moved on; remake {pins_file(version).name} (README, 'Pinning')"
            ) from exc
        except (urllib.error.URLError, OSError) as exc:  # name resolution, a dropped connection
            part.unlink(missing_ok=True)
            if attempt + 1 == _ATTEMPTS:
                tried = f"{_ATTEMPTS} attempts"
                raise ToolchainError(f"{deb.name} {deb.version}: {url}: {exc} ({tried})") from exc
            time.sleep(2**attempt)
    if _sha256(part) != deb.sha256:
        part.unlink()
        raise ToolchainError(f"{url}: sha256 is not the pinned {deb.sha256}")
    part.rename(path)
    return path


def unpack(version: str, files: list[Path], tree: Path) -> None:
    """The .debs' contents, less TRIMMED, in pinned order into the empty folder `tree`."""
    excludes = [f"--exclude={p}" for p in TRIMMED]
    for path in files:
        deb = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(path)], stdout=subprocess.PIPE)
        tar = subprocess.run(
            ["tar", "-x", "-C", str(tree), "--no-same-owner", "--no-same-permissions", *excludes],
            stdin=deb.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        if deb.stdout is not None:
            deb.stdout.close()
        if deb.wait() or tar.returncode:
            raise ToolchainError(f"{path}: could not be unpacked: {tar.stderr.strip()[-2000:]}")
    for name, target in _MERGED_USR.items():
        link = tree / name
        if not link.is_symlink():
            if link.exists():
                raise ToolchainError(f"{link}: a package ships it as a folder, not the merged-/usr link")
            link.symlink_to(target)
    (tree / _MANIFEST).write_text(manifest(version))
    normalise(tree)


def normalise(tree: Path) -> None:
    """Modes and mtimes as the store has them, so that the NAR hash depends on content alone."""
    for root, dirs, names in os.walk(tree, topdown=False):
        for name in names + dirs:
            item = Path(root) / name
            if not item.is_symlink():
                mode = item.stat().st_mode
                item.chmod(0o755 if item.is_dir() or mode & 0o100 else 0o644)
            os.utime(item, (_MTIME, _MTIME), follow_symlinks=False)
    tree.chmod(0o755)
    os.utime(tree, (_MTIME, _MTIME))


def pin(version: str, root: Path) -> Path:
    """debs/rocm-VERSION.txt from the packages installed in `root` (its dpkg status and apt
    lists): each with the pool path and sha256 of the archive's Packages index."""
    _toolchain(version)
    installed = _installed(root / "var" / "lib" / "dpkg" / "status")
    index: dict[tuple[str, str, str], tuple[str, str]] = {}
    for lists in sorted((root / "var" / "lib" / "apt" / "lists").glob("*_Packages")):
        for stanza in _stanzas(lists.read_text()):
            key = (stanza["Package"], stanza["Version"], stanza["Architecture"])
            index.setdefault(key, (stanza["SHA256"], stanza["Filename"]))
    lines = [f"# {version}: the packages of a root made as the README's 'Pinning' says"]
    for name, ver, arch in sorted(installed):
        if (name, ver, arch) not in index:
            raise ToolchainError(f"{root}: {name} {ver} ({arch}) is installed but in no Packages index")
        sha, filename = index[(name, ver, arch)]
        lines.append(f"{name} {ver} {arch} {sha} {filename}")
    out = pins_file(version)
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out


def _installed(status: Path) -> set[tuple[str, str, str]]:
    return {
        (s["Package"], s["Version"], s["Architecture"])
        for s in _stanzas(status.read_text())
        if s.get("Status", "").endswith(" installed")
    }


def _stanzas(text: str) -> list[dict[str, str]]:
    found = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            found.append(fields)
    return found


def _nar() -> ModuleType:
    """The NAR hash of the CUDA example's toolchain script (one implementation for both)."""
    name = "cuda_toolchain"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, HERE.parent / "llama-cpp-cuda" / "cuda_toolchain.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def nar_hash(path: Path) -> str:
    """sha256 of the NAR serialisation of `path`, in nix's base32: `nix-hash` where it is
    installed (several times faster on a 2 GB tree), else the Python implementation."""
    if shutil.which("nix-hash"):
        argv = ["nix-hash", "--type", "sha256", "--base32", str(path)]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    return str(_nar().nar_hash(path))


def check(version: str, tree: Path) -> str | None:
    """None when `tree` has the pinned NAR hash of `version`, else what is wrong."""
    if not tree.is_dir():
        return f"{tree}: no such folder"
    expected = _toolchain(version).nar_sha256
    found = nar_hash(tree)
    return None if found == expected else f"{tree}: NAR hash {found}, pinned {expected} for ROCm {version}"


def _toolchain(version: str) -> Toolchain:
    if version not in TOOLCHAINS:
        raise ToolchainError(f"ROCm {version} is not pinned here (pinned: {', '.join(TOOLCHAINS)})")
    return TOOLCHAINS[version]


def _remove(path: Path) -> None:
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            (Path(root) / name).chmod(0o755)  # the tree's folders may have been made read-only
    shutil.rmtree(path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("action", choices=("make", "check", "pin"))
    parser.add_argument("version", choices=sorted(TOOLCHAINS))
    parser.add_argument("dest", type=Path, help="the tree (make, check) or the apt-made root (pin)")
    parser.add_argument("--cache", type=Path, default=None, help="where the .debs are kept")
    args = parser.parse_args(argv)
    try:
        if args.action == "pin":
            print(f"{pin(args.version, args.dest)}: {len(debs(args.version))} packages")
            return 0
        if args.action == "make":
            ensure_tree(args.version, args.dest, args.cache)
        problem = check(args.version, args.dest)
    except ToolchainError as exc:
        print(f"rocm_toolchain: {exc}", file=sys.stderr)
        return 1
    if problem:
        print(f"rocm_toolchain: {problem}", file=sys.stderr)
        return 1
    print(f"{args.dest}: ROCm {args.version}, NAR sha256 {TOOLCHAINS[args.version].nar_sha256}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

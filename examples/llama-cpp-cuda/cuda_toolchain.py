#!/usr/bin/env python3
"""CUDA's compiler set from pinned PyPI wheels, unpacked into one tree for the nix store.

    python cuda_toolchain.py VERSION DEST [--cache DIR]   # make DEST (or reuse it), print its NAR hash
    python cuda_toolchain.py VERSION DEST --check         # verify DEST against the pinned NAR hash

VERSION is an nvcc release pinned below (13.0.88, the pinned toolchain; 13.5.37, the candidate).
Each wheel is pinned by version and sha256 and downloaded by pip with `--require-hashes` into a
cache (default ~/.cache/qualify/cuda-wheels), then unpacked with NVIDIA's wheel layout
`nvidia/cu13/{bin,nvvm,include,lib}` flattened, so DEST/bin/nvcc, DEST/nvvm/bin/cicc,
DEST/include and DEST/lib exist and nvcc's own nvcc.profile finds everything relative to itself.

Left out: libnvvm.so (63-75 MB; nvcc runs cicc, which does not load it), the wheels'
`.metadata` folders (NVIDIA's packaging scan records), their dist-info, and all of cuBLAS but
its headers (ggml's CUDA sources include cublas_v2.h; no kernel calls cuBLAS).

The tree is deterministic: files in sorted order, modes 0755/0644 from the wheels' executable
bits, every mtime 1 (the store's), lib/libcudart.so a symlink to the versioned library, and
WHEELS listing what it was made of (written last). There is no lib64: nvcc's nvcc.profile links
programs from lib64, so a link step needs `-L DEST/lib` (NVCC_APPEND_FLAGS does it for every
call); compiling to cubins, objects and PTX needs nothing. Its NAR hash is pinned here, and a
tree that has it is reused as it is; add it to the store as a fixed-output path with

    nix-store --add-fixed --recursive sha256 DEST

The wheels are the manylinux x86_64 builds; no other platform is pinned.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple


class Wheel(NamedTuple):
    name: str
    version: str
    sha256: str


class Toolchain(NamedTuple):
    wheels: tuple[Wheel, ...]
    nar_sha256: str  # nix base32, as `nix-hash --type sha256 --base32 DEST` prints it


def pins(table: str) -> tuple[Wheel, ...]:
    """Wheels from lines of `name version sha256`."""
    return tuple(Wheel(*line.split()) for line in table.strip().splitlines())


# CUDA 13.0 Update 2, the release the pinned nvcc 13.0.88 last shipped in (PyPI uploads of one
# release share a date: nvcc, nvvm and crt 13.0.88 came with Update 1 and are unchanged in
# Update 2, which brought cudart 13.0.96 and cuBLAS 13.1.0.3; cccl 13.0.85 is in both). It is
# also the set of a CUDA 13.0 installed from these wheels. cuobjdump was first published on PyPI
# with 13.2: the 13.0 tree carries the oldest one, 13.2.51; it reads cubins and has no part in
# what nvcc writes.
CUDA_13_0 = Toolchain(
    pins(
        """
        nvidia-cuda-nvcc       13.0.88     56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
        nvidia-nvvm            13.0.88     c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0
        nvidia-cuda-crt        13.0.88     2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4
        nvidia-cuda-runtime    13.0.96     7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
        nvidia-cuda-cccl       13.0.85     e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649
        nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
        nvidia-cublas          13.1.0.3    ee8722c1f0145ab246bccb9e452153b5e0515fd094c3678df50b2a0888b8b171
        """
    ),
    nar_sha256="0jp5vqnm1xck8pyw6awjajg85kc9g9z883h0m9sk953hz4xm7izr",
)

# CUDA 13.5: every wheel of the release (one upload date) at its own version; CCCL now has its
# own numbering (13.3.5.0.6 is the one that came with nvcc 13.5.37).
CUDA_13_5 = Toolchain(
    pins(
        """
        nvidia-cuda-nvcc       13.5.37     f5c4f7ead5d964fb4af42bbf1e6d3ec3c1e6e9d83b53749f691d387e7fcaa3a7
        nvidia-nvvm            13.5.37     c41bfa362e407405163f103c2229f0765f8cc2ed7d148b754dc77f228bf7e070
        nvidia-cuda-crt        13.5.37     e898b7f73d3035fa89915a3f7bf3b54a73e90249746111aed295822c4729bb29
        nvidia-cuda-runtime    13.5.37     df2b79a8852f10d1fef8c848489c49eebb5754051bf870202a862831412b179d
        nvidia-cuda-cccl       13.3.5.0.6  d5230098fa2df5021e1a00c0c4eee41797671a91119d31e892463e5ccf3ee326
        nvidia-cuda-cuobjdump  13.5.37     38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58
        nvidia-cublas          13.10.0.20  dcc6d63884c53d07e267ce7e6feac17b2538cebaafec5db865736c3e28e4dc84
        """
    ),
    nar_sha256="028zn6h7dwzs0vnhpcfmyxxvq0w182s49lzpzky3dlfibrvdx56d",
)

TOOLCHAINS: dict[str, Toolchain] = {"13.0.88": CUDA_13_0, "13.5.37": CUDA_13_5}
PINNED, CANDIDATE = "13.0.88", "13.5.37"

_PREFIX = "nvidia/cu13/"
_DROPPED = (".metadata/", "lib/libnvvm.so", "nvvm/lib64/libnvvm.so")
_ONLY = {"nvidia-cublas": "include/"}  # of these wheels, only what is under this folder
_MTIME = 1
_MANIFEST = "WHEELS"


class ToolchainError(RuntimeError):
    """The wheels could not be had, or a tree is not the pinned one."""


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qualify" / "cuda-wheels"


def manifest(version: str) -> str:
    """The WHEELS file of a complete tree of `version`."""
    return "".join(f"{w.name}=={w.version} sha256:{w.sha256}\n" for w in _toolchain(version).wheels)


def is_complete(version: str, tree: Path) -> bool:
    """Whether `tree` is the pinned tree of `version`, to the NAR hash (under a second)."""
    marker = tree / _MANIFEST
    return marker.is_file() and marker.read_text() == manifest(version) and check(version, tree) is None


def ensure_tree(version: str, dest: Path, cache: Path | None = None) -> Path:
    """DEST as the pinned tree of `version`: reused when it is, else made anew from the wheels
    (downloaded to `cache` unless there already). One process makes it; others wait."""
    if is_complete(version, dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with (dest.parent / f".{dest.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(version, dest):
            return dest
        wheels = download(version, cache or default_cache())
        partial = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            unpack(version, wheels, partial)
            if dest.exists():
                shutil.rmtree(dest)
            partial.rename(dest)
        finally:
            if partial.exists():
                shutil.rmtree(partial)
    return dest


def download(version: str, cache: Path) -> list[Path]:
    """The pinned wheels of `version` in `cache`: those already there with the pinned sha256 are
    used as they are (no network), the others fetched by pip with `--require-hashes`."""
    toolchain = _toolchain(version)
    found = {w: _cached(w, cache) for w in toolchain.wheels}
    missing = [w for w, path in found.items() if path is None]
    if missing:
        if sys.platform != "linux" or platform.machine() != "x86_64":
            raise ToolchainError(
                f"the CUDA wheels are pinned for linux x86_64, not {sys.platform} {platform.machine()}"
            )
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="cuda-wheels-") as requirements:
            requirements.write("".join(f"{w.name}=={w.version} --hash=sha256:{w.sha256}\n" for w in missing))
            requirements.flush()
            argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
            argv += ["--require-hashes", "--no-cache-dir", "--disable-pip-version-check", "-d", str(cache)]
            argv += ["-r", requirements.name]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise ToolchainError(f"pip could not download the CUDA {version} wheels:\n{tail}")
        found.update({w: _cached(w, cache) for w in missing})
    paths = []
    for wheel, path in found.items():
        if path is None:
            raise ToolchainError(f"{cache}: no {wheel.name} {wheel.version} wheel with sha256 {wheel.sha256}")
        paths.append(path)
    return paths


def _cached(wheel: Wheel, cache: Path) -> Path | None:
    stem = f"{wheel.name.replace('-', '_')}-{wheel.version}-"
    return next((p for p in sorted(cache.glob(f"{stem}*.whl")) if _sha256(p) == wheel.sha256), None)


def unpack(version: str, wheels: list[Path], tree: Path) -> None:
    """The wheels' nvidia/cu13 contents, flattened into the empty folder `tree`."""
    written: dict[str, tuple[str, bytes]] = {}  # path -> (wheel, sha256) to catch clashes
    for wheel, path in zip(_toolchain(version).wheels, wheels, strict=True):
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                rel = _kept(info.filename, _ONLY.get(wheel.name, ""))
                if rel is None or info.is_dir():
                    continue
                data = archive.read(info)
                digest = hashlib.sha256(data).digest()
                if rel in written and written[rel][1] != digest:
                    raise ToolchainError(f"{rel}: {wheel.name} and {written[rel][0]} differ")
                written[rel] = (wheel.name, digest)
                target = tree / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    target.unlink(missing_ok=True)
                    target.symlink_to(data.decode())
                    continue
                target.write_bytes(data)
                target.chmod(0o755 if mode & 0o111 else 0o644)
    lib = tree / "lib"
    if not (lib / "libcudart.so").exists():
        versioned = sorted(lib.glob("libcudart.so.*"))
        if versioned:
            (lib / "libcudart.so").symlink_to(versioned[-1].name)
    (tree / _MANIFEST).write_text(manifest(version))
    (tree / _MANIFEST).chmod(0o644)
    for item in [*sorted(tree.rglob("*"), reverse=True), tree]:
        if item.is_dir() and not item.is_symlink():
            item.chmod(0o755)
        os.utime(item, (_MTIME, _MTIME), follow_symlinks=False)


def _kept(name: str, only: str) -> str | None:
    if not name.startswith(_PREFIX):
        return None  # dist-info
    rel = name[len(_PREFIX) :]
    if rel.startswith(_DROPPED) or not rel.startswith(only):
        return None
    return rel


# --- NAR hash: nix's serialisation of a file tree, hashed; `nix-hash --type sha256` ------------


def _nar_string(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data + b"\0" * (-len(data) % 8)


def _nar(path: Path) -> Iterator[bytes]:
    yield _nar_string(b"(")
    if path.is_symlink():
        yield from map(_nar_string, (b"type", b"symlink", b"target", os.fsencode(path.readlink())))
    elif path.is_file():
        yield from map(_nar_string, (b"type", b"regular"))
        if path.stat().st_mode & stat.S_IXUSR:  # the one mode bit a NAR keeps
            yield from map(_nar_string, (b"executable", b""))
        size = path.stat().st_size
        yield _nar_string(b"contents") + size.to_bytes(8, "little")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                yield chunk
        yield b"\0" * (-size % 8)
    elif path.is_dir():
        yield from map(_nar_string, (b"type", b"directory"))
        for name in sorted(os.fsencode(p.name) for p in path.iterdir()):
            yield from map(_nar_string, (b"entry", b"(", b"name", name, b"node"))
            yield from _nar(path / os.fsdecode(name))
            yield _nar_string(b")")
    else:
        raise ToolchainError(f"{path}: neither a file, a folder nor a symlink")
    yield _nar_string(b")")


def nar_hash(path: Path) -> str:
    """sha256 of the NAR serialisation of `path`, in nix's base32."""
    digest = hashlib.sha256(_nar_string(b"nix-archive-1"))
    for chunk in _nar(path):
        digest.update(chunk)
    return nix_base32(digest.digest())


def nix_base32(data: bytes) -> str:
    alphabet = "0123456789abcdfghijklmnpqrsvwxyz"
    out = []
    for n in reversed(range((len(data) * 8 + 4) // 5)):
        bit, byte = n * 5 % 8, n * 5 // 8
        c = data[byte] >> bit
        if byte + 1 < len(data):
            c |= data[byte + 1] << (8 - bit)
        out.append(alphabet[c & 0x1F])
    return "".join(out)


def check(version: str, tree: Path) -> str | None:
    """None when `tree` has the pinned NAR hash of `version`, else what is wrong."""
    if not tree.is_dir():
        return f"{tree}: no such folder"
    expected = _toolchain(version).nar_sha256
    found = nar_hash(tree)
    return None if found == expected else f"{tree}: NAR hash {found}, pinned {expected} for CUDA {version}"


def _toolchain(version: str) -> Toolchain:
    if version not in TOOLCHAINS:
        raise ToolchainError(f"CUDA {version} is not pinned here (pinned: {', '.join(TOOLCHAINS)})")
    return TOOLCHAINS[version]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("version", choices=sorted(TOOLCHAINS))
    parser.add_argument("dest", type=Path)
    parser.add_argument("--cache", type=Path, default=None, help="where the wheels are kept")
    parser.add_argument("--check", action="store_true", help="only verify DEST against the pinned hash")
    args = parser.parse_args(argv)
    try:
        if not args.check:
            ensure_tree(args.version, args.dest, args.cache)
        problem = check(args.version, args.dest)
    except ToolchainError as exc:
        print(f"cuda_toolchain: {exc}", file=sys.stderr)
        return 1
    if problem:
        print(f"cuda_toolchain: {problem}", file=sys.stderr)
        return 1
    print(f"{args.dest}: CUDA {args.version}, NAR sha256 {TOOLCHAINS[args.version].nar_sha256}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

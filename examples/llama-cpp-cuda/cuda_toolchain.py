#!/usr/bin/env python3
"""CUDA's compiler set from pinned PyPI wheels, unpacked into one tree for the nix store.

    python cuda_toolchain.py VERSION DEST [--cache DIR]   # make DEST (or reuse it), print its NAR hash
    python cuda_toolchain.py VERSION DEST --check         # verify DEST against the pinned NAR hash
    python cuda_toolchain.py --list                       # every pinned nvcc release, oldest first

VERSION is an nvcc release pinned below, 13.0.48 to 13.5.37: 13.0.88 is the example's pinned
toolchain, 13.5.37 its candidate, and the releases between them the steps of a bisect.
Each wheel is pinned by version and sha256 and downloaded by pip with `--require-hashes` into a
cache (default ~/.cache/qualify/cuda-wheels), then unpacked with NVIDIA's wheel layout
`nvidia/cu13/{bin,nvvm,include,lib}` flattened, so DEST/bin/nvcc, DEST/nvvm/bin/cicc,
DEST/include and DEST/lib exist and nvcc's own nvcc.profile finds everything relative to itself
(nvvm 13.0.48's wheel has cicc in bin/, where nvcc does not look: it is moved to nvvm/bin/).

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


def series(table: str) -> dict[str, Toolchain]:
    """Toolchains from blocks of a `VERSION nar HASH` line and its wheels' indented lines."""
    blocks: dict[str, tuple[str, list[Wheel]]] = {}
    for line in table.strip("\n").splitlines():
        if line.startswith(" "):
            blocks[next(reversed(blocks))][1].append(Wheel(*line.split()))
        else:
            version, _, nar = line.split()
            blocks[version] = (nar, [])
    return {version: Toolchain(tuple(wheels), nar) for version, (nar, wheels) in blocks.items()}


# Every nvcc release on PyPI from 13.0.48 to 13.5.37, by version (13.2.86, 13.2 Update 3, came
# after 13.3.73); 13.4.46rc1, a release candidate, is left out. A CUDA release is one upload (its
# wheels share a date on PyPI), and each nvcc is pinned with the last release that shipped it:
# its own, but for 13.0.88, last shipped by 13.0 Update 2 (2025-10-09, no nvcc of its own: cudart
# 13.0.96 and cuBLAS 13.1.0.3 new, the rest kept), a CUDA 13.0 installed from these wheels. In it
# each companion is at nvcc's version where one exists, else at the version uploaded with it
# (cudart 13.2.75 with nvcc 13.2.78; CCCL numbers itself 13.3.x from 13.3, cuBLAS always has
# its own), else, not republished, the newest before it (cudart 13.1.80 with nvcc 13.1.115,
# 13.3.29 with 13.3.73). cuBLAS wheels uploaded alone between releases belong to none. cuobjdump
# was first published with 13.2: older releases carry the oldest, 13.2.51 (it reads cubins, no
# part of what nvcc writes). No release lacks a wheel. NAR: `nix-hash --type sha256 --base32`.
TOOLCHAINS: dict[str, Toolchain] = series("""
13.0.48    nar 1nsc7d69f044v6gk8bhwyvnsr8b5xcdm2agj1vvqphm2j61gc3zk
    nvidia-cuda-nvcc       13.0.48     d529c52d30c403cbf6fb17a3009530a48d94ea3ad99c990ad0301d9c744eb866
    nvidia-nvvm            13.0.48     a7cf76afc14682c46d43d5cdc370fc1da69cb84270e6854c6b3869584ecbd483
    nvidia-cuda-crt        13.0.48     944b6070c50dc4fbb7c012b1a4c28b444c9c5ac071ac17d84dc9726d9cbc6bea
    nvidia-cuda-runtime    13.0.48     5b54d12087a1abff81a4cbfa6556876e3afea1fc60da2e0816da374619810c89
    nvidia-cuda-cccl       13.0.50     46c209499996c18a0c673298f5eac3a09fecdb032da2b8be21c7d0914d966861
    nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
    nvidia-cublas          13.0.0.19   f6723af2e8e2600a11dc384037d90d9bf93070e346c24ef2e8f9001658c99896
13.0.88    nar 0jp5vqnm1xck8pyw6awjajg85kc9g9z883h0m9sk953hz4xm7izr
    nvidia-cuda-nvcc       13.0.88     56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
    nvidia-nvvm            13.0.88     c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0
    nvidia-cuda-crt        13.0.88     2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4
    nvidia-cuda-runtime    13.0.96     7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
    nvidia-cuda-cccl       13.0.85     e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649
    nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
    nvidia-cublas          13.1.0.3    ee8722c1f0145ab246bccb9e452153b5e0515fd094c3678df50b2a0888b8b171
13.1.80    nar 17aibj6icv22g7kmvhyijwl81x0f20dl14d10js5qkdim3dn1w8d
    nvidia-cuda-nvcc       13.1.80     3bc4a530566f7083da0cfe9f637474efa173a1101ed0bc72da9a98f8a55edb77
    nvidia-nvvm            13.1.80     058519d3e290cad0ad4034addad3f72fef2782f383e33d3c5b38172ed8fdb144
    nvidia-cuda-crt        13.1.80     4d9c87b60d82140e07881b8b8fa197c4867d27e41cef5f2171a82fa916211eba
    nvidia-cuda-runtime    13.1.80     dac25b52e69050e5a7a84957e6df470a85b185f8f648a99a1ab1dfce027576cf
    nvidia-cuda-cccl       13.1.78     24734b3dbb8ea7ee228ad4b19c8069ce862490513298e392641e077121e592c5
    nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
    nvidia-cublas          13.2.0.9    9c46d723b9a34bd69a453594be9b3ca6fd68db6e1da99095e15106d4134be0c3
13.1.115   nar 0hbsdbgkw5j7ylzh9kznfnrvdbahvmc7fp24q4rlm91zqiksw327
    nvidia-cuda-nvcc       13.1.115    fe5c0604869dfbc837bdce9e1eef8e4f0e0d103c29e3875014ba3538c70efb74
    nvidia-nvvm            13.1.115    6fdf483d85d9903f9cbf84c41d99221a86e0c0511d05de3d237b4ab69c11627e
    nvidia-cuda-crt        13.1.115    53c9b03f804dc7e539dd11914ec3d3fd0849791d8cd6a73f0d4df984bb339916
    nvidia-cuda-runtime    13.1.80     dac25b52e69050e5a7a84957e6df470a85b185f8f648a99a1ab1dfce027576cf
    nvidia-cuda-cccl       13.1.115    d4a9e0590cd34290cda27f402a67fbf42e3ed043bdd927c6dd52419c860f2f92
    nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
    nvidia-cublas          13.2.1.1    8c13c93cf8be4480b4909905c96d2d31575b4af43fcd3af0e84af94762665e4f
13.2.51    nar 0bzww5qpfzk3baj2z803xplsvlw7hajk795z8fxpg0snv5pn2m1z
    nvidia-cuda-nvcc       13.2.51     18aea9976c8a0033cc61d45baf5649a5bd8647a45999ddd50b885814a6190442
    nvidia-nvvm            13.2.51     9c5725d97b1108bdb6c474784f7901c34f570319a2c2a0f279d23190070915f3
    nvidia-cuda-crt        13.2.51     f4cda277fbf1025ad291a5d3b4dc4f788056ae11921552cdbebcf0626db99ba9
    nvidia-cuda-runtime    13.2.51     9c43b06a52c5b9316e19abc047236932c4d5c729969918a83223c4d2a4132f9a
    nvidia-cuda-cccl       13.2.27     f71b5dbc838867d1281715f34e642263098ea2ce59d85e9192f140ee24744f49
    nvidia-cuda-cuobjdump  13.2.51     95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
    nvidia-cublas          13.3.0.5    366568e2dc59e6fe71ffd179f9f2a38b8b2772aed626320a64008651b1e72974
13.2.78    nar 0wwavlg67paka798qdlnx9apjcwwhdwwklqvh366ngrk2iw8qh8h
    nvidia-cuda-nvcc       13.2.78     c3bd144dd9b6b25e062589acb7bbd43d93d3120c72fad71da808f9817aba1239
    nvidia-nvvm            13.2.78     f5aa433631109bbdec81802c5b5f319bf10bc891fe2f212e4e445845211d6f77
    nvidia-cuda-crt        13.2.78     2c8615ee30ed466cb6298ecb8ffe9e6ea8b252ca833206152d155750bf831608
    nvidia-cuda-runtime    13.2.75     72bf454902da594e0b833cadeddc8b7100ce1c7cf7ed9023943931be1aa913b7
    nvidia-cuda-cccl       13.2.75     11a2b1948e8709805a0ccf04441baf5279a9219c13eb11dc13d57bb023151768
    nvidia-cuda-cuobjdump  13.2.78     394087411405b846bf43aa52ca2ff603bbe18b3b8a1257cda0903e23c17bdbf3
    nvidia-cublas          13.4.0.1    53bf22e2ccbf644db74b6cc21cea7f5efb1a52aa64515438b430abbd05af4106
13.2.86    nar 130jaqzbd6srm7nsygr1h73xl9fqjmlbcv1csq7lnvcfh9h6kk36
    nvidia-cuda-nvcc       13.2.86     7d3f56c8d705bad35bbba69eb0470d90856fd5d4dc48c6a6173aaf1e9f887cf5
    nvidia-nvvm            13.2.86     a9244f3209922d655612c11ebb4117ea1f80983cb2b215c9cccded127282cebc
    nvidia-cuda-crt        13.2.86     e3ab08801bf9b1e6dc979275d25e816bb5000521b648e19c324d5eef0c79f1da
    nvidia-cuda-runtime    13.2.86     3498247680dfddce31bad102af7e3e26fc795342a3cac64722bb0fa95e7f60f0
    nvidia-cuda-cccl       13.2.86     35da671cf0cecd3539da214a11bb8e7634366c9e950da9c5feecf6c490a65b20
    nvidia-cuda-cuobjdump  13.2.86     d332c2ffe78e703ca0a3894be927f83124244e2acf0d792b8c12b4362d44d837
    nvidia-cublas          13.4.1.3    a5917cb642cfb07f4a0231ee16aec7e2e0357d8cb8b1b78a0c9c68dba3e6afc7
13.3.33    nar 1q5lvln80frg598k184h55kag09y4gwj764yrc3rqh0gj40v0av1
    nvidia-cuda-nvcc       13.3.33     53b5f1be1731574368b8be931b77b6313492266c464aef3dd3f431569ce90deb
    nvidia-nvvm            13.3.33     aafaf73246b6126bc88f521e5dab1d196395ee87739d9f5b7c39c9fee0ead9c7
    nvidia-cuda-crt        13.3.33     01ff37600c7b880a14cab4ade763b4c10c0ff92f25cc9dca30f0881ce52693c4
    nvidia-cuda-runtime    13.3.29     e04420616e72f563167a7733272992d7e6df6dc5cb54b2f94f9f1520ea9e30c1
    nvidia-cuda-cccl       13.3.3.3.1  40ba1fa0b2c694ddc06cc791ed5c8bdad4638e2735b784960d68ac3086399c97
    nvidia-cuda-cuobjdump  13.3.29     caef94c17fc28f5eb6d4a82905c97d0b12d32ee8ea7e089d0ba91e6a569e3cc5
    nvidia-cublas          13.5.1.27   db3a1f0c8bc24945a4d195ba199d83f27e650ffdfc0c32e6b8362c314f14d553
13.3.73    nar 19yhz9wpmgcmkjp22ip4xwlri49b3r6isl8xnbi329cvlbhzvzjr
    nvidia-cuda-nvcc       13.3.73     f483af83166c4fa356a21606076d553b0b4ceaebbd9912e537545080db695bdd
    nvidia-nvvm            13.3.73     0e28e0858a3475e11ac67d35301cd5bf82666a1c0dc4ec4e80ceaf3a5fd1dea8
    nvidia-cuda-crt        13.3.73     df14a17ae1c5c3171265411212246654d780f89344ea85344466c6b955247543
    nvidia-cuda-runtime    13.3.29     e04420616e72f563167a7733272992d7e6df6dc5cb54b2f94f9f1520ea9e30c1
    nvidia-cuda-cccl       13.3.3.4.1  cc0adc188d570b09f4d606c7dc05a42aa3d8aa082e0d60f7bbfc5b6435f627c6
    nvidia-cuda-cuobjdump  13.3.73     8e87d17597fccb71e6bffe0718b7ff6847b9b7923744b789e282bd761eb91654
    nvidia-cublas          13.6.0.2    b82c80c886cea6da6e149a5c3bdba274f12b7e4ec4b00a050b916b0446fb4153
13.4.59    nar 1f158d1rmppdkmra4zby4acjb1la6h03fnwskkzfv7rp7b835gmz
    nvidia-cuda-nvcc       13.4.59     5a02c4a5beb1cc19a56148c0384c2ef7c2699259308ae41fc32ddab3976b51ce
    nvidia-nvvm            13.4.59     5b21e81ca57ca15b13d75866de7d45e524eaba2fb418738d2bac5509e9a0e502
    nvidia-cuda-crt        13.4.59     32a48e6b08d1c00f10068edd2e212b9c0e9a1a784a0403cdd715fa81551759f9
    nvidia-cuda-runtime    13.4.49     0b228cc646acda27e9b512b8b94417c3ff8b3d24a0ad9b1d6603dc6c2a908046
    nvidia-cuda-cccl       13.3.4.2.1  4a78adf03982c941708aa9cc7967d73370a9c59ad1ac4e63a1ca7509bc54e392
    nvidia-cuda-cuobjdump  13.4.49     70fae3b43a4c3f403654e9a41ff91cefa90095d477daa17769ace84a5477a0d1
    nvidia-cublas          13.7.0.27   481adf76a6b7585a7a4cd5f53298589abe207415dd584887751b99baa85491d4
13.4.92    nar 1ycaj52nz5paw44d93wrqqa0hzmq9q2h9hmhb40j39p1dxwgckd5
    nvidia-cuda-nvcc       13.4.92     a1f3bfb27299e060b444d5df1f4bcd762501326cf0fd3141ed61756816ab9a0e
    nvidia-nvvm            13.4.92     e4c81cb321dd9743bcf871c5e7e8fecd7f05dea607944426e102bdda8d49e137
    nvidia-cuda-crt        13.4.92     731ce3de11df8add8306404417a1edaede225dbe27eb233aed37c8de9d4fe720
    nvidia-cuda-runtime    13.4.92     9641f797da20ce1dd8e779b6e96d08cf9ba564cec8e8225458811ee26423f3a5
    nvidia-cuda-cccl       13.3.4.3.1  48ba8e44a1162face51306d5bfd67604d9949be5acb9105dbb93734d2df8b3a4
    nvidia-cuda-cuobjdump  13.4.92     fb72ca80d0cdd8f5e8e232ce17d3c5aa2a37c3153bb8ef4e010010ed4fdef6c5
    nvidia-cublas          13.8.0.4    9f17797dfcc048694461f4e47de17d2e3c25adf172ef723d2db0a07cd8744b89
13.5.37    nar 028zn6h7dwzs0vnhpcfmyxxvq0w182s49lzpzky3dlfibrvdx56d
    nvidia-cuda-nvcc       13.5.37     f5c4f7ead5d964fb4af42bbf1e6d3ec3c1e6e9d83b53749f691d387e7fcaa3a7
    nvidia-nvvm            13.5.37     c41bfa362e407405163f103c2229f0765f8cc2ed7d148b754dc77f228bf7e070
    nvidia-cuda-crt        13.5.37     e898b7f73d3035fa89915a3f7bf3b54a73e90249746111aed295822c4729bb29
    nvidia-cuda-runtime    13.5.37     df2b79a8852f10d1fef8c848489c49eebb5754051bf870202a862831412b179d
    nvidia-cuda-cccl       13.3.5.0.6  d5230098fa2df5021e1a00c0c4eee41797671a91119d31e892463e5ccf3ee326
    nvidia-cuda-cuobjdump  13.5.37     38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58
    nvidia-cublas          13.10.0.20  dcc6d63884c53d07e267ce7e6feac17b2538cebaafec5db865736c3e28e4dc84
""")
SERIES = tuple(TOOLCHAINS)  # oldest first: the steps of a bisect between two of them
PINNED, CANDIDATE = "13.0.88", "13.5.37"

_PREFIX = "nvidia/cu13/"
_DROPPED = (".metadata/", "lib/libnvvm.so", "nvvm/lib64/libnvvm.so")
_ONLY = {"nvidia-cublas": "include/"}  # of these wheels, only what is under this folder
_MOVED = {"bin/cicc": "nvvm/bin/cicc"}
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
    return _MOVED.get(rel, rel)


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
    parser.add_argument("version", nargs="?", choices=SERIES)
    parser.add_argument("dest", nargs="?", type=Path)
    parser.add_argument("--cache", type=Path, default=None, help="where the wheels are kept")
    parser.add_argument("--check", action="store_true", help="only verify DEST against the pinned hash")
    parser.add_argument("--list", action="store_true", help="print every pinned version, oldest first")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SERIES))
        return 0
    if args.version is None or args.dest is None:
        parser.error("VERSION and DEST are needed (or --list)")
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

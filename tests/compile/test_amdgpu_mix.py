"""The instruction mix of real ggml HIP kernels, against the toolchain's own disassembly.

The objects are the ROCm example's slice (tests/compile/ggml_rocm.py: `mmvq.cu`, the q4_K MMQ
instance and the head-size-128 tile flash-attention instance for gfx1151, the MMQ instance for
gfx942 and gfx950, each compiled by ROCm 6.4.3's clang 21 and 7.2.4's clang 22 inside the
example's roots). The check's reader (`qualify.compile.mixreading`, through a wrapper that runs
the 7.2.4 root's llvm-objdump, as the example's arms do) is compared kernel by kernel with a
reading written here: llvm-objdump's default listing (addresses and encodings shown, another form
of its output than the reader asks for) read line by line, each mnemonic classed by the table
below, and each kernel's code size from llvm-readelf's symbol table. Nothing here stands in.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import Project, qualify_proc
from ggml_rocm import (
    ARTIFACTS,
    EXAMPLE,
    LLVM,
    TARGET,
    Builds,
    both_roots,
    in_root,
    load_toolchain,
    role_tree,
    slice_builds,
)

from qualify.compile.amdgpu import read_code_object
from qualify.compile.disassembly import probe
from qualify.compile.instmix import CLASSES, MIX_COLUMNS
from qualify.compile.mixreading import OBJDUMP_OPTIONS, MixReading
from qualify.compile.offloadbundle import iter_code_objects
from qualify.core.environment import child_env

pytestmark = pytest.mark.slow
TOOLCHAIN = load_toolchain()
PINNED, CANDIDATE = TOOLCHAIN.PINNED, TOOLCHAIN.CANDIDATE

# The classes by mnemonic prefix, as the AMDGPU instruction set names its units; the longest
# prefix a mnemonic has decides.
PREFIXES = {
    "v_": "valu", "v_wmma_": "matrix", "v_swmmac_": "matrix", "v_mfma_": "matrix",
    "v_smfmac_": "matrix", "v_dot": "dot", "v_pk_": "packed16",
    "s_": "salu", "s_load_": "smem", "s_buffer_load_": "smem", "s_store_": "smem",
    "s_waitcnt": "waits", "s_wait_": "waits", "s_barrier": "waits",
    "s_branch": "branches", "s_cbranch_": "branches", "s_setpc_": "branches", "s_swappc_": "branches",
    "s_call_": "branches", "s_nop": "other", "s_delay_alu": "other", "s_clause": "other",
    "s_endpgm": "other", "s_code_end": "other", "s_sendmsg": "other", "s_sleep": "other",
    "s_setprio": "other", "s_inst_prefetch": "other", "s_set_inst_prefetch_distance": "other",
    "s_icache_inv": "other", "s_dcache_": "other", "s_trap": "other", "s_denorm_mode": "other",
    "s_round_mode": "other", "s_singleuse_vdst": "other", "s_sethalt": "other",
    "global_": "global", "buffer_": "buffer", "buffer_gl0_inv": "other", "buffer_gl1_inv": "other",
    "buffer_wbl2": "other", "buffer_inv": "other", "buffer_wbinvl1": "other", "flat_": "flat",
    "scratch_load": "scratch_load", "scratch_store": "scratch_store", "ds_": "lds",
}  # fmt: skip


def their_class(mnemonic: str) -> str:
    matches = [p for p in PREFIXES if mnemonic.startswith(p)]
    return PREFIXES[max(matches, key=len)] if matches else "other"


@pytest.fixture(scope="module")
def roots() -> dict[str, Path]:
    return both_roots()


@pytest.fixture(scope="module")
def builds(roots: dict[str, Path]) -> Builds:
    return slice_builds(roots)


def wrapper(roots: dict[str, Path], folder: Path) -> Path:
    """The candidate root's llvm-objdump behind the wrapper the example's arms install."""
    script = folder / "llvm-objdump"
    llvm = LLVM[CANDIDATE]
    script.write_text(
        "#!/bin/sh\n"
        f'exec "{EXAMPLE / "enter-root.sh"}" "{roots[CANDIDATE]}" --bind "$PWD" '
        f'${{TMPDIR:+--bind "$TMPDIR"}} -- /usr/lib/llvm-{llvm}/bin/llvm-objdump "$@"\n'
    )
    script.chmod(0o755)
    return script


def tool(roots: dict[str, Path], work: Path, name: str, *args: str) -> str:
    argv = in_root(
        roots[CANDIDATE], [work, ARTIFACTS], [f"/usr/lib/llvm-{LLVM[CANDIDATE]}/bin/{name}", *args]
    )
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def their_mix(roots: dict[str, Path], work: Path, code: Path) -> dict[str, dict[str, int]]:
    """Function -> counts, from the plain listing and the symbol table of `code`."""
    sizes = {}
    for line in tool(roots, work, "llvm-readelf", "--symbols", "--wide", str(code)).splitlines():
        fields = line.split()
        if len(fields) == 8 and fields[3] == "FUNC":
            sizes[fields[7]] = int(fields[2], 0)
    found: dict[str, dict[str, int]] = {}
    current: Counter[str] | None = None
    for line in tool(roots, work, "llvm-objdump", "-d", str(code)).splitlines():
        label = re.fullmatch(r"[0-9a-f]+ <(.+)>:", line)
        if label:
            current = Counter() if label[1] in sizes else None
            if current is not None:
                found[label[1]] = current  # type: ignore[assignment]
                current["code_bytes"] = sizes[label[1]]
            continue
        if current is None or not line.startswith("\t"):
            continue
        text = line.split("//")[0].strip()
        mnemonic, _, operands = text.partition(" ")
        current[their_class(mnemonic)] += 1
        current["instructions"] += 1
        for operand in re.split(r"[,\s]+", operands):
            if re.fullmatch(r"v\d+\.[lh]", operand):
                current["true16_operands"] += 1
                current["high16_operands"] += operand.endswith(".h")
    return {name: {c: counts.get(c, 0) for c in MIX_COLUMNS} for name, counts in found.items()}


def test_every_kernels_mix_is_the_toolchains_own_listing(
    roots: dict[str, Path], builds: Builds, tmp_path: Path
) -> None:
    decoder = probe([str(wrapper(roots, tmp_path))], OBJDUMP_OPTIONS, child_env())
    assert decoder.version.endswith("22.1.8"), decoder.version
    totals: dict[tuple[str, str, str], Counter[str]] = {}
    for (version, target, source), build in sorted(builds.items()):
        blobs = list(iter_code_objects(build.obj.read_bytes(), build.obj.name))
        rows = [
            {"origin": blob.source, "name": kernel.name}
            for blob in blobs
            for kernel in read_code_object(blob.data, blob.source)
        ]
        reading = MixReading(amdgpu=decoder, folder=tmp_path)
        try:
            for blob in blobs:
                reading.amdgpu(blob.source, blob.data)
            reading.attach("amdgpu", rows)
        finally:
            reading.close()
        assert reading.status()["amdgpu"]["kernels_read"] == len(rows) > 0
        for i, blob in enumerate(blobs):
            code = tmp_path / f"{version}-{target}-{i}.co"
            code.write_bytes(blob.data)
            theirs = their_mix(roots, tmp_path, code)
            mine = [row for row in rows if row["origin"] == blob.source]
            for row in mine:
                assert {c: row[c] for c in MIX_COLUMNS} == theirs[row["name"]], (version, target, row["name"])
                totals.setdefault((version, target, source), Counter()).update({c: row[c] for c in CLASSES})
    q4k = "template-instances/mmq-instance-q4_k.cu"
    for version in (PINNED, CANDIDATE):
        # RDNA 3.5's MMQ runs on WMMA, the Instinct parts' on MFMA: both are matrix instructions.
        for target in (TARGET, "gfx942", "gfx950"):
            assert totals[(version, target, q4k)]["matrix"] > 0, (version, target)
        assert totals[(version, TARGET, "mmvq.cu")]["matrix"] == 0  # a vector kernel: dot products
    # The move's known spill change shows as scratch traffic in the q4_K MMQ kernels.
    scratch = {
        v: sum(totals[(v, TARGET, q4k)][c] for c in ("scratch_load", "scratch_store"))
        for v in (PINNED, CANDIDATE)
    }
    assert scratch[CANDIDATE] > scratch[PINNED]


def test_the_move_is_judged_by_its_mix_too(roots: dict[str, Path], builds: Builds, tmp_path: Path) -> None:
    """`qualify run` with the candidate's llvm-objdump: the q4_K MMQ kernels that gained scratch
    loads and stores fail for it, the families table leads with the failing families, and the
    measurement names the decoder."""
    p = Project(tmp_path / "proj")
    (p.root / "stages").mkdir(parents=True)
    pinned, candidate = (
        role_tree(tmp_path / "p", PINNED, builds),
        role_tree(tmp_path / "c", CANDIDATE, builds),
    )
    (p.root / "qualify.toml").write_text(
        textwrap.dedent(
            f"""
            plan = "stages"
            [arms.pinned]
            installable = ".#default"
            vars = {{ tree = "{pinned}" }}
            [arms.rocm72]
            installable = ".#rocm72"
            vars = {{ tree = "{candidate}" }}
            """
        )
    )
    p.stage(
        "20-compile.toml",
        f"""
        [[check]]
        kind = "kernel-resources"
        name = "kernels"
        root = "{{tree}}"
        host_patterns = []
        require = ["amdgpu"]
        objdump = "{wrapper(roots, tmp_path)}"
        """,
    )
    proc = qualify_proc("run", "--candidate", "rocm72", "--project", str(p.root))
    assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
    run = p.run_dirs()[0]
    result = json.loads((run / "20-compile" / "kernels" / "result.json").read_text())
    assert result["facts"]["mix"]["candidate"]["amdgpu"]["version"].endswith("22.1.8")
    assert result["facts"]["mix"]["pinned"]["amdgpu"]["version"].endswith("22.1.8")  # one decoder
    table = pd.read_parquet(run / "20-compile" / "kernels" / "diff.parquet")
    grew = table[
        (table["candidate_scratch_load"] + table["candidate_scratch_store"])
        > (table["pinned_scratch_load"] + table["pinned_scratch_store"])
    ]
    assert len(grew) > 0
    assert (grew["severity"] == "FAIL").all() and grew["reasons"].str.contains("scratch loads\\+stores").all()
    assert "gain scratch loads and stores" in result["reason"], result["reason"]
    families = next(t for t in result["tables"] if t["title"].startswith("Kernel families"))
    first = dict(zip(families["columns"], families["rows"][0], strict=True))
    assert first["FAIL"] > 0 and first["kernel family"] in ("mul_mat_q", "flash_attn_tile")
    assert any(t["title"].startswith("Instruction mix: kernels flagged") for t in result["tables"])

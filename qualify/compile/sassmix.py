"""The instruction mix of CUDA kernels, from `cuobjdump -sass` of one cubin.

Contract of `parse_sass(text, data)`: `text` is cuobjdump's `-sass` output for one cubin (it
runs NVIDIA's nvdisasm, which must be on PATH or in NVDISASM_PATH) and `data` that cubin's
bytes. Every `Function : <name>` line starts a function (the mangled name, as
`qualify.compile.cubin` lists it) whose instructions are the lines `/*<offset>*/ [@pred] OPCODE`
up to the next one; the encoding lines beside them are not instructions. The result maps each
function to its mix (`qualify.compile.instmix`); a function cuobjdump does not show gets no
entry. `code_bytes` is the size of the function's `.text.<name>` section, and 16 bytes an
instruction (every SASS instruction from Volta on) where the cubin has no such section;
cuobjdump prints every slot of the section, alignment NOPs included, so the two agree (older
Maxwell and Pascal code, 8 bytes an instruction plus scheduling words, is sized right only by
its section). CUDA has no 16-bit register halves: both operand counts are 0.

Classes are decided by the opcode alone, its `.MODIFIER` suffixes dropped (`LDG.E.128` is
LDG), after the unit that NVIDIA's instruction set reference ("CUDA Binary Utilities",
Turing to Blackwell tables) gives each opcode:
- matrix: every `*MMA` (HMMA, IMMA, DMMA, BMMA; Hopper's HGMMA, IGMMA, QGMMA, BGMMA;
  Blackwell's warp OMMA, QMMA and the tensor-memory UTCHMMA, UTCIMMA, UTCQMMA, UTCOMMA, ...);
- dot: IDP (dp4a, dp2a); packed16: the FP16x2 ALU (HADD2, HFMA2, HMUL2, HMNMX2, HSET2,
  HSETP2, VHMNMX). ptxas also writes small constants with `HFMA2.MMA Rd, -RZ, RZ, imm`, so
  code with no half math can have a few;
- global: LDG, STG, RED/REDG, ATOMG, LDGMC, the asynchronous copies LDGSTS and the TMA and
  bulk units (UTMALDG, UTMASTG, UTMAREDG, UTMAPF, UBLKCP, UBLKRED, UBLKPF), USTGR/UREDGR, and
  texture and surface accesses; flat: the generic LD, ST, ATOM;
- scratch_load / scratch_store: LDL / STL, local memory, where spills go;
- lds: shared memory (LDS, STS, LDSM, STSM, ATOMS, the distributed STAS/REDAS, UMEMSETS) and
  Blackwell's tensor memory (LDTM, STTM, LDT, STT, UTCCP, UTCSHIFT), the SM's on-chip stores;
- smem: constant-bank loads (LDC, ULDC, LDCU);
- waits: barriers, fences and dependency waits (BAR, DEPBAR, LDGDEPBAR, WARPSYNC, MEMBAR,
  FENCE, ERRBAR, CGAERRBAR, SYNCS, ACQBULK, WARPGROUP, UCGABAR, UTCBAR, ...);
- branches: BRA, BRX(U), JMP, JMX(U), CALL, RET, BREAK, BSSY, BSYNC, BMOV, RPCMOV;
- other: what computes nothing: NOP, EXIT, KILL, YIELD, NANOSLEEP, BPT, PMTRIG, PREEXIT,
  cache and TMA control (CCTL*, UTMACCTL, UTMACMDFLUSH), register-budget and tensor-core
  bookkeeping (USETMAXREG, UVIRTCOUNT, WARPGROUPSET, UTCATOMSWS);
- salu: the rest of the uniform datapath: opcodes that start with U (UIADD3, UMOV, ULOP3, ...)
  and those the reference lists there that move values into uniform registers (R2UR, S2UR,
  CS2UR, REDUX, CREDUX, VOTEU);
- valu: everything else, the per-thread ALUs (FFMA, IMAD, MOV, S2R, SHFL, ...).
An opcode no table names falls to salu or valu by its first letter, so a new one is counted,
never lost.

Beside the mix, `traps` counts the function's traps that no predicate guards (`BPT.TRAP`, what
`__trap()` compiles to): with them `qualify.compile.stubs` tells a body that only prints and
traps (ggml's `NO_DEVICE_CODE`) from a kernel.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from functools import cache

from qualify.compile.instmix import TRAPS, mix_from_counts

#: cuobjdump's options for the mix (the runner adds the file name).
SASS_OPTIONS: tuple[str, ...] = ("-sass",)
#: Bytes of one SASS instruction from Volta (sm_70) on.
INSTRUCTION_BYTES = 16

# Both patterns start with a literal, which `re` finds by a fast scan: anchored at line starts
# (`^` with re.M) they are four times slower on a large library's text.
_FUNCTION = re.compile(r"Function : (\S+)")
# An instruction: `/*0a30*/  [@!UP1 ]OPCODE.MODS operands ;`. The encoding comments beside it
# start `/* 0x`, with a space, and do not match.
_OPCODE = re.compile(r"/\*[0-9a-f]+\*/[ \t]+(?:@!?U?P(?:T|\d+)[ \t]+)?([A-Z][A-Z0-9_]*)")

#: A trap no predicate guards: the code after it on its path never runs (`__trap()`).
_TRAP = re.compile(r"/\*[0-9a-f]+\*/[ \t]+BPT\.TRAP\b")
_BASE = re.compile(r"(?:@!?U?P(?:T|\d+)\s+)?([A-Za-z][A-Za-z0-9_]*)")

_DOT = frozenset({"IDP", "IDP4A", "IDP2A"})
_PACKED16 = frozenset({
    "HADD2", "HADD2_32I", "HFMA2", "HFMA2_32I", "HMUL2", "HMUL2_32I", "HMNMX2", "HSET2",
    "HSETP2", "VHMNMX",
})  # fmt: skip
_GLOBAL = frozenset({
    "LDG", "STG", "RED", "REDG", "ATOMG", "LDGMC", "LDGSTS", "UTMALDG", "UTMASTG", "UTMAREDG",
    "UTMAPF", "UBLKCP", "UBLKRED", "UBLKPF", "USTGR", "UREDGR", "TEX", "TLD", "TLD4", "TXD",
    "SULD", "SUST", "SUATOM", "SURED",
})  # fmt: skip
_FLAT = frozenset({"LD", "ST", "ATOM"})
_LDS = frozenset({
    "LDS", "STS", "LDSM", "STSM", "ATOMS", "STAS", "REDAS", "UMEMSETS", "LDTM", "STTM", "LDT",
    "STT", "UTCCP", "UTCSHIFT",
})  # fmt: skip
_SMEM = frozenset({"LDC", "ULDC", "LDCU"})
_WAITS = frozenset({
    "BAR", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "MEMBAR", "FENCE", "ERRBAR", "CGAERRBAR", "SYNCS",
    "ACQBULK", "ACQSHMINIT", "WARPGROUP", "UCGABAR", "UCGABAR_ARV", "UCGABAR_WAIT", "UTCBAR",
    "ARRIVES",
})  # fmt: skip
_BRANCHES = frozenset({
    "BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "BREAK", "BSSY", "BSYNC", "BMOV",
    "RPCMOV",
})  # fmt: skip
_OTHER = frozenset({
    "NOP", "EXIT", "KILL", "YIELD", "NANOSLEEP", "BPT", "PMTRIG", "PREEXIT", "CCTL", "CCTLL",
    "CCTLT", "UTMACCTL", "UTMACMDFLUSH", "USETMAXREG", "UVIRTCOUNT", "WARPGROUPSET",
    "UTCATOMSWS", "ENDCOLLECTIVE", "TMML", "TXQ",
})  # fmt: skip
_UNIFORM = frozenset({"R2UR", "S2UR", "CS2UR", "REDUX", "CREDUX", "VOTEU"})
_BY_SET: tuple[tuple[frozenset[str], str], ...] = (
    (_DOT, "dot"),
    (_PACKED16, "packed16"),
    (_GLOBAL, "global"),
    (_FLAT, "flat"),
    (_LDS, "lds"),
    (_SMEM, "smem"),
    (_WAITS, "waits"),
    (_BRANCHES, "branches"),
    (_OTHER, "other"),
    (_UNIFORM, "salu"),
)


@cache
def classify(opcode: str) -> str:
    """The class (`qualify.compile.instmix.CLASSES`) of one SASS opcode; a leading predicate
    (`@P0`, `@!UP1`) and `.MODIFIER` suffixes are dropped first (see the module)."""
    match = _BASE.match(opcode.strip())
    base = match.group(1).upper() if match else ""
    if base.endswith("MMA"):
        return "matrix"
    if base == "LDL":
        return "scratch_load"
    if base == "STL":
        return "scratch_store"
    for names, kind in _BY_SET:
        if base in names:
            return kind
    return "salu" if base.startswith("U") else "valu"


def parse_sass(text: str, data: bytes) -> dict[str, dict[str, int]]:
    """Each function that the `-sass` text shows, with its mix (see the module)."""
    parts = _FUNCTION.split(text)
    sizes = text_sizes(data)
    found: dict[str, dict[str, int]] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        opcodes = Counter(_OPCODE.findall(body))
        count = sum(opcodes.values())
        code_bytes = sizes.get(name, count * INSTRUCTION_BYTES)
        found[name] = mix_from_counts(opcodes, {op: classify(op) for op in opcodes}, 0, 0, code_bytes)
        found[name][TRAPS] = len(_TRAP.findall(body))
    return found


_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_TEXT = b".text."


def text_sizes(data: bytes) -> dict[str, int]:
    """`.text.<name>` section -> its size, for one little-endian ELF64 cubin, read from the raw
    section headers (no section's contents but the names); {} for anything else."""
    if len(data) < 64 or not data.startswith(b"\x7fELF") or data[4] != 2 or data[5] != 1:
        return {}
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize != _SHDR.size or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        return {}
    headers = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
    names = data[names_at : names_at + names_size]
    sizes: dict[str, int] = {}
    for sh_name, _kind, _flags, _addr, _offset, size, *_rest in headers:
        if names.startswith(_TEXT, sh_name):
            end = names.find(b"\0", sh_name)
            name = names[sh_name + len(_TEXT) : end if end >= 0 else len(names)]
            sizes[name.decode("utf-8", "replace")] = size
    return sizes

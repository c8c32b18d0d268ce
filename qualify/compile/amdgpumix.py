"""The instruction mix of AMDGPU kernels, from `llvm-objdump -d` of their code object.

Contract of `parse_objdump(text, sizes)`: `text` is llvm-objdump's disassembly of one code
object (`-d --no-show-raw-insn --no-leading-addr`); every function label `<name>:` starts a
function whose instructions are the tab-indented lines up to the next label. The result maps
each function named in `sizes` (function symbol -> st_size, `function_sizes`) to its mix
(`qualify.compile.instmix`); a kernel the disassembly does not show gets no entry, so that a
missing mix is never read as an empty one.

Classes are decided by the mnemonic alone (`classify`), from the AMDGPU instruction set's
naming: the prefix names the unit (``v_`` vector ALU, ``s_`` scalar, ``ds_`` LDS, ``global_``,
``buffer_``, ``flat_``, ``scratch_`` memory), and the matrix, dot and packed forms have their own
prefixes on every target from GFX9 to GFX12.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from functools import cache

from qualify.compile.instmix import mix_from_counts

_LABEL = re.compile(r"\n<([^>\n]+)>:(?=\n)")  # the newline stays with the body
_MNEMONIC = re.compile(r"\n\t([^ \n/]+)")
# A 16-bit half of a VGPR: `v12.l`, `v12.h`. No left boundary: `\b` or a look-behind there costs
# the regex engine its literal search, 25 times the time, and no other token of a listing ends
# in `v<digits>.l` or `.h`.
_HALF = re.compile(r"v\d+\.[lh](?!\w)")
_HIGH = re.compile(r"v\d+\.h(?!\w)")

_MATRIX = ("v_wmma_", "v_swmmac_", "v_mfma_", "v_smfmac_")
_SMEM = (
    "s_load_",
    "s_buffer_load_",
    "s_store_",
    "s_buffer_store_",
    "s_scratch_",
    "s_atc_probe",
    "s_prefetch_",
)
_WAITS = ("s_waitcnt", "s_wait_", "s_barrier")
_BRANCHES = ("s_branch", "s_cbranch_", "s_setpc_", "s_swappc_", "s_call_", "s_rfe_")
# Scalar instructions that compute nothing: hints to the scheduler, program end, messages,
# traps, instruction-cache and mode control.
_SCALAR_OTHER = (
    "s_nop", "s_delay_alu", "s_clause", "s_endpgm", "s_code_end", "s_sendmsg", "s_sleep",
    "s_setprio", "s_inst_prefetch", "s_set_inst_prefetch_distance", "s_icache_inv", "s_dcache_",
    "s_trap", "s_sethalt", "s_ttrace", "s_singleuse_vdst", "s_denorm_mode", "s_round_mode",
    "s_setkill", "s_incperflevel", "s_decperflevel", "s_version", "s_gl1_inv", "s_set_vgpr_msb",
)  # fmt: skip
# Cache maintenance spelled as buffer instructions: they move no data.
_CACHE_CONTROL = ("buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbl2", "buffer_inv", "buffer_wbinvl1")


@cache
def classify(mnemonic: str) -> str:
    """The class (`qualify.compile.instmix.CLASSES`) of one AMDGPU mnemonic."""
    m = mnemonic.lower()
    if m.startswith(_MATRIX):
        return "matrix"
    if m.startswith("v_dot"):
        return "dot"
    if m.startswith("v_pk_"):
        return "packed16"
    if m.startswith("v_"):
        return "valu"
    if m.startswith("scratch_load"):
        return "scratch_load"
    if m.startswith("scratch_store"):
        return "scratch_store"
    if m.startswith("global_"):
        return "global"
    if m.startswith(_CACHE_CONTROL):
        return "other"
    if m.startswith(("buffer_", "tbuffer_")):
        return "buffer"
    if m.startswith("flat_"):
        return "flat"
    if m.startswith("ds_"):
        return "lds"
    if m.startswith(_SMEM):
        return "smem"
    if m.startswith(_WAITS):
        return "waits"
    if m.startswith(_BRANCHES):
        return "branches"
    if m.startswith(_SCALAR_OTHER):
        return "other"
    if m.startswith("s_"):
        return "salu"
    return "other"  # exp, image and export instructions: none in a compute kernel's arithmetic


def parse_objdump(text: str, sizes: dict[str, int]) -> dict[str, dict[str, int]]:
    """Each function of `sizes` that the disassembly shows, with its mix (see the module)."""
    parts = _LABEL.split(text)
    found: dict[str, dict[str, int]] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name not in sizes:
            continue
        mnemonics = Counter(_MNEMONIC.findall(body))
        classes = {m: classify(m) for m in mnemonics}
        found[name] = mix_from_counts(
            mnemonics, classes, len(_HALF.findall(body)), len(_HIGH.findall(body)), sizes[name]
        )
    return found


_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SHT_SYMTAB = 2
_STT_FUNC = 2


def function_sizes(data: bytes) -> dict[str, int]:
    """Function symbol -> st_size of one little-endian ELF64 code object (`.symtab`), read from
    the raw headers: the disassembly shows labels, the symbol table gives each one's bytes."""
    if len(data) < 64 or not data.startswith(b"\x7fELF"):
        return {}
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize != _SHDR.size or shoff + shnum * shentsize > len(data):
        return {}
    headers = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    sizes: dict[str, int] = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in headers:
        if kind != _SHT_SYMTAB or entsize != _SYM.size or link >= shnum:
            continue
        strings_at, strings_size = headers[link][4], headers[link][5]
        strings = data[strings_at : strings_at + strings_size]
        table = data[offset : offset + size - size % _SYM.size]
        for st_name, info, _other, _shndx, _value, st_size in _SYM.iter_unpack(table):
            if info & 0xF != _STT_FUNC or not st_name:
                continue
            end = strings.find(b"\0", st_name)
            sizes[strings[st_name : end if end >= 0 else len(strings)].decode("utf-8", "replace")] = st_size
    return sizes

"""A kernel's instruction mix: how many of its instructions fall in each class, and its size.

The classes are the same for AMDGPU (`qualify.compile.amdgpumix`, from `llvm-objdump -d`) and
CUDA (`qualify.compile.sassmix`, from `cuobjdump -sass`), so one table and one set of rules
serve both. Every instruction is in exactly one class; the 16-bit operand counts are kept
apart, as operands rather than instructions:

- ``valu`` / ``salu``: vector and scalar (CUDA: uniform datapath) arithmetic and moves;
- ``matrix``: WMMA, SWMMAC, MFMA, SMFMAC (CUDA: HMMA, IMMA, DMMA, the GMMA and UTC MMA forms);
- ``dot``: packed dot products (AMDGPU ``v_dot*``, CUDA ``IDP``);
- ``packed16``: packed 16-bit math (AMDGPU ``v_pk_*``, CUDA ``HADD2``/``HFMA2``/... );
- ``global``, ``buffer``, ``flat``: memory through those address spaces (CUDA: LDG/STG/RED/
  ATOMG/LDGSTS are global, LD/ST flat);
- ``smem``: scalar (CUDA: constant-bank) loads;
- ``scratch_load`` / ``scratch_store``: private memory, where spills go (CUDA: LDL / STL);
- ``lds``: local data share (CUDA: shared memory);
- ``waits``: counters and barriers waited on; ``branches``: jumps, calls and returns;
- ``other``: scheduling hints, program end, messages, cache control.

``true16_operands`` counts register operands that name one 16-bit half (``v1.l``, ``v1.h``),
``high16_operands`` those naming a high half, which only code generated for 16-bit registers
uses. Both depend on the decoder as well as on the code: LLVM 22 prints gfx11 16-bit
operands as halves where LLVM 21 prints whole registers for the same bytes. The check therefore
decodes both builds with one disassembler, so that a count changes only when the code does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral

CLASSES: tuple[str, ...] = (
    "valu", "salu", "matrix", "dot", "packed16", "global", "buffer", "flat", "smem",
    "scratch_load", "scratch_store", "lds", "waits", "branches", "other",
)  # fmt: skip
OPERAND_COUNTS: tuple[str, ...] = ("true16_operands", "high16_operands")
#: The columns a kernel's mix adds to its family's table, in order.
MIX_COLUMNS: tuple[str, ...] = ("instructions", "code_bytes", *CLASSES, *OPERAND_COUNTS)
#: The CUDA table's column of a function's unguarded traps (`qualify.compile.sassmix`), read
#: beside the mix by `qualify.compile.stubs`; not a class, so not a mix column.
TRAPS = "traps"
#: How the report titles them.
TITLES: dict[str, str] = {
    "instructions": "instructions",
    "code_bytes": "code B",
    "valu": "VALU",
    "salu": "SALU",
    "matrix": "matrix",
    "dot": "dot",
    "packed16": "packed 16-bit",
    "global": "global",
    "buffer": "buffer",
    "flat": "flat",
    "smem": "scalar mem",
    "scratch_load": "scratch loads",
    "scratch_store": "scratch stores",
    "lds": "LDS",
    "waits": "waits",
    "branches": "branches",
    "other": "other",
    "true16_operands": "16-bit operands",
    "high16_operands": "high-half operands",
}


def empty_mix() -> dict[str, int]:
    """A mix with every column zero."""
    return dict.fromkeys(MIX_COLUMNS, 0)


def mix_from_counts(
    mnemonics: Mapping[str, int], classify: Mapping[str, str], true16: int, high16: int, code_bytes: int
) -> dict[str, int]:
    """A mix from per-mnemonic counts and the class of each mnemonic."""
    mix = empty_mix()
    for mnemonic, n in mnemonics.items():
        mix[classify[mnemonic]] += n
        mix["instructions"] += n
    mix["true16_operands"] = true16
    mix["high16_operands"] = high16
    mix["code_bytes"] = code_bytes
    return mix


@dataclass(frozen=True)
class Mix:
    """One kernel's instruction mix as the comparison reads it: a count per class (`CLASSES`),
    the 16-bit operand counts (`OPERAND_COUNTS`) and the code's size, each 0 where the mix was
    not read (`read` says whether it was)."""

    instructions: int = 0
    code_bytes: int = 0
    valu: int = 0
    salu: int = 0
    matrix: int = 0
    dot: int = 0
    packed16: int = 0
    global_: int = 0  # the column `global`, a keyword here
    buffer: int = 0
    flat: int = 0
    smem: int = 0
    scratch_load: int = 0
    scratch_store: int = 0
    lds: int = 0
    waits: int = 0
    branches: int = 0
    other: int = 0
    true16_operands: int = 0
    high16_operands: int = 0

    @classmethod
    def of(cls, figures: Mapping[str, object]) -> Mix:
        """The mix columns (`MIX_COLUMNS`) of a GPU kernel's row of its family's table (every
        such table holds them, `qualify.compile.scan`); one that holds no value (None) is 0."""
        return cls(**{_FIELDS[column]: _count(figures[column]) for column in MIX_COLUMNS})

    @property
    def read(self) -> bool:
        """Whether the kernel's mix was read: a read kernel has instructions."""
        return self.instructions > 0

    def count(self, column: str) -> int:
        """One column's count, by its name in `MIX_COLUMNS`."""
        value: int = getattr(self, _FIELDS[column])
        return value


#: Each mix column's field of `Mix`.
_FIELDS: dict[str, str] = {column: column + "_" if column == "global" else column for column in MIX_COLUMNS}


def _count(value: object) -> int:
    return int(value) if isinstance(value, Integral) else 0  # None: not read


def shares(mix: Mix) -> dict[str, float]:
    """Each class's share of the kernel's instructions, in percent (empty when it has none)."""
    if not mix.instructions:
        return {}
    return {c: 100.0 * mix.count(c) / mix.instructions for c in CLASSES}

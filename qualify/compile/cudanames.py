"""The name a CUDA kernel is matched by across two builds.

A mangled CUDA kernel name can carry parts that change with the toolchain while the kernel
stays the same:

- Internal linkage (`static` functions, anonymous namespaces) is mangled as
  `_INTERNAL_<8 hex>_<n>_<file>_<8 hex>`, the hex digits a hash of the translation unit that
  changes from one nvcc to the next (`_INTERNAL_aba5dc98_6_cpy_cu_bfba63e2`). The hashes become
  zeros of the same length, so the name stays well-formed.
- CCCL's versioned inline namespaces (`CUB_300001_SM_900`, `THRUST_300001_SM_900`, and from CCCL
  3.x `_V_300500_SM_900`) name the library release. Each such `<length><namespace>` becomes
  `7CCCL_NS`.

What is left is the kernel's real identity: a CUB kernel whose template arguments changed
between CCCL releases stays a different kernel (missing on one side, new on the other).

How a kernel's name is shown to a reviewer (`demangle`, `display_name`) is in
`qualify.core.symbols`: the report shows every stage's kernels the same way.
"""

from __future__ import annotations

import re

from qualify.core.symbols import demangle, display_name

__all__ = ["demangle", "display_name", "match_key"]

_INTERNAL = re.compile(r"_INTERNAL_[0-9a-f]{8}_(\d+)_")
_HASH_TAIL = re.compile(r"_[0-9a-f]{8}")
_LENGTH_BEFORE_VERSIONED = re.compile(r"(\d+)(?=(?:CUB|THRUST|_V)_\d)")
_VERSIONED = re.compile(r"(?:CUB|THRUST|_V)_\d+_SM_\d+(?:_\d+)*")


def match_key(name: str) -> str:
    """`name` with translation-unit hashes zeroed and CCCL's versioned namespaces folded."""
    return _fold_versioned(_zero_internal(name))


def _zero_internal(name: str) -> str:
    parts, at = [], 0
    while match := _INTERNAL.search(name, at):
        end = match.end() + int(match.group(1))  # the file part is <n> characters long
        tail = _HASH_TAIL.match(name, end)
        if tail is None:  # not the nvcc pattern after all: keep it as it is
            parts.append(name[at : match.end()])
            at = match.end()
            continue
        parts.append(
            f"{name[at : match.start()]}_INTERNAL_00000000_{match.group(1)}_{name[match.end() : end]}"
        )
        parts.append("_00000000")
        at = tail.end()
    parts.append(name[at:])
    return "".join(parts)


def _fold_versioned(name: str) -> str:
    parts, at = [], 0
    for match in _LENGTH_BEFORE_VERSIONED.finditer(name):
        if match.start() < at:
            continue
        end = match.end() + int(match.group(1))
        if _VERSIONED.fullmatch(name, match.end(), end):
            parts.append(f"{name[at : match.start()]}7CCCL_NS")
            at = end
    parts.append(name[at:])
    return "".join(parts)

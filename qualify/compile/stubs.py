"""Kernels that do no work of their own: stubs, set apart from the kernel comparison.

A library built for one target still holds every kernel its sources name; the ones the target
cannot run are compiled as stubs. ggml, for a type or an architecture a target does not build,
compiles the kernel's body as `NO_DEVICE_CODE` (ggml-cuda/common.cuh): a call to a
`[[noreturn]]` `no_device_code(file, line, function, arch)` that prints and traps. Such a
kernel's registers (the callee's, which the call graph charges to the kernel) move with every
toolchain, and judging them is noise: a stub never runs a real workload.

Contract of `is_stub(mix)`: whether a GPU kernel's own code, as its instruction mix
(`qualify.compile.instmix.Mix`) counts it, does no work — decided from the mix's class counts,
never from the kernel's name:

- it touches no memory: no global, buffer, flat, scalar (so it reads none of its own
  arguments, which arrive in memory), scratch or LDS instruction, and waits on nothing;
- it computes nothing of substance: no matrix, dot or packed 16-bit instruction, and at most
  `MOST_SETUP` scalar and vector instructions, which set up the arguments of one call;
- at most one call or jump (`branches`: the call to the function that prints and traps).

A kernel whose mix was not read is never a stub. The class `other` (program end, traps, `s_nop`
padding) is not counted: it does no work either way.

What the mix cannot show, and why the rule reads what it reads: the mix counts classes, not
opcodes, so a trap (`s_trap`, filed under `other`) is not seen as such; and in ggml's stubs the
trap is not in the kernel anyway but in the callee, whose code the mix does not charge to the
kernel. The rule therefore reads the kernel's own code for what a stub lacks. A kernel that
does real work in a function it calls is not a stub by it: it must load its arguments to pass
them on (scalar memory), as a real trampoline does. A kernel with no arguments that calls a
function working only on global variables would be taken for one; none is known in the engines
qualify reads.

In the ROCm example's recorded gfx1151 run, ggml's stubs are 7 to 13 instructions: 6 to 9
SALU, 0 to 2 VALU, one branch and at most one `other`, and nothing else. clang 19's listing of
the same pattern (tests/compile/kernels/stubs.hip) names them: `s_getpc_b64`, `s_add_u32` and
`s_addc_u32` for the callee's address and the constant strings', `s_mov_b32` and `v_mov_b32`
for the arguments and the stack pointer, one `s_swappc_b64`, an `s_delay_alu` hint.

CUDA: the rule above cannot hold for a CUDA kernel, whose every body loads from the constant
bank (its stack pointer, its arguments: the class `smem`), and ggml's CUDA stubs print through
`vprintf` with the call's arguments on the kernel's stack (local stores, STL: a 40-byte frame).
What tells them is the trap, which the CUDA table counts beside the mix (`traps`: `BPT.TRAP`
that no predicate guards, `qualify.compile.sassmix`). A CUDA kernel is a stub when it traps so
and its own code:

- touches no memory but its own stack's stores and the constant bank: no global, flat, shared,
  local load or wait; at most `MOST_CALL_STORES` local stores (one call's arguments);
- computes nothing: no matrix or dot instruction, at most `MOST_CONSTANT_HALVES` packed 16-bit
  ones (ptxas writes constants with `HFMA2.MMA`), at most `MOST_SETUP` scalar and vector ones;
- has at most `MOST_CUDA_BRANCHES` branches (the call, and the branch to itself ptxas ends
  code with).

A trap that a branch goes round (`if (n < 0) __trap();`) is counted too, since the branch, not a
predicate, guards it; such a kernel stays judged by the rest: the path round the trap does its
work, and work reaches global, flat or shared memory, which a stub never touches. So a stub has
nothing to write its work to, whichever path it takes. In the CUDA builds of ggml's
`mmq-instance-q4_0.cu` and `fattn-vec-instance-f16-f16.cu` (nvcc 13.0, sm_90) the 18 kernels
with a trap are exactly these, each 25 or 26 instructions: 8 ALU, 8 constant loads, 5 local
stores, 1 `HFMA2.MMA`, the call and the closing branch. A body that aborts by another call
(`assert` alone: `__assertfail` is called, no trap follows) stays judged, as do tables saved
before traps were counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

from qualify.compile.instmix import TRAPS, Mix

#: Scalar and vector instructions a stub may spend setting up its one call: ggml's gfx1151 stubs
#: spend 6 to 11; a kernel that does work spends more before it reads anything.
MOST_SETUP = 16
#: Classes of which a stub has none: memory of every kind, waits, and the math units.
_NO_WORK = (
    "global", "buffer", "flat", "smem", "scratch_load", "scratch_store", "lds", "waits",
    "matrix", "dot", "packed16",
)  # fmt: skip
#: CUDA (see the module): the classes a trapping stub has none of, and its bounds.
_CUDA_NO_WORK = ("global", "buffer", "flat", "scratch_load", "lds", "waits", "matrix", "dot")
MOST_CALL_STORES = 8
MOST_CONSTANT_HALVES = 2
MOST_CUDA_BRANCHES = 2
#: What the reasons call a stub: `qualify.compile.failurekinds` reads the first words.
STUB = "stub"
_WHAT = "its code does no work: it only calls, traps or ends"


def is_stub(mix: Mix) -> bool:
    """Whether a kernel's own code does no work (see the module)."""
    return (
        mix.read
        and all(mix.count(c) == 0 for c in _NO_WORK)
        and mix.branches <= 1
        and mix.valu + mix.salu <= MOST_SETUP
    )


def is_trap_stub(mix: Mix, traps: int) -> bool:
    """Whether a CUDA kernel's own code only sets up one call and traps (see the module)."""
    return (
        mix.read
        and traps > 0
        and all(mix.count(c) == 0 for c in _CUDA_NO_WORK)
        and mix.scratch_store <= MOST_CALL_STORES
        and mix.packed16 <= MOST_CONSTANT_HALVES
        and mix.branches <= MOST_CUDA_BRANCHES
        and mix.valu + mix.salu <= MOST_SETUP
    )


def figures_stub(figures: Mapping[str, Any] | None) -> bool:
    """`is_stub`, or for a CUDA kernel whose traps were counted `is_trap_stub`, of a kernel's
    aggregated row (its worst copy per column: a stub when every copy is one, since each count
    is bounded from above and the traps are the fewest of any copy), False for an absent kernel
    or a host one."""
    if figures is None or "instructions" not in figures:
        return False
    mix = Mix.of(figures)
    traps = figures.get(TRAPS)
    return is_stub(mix) or (isinstance(traps, Integral) and is_trap_stub(mix, int(traps)))


def stub_rule(
    pinned: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> tuple[str, list[str]] | None:
    """The finding of a GPU kernel that is a stub in either build, or None when it is in
    neither (the comparison's rules judge it then):

    - a stub in both, or in one while absent from the other: severity ``stub``, never judged;
    - real code in pinned, a stub in the candidate: FAIL (the candidate no longer builds it);
    - a stub in pinned, real code in the candidate: WARN (code pinned never had, so nothing to
      compare it with).

    A kernel in both builds whose mix was read in only one is left to the rules: the other may
    be either."""
    before, after = figures_stub(pinned), figures_stub(candidate)
    if (not before and not after) or not (_read(pinned) and _read(candidate)):
        return None  # a side whose mix was not read may be either: the rules judge the kernel
    if pinned is None:
        return STUB, [f"{STUB}, new in the candidate ({_WHAT})"]
    if candidate is None:
        return STUB, [f"{STUB} in pinned, missing from the candidate ({_WHAT})"]
    if before and after:
        return STUB, [f"{STUB} in both builds ({_WHAT}): not judged"]
    if after:
        return "FAIL", [
            f"{STUB} in the candidate ({_WHAT}); pinned has {_instructions(pinned)} instructions of real code"
        ]
    return "WARN", [
        f"{STUB} in pinned, real code in the candidate ({_instructions(candidate)} instructions): "
        "nothing to compare it with"
    ]


def _read(figures: Mapping[str, Any] | None) -> bool:
    """An absent kernel, or one whose mix was read."""
    return figures is None or Mix.of(figures).read


def _instructions(figures: Mapping[str, Any]) -> int:
    return Mix.of(figures).instructions

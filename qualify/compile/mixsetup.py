"""Which disassembler reads each family's instruction mix, from the check's parameters.

`objdump` (AMDGPU) and `cuobjdump` (CUDA) are command templates expanded with the candidate's
values, so that `{out}/libexec/...` names the candidate's own toolchain, and the one tool
decodes both builds: a decoder's own spelling (LLVM 22 prints gfx11 16-bit operands as register
halves where LLVM 21 prints whole registers) then never shows as a change of code. `auto`
looks on PATH (the newest versioned llvm-objdump first, which knows the most targets); an
empty value reads no mix. A tool that was asked for by name and does not run is an error; one
that `auto` does not find is a note in the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from qualify.compile.disassembly import DisassemblyError, Tool, first_on_path, probe
from qualify.compile.mixreading import OBJDUMP_OPTIONS, MixReading
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError

#: cuobjdump's options for the mix: the SASS of every function.
CUOBJDUMP_OPTIONS = ("-sass",)
_OBJDUMPS = (*(f"llvm-objdump-{v}" for v in range(30, 13, -1)), "llvm-objdump")


@dataclass(frozen=True)
class Disassembler:
    """A family's disassembler as a check names it: the parameter, the names `auto` looks for
    on PATH, and the options the mix is read with."""

    family: str
    param: str
    names: tuple[str, ...]
    options: tuple[str, ...]


DISASSEMBLERS = {
    "amdgpu": Disassembler("amdgpu", "objdump", _OBJDUMPS, OBJDUMP_OPTIONS),
    "cuda": Disassembler("cuda", "cuobjdump", ("cuobjdump",), CUOBJDUMP_OPTIONS),
}


def on_path(tool: Disassembler) -> tuple[list[str] | None, str | None]:
    """What `auto` finds on PATH for the family: its argv, or None and why not."""
    found = first_on_path(tool.names)
    if found is None:
        shown = ", ".join(tool.names[:2]) + (", ..." if len(tool.names) > 2 else "")
        return None, f"no {shown} on PATH: set `{tool.param}` to the toolchain's own"
    if tool.family == "cuda" and first_on_path(("nvdisasm",)) is None:
        # cuobjdump prints no SASS itself: it runs nvdisasm, and fails on every cubin without it.
        return None, "cuobjdump is on PATH but nvdisasm, which it runs for SASS, is not"
    return found, None


@dataclass(frozen=True)
class MixTools:
    """Each family's disassembler (None: its mix is not read), and why a family's is not."""

    amdgpu: Tool | None = None
    cuda: Tool | None = None
    not_read: dict[str, str] = field(default_factory=dict)


def mix_tools(ctx: CheckContext) -> MixTools:
    """Each family's disassembler, or why its mix is not read. A tool the plan named is
    `strict` (`named`): its failures are errors."""
    not_read: dict[str, str] = {}
    role = "candidate" if "candidate" in ctx.arms else ctx.roles[0]
    amdgpu = _tool(ctx, DISASSEMBLERS["amdgpu"], role, not_read)
    cuda = _tool(ctx, DISASSEMBLERS["cuda"], role, not_read)
    return MixTools(amdgpu, cuda, not_read)


def _tool(ctx: CheckContext, tool: Disassembler, role: str, not_read: dict[str, str]) -> Tool | None:
    """The family's disassembler, or None with the reason in `not_read`."""
    value = ctx.spec.params.get(tool.param, "auto")
    if not value:
        not_read[tool.family] = f"`{tool.param}` is empty"
        return None
    if value == "auto":
        argv, why = on_path(tool)
        if argv is None:
            not_read[tool.family] = why or "not found"
            return None
    else:
        argv = ctx.argv(value, role)
    try:
        return probe(argv, tool.options, ctx.env(role))
    except DisassemblyError as exc:
        raise QualifyError(f"{tool.param}: {exc.message}", exc.hint) from None


def named(ctx: CheckContext) -> frozenset[str]:
    """The families whose disassembler the plan named (not `auto`, not empty)."""
    return frozenset(
        f for f, tool in DISASSEMBLERS.items() if ctx.spec.params.get(tool.param, "auto") not in ("auto", "")
    )


def mix_reading(ctx: CheckContext, tools: MixTools, folder: Path) -> MixReading:
    """A reading for one role's scan, its temporary files under `folder`."""
    return MixReading(tools.amdgpu, tools.cuda, tools.not_read, folder, strict=named(ctx))

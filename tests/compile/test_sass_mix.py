"""The SASS instruction mix against NVIDIA's own decoder, on cubins nvcc builds here.

Every cubin is compiled by nvcc (on PATH, else the pinned PyPI wheels, `cuda_wheels`) from
tests/compile/kernels/cuda, for targets from sm_75 to sm_120. The side under test is
`parse_sass` on `cuobjdump -sass`; the expected side is `nvdisasm -json` on the same cubin,
read as JSON (function name, section length, each instruction's predicate and opcode), and the
cubin's section headers read by pyelftools. cuobjdump prints SASS only through nvdisasm, which
no toolchain wheel carries: it comes from NVIDIA's nvidia-cuda-nvdisasm wheel, pinned in
`cuda_wheels`.

The classes themselves are checked against what does not come from `classify`: the decoder's
own marks (control flow, calls, inter-warp barriers), ptxas's spill report, and kernels whose
source makes one class certain on one target and absent on another.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from cuda_wheels import find_nvcc, find_nvdisasm, load_toolchain, wheel_tree
from elftools.elf.elffile import ELFFile

from qualify.compile.cubin import read_cubin
from qualify.compile.instmix import CLASSES
from qualify.compile.ptxaslog import read_ptxas_log
from qualify.compile.sassmix import INSTRUCTION_BYTES, SASS_OPTIONS, classify, parse_sass, text_sizes

SOURCES = Path(__file__).parent / "kernels" / "cuda"
MIX_TARGETS = ["sm_75", "sm_80", "sm_90a", "sm_100a", "sm_120"]
BUILDS = [f"mix_{t}" for t in MIX_TARGETS] + ["resources_sm_80", "resources_sm_90", "resources_rdc_sm_90"]


def find_cuobjdump() -> str:
    """cuobjdump on PATH, else the pinned toolchain's (from its PyPI wheels)."""
    return shutil.which("cuobjdump") or str(wheel_tree(load_toolchain().PINNED) / "bin" / "cuobjdump")


@dataclass(frozen=True)
class Build:
    """One cubin, what cuobjdump and nvdisasm say of it, and ptxas's report of its build."""

    target: str
    data: bytes
    sass: str
    decoded: list[dict[str, object]]  # nvdisasm -json: one entry per function
    ptxas_log: str
    marked: bool  # whether `decoded` is nvdisasm's JSON, with its marks, or read from its text


class Builds:
    """Each cubin of BUILDS, built and read once, on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nvcc = find_nvcc()
        self.nvdisasm = find_nvdisasm()
        self.cuobjdump = find_cuobjdump()
        self.env = {**os.environ, "NVDISASM_PATH": str(self.nvdisasm.parent)}
        self.built: dict[str, Build] = {}

    def run(self, *argv: str | Path) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=self.env)
        if proc.returncode:
            pytest.fail(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
        return proc

    def get(self, name: str) -> Build:
        if name not in self.built:
            source, _, target = name.rpartition("_sm_")
            flags = ["-rdc=true"] if source.endswith("_rdc") else []
            path = self.root / f"{name}.cubin"
            compiled = self.run(
                self.nvcc, "-O3", "-Xptxas", "-v", "-cubin", f"-arch=sm_{target}", *flags,
                SOURCES / f"{source.removesuffix('_rdc')}.cu", "-o", path,
            )  # fmt: skip
            sass = self.run(self.cuobjdump, *SASS_OPTIONS, path).stdout
            decoded, marked = self.decode(path)
            self.built[name] = Build(
                f"sm_{target}", path.read_bytes(), sass, decoded, compiled.stderr, marked
            )
        return self.built[name]

    def decode(self, path: Path) -> tuple[list[dict[str, object]], bool]:
        """nvdisasm's functions as its JSON lists them. nvdisasm 13.5 crashes on `-json` of a
        relocatable (-rdc) cubin; its text form of those is read line by line instead."""
        proc = subprocess.run([self.nvdisasm, "-json", path], capture_output=True, text=True)
        if proc.returncode == 0:
            listed = json.loads(proc.stdout)[1]
            assert isinstance(listed, list)
            return listed, True
        elf = ELFFile(io.BytesIO(path.read_bytes()))
        assert proc.returncode < 0 and elf["e_type"] == "ET_REL", proc.stderr
        sizes = {s.name[6:]: s["sh_size"] for s in elf.iter_sections() if s.name.startswith(".text.")}
        return read_nvdisasm_text(self.run(self.nvdisasm, "-c", path).stdout, sizes), False


def read_nvdisasm_text(text: str, sizes: dict[str, int]) -> list[dict[str, object]]:
    """nvdisasm's text, in the shape of its JSON: `.section .text.<name>,...` starts a function;
    `/*<offset>*/ [@pred] OPCODE operands ;` is one instruction."""
    functions: list[dict[str, object]] = []
    listed: list[dict[str, str]] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] == ".section" and words[1].startswith(".text."):
            name = words[1].split(",")[0].removeprefix(".text.")
            listed = []
            functions.append({"function-name": name, "length": sizes[name], "sass-instructions": listed})
        elif len(words) > 1 and words[0].startswith("/*") and words[0].endswith("*/"):
            predicated = words[1].startswith("@")
            opcode = words[2 if predicated else 1].rstrip(";")
            listed.append({"opcode": opcode, **({"predicate": words[1]} if predicated else {})})
    return functions


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("sass"))


def instructions(function: dict[str, object]) -> list[dict[str, object]]:
    listed = function["sass-instructions"]
    assert isinstance(listed, list)
    return listed


def decoded_mix(function: dict[str, object]) -> dict[str, int]:
    """One function's mix from nvdisasm's JSON: each instruction's full text (predicate,
    opcode and modifiers, as the decoder splits them) classified, the section's length."""
    counts = Counter(classify(f"{i.get('predicate', '')} {i['opcode']}") for i in instructions(function))
    length = function["length"]
    assert isinstance(length, int)
    return {**{c: counts[c] for c in CLASSES}, "instructions": counts.total(), "code_bytes": length}


@pytest.mark.parametrize("name", BUILDS)
def test_every_function_matches_nvdisasm_class_by_class(builds: Builds, name: str) -> None:
    build = builds.get(name)
    ours = parse_sass(build.sass, build.data)
    decoded = {str(f["function-name"]): f for f in build.decoded}
    assert sorted(ours) == sorted(decoded) == sorted(k.name for k in read_cubin(build.data, name))
    for function, fields in decoded.items():
        expected = decoded_mix(fields)
        got = ours[function]
        for column, value in expected.items():
            assert got[column] == value, (function, column)
        assert got["true16_operands"] == got["high16_operands"] == 0
        # Modifiers and predicates do not change a class.
        for i in instructions(fields):
            base = str(i["opcode"]).split(".")[0]
            assert classify(str(i["opcode"])) == classify(base), i


@pytest.mark.parametrize("name", BUILDS)
def test_code_bytes_are_the_sections_and_16_bytes_an_instruction(builds: Builds, name: str) -> None:
    build = builds.get(name)
    elf = ELFFile(io.BytesIO(build.data))
    sections = {s.name[6:]: s["sh_size"] for s in elf.iter_sections() if s.name.startswith(".text.")}
    assert text_sizes(build.data) == sections and sections
    for function, mix in parse_sass(build.sass, build.data).items():
        assert mix["code_bytes"] == sections[function] == INSTRUCTION_BYTES * mix["instructions"]
    # Without the cubin the size is counted from the instructions, and comes out the same.
    assert parse_sass(build.sass, b"") == parse_sass(build.sass, build.data)


def test_the_decoders_own_marks_agree_with_the_classes(builds: Builds) -> None:
    marked: Counter[tuple[str, str]] = Counter()
    for build in (builds.get(name) for name in BUILDS):
        for function in build.decoded if build.marked else []:
            for i in instructions(function):
                kind = classify(str(i["opcode"]))
                marks = i.get("other-attributes") or {}
                assert isinstance(marks, dict)
                if marks.get("inter-warp-barrier") == "True":
                    assert kind == "waits", i
                if marks.get("subroutine-call") == "True":
                    assert kind == "branches", i
                flow = marks.get("control-flow") == "True"
                if kind == "branches":
                    assert flow, i
                if flow:
                    assert kind in {"branches", "waits", "other", "valu"}, i
                marked[(kind, "flow" if flow else "")] += 1
    assert marked[("branches", "flow")] and marked[("waits", "")] + marked[("waits", "flow")]


def plain_name(mangled: str) -> str:
    """`_Z8mma_tilePKjS0_Pf` -> `mma_tile`: the kernels here are plain functions, whose Itanium
    name is their length and name after `_Z`."""
    match = re.match(r"_Z(\d+)", mangled)
    return mangled[match.end() : match.end() + int(match[1])] if match else mangled


@pytest.mark.parametrize("target", MIX_TARGETS)
def test_each_class_is_where_the_source_puts_it(builds: Builds, target: str) -> None:
    build = builds.get(f"mix_{target}")
    found = {plain_name(k): v for k, v in parse_sass(build.sass, build.data).items()}
    matrix_kernels = {"mma_tile"} if target != "sm_75" else set()  # mma.sync m16n8k16: sm_80 on
    matrix_kernels |= {"sm_90a": {"warpgroup_mma"}, "sm_100a": {"tensor_memory_mma"}}.get(target, set())
    assert {k for k, m in found.items() if m["matrix"]} == matrix_kernels
    assert {k for k, m in found.items() if m["dot"]} == {"dot4"}
    assert {k for k, m in found.items() if m["flat"]} == {"generic_access"}
    assert found["half2_fma"]["packed16"] > 0
    assert found["atomics"]["global"] and found["atomics"]["lds"] and found["atomics"]["waits"]
    assert found["async_copy"]["global"] and found["async_copy"]["lds"] and found["async_copy"]["waits"]
    assert found["divergent"]["branches"] >= 3  # a call, its return, the convergence barrier
    for kernel, mix in found.items():
        assert sum(mix[c] for c in CLASSES) == mix["instructions"] > 0, kernel


@pytest.mark.parametrize("name", ["resources_sm_80", "resources_sm_90", "resources_rdc_sm_90"])
def test_spills_are_scratch_loads_and_stores(builds: Builds, name: str) -> None:
    build = builds.get(name)
    report = {key[1]: usage for key, usage in read_ptxas_log(build.ptxas_log, name).items()}
    found = parse_sass(build.sass, build.data)
    spilled = {f for f, usage in report.items() if usage.spill_stores}
    assert spilled == {"_Z9acc_spillPKfPfi"}  # the kernel made to spill does, and only it
    for function, mix in found.items():
        usage = report[function]
        if usage.spill_stores:
            assert mix["scratch_store"] > 0 and mix["scratch_load"] > 0, function
        if usage.stack_frame == 0:  # no frame: no local memory to load or store
            assert mix["scratch_store"] == mix["scratch_load"] == 0, function

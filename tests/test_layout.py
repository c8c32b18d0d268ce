"""The package layout holds: imports point down the layers, stages stay apart, no cycles.

Read from the source with `ast` (every import, also those inside functions and under
TYPE_CHECKING, since each is a dependency a reader must follow), so a test run needs no extra
tool and fails on the first import that crosses a line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "qualify"

STAGES = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")

#: Layer of each top-level part of the package; an import may only point to a lower layer or
#: within its own part. Parts of one layer are independent of each other.
LAYERS: dict[str, int] = {
    "cli": 7,
    "__main__": 8,
    "console": 6,
    "doctor": 6,
    "scaffold": 6,
    "stagefit": 5,  # the default plan fitted to a build's programs; only `init` uses it
    "kinds": 6,
    "kinddocs": 6,
    "report": 5,
    "bisect": 5,  # probes a series of toolchains through the run; only the CLI above uses it
    "remedy": 5,  # rebuilds a run's failing sources with variants; only the CLI above uses it
    **dict.fromkeys(STAGES, 4),
    "pipeline": 4,
    "records": 3,  # the run folder's documents as types: what every part above reads them through
    "checks": 2,
    "core": 1,
    "stats": 1,
    "__init__": 0,  # the version
}

#: Lower parts a part must still not import: the report reads stages only through the contract.
FORBIDDEN: dict[str, set[str]] = {"report": set(STAGES)}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The qualify modules `name` imports (a name imported from a package counts as the
    submodule when one exists)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "qualify")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "qualify":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in known else node.module


def part(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: set(imports(name, path, set(found))) - {name} for name, path in found.items()}


def test_every_part_has_a_layer() -> None:
    assert {part(m) for m in modules()} <= set(LAYERS), "a new top-level part needs a layer in LAYERS"


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for module, targets in graph().items():
        here = part(module)
        for target in targets:
            there = part(target)
            if there == here or there == "__init__":
                continue
            if LAYERS[there] >= LAYERS[here] or there in FORBIDDEN.get(here, set()):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_core_and_checks_import_no_stage() -> None:
    # Implied by the layers, but the one rule a reader most needs spelled out.
    offenders = [
        f"{m} imports {t}"
        for m, ts in graph().items()
        if part(m) in {"core", "checks", "pipeline", "stats"}
        for t in ts
        if part(t) in STAGES
    ]
    assert not offenders


def test_no_import_cycles() -> None:
    deps = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(deps.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(deps):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("word", ["utils", "common", "helpers", "misc"])
def test_no_grab_bag_modules(word: str) -> None:
    assert not [m for m in modules() if m.split(".")[-1] == word]


def test_modules_stay_small() -> None:
    # About 400 lines at most: past that a module holds two ideas and should be split.
    large = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > 420}
    assert not large, f"modules over 420 lines: {large}"

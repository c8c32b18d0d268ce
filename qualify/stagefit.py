"""The default plan's stage files fitted to the programs an engine's build holds, for `qualify
init`: the default plan runs llama.cpp's tools (llama-perplexity, llama-server, llama-bench and a
ctest tree), and an engine without them would get stage files that call programs it does not
have, each to be found and rewritten by hand.

So each stage whose program the build lacks is written anew: serving and soak without a server
are declared not applicable (a run then qualifies on the other stages, and every verdict line
names them), numerics and bench get a skeleton of the check kind that takes any program's
metrics (`command`, `bench` with `format = "metrics"`) with a comment saying what to replace,
and the compile stage loses its operator tests without a ctest tree. Without a build nothing is
known, and the files stay as the default plan has them, which `init` says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

#: Each stage file of the default plan, and the llama.cpp program it runs.
PROGRAMS = {
    "30-numerics.toml": "llama-perplexity",
    "40-serving.toml": "llama-server",
    "50-soak.toml": "llama-server",
    "60-bench.toml": "llama-bench",
}
COMPILE = "20-compile.toml"
#: How a skeleton's run line names the program the project must put there.
SKELETON = "REPLACE-with"


def _found(tools: Iterable[str]) -> str:
    names = sorted(tools)
    if not names:
        return "no program"
    shown = ", ".join(names[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _not_applicable(stage: str, program: str, tools: frozenset[str]) -> str:
    kind = "openai-suite" if stage == "serving" else "soak"
    return f"""\
# {stage}: the engine's build has no {program} (its programs: {_found(tools)}), so this stage
# is declared not applicable: a run qualifies on the other stages, and every verdict line names
# this one. An engine with an OpenAI-compatible server gets a `{kind}` check here instead
# (`qualify kinds` describes it; the default plan's is in qualify's own stages/).
name = "{stage}"
not_applicable = "the engine's build has no server ({program} not found)"
"""


def _numerics(tools: frozenset[str]) -> str:
    return f"""\
# numerics: the engine's build has no llama-perplexity (its programs: {_found(tools)}). A
# skeleton to finish: a program of the engine's that computes its results on fixed inputs and
# writes them as the metrics JSON to {{out_file}} (`qualify kinds` shows the schema), each metric
# judged by a limit: max_NAME / min_NAME on the candidate alone, NAME_margin against pinned.
# examples/c-kernels/stages/30-numerics.toml is one such plan.
name = "numerics"

[[check]]
kind = "command"
name = "accuracy"
run = "{{bin}}/REPLACE-with-the-engine-accuracy-program {{out_file}}"
metrics = true
# limits = {{ max_rel_error = 1e-6 }}
"""


def _bench(tools: frozenset[str]) -> str:
    return f"""\
# bench: the engine's build has no llama-bench (its programs: {_found(tools)}). A skeleton to
# finish: a program of the engine's that times its work and writes the metrics JSON to
# {{out_file}} (each metric's samples and whether higher is better); qualify runs it in
# interleaved pairs and decides "not slower than pinned by more than speed_margin".
# examples/c-kernels/stages/60-bench.toml is one such plan.
name = "bench"

[[check]]
kind = "bench"
name = "bench"
format = "metrics"
run = "{{bin}}/REPLACE-with-the-engine-benchmark {{out_file}}"
limits = {{ speed_margin = 0.05 }}
"""


_CHECK = re.compile(r"^\[\[check\]\]\s*$")
_TESTS_KIND = re.compile(r'^\s*kind\s*=\s*"tests"\s*(#.*)?$')


def without_ctest(text: str) -> str:
    """The compile stage `text` without its `tests` check (which runs ctest), and a comment in its
    place saying what would go there."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _CHECK.match(line)]
    for start in starts:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].lstrip().startswith("[")), len(lines))
        if any(_TESTS_KIND.match(line) for line in lines[start:end]):
            note = [
                "# Operator tests: the engine's build has no ctest tree (share/tests/CTestTestfile.cmake).",
                "# A `tests` check running the engine's own test program, writing JUnit to {out_file},",
                '# goes here: [[check]], kind = "tests", name = "unit-tests",',
                '# run = "{bin}/PROGRAM {out_file}".',
            ]
            kept = [*lines[:start], *note, *lines[end:]]
            return "\n".join(kept).rstrip("\n") + "\n"
    return text


def fit_stages(stages: Path, tools: frozenset[str] | None, ctest: bool) -> list[str]:
    """Rewrite the stage files under `stages` whose program the build lacks; what was written,
    one line a file. `tools` None (no build found) leaves them all."""
    if tools is None:
        return [
            "no build was found: the stage files call llama.cpp's programs (llama-perplexity, "
            "llama-server, llama-bench, ctest); rewrite those the engine does not have, or build "
            "it (nix build) and run `qualify init --force` again"
        ]
    said: list[str] = []
    for name, program in PROGRAMS.items():
        path = stages / name
        if program in tools or not path.is_file():
            continue
        stage = name.split("-", 1)[1].removesuffix(".toml")
        if stage in ("serving", "soak"):
            path.write_text(_not_applicable(stage, program, tools), encoding="utf-8")
            said.append(f"{path}: no {program} in the build: {stage} declared not applicable")
        else:
            path.write_text(_numerics(tools) if stage == "numerics" else _bench(tools), encoding="utf-8")
            said.append(
                f"{path}: no {program} in the build: a {stage} check skeleton to finish (its run line)"
            )
    compile_stage = stages / COMPILE
    if not ctest and compile_stage.is_file():
        text = compile_stage.read_text(encoding="utf-8")
        fitted = without_ctest(text)
        if fitted != text:
            compile_stage.write_text(fitted, encoding="utf-8")
            said.append(f"{compile_stage}: no ctest tree in the build: the operator-tests check left out")
    return said

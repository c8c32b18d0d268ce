"""A remedy run: every variant asked for, on every failing source file asked for, each unit
built, read and saved before the next starts, so that a stop loses one unit at most."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qualify.compile.disassembly import Tool
from qualify.compile.scan import load_tables
from qualify.core.errors import UsageError
from qualify.core.remedies import RemedySpec
from qualify.core.runstore import now_iso
from qualify.core.tomlfile import suggest
from qualify.records.build import BuildSource, read_source
from qualify.records.compile import KernelMeasurement
from qualify.remedy import state as saved
from qualify.remedy.failing import CompileCheck, FailingSource
from qualify.remedy.judge import SourceOutcome, judge_variant
from qualify.remedy.units import (
    ListedUnit,
    RemedyError,
    build_unit,
    disassembler,
    list_units,
    read_unit,
    variant_ref,
)


@dataclass
class Remedy:
    """What a remedy found: per variant, each source file's outcome, and the units that could
    not be built or read, with why."""

    check: CompileCheck
    failing: list[FailingSource]
    variants: dict[str, RemedySpec]
    outcomes: dict[str, list[SourceOutcome]] = field(default_factory=dict)
    problems: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def chosen_variants(
    declared: Mapping[str, RemedySpec], names: Sequence[str], arm: str
) -> dict[str, RemedySpec]:
    """The variants asked for (all declared when none is named) that remedy the run's candidate."""
    if not declared:
        raise UsageError(
            "qualify.toml declares no remedy variant",
            'add one: [remedies.NAME] with installable = ".#ATTRS" (docs/remedy.md)',
        )
    for name in names:
        if name not in declared:
            raise UsageError(
                f"no remedy variant {name!r}{suggest(name, declared)}",
                "declared: " + ", ".join(sorted(declared)),
            )
    picked = {n: declared[n] for n in (names or sorted(declared))}
    wrong = [n for n, v in picked.items() if v.candidate is not None and v.candidate != arm]
    if wrong:
        raise UsageError(
            f"remedy variant(s) {', '.join(wrong)} remedy another arm than the run's candidate, {arm}",
            "name the variants for this candidate with --variant",
        )
    return picked


def chosen_sources(failing: list[FailingSource], names: Sequence[str]) -> list[FailingSource]:
    known = {f.source_file: f for f in failing}
    for name in names:
        if name not in known:
            raise UsageError(
                f"{name!r} holds no failing kernel{suggest(name, known)}",
                "source files with failures: "
                + ", ".join(list(known)[:10])
                + (" …" if len(known) > 10 else ""),
            )
    return [known[n] for n in names] if names else failing


def locked_url(run: Path) -> str | None:
    """The revision the run's arms were built from, as its build stage recorded it (None: the
    run built nothing)."""
    for path in sorted(run.glob("*/*/source.json")):
        source = read_source(path)
        if isinstance(source, BuildSource):
            return source.locked_url
    return None


def candidate_tool(check: CompileCheck) -> list[str] | None:
    """The disassembler the compile check read the candidate with (its argv), if it read a mix."""
    measured = KernelMeasurement.read(check.folder / "candidate" / "measurement.json")
    mix = measured.mix.get(check.family.name)
    tool = getattr(mix, "tool", None) if mix is not None else None
    return list(tool) if tool else None


def run_remedy(
    folder: Path,
    check: CompileCheck,
    failing: list[FailingSource],
    asked: tuple[dict[str, RemedySpec], list[FailingSource]],
    env: Mapping[str, str],
    echo: Callable[[str], None],
    flake: str | None = None,
) -> Remedy:
    """Build the units of the variants and source files `asked`, then judge every variant the
    remedy's folder holds units of (earlier ones too) over every failing source it built. The
    project's variants (`.#…`) come from `flake` where given, else from the run's revision."""
    variants, sources = asked
    locked = flake or locked_url(check.run)
    tool = None
    if variants:
        tool, note = disassembler(check.family, candidate_tool(check), check.disassembler, env)
        if note is not None:
            echo(note)
    state = saved.open_state(folder, check.run.name, check.label)
    state = state.model_copy(
        update={
            "variants": {
                **state.variants,
                **{n: saved.Variant(installable=v.installable, flags=v.flags) for n, v in variants.items()},
            },
            "sources": sorted({*state.sources, *(f.source_file for f in sources)}),
        }
    )
    saved.save(folder, state)
    problems: dict[str, dict[str, str]] = {name: {} for name in state.variants}
    for name, variant in variants.items():
        ref = variant_ref(locked, variant.installable)
        units = list_units(ref, env)
        for file in (f.source_file for f in sources):
            if file not in units:
                problems[name][file] = f"{variant.installable} has no unit for {file}"
                continue
            try:
                state = _unit(folder, state, check, (name, file), ref, units[file], tool, env, echo)
            except RemedyError as exc:
                problems[name][file] = exc.message
    everything = {n: RemedySpec(n, v.installable, v.flags, None) for n, v in state.variants.items()}
    found = Remedy(check, failing, everything, problems=problems)
    family = check.family.name
    for name in everything:
        tables = {}
        for file in (f.source_file for f in failing):
            last = state.last(name, file)
            if last is not None and last.ok and (folder / last.folder / f"{family}.parquet").is_file():
                tables[file] = load_tables(folder / last.folder)[family]
        found.outcomes[name] = judge_variant(check, tables)
        found.seconds[name] = round(
            sum(u.seconds or 0.0 for u in state.units if u.variant == name and u.ok), 1
        )
    return found


def _unit(
    folder: Path,
    state: saved.RemedyFile,
    check: CompileCheck,
    which: tuple[str, str],
    ref: str,
    listed: ListedUnit,
    tool: Tool | None,
    env: Mapping[str, str],
    echo: Callable[[str], None],
) -> saved.RemedyFile:
    """One unit, built and read unless an attempt at it finished from the derivation the
    variant gives now: a variant whose flags changed since is built again, never judged by the
    objects of the flags it had."""
    variant, file = which
    attr = listed.attr
    last = state.last(variant, file)
    if last is not None and last.ok and (folder / last.folder / f"{check.family.name}.parquet").is_file():
        if listed.drv is None or last.drv == listed.drv:
            return state
        echo(f"{variant}: {file}: built from {last.drv}, the variant now gives {listed.drv}: building again")
    unit = saved.Unit(
        variant=variant,
        source_file=file,
        attr=attr,
        attempt=1 if last is None else last.attempt + 1,
        started=now_iso(),
    )
    state = _put(folder, state, unit)
    echo(f"{variant}: building {file} (attempt {unit.attempt})")
    where = folder / unit.folder
    where.mkdir(parents=True, exist_ok=True)
    built = build_unit(ref, attr, where, env)
    done = unit.model_copy(
        update={
            "finished": now_iso(),
            "ok": built.ok,
            "drv": built.drv,
            "out": built.out,
            "seconds": built.seconds,
        }
    )
    table = None
    try:
        if not built.ok or built.out is None:
            raise RemedyError(built.error or f"{ref}.{attr}: no output")
        table = read_unit(Path(built.out), file, where, tool, check.family, check.spills_from_logs)
    except RemedyError as exc:
        done = done.model_copy(update={"ok": False, "error": exc.message})
        _put(folder, state, done)
        raise
    state = _put(folder, state, done)
    echo(f"{variant}: {file}: {len(table)} kernels in {built.seconds:.1f} s")
    return state


def _put(folder: Path, state: saved.RemedyFile, unit: saved.Unit) -> saved.RemedyFile:
    """`state` with `unit` in place of its attempt's earlier record, saved."""
    kept = [
        u
        for u in state.units
        if (u.variant, u.source_file, u.attempt) != (unit.variant, unit.source_file, unit.attempt)
    ]
    state = state.model_copy(update={"units": [*kept, unit]})
    saved.save(folder, state)
    return state

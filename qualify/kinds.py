"""The one list of check kinds, above the stage packages.

Explicit, in the default order of the stages (no discovery, no import-time magic): entry points
call `install()` once, and the spine then finds the kinds through `qualify.checks.registry`.

A stage declares its kind in `<stage>/kind.py` (name, parameters, limits, verdict rules: all that
`qualify plan`, `qualify kinds` and the preflight read) and measures and judges it in
`<stage>/check.py`, which pulls in pandas, numpy or httpx; the generic kinds do the same in
`checks/command.py` and `checks/command_check.py`, `checks/tests.py` and `checks/tests_check.py`.
The loaders below bind the two, and import an implementation only when a check of its kind first
runs or is judged.
"""

from __future__ import annotations

from qualify.bench import kind as bench
from qualify.build import kind as build
from qualify.checks import command, registry, tests
from qualify.checks.base import CheckKind, EvidenceTypes, Judge, Measure, MemberView
from qualify.compile import kind as compile_
from qualify.distribution import kind as distribution
from qualify.numerics import kind as numerics
from qualify.serving import kind as serving
from qualify.soak import kind as soak


def _build() -> tuple[Measure, Judge]:
    from qualify.build.check import judge, measure

    return measure, judge


def _build_evidence() -> EvidenceTypes:
    from qualify.records.build import BuildFacts, BuildMeasurement

    return EvidenceTypes(BuildMeasurement, BuildFacts)


def _command() -> tuple[Measure, Judge]:
    from qualify.checks.command_check import judge, measure

    return measure, judge


def _tests() -> tuple[Measure, Judge]:
    from qualify.checks.tests_check import judge, measure

    return measure, judge


def _command_evidence() -> EvidenceTypes:
    from qualify.checks.commandfacts import CommandFacts
    from qualify.checks.rolerun import RoleRun

    return EvidenceTypes(RoleRun, CommandFacts)


def _tests_evidence() -> EvidenceTypes:
    from qualify.checks.rolerun import JUnitRun
    from qualify.checks.testsfacts import CasesFacts

    return EvidenceTypes(JUnitRun, CasesFacts)


def _compile() -> tuple[Measure, Judge]:
    from qualify.compile.check import judge, measure

    return measure, judge


def _compile_evidence() -> EvidenceTypes:
    from qualify.records.compile import KernelFacts, KernelMeasurement

    return EvidenceTypes(KernelMeasurement, KernelFacts)


def _numerics() -> tuple[Measure, Judge]:
    from qualify.numerics.check import judge, measure

    return measure, judge


def _numerics_evidence() -> EvidenceTypes:
    from qualify.records.numerics import KldFacts, KldMeasurement

    return EvidenceTypes(KldMeasurement, KldFacts)


def _serving() -> tuple[Measure, Judge]:
    from qualify.serving.check import judge, measure

    return measure, judge


def _serving_evidence() -> EvidenceTypes:
    from qualify.records.serving import ServingFacts, ServingMeasurement

    return EvidenceTypes(ServingMeasurement, ServingFacts)


def _soak() -> tuple[Measure, Judge]:
    from qualify.soak.check import judge, measure

    return measure, judge


def _soak_evidence() -> EvidenceTypes:
    from qualify.records.soak import SoakFacts, SoakMeasurement

    return EvidenceTypes(SoakMeasurement, SoakFacts)


def _bench_evidence() -> EvidenceTypes:
    from qualify.records.bench import BenchFacts, BenchMeasurement

    return EvidenceTypes(BenchMeasurement, BenchFacts)


def _bench() -> tuple[Measure, Judge]:
    from qualify.bench.check import judge, measure

    return measure, judge


def _flake_inputs() -> tuple[Measure, Judge]:
    from qualify.distribution.inputs import judge, measure

    return measure, judge


def _flake_inputs_evidence() -> EvidenceTypes:
    from qualify.records.distribution import InputsFacts, InputsMeasurement

    return EvidenceTypes(InputsMeasurement, InputsFacts)


def _binary_cache() -> tuple[Measure, Judge]:
    from qualify.distribution.cache import judge, measure

    return measure, judge


def _binary_cache_evidence() -> EvidenceTypes:
    from qualify.records.distribution import CacheFacts, CacheMeasurement

    return EvidenceTypes(CacheMeasurement, CacheFacts)


def _pin_move() -> tuple[Measure, Judge]:
    from qualify.distribution.pinmove import judge, measure

    return measure, judge


def _pin_move_evidence() -> EvidenceTypes:
    from qualify.records.distribution import PinMoveFacts, PinMoveMeasurement

    return EvidenceTypes(PinMoveMeasurement, PinMoveFacts)


def _role_members() -> MemberView:
    from qualify.checks.roleview import role_view

    return role_view


def _numerics_members() -> MemberView:
    from qualify.numerics.sharedpass import member_view

    return member_view


def _serving_members() -> MemberView:
    from qualify.serving.memberview import member_view

    return member_view


def _bench_members() -> MemberView:
    from qualify.bench.sharedschedule import member_view

    return member_view


KINDS: tuple[CheckKind, ...] = (
    build.KIND.implemented_by(_build, evidence=_build_evidence),
    command.KIND.implemented_by(_command, _role_members, _command_evidence),
    tests.KIND.implemented_by(_tests, _role_members, _tests_evidence),
    compile_.KIND.implemented_by(_compile, evidence=_compile_evidence),
    numerics.KIND.implemented_by(_numerics, _numerics_members, _numerics_evidence),
    serving.KIND.implemented_by(_serving, _serving_members, _serving_evidence),
    soak.KIND.implemented_by(_soak, _role_members, _soak_evidence),
    bench.KIND.implemented_by(_bench, _bench_members, _bench_evidence),
    distribution.INPUTS.implemented_by(_flake_inputs, evidence=_flake_inputs_evidence),
    distribution.CACHE.implemented_by(_binary_cache, evidence=_binary_cache_evidence),
    distribution.PIN_MOVE.implemented_by(_pin_move, evidence=_pin_move_evidence),
)


def install() -> None:
    registry.install(KINDS)

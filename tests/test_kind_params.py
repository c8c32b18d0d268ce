"""Every kind's parameters are declared once, as the fields of its parameters type, and the
kind's `Param`s are derived from them: the same names in the same order, each of the field's
type and default, so that `measure` and `judge` read by attribute what `qualify plan` checked
and shows; a field that is no parameter is refused where the type is declared; and a saved
parameter of the wrong type is refused naming the file and the key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from qualify.bench.params import BenchParams
from qualify.build.params import BuildParams
from qualify.checks import kindparams
from qualify.checks.base import CheckKind, Param
from qualify.checks.binarycache import CacheParams
from qualify.checks.commandparams import CommandParams
from qualify.checks.kindparams import KindParams
from qualify.checks.testsparams import TestsParams
from qualify.compile.params import CompileParams
from qualify.core.checkspec import CheckSpec
from qualify.core.errors import RunStoreError
from qualify.distribution.params import InputsParams, PinMoveParams
from qualify.kinds import KINDS
from qualify.numerics.params import NumericsParams
from qualify.serving.params import ServingParams
from qualify.soak.params import SoakParams

TYPES: dict[str, type[KindParams]] = {
    "nix-build": BuildParams,
    "command": CommandParams,
    "tests": TestsParams,
    "kernel-resources": CompileParams,
    "kld": NumericsParams,
    "openai-suite": ServingParams,
    "soak": SoakParams,
    "bench": BenchParams,
    "flake-inputs": InputsParams,
    "binary-cache": CacheParams,
    "pin-move": PinMoveParams,
}
#: The field type of each parameter type.
FIELD_TYPES: dict[str, Any] = {
    "string": str,
    "number": float,
    "integer": int,
    "boolean": bool,
    "strings": tuple[str, ...],
    "table": dict[str, Any],
}


def _expected_type(param: Param) -> Any:
    base = FIELD_TYPES[param.type]
    return base | None if param.default is None and not param.required else base


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_reads_its_parameters_through_a_type_of_the_declared_ones(kind: CheckKind) -> None:
    params = TYPES[kind.name]
    fields = dataclasses.fields(params)
    assert [f.name for f in fields] == [p.name for p in kind.params], kind.name
    hints = get_type_hints(params)
    for field, param in zip(fields, kind.params, strict=True):
        where = f"{kind.name}.{param.name}"
        assert hints[field.name] == _expected_type(param), where
        if param.required:
            assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, (
                where
            )
            continue
        declared = tuple(param.default) if isinstance(param.default, list) else param.default
        assert _default(field) == declared, where
        assert type(_default(field)) is type(declared), where


def test_every_kind_has_a_parameters_type() -> None:
    assert set(TYPES) == {k.name for k in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_declares_its_parameters_through_its_type(kind: CheckKind) -> None:
    assert kind.params == TYPES[kind.name].declared()


def test_a_declaration_shows_a_list_as_a_plan_writes_it_and_a_table_fresh() -> None:
    @dataclass(frozen=True)
    class Declared(KindParams):
        run: str = kindparams.param(help="r")
        globs: tuple[str, ...] = kindparams.param(("*",), help="g")
        body: dict[str, Any] = kindparams.param(factory=dict, help="b")
        level: float | None = kindparams.param(None, help="l", only_when=("run", "x"))

    run, globs, body, level = Declared.declared()
    assert (run.type, run.required, run.default) == ("string", True, None)
    assert (globs.type, globs.default) == ("strings", ["*"])
    assert (body.type, body.default) == ("table", {})
    assert (level.type, level.default, level.only_when) == ("number", None, ("run", "x"))


def test_a_field_that_is_no_parameter_is_refused() -> None:
    @dataclass(frozen=True)
    class Undeclared(KindParams):
        run: str = "x"

    with pytest.raises(TypeError, match=r"Undeclared\.run is not declared with param"):
        Undeclared.declared()

    @dataclass(frozen=True)
    class Untyped(KindParams):
        when: list[int] = kindparams.param(factory=list, help="w")

    with pytest.raises(TypeError, match="no parameter is of type"):
        Untyped.declared()


def _spec(kind: str, **params: Any) -> CheckSpec:
    return CheckSpec("c", kind, params, {}, ("pinned", "candidate"))


def test_a_spec_leaving_a_parameter_out_reads_its_declared_default() -> None:
    """A result saved before a parameter was added is judged by the kind's default."""
    read = NumericsParams.of(_spec("kld", run="score {out_file}", min_chunks=8))
    assert (read.min_chunks, read.looks, read.floor_rerun, read.artifact_bytes) == (8, 4, True, None)
    bench = BenchParams.of(_spec("bench", run="b", allow_config_diff=["n_gpu_layers"], alpha_family=0.1))
    assert bench.allow_config_diff == ("n_gpu_layers",) and bench.discard_reps == 0
    assert SoakParams.of(_spec("soak", server="s {port}")).body == {}


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"run": "b", "discard_reps": "2"}, r"spec\.params\.discard_reps: expected a whole number"),
        ({"run": "b", "discard_reps": True}, r"spec\.params\.discard_reps: expected a whole number"),
        ({"run": "b", "alpha": None}, r"spec\.params\.alpha: expected a number \(it is None\)"),
        ({"run": "b", "allow_config_diff": ["a", 1]}, r"spec\.params\.allow_config_diff: expected a list"),
        ({"run": "b", "min_pairs": 1.5}, r"spec\.params\.min_pairs: expected a whole number or null"),
        ({"format": "metrics"}, r"spec\.params\.run is missing"),
    ],
)
def test_a_saved_parameter_of_the_wrong_type_is_refused_naming_file_and_key(
    params: dict[str, Any], said: str
) -> None:
    where = Path("runs/r/60-bench/b/result.json")
    with pytest.raises(RunStoreError, match=r"runs/r/60-bench/b/result\.json: " + said):
        BenchParams.of(_spec("bench", **params), where)


def test_a_number_written_whole_stays_as_written() -> None:
    assert SoakParams.of(_spec("soak", server="s", grace_s=30)).grace_s == 30
    assert isinstance(SoakParams.of(_spec("soak", server="s", grace_s=30)).grace_s, int)

"""The distribution stage's kinds' parameters, declared once as typed fields
(`qualify.checks.kindparams`): `qualify.distribution.kind` derives each kind's `Param`s from
them, and `measure` reads them by attribute. The `binary-cache` kind's are in
`qualify.checks.binarycache`, since the build stage reads them too."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.checks.kindparams import KindParams, param


@dataclass(frozen=True)
class InputsParams(KindParams):
    """A `flake-inputs` check's parameters."""

    mirror: str | None = param(
        None,
        help="a binary cache folder (or file:// URL) the inputs' sources are kept in and "
        "restored from; none: each must be fetchable from its origin",
    )


@dataclass(frozen=True)
class PinMoveParams(KindParams):
    """A `pin-move` check's parameters."""

    run: str | None = param(
        None,
        help="the command that makes the candidate the default in a clean clone of the run's "
        "revision; none: lock the inputs the candidate overrides",
    )
    allow_unqualified: str | None = param(
        None, help="write the patch although a stage before did not qualify, for this reason (a WARN)"
    )

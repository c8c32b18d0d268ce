"""The contract every check kind fulfils: declared parameters, `measure`, then a pure `judge`.

`measure(ctx)` runs the check for each role and saves raw data under the check's folder.
`judge(saved)` decides from that saved data and the plan's limits alone, so a run can be
re-judged with new limits without measuring again.

A kind is declared apart from its implementation: the declaration (name, parameters and limits
with their defaults and ranges, verdict rules, what the plan must refuse) is all that
`qualify plan`, `qualify kinds` and the preflight read, and imports nothing heavy; `measure` and
`judge` come from a loader, called when a check of the kind first runs or is judged (a stage's
implementation pulls in pandas, numpy, httpx).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from qualify.core.ranges import ANY, NON_NEGATIVE, SECONDS, Range
from qualify.core.verdicts import Verdict

if TYPE_CHECKING:
    from qualify.checks.evidence import Evidence
    from qualify.checks.figures import Chart, Table
    from qualify.core.checkspec import CheckSpec
    from qualify.core.config import ProjectConfig
    from qualify.core.context import CheckContext

E = TypeVar("E", bound="Evidence")

ParamType = Literal["string", "number", "integer", "boolean", "strings", "table"]

#: The roles by name: what is keyed by role is read with these, so a misspelt role is an error
#: where it is written, never a silent miss.
PINNED, CANDIDATE, REFERENCE = "pinned", "candidate", "reference"
ROLES = (PINNED, CANDIDATE, REFERENCE)


@dataclass(frozen=True)
class Param:
    """A parameter a check kind accepts in the plan.

    A number's (or an integer's) `allowed` range is checked when the plan is loaded; its
    default lies in it (a test holds every kind to that)."""

    name: str
    type: ParamType
    default: Any = None
    required: bool = False
    help: str = ""
    allowed: Range | None = None
    #: The parameter means something only when another one has a value (a server bench's
    #: request sizes only when `format = "llama-server"`): (that parameter, its value).
    #: `qualify plan` leaves it out elsewhere, so a plan shows what its check will use.
    only_when: tuple[str, str] | None = None

    def applies(self, params: Mapping[str, Any]) -> bool:
        return self.only_when is None or params.get(self.only_when[0]) == self.only_when[1]


#: Every check's `timeout`, whatever its kind: seconds a role's command may run before it is
#: stopped. Zero or less would stop the candidate before it starts and blame it; NaN or infinity
#: would mean no limit where one was asked for.
TIMEOUT = Param(
    "timeout", "number", None, help="seconds a role may run before it is stopped", allowed=SECONDS
)


@dataclass(frozen=True)
class Limit:
    """A limit a check kind judges by: its range, and the value it judges by when the plan
    gives none (None: the limit is judged only when the plan sets it). The implementation reads
    the default from here (`CheckKind.limit_defaults`), so it is written once."""

    name: str
    allowed: Range
    default: float | None = None
    help: str = ""


def open_limit(name: str) -> Limit:
    """A limit of a kind that takes any `max_*`/`min_*`/`*_margin`: a margin is a fraction by
    which pinned may be beaten, never negative; a bound on a metric may be any finite number."""
    if name.endswith("_margin"):
        return Limit(name, NON_NEGATIVE, help="how much worse than pinned the metric may be (a fraction)")
    return Limit(name, ANY, help="a bound on the candidate's median of the metric")


@dataclass(frozen=True)
class Finding:
    """One thing a reviewer should read: a newly failing test, a limit crossed."""

    verdict: Verdict
    message: str
    role: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "message": self.message, "role": self.role}


@dataclass(frozen=True)
class Judgement:
    """A check's verdict, why, and the evidence behind it."""

    verdict: Verdict
    reason: str
    findings: tuple[Finding, ...] = ()
    #: The report's tables and charts (`qualify.checks.figures`).
    tables: tuple[Table, ...] = ()
    #: The kind's facts type (`CheckKind.evidence`), or, for a kind that has none yet, a dict.
    facts: Evidence | dict[str, Any] = field(default_factory=dict)
    charts: tuple[Chart, ...] = ()
    #: What was judged, one short line each: a limit evaluated, a comparison made, a series
    #: tested. A judgement with none is never PASS or WARN (`qualify.pipeline.judging`).
    judged: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "judged": list(self.judged),
            "findings": [f.as_json() for f in self.findings],
            "tables": [t.to_json() for t in self.tables],
            "facts": self.facts if isinstance(self.facts, dict) else self.facts.to_json(),
            "charts": [c.to_json() for c in self.charts],
        }


@dataclass(frozen=True)
class SavedCheck:
    """What `judge` may look at: the check's folder and its resolved plan entry."""

    folder: Path
    spec: CheckSpec
    roles: tuple[str, ...]

    def role_dir(self, role: str) -> Path:
        return self.folder / role

    def measurement(self, role: str) -> dict[str, Any] | None:
        from qualify.core.runstore import read_json  # the run store: not for a plan's declarations

        path = self.role_dir(role) / "measurement.json"
        return read_json(path) if path.is_file() else None

    def measured(self, role: str, kind: type[E]) -> E | None:
        """The role's measurement as its kind's type, checked (None: not measured)."""
        path = self.role_dir(role) / "measurement.json"
        return kind.read(path) if path.is_file() else None


Measure = Callable[["CheckContext"], None]
Judge = Callable[[SavedCheck], Judgement]
#: Returns a kind's `measure` and `judge`; importing them is what it defers.
Implementation = Callable[[], tuple[Measure, Judge]]
#: A `measure` that fills one member's check folder from a measurement made once for several
#: candidate roles (the folder it is in, the role the member's arm ran as).
MemberView = Callable[[Path, str], Measure]


@dataclass(frozen=True)
class EvidenceTypes:
    """The types of what a kind saves: a role's measurement.json and the facts of result.json."""

    measurement: type[Evidence] | None
    facts: type[Evidence]


@dataclass(frozen=True)
class CheckKind:
    """A kind of check, listed in `qualify.kinds.KINDS`."""

    name: str
    summary: str
    params: tuple[Param, ...]
    #: How findings map onto the verdict; shown in the report next to the check.
    verdict_rules: str
    default_roles: tuple[str, ...] = ("pinned", "candidate")
    #: The limits this kind understands; None means any `max_*`/`min_*`/`*_margin`.
    limits: tuple[Limit, ...] | None = None
    #: Builds the arms: measures every role the run binds, and its own inputs are the
    #: source and installables, not the store paths it produces.
    builds_arms: bool = False
    #: Why this check, as configured, cannot judge the candidate without the pinned role (None
    #: when it can judge the candidate on its own). The plan is refused when `roles` leave
    #: pinned out and this gives a reason.
    needs_pinned: Callable[[CheckSpec], str | None] = lambda _spec: None
    #: Why these parameters cannot be measured or judged soundly (None when they can); the
    #: plan is refused before anything runs.
    invalid: Callable[[CheckSpec], str | None] = lambda _spec: None
    #: What this check, as configured, lacks on this host before it can run (a key file it
    #: signs with, a folder it writes), with what to do; None when nothing. Asked by `qualify
    #: run` of each check it is about to run, before anything slow starts; never by a command
    #: that only reads a plan (another host's run is shown and re-judged without these files).
    preflight: Callable[[CheckSpec, ProjectConfig], str | None] = lambda _spec, _config: None
    #: Parameters that only the judgement reads (which saved samples it analyses): a rejudge
    #: takes them, like the limits, from the current plan.
    judge_params: tuple[str, ...] = ()
    #: Where `measure` and `judge` come from. A stage declares its kind without it (the
    #: declaration stays light) and `qualify.kinds` binds it with `implemented_by`.
    implementation: Implementation | None = None
    #: For a kind that measures a run set's members together (the bench: one interleaved
    #: schedule with pinned and every member's arm), how each member reads its share; None for
    #: kinds measured member by member.
    member_view: Callable[[], MemberView] | None = None
    #: The types of its evidence (`qualify.checks.evidence`), imported when first read; None
    #: for a kind whose evidence is not typed yet.
    evidence: Callable[[], EvidenceTypes] | None = None

    def implemented_by(
        self,
        implementation: Implementation,
        member_view: Callable[[], MemberView] | None = None,
        evidence: Callable[[], EvidenceTypes] | None = None,
    ) -> CheckKind:
        return replace(self, implementation=implementation, member_view=member_view, evidence=evidence)

    def evidence_types(self) -> EvidenceTypes | None:
        return None if self.evidence is None else self.evidence()

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"check kind {self.name!r} declares no parameter {name!r}")

    @property
    def limit_names(self) -> tuple[str, ...] | None:
        return None if self.limits is None else tuple(limit.name for limit in self.limits)

    def limit(self, name: str) -> Limit | None:
        """The declaration of limit `name` (None when this kind has no such limit)."""
        if self.limits is None:
            return open_limit(name)
        return next((limit for limit in self.limits if limit.name == name), None)

    def limit_defaults(self) -> dict[str, float]:
        """The limits judged by default, as the kind declares them."""
        return {limit.name: limit.default for limit in self.limits or () if limit.default is not None}

    @property
    def measures_members(self) -> bool:
        return self.member_view is not None

    def view_for(self, folder: Path, role: str) -> Measure:
        """The `measure` that fills a member's check from the joint measurement in `folder`."""
        if self.member_view is None:
            raise RuntimeError(f"check kind {self.name!r} does not measure members together")
        return self.member_view()(folder, role)

    def measure(self, ctx: CheckContext) -> None:
        self._implemented()[0](ctx)

    def judge(self, saved: SavedCheck) -> Judgement:
        return self._implemented()[1](saved)

    def _implemented(self) -> tuple[Measure, Judge]:
        if self.implementation is None:
            # A programming error: a declaration used where qualify.kinds' bound kind belongs.
            raise RuntimeError(f"check kind {self.name!r} has no implementation bound (qualify.kinds)")
        return self.implementation()

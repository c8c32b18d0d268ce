"""What an `openai-suite` check saves and what its judge writes beside the verdict, as types:
each role's measurement (`ServingMeasurement`) and serving cases (`ServingCases`, its
cases.json), the timing requests of the check (`ServingTiming`, timing.json) and the facts
(`ServingFacts`). Every reader of them goes through these.

What a server said is kept as it said it: a case's `strict` and `text` values and the
`/props` figures in a role's `server` are the server's JSON, not qualify's, so their types are
the server's own (`Any`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from qualify.checks.evidence import Evidence

#: Every part keeps a float as it was measured: an infinite log-prob margin is saved as
#: `Infinity`, as the JSON writer saved it before the types, never as null.
CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, ser_json_inf_nan="constants")


class Part(BaseModel):
    """A part of a document: frozen, every field declared."""

    model_config = CONFIG


class GreedyRun(Part):
    """A case's greedy generation: the token at each position and how sure pinned was of it."""

    tokens: list[Any] = Field(description="token ids (the token text where the server gave no ids)")
    margins: list[float | None] = Field(
        description="top-1 minus top-2 log-prob at each position (None: fewer than two given)"
    )


class ServingCase(Part):
    """One serving case as a role ran it (`qualify.serving.cases`)."""

    suite: str
    case: str
    problems: list[str] = Field(description="invariants that failed within the role; empty: it passed")
    strict: dict[str, Any] = Field(description="values that must be equal across roles")
    text: dict[str, Any] = Field(description="values that depend on the generated tokens")
    greedy: GreedyRun | None
    greedy_ref: str | None = Field(description="the case whose greedy run decides for this one")
    note: str


class ServingCases(Evidence):
    """A role's cases.json: its serving cases in the order they ran."""

    model_config = CONFIG

    cases: list[ServingCase]


class Problem(Part):
    """A placeholder of the server's template that could not be filled."""

    message: str
    hint: str | None


class StartError(Part):
    """The server did not become ready."""

    message: str
    log_tail: list[str]
    missing: bool = Field(description="no such server binary: the harness's problem, not the role's")


class ServerDeath(Part):
    """The server exited while a suite ran."""

    suite: str
    message: str
    log_tail: list[str]


class ServerRecord(Part):
    """The role's server: how it was started, and what its `/props` said."""

    base_url: str
    argv: list[str]
    log: str
    ready_after_s: float = Field(description="seconds from start to ready")
    build_info: Any = Field(description="as /props said")
    total_slots: Any = Field(description="as /props said")
    n_ctx: Any = Field(description="a slot's context, as /props said")
    model_path: Any = Field(description="as /props said")
    chat_template_caps: Any = Field(description="as /props said")


class ServingMeasurement(Evidence):
    """One role's serving: the suites asked for and reached, or why none ran."""

    model_config = CONFIG

    role: str
    arm: str
    measured_as: str | None = Field(
        default=None,
        description="in a run set's member: the role its arm ran as in the set's one measurement",
    )
    server: ServerRecord | None = None
    suites: list[str] = Field(description="the suites asked for, in the order they run")
    ran: list[str] = Field(default_factory=list)
    not_run: list[str] = Field(default_factory=list)
    died: ServerDeath | None = None
    start_error: StartError | None = None
    error: Problem | None = None


#: The timing gate's metrics, as a timing record names them.
Metric = Literal["ttft_ms", "tpot_ms", "e2e_ms"]


class TimingRecord(Part):
    """One timed request: its round and place in it, and (when it completed) its times."""

    type: str = Field(description="completion, long-prompt or chat")
    pair: int = Field(description="the round")
    role: str
    position: int = Field(description="its place in the round (0: sent first)")
    ok: bool
    status: int = Field(description="HTTP status (0: no answer)")
    events: int = Field(description="stream events received")
    error: str | None = Field(default=None, description="why it failed (only when not ok)")
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    tokens: int | None = Field(default=None, description="stream events that carried text")

    def ms(self, metric: Metric) -> float:
        """The time of `metric`, of a request that completed."""
        value = {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}[metric]
        if value is None:
            raise ValueError(f"a failed request has no {metric}")
        return value


class ServingTiming(Evidence):
    """The check's timing.json: the rounds per request type, the warm-up, every timed request."""

    model_config = CONFIG

    pairs: int
    types: list[str]
    warmup: int = Field(description="requests per role and type sent first and thrown away")
    records: list[TimingRecord]


class GreedyFact(Part):
    """Where pinned's and the candidate's greedy runs of a case first differ."""

    case: str
    compared: int = Field(description="tokens compared")
    position: int | None = Field(description="the first differing token; None: identical")
    margin: float | None = Field(description="pinned's top-1 minus top-2 log-prob there")
    tie: bool = Field(description="the margin is below tie_margin: either token is faithful")


class GateRow(Part):
    """The timing gate on one request type and metric (milliseconds)."""

    type: str
    metric: Metric
    pairs: int = Field(description="complete pairs")
    pinned_median: float | None
    candidate_median: float | None
    bound: float | None = Field(description="max(max_slowdown_pct % × pinned's median, max_slowdown_ms)")
    exceeded: bool
    p_value: float | None = Field(description="one-sided, of the exact signed-rank test on the excess")
    level: float | None = Field(description="the Holm level it was held to")
    reachable: bool
    result: Literal["PASS", "FAIL", "INCONCLUSIVE"]


class TimingFacts(Part):
    pairs: int = Field(description="ABBA pairs per request type")
    rows: list[GateRow]


class ServingFacts(Evidence):
    model_config = CONFIG

    cases: dict[str, int] = Field(description="per role, the serving cases saved")
    greedy: list[GreedyFact] = Field(description="per case pinned and the candidate both ran greedy")
    timing: TimingFacts | None = Field(default=None, description="absent when no timing was measured")

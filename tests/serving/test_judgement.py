"""The `openai-suite` judgement is a pure function of the saved data and the limits, apart from
the tables that present it: judged here from data written in memory, with no folder and no
server."""

from __future__ import annotations

from qualify.core.verdicts import Verdict
from qualify.records.serving import ServerDeath, ServingCase, ServingMeasurement
from qualify.serving.check import DEFAULT_LIMITS
from qualify.serving.judgement import SavedServing, assess
from qualify.serving.tables import serving_tables


def _case(name: str, problems: list[str]) -> ServingCase:
    return ServingCase(
        suite="completion",
        case=name,
        problems=problems,
        strict={},
        text={},
        greedy=None,
        greedy_ref=None,
        note="",
    )


def test_a_candidate_server_that_died_fails_and_its_tables_say_where() -> None:
    died = ServerDeath(suite="chat", message="the server is not running", log_tail=["POST /v1/chat"])
    suites = ["completion", "chat"]
    data = SavedServing(
        roles=("pinned", "candidate"),
        measured={
            "pinned": ServingMeasurement(role="pinned", arm="pinned", suites=suites, ran=suites, not_run=[]),
            "candidate": ServingMeasurement(
                role="candidate", arm="cand", suites=suites, ran=["completion"], died=died, not_run=["chat"]
            ),
        },
        cases={"pinned": [_case("c0", [])], "candidate": [_case("c0", [])]},
        timing=None,
        alpha=0.05,
        timing_asked=False,
    )
    judgement = assess(data, DEFAULT_LIMITS)
    assert judgement.verdict is Verdict.FAIL
    assert judgement.reason.startswith("candidate: server died in suite chat (not run: chat)")
    assert judgement.judged == ("1 candidate cases checked", "1 cases compared with pinned")
    assert judgement.facts.to_json() == {"version": 1, "cases": {"pinned": 1, "candidate": 1}, "greedy": []}
    tables = {t.title: t for t in serving_tables(judgement)}
    assert list(tables) == ["Serving cases (per suite; failures first)", "Servers"]
    servers = tables["Servers"].rows
    assert [(r[0], r[6], r[7], r[8]) for r in servers] == [
        ("pinned", "ok", "", "logs/pinned-server.log"),
        ("candidate", "died in chat", "chat", "logs/candidate-server.log"),
    ]

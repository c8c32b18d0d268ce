"""What a serving suite produces, and the pieces every suite shares.

A suite is a named group of cases run against one role's server. Each case records:
- `problems`: invariants that failed within the role (a 5xx, a stream that does not join to
  the non-streamed text, arguments that are not JSON); empty means the case passed there;
- `strict`: values that must be equal across roles whatever the numerics (rendered templates,
  prompt token counts, status codes, schema validity);
- `text`: values that depend on the generated tokens (generated text, parsed tool calls, stop
  reasons): compared across roles only while greedy decoding has not met a near-tie;
- `greedy`: the generated token ids and the top-1 minus top-2 log-prob margin at each
  position, for the faithfulness comparison (or `greedy_ref`, another case's greedy run that
  decides for this one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qualify.records.serving import GreedyRun, ServingCase
from qualify.serving.client import Client, Reply

#: Sampling settings of every comparison (the recipe of llama.cpp's own server tests).
GREEDY: dict[str, Any] = {"temperature": 0.0, "top_k": 1, "seed": 42, "cache_prompt": False}


@dataclass
class Case:
    suite: str
    name: str
    problems: list[str] = field(default_factory=list)
    strict: dict[str, Any] = field(default_factory=dict)
    text: dict[str, Any] = field(default_factory=dict)
    greedy: GreedyRun | None = None
    greedy_ref: str | None = None
    note: str = ""

    def check(self, condition: bool, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return condition

    def status_ok(self, reply: Reply, what: str, expected: int = 200) -> bool:
        if reply.status == expected:
            return True
        detail = reply.error or _short(reply.body)
        self.problems.append(f"{what}: HTTP {reply.status or 'no answer'} (expected {expected}) {detail}")
        return False

    def saved(self) -> ServingCase:
        """The case as its role's cases.json holds it."""
        return ServingCase(
            suite=self.suite,
            case=self.name,
            problems=self.problems,
            strict=self.strict,
            text=self.text,
            greedy=self.greedy,
            greedy_ref=self.greedy_ref,
            note=self.note,
        )


def _short(body: Any) -> str:
    text = str(body.get("error", body)) if isinstance(body, dict) else str(body)
    return text[:200]


@dataclass(frozen=True)
class Settings:
    """The plan's parameters as the suites use them."""

    prompts: tuple[str, ...]
    n_predict: int
    n_probs: int
    concurrency: int
    slot_save: bool


@dataclass
class SuiteRun:
    """One role's server, as the suites see it."""

    client: Client
    props: dict[str, Any]
    settings: Settings
    progress: Callable[[str | None], None] = lambda _text: None

    @property
    def slot_ctx(self) -> int:
        settings = self.props.get("default_generation_settings") or {}
        return int(settings.get("n_ctx") or 0)

    @property
    def slots(self) -> int:
        return int(self.props.get("total_slots") or 1)


Suite = Callable[[SuiteRun], list[Case]]


def greedy_from_completion(body: dict[str, Any]) -> GreedyRun | None:
    """Token ids and top-1/top-2 margins from `/completion`'s `completion_probabilities`."""
    return _greedy(body.get("completion_probabilities"))


def greedy_from_chat(body: dict[str, Any]) -> GreedyRun | None:
    """The same from chat/completions `logprobs.content` (ids when given, else token text)."""
    choices = body.get("choices") or [{}]
    logprobs = (choices[0] or {}).get("logprobs") or {}
    return _greedy(logprobs.get("content"))


def _greedy(entries: Any) -> GreedyRun | None:
    if not isinstance(entries, list) or not entries:
        return None
    tokens: list[Any] = []
    margins: list[float | None] = []
    for entry in entries:
        tokens.append(entry.get("id", entry.get("token")))
        top = entry.get("top_logprobs") or entry.get("top_probs") or []
        values = [t.get("logprob") for t in top if isinstance(t.get("logprob"), (int, float))]
        margins.append(float(values[0] - values[1]) if len(values) >= 2 else None)
    return GreedyRun(tokens=tokens, margins=margins)


def repeated_tokens(client: Client, count: int, word: str = " the") -> list[int] | None:
    """A prompt of exactly `count` tokens: one token of `word`, repeated (None if /tokenize fails)."""
    reply = client.post("/tokenize", {"content": word})
    ids = reply.json.get("tokens") if reply.status == 200 else None
    if not ids:
        return None
    first = ids[0]
    return [int(first["id"] if isinstance(first, dict) else first)] * count

"""An agent-like soak workload, generated from a seed so every role replays the same one.

Shape: every request shares one system prompt (a shared prefix, as an agent's tools and
instructions are); requests belong to multi-turn conversations whose history grows by one
user and one assistant message per turn, up to `turns`; arrivals are Poisson at `rate` per
second, for at most `duration_s` seconds and `max_requests` requests. A new arrival continues an
open conversation with probability `continue_p`, else starts a new one.

The assistant messages in the history are generated text, not the server's replies: the
replies differ between builds, and a history built from them would give the two roles
different prompts. With generated history the request list, prompts included, is a pure
function of the seed and the parameters (`digest` proves it in the saved run).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from typing import Any

# Plain English words: every tokenizer splits them into few tokens, so prompt lengths stay
# predictable across models.
_WORD_TEXT = (
    "the of and to in is was for on that with as by at from his her an which or are this be had "
    "it not but were have one all their has been can there its more when who will would so out "
    "up into them only other new some could time these two may first then do any like my now "
    "over such our man me even most made after also did many before must through back years "
    "where much your way well down should because each just those people how too little state "
    "good very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since against go "
    "came right used take three river garden window market engine paper music winter letter "
    "signal travel number"
)
_WORDS = tuple(_WORD_TEXT.split())


@dataclass(frozen=True)
class Request:
    """One request of the schedule: when it arrives and what it sends."""

    index: int
    at_s: float  # arrival, seconds after the role's load starts
    conversation: int
    turn: int  # 0 for a conversation's first request
    messages: tuple[dict[str, str], ...]
    max_tokens: int

    def prompt_words(self) -> int:
        return sum(len(m["content"].split()) for m in self.messages)


@dataclass(frozen=True)
class WorkloadSpec:
    seed: int = 42
    duration_s: float = 600.0
    rate: float = 1.0  # arrivals per second
    max_requests: int = 100_000
    turns: int = 4
    continue_p: float = 0.7
    prefix_words: int = 120
    turn_words: int = 24
    reply_words: int = 16
    max_tokens: int = 16


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def generate(spec: WorkloadSpec) -> list[Request]:
    """The request schedule of `spec` (deterministic: the same spec gives the same list)."""
    if spec.rate <= 0 or spec.duration_s <= 0:
        raise ValueError("rate and duration_s must be positive")
    rng = random.Random(spec.seed)
    system = {"role": "system", "content": "You are a helpful agent. " + _text(rng, spec.prefix_words)}
    open_conversations: dict[int, list[dict[str, str]]] = {}
    turns: dict[int, int] = {}
    requests: list[Request] = []
    at = 0.0
    next_conversation = 0
    while len(requests) < spec.max_requests:
        at += rng.expovariate(spec.rate)
        if at >= spec.duration_s:
            break
        if open_conversations and rng.random() < spec.continue_p:
            conversation = rng.choice(sorted(open_conversations))
        else:
            conversation = next_conversation
            next_conversation += 1
            open_conversations[conversation] = []
            turns[conversation] = 0
        history = open_conversations[conversation]
        history.append({"role": "user", "content": _text(rng, spec.turn_words)})
        messages = (system, *history)
        requests.append(
            Request(len(requests), round(at, 6), conversation, turns[conversation], messages, spec.max_tokens)
        )
        history.append({"role": "assistant", "content": _text(rng, spec.reply_words)})
        turns[conversation] += 1
        if turns[conversation] >= spec.turns:
            del open_conversations[conversation]
    return requests


def digest(requests: list[Request]) -> str:
    """A short hash of the whole schedule, prompts included."""
    payload = json.dumps([asdict(r) for r in requests], sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def describe(spec: WorkloadSpec, requests: list[Request]) -> dict[str, Any]:
    """What is saved about the workload (the requests themselves are regenerated from it)."""
    words = [r.prompt_words() for r in requests]
    return {
        "spec": asdict(spec),
        "requests": len(requests),
        "conversations": len({r.conversation for r in requests}),
        "digest": digest(requests),
        "prompt_words": {"min": min(words, default=0), "max": max(words, default=0)},
        "last_arrival_s": requests[-1].at_s if requests else None,
    }

"""Suites on server features: prefix cache, tools, structured output, sampling, concurrency."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import jsonschema

from qualify.serving.cases import GREEDY, Case, SuiteRun, greedy_from_chat
from qualify.serving.client import Reply

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city, e.g. Paris"}},
            "required": ["city"],
        },
    },
}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
INVALID_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}


def prefix_cache(run: SuiteRun) -> list[Case]:
    case = Case("prefix-cache", "cached-vs-uncached")
    prompt = " ".join(run.settings.prompts) * 2
    body = {**GREEDY, "prompt": prompt, "n_predict": 2, "cache_prompt": True, "id_slot": 0}
    counts = []
    for attempt in ("first", "second"):
        reply = run.client.post("/completion", body)
        if not case.status_ok(reply, f"{attempt} request"):
            return [case]
        timings = reply.json.get("timings") or {}
        counts.append((timings.get("prompt_n"), timings.get("cache_n", 0)))
    (first_n, first_cached), (second_n, second_cached) = counts
    case.check(isinstance(second_cached, int) and second_cached > 0, "the repeated prompt reused no cache")
    case.check(
        isinstance(first_n, int) and isinstance(second_n, int) and second_n < first_n,
        f"prompt tokens evaluated {first_n} then {second_n}: the cache saved nothing",
    )
    case.strict.update(first=[first_n, first_cached], second=[second_n, second_cached])
    cases = [case]
    if run.settings.slot_save:
        saved = Case("prefix-cache", "slot-save-restore")
        cases.append(saved)
        reply = run.client.post("/slots/0?action=save", {"filename": "qualify-slot0.bin"})
        if saved.status_ok(reply, "slot save"):
            n_saved = reply.json.get("n_saved")
            saved.status_ok(run.client.post("/slots/0?action=erase", {}), "slot erase")
            restored = run.client.post("/slots/0?action=restore", {"filename": "qualify-slot0.bin"})
            if saved.status_ok(restored, "slot restore"):
                n_restored = restored.json.get("n_restored")
                saved.check(n_saved == n_restored, f"saved {n_saved} tokens, restored {n_restored}")
                saved.strict.update(n_saved=n_saved, n_restored=n_restored)
    return cases


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    choice = (reply.json.get("choices") or [{}])[0]
    return list((choice.get("message") or {}).get("tool_calls") or [])


def _check_calls(case: Case, calls: list[dict[str, Any]], required: bool) -> None:
    parsed = []
    for call in calls:
        function = call.get("function") or {}
        name = function.get("name")
        case.check(name == "get_weather", f"a call to {name!r}, not get_weather")
        arguments = function.get("arguments")
        try:
            value = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            case.problems.append(f"tool arguments are not JSON: {str(arguments)[:120]!r}")
            continue
        if isinstance(value, dict):
            case.check("city" in value, f"tool arguments lack the required key 'city': {value}")
        else:
            case.problems.append(f"tool arguments are not an object: {value!r}")
        parsed.append({"name": name, "arguments": value})
    if required:
        case.check(len(calls) == 1, f"{len(calls)} tool calls with tool_choice=required (expected 1)")
    case.text["calls"] = parsed


def tools(run: SuiteRun) -> list[Case]:
    cases = []
    base = {
        **GREEDY,
        "messages": ASK_WEATHER,
        "tools": [WEATHER_TOOL],
        "max_tokens": max(run.settings.n_predict, 24),
    }
    for choice in ("required", "none", "auto"):
        run.progress(f"tools: tool_choice={choice}")
        case = Case("tools", f"tool-choice-{choice}")
        reply = run.client.post(
            "/v1/chat/completions", {**base, "tool_choice": choice, "logprobs": True, "top_logprobs": 2}
        )
        if case.status_ok(reply, "chat/completions with tools"):
            calls = _tool_calls(reply)
            if choice == "none":
                case.check(not calls, f"{len(calls)} tool calls with tool_choice=none")
            _check_calls(case, calls, required=choice == "required")
            case.strict["status"] = reply.status
            case.greedy = greedy_from_chat(reply.json)
        cases.append(case)
    streamed_case = Case("tools", "tool-choice-required-stream", greedy_ref="tool-choice-required")
    streamed = run.client.stream("/v1/chat/completions", {**base, "tool_choice": "required"})
    if streamed_case.check(streamed.status == 200 and not streamed.error, f"stream: HTTP {streamed.status}"):
        streamed_case.check(
            not streamed.unparsable, f"stream events that are not JSON: {streamed.unparsable[:2]}"
        )
        # Tool-call deltas are joined per index, then parsed like the non-streamed reply.
        joined: dict[int, dict[str, Any]] = {}
        for event in streamed.events:
            for choice_delta in event.get("choices") or []:
                for part in (choice_delta.get("delta") or {}).get("tool_calls") or []:
                    slot = joined.setdefault(
                        int(part.get("index", 0)), {"function": {"name": "", "arguments": ""}}
                    )
                    function = part.get("function") or {}
                    slot["function"]["name"] += function.get("name") or ""
                    slot["function"]["arguments"] += function.get("arguments") or ""
        _check_calls(streamed_case, [joined[i] for i in sorted(joined)], required=True)
    cases.append(streamed_case)
    return cases


def structured(run: SuiteRun) -> list[Case]:
    ask = [{"role": "user", "content": "Is Paris in France? Answer in JSON."}]
    schema_case = Case("structured-output", "json-schema")
    reply = run.client.post(
        "/v1/chat/completions",
        {
            **GREEDY,
            "messages": ask,
            "max_tokens": 24,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA},
            },
        },
    )
    if schema_case.status_ok(reply, "response_format json_schema"):
        content = ((reply.json.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        valid = False
        try:
            jsonschema.validate(json.loads(content), ANSWER_SCHEMA)
            valid = True
        except (ValueError, jsonschema.ValidationError) as exc:
            schema_case.problems.append(f"output does not validate against the schema: {str(exc)[:160]}")
        schema_case.strict["valid"] = valid
        schema_case.text["content"] = content
    grammar_case = Case("structured-output", "gbnf-grammar")
    reply = run.client.post(
        "/completion",
        {
            **GREEDY,
            "prompt": "Is Paris in France? Answer yes or no:",
            "n_predict": 8,
            "grammar": 'root ::= " "? ("yes" | "no")',
        },
    )
    if grammar_case.status_ok(reply, "/completion with grammar"):
        content = str(reply.json.get("content") or "")
        valid = content.strip() in ("yes", "no")
        grammar_case.check(valid, f"output {content!r} does not match the grammar")
        grammar_case.strict["valid"] = valid
        grammar_case.text["content"] = content
    invalid = Case("structured-output", "invalid-schema-400")
    reply = run.client.post(
        "/v1/chat/completions",
        {
            **GREEDY,
            "messages": ask,
            "max_tokens": 4,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "bad", "schema": INVALID_SCHEMA},
            },
        },
    )
    invalid.status_ok(reply, "an invalid schema", expected=400)
    invalid.strict["status"] = reply.status
    return [schema_case, grammar_case, invalid]


def sampling(run: SuiteRun) -> list[Case]:
    prompt = run.settings.prompts[0]
    seeded = Case("sampling", "same-seed-same-text")
    body = {
        "prompt": prompt,
        "n_predict": run.settings.n_predict,
        "temperature": 0.9,
        "seed": 1234,
        "cache_prompt": False,
    }
    texts = []
    for _ in range(2):
        reply = run.client.post("/completion", body)
        if seeded.status_ok(reply, "seeded sampling"):
            texts.append(reply.json.get("content"))
    if len(texts) == 2:
        seeded.check(texts[0] == texts[1], "the same seed gave different text within the role")
    probs = Case("sampling", "logprobs-top-n")
    n = max(2, run.settings.n_probs)
    reply = run.client.post(
        "/completion", {**GREEDY, "prompt": prompt, "n_predict": run.settings.n_predict, "n_probs": n}
    )
    first_token = None
    if probs.status_ok(reply, "n_probs"):
        entries = reply.json.get("completion_probabilities") or []
        probs.check(bool(entries), "no completion_probabilities")
        for entry in entries:
            top = entry.get("top_logprobs") or []
            if not probs.check(len(top) == n, f"{len(top)} top log-probs, asked for {n}"):
                break
            values = [t.get("logprob") for t in top]
            if not probs.check(
                all(isinstance(v, (int, float)) and v <= 0 for v in values), f"log-probs > 0: {values}"
            ):
                break
        first_token = entries[0].get("id") if entries else None
        probs.strict["n_probs"] = n
    banned = Case("sampling", "logit-bias-bans")
    if banned.check(first_token is not None, "no greedy first token to ban"):
        reply = run.client.post(
            "/completion",
            {
                **GREEDY,
                "prompt": prompt,
                "n_predict": run.settings.n_predict,
                "return_tokens": True,
                "logit_bias": [[first_token, False]],
            },
        )
        if banned.status_ok(reply, "logit_bias"):
            tokens = reply.json.get("tokens") or []
            absent = first_token not in list(tokens)
            banned.check(absent, f"banned token {first_token} was generated")
            banned.strict["banned_absent"] = absent
    return [seeded, probs, banned]


def concurrency(run: SuiteRun) -> list[Case]:
    parallel = Case("concurrency", "parallel-requests")
    count = max(run.settings.concurrency, run.slots)
    replies: list[Reply | None] = [None] * count
    errors: list[BaseException] = []

    def one(index: int) -> None:
        try:
            replies[index] = run.client.post(
                "/completion",
                {**GREEDY, "prompt": run.settings.prompts[index % len(run.settings.prompts)], "n_predict": 4},
            )
        except BaseException as exc:  # re-raised below, in the suite's own thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    ok = sum(r is not None and r.status == 200 for r in replies)
    parallel.check(ok == count, f"{count - ok} of {count} parallel requests failed on {run.slots} slots")
    parallel.strict.update(requests=count, succeeded=ok)
    cancel = Case("concurrency", "cancel-frees-slot")
    streamed = run.client.stream(
        "/completion",
        {**GREEDY, "prompt": run.settings.prompts[0], "n_predict": 256, "ignore_eos": True},
        stop_after=2,
    )
    cancel.check(len(streamed.events) >= 1, f"the stream to cancel gave no event ({streamed.error})")
    slots = run.client.get("/slots")
    if slots.status == 200 and isinstance(slots.body, list):
        deadline = time.monotonic() + 10
        busy = [s for s in slots.body if s.get("is_processing")]
        while busy and time.monotonic() < deadline:
            time.sleep(0.2)
            slots = run.client.get("/slots")
            busy = [s for s in slots.body if s.get("is_processing")] if isinstance(slots.body, list) else []
        cancel.check(not busy, f"{len(busy)} slots still busy 10 s after the client went away")
        cancel.strict["freed"] = not busy
    else:
        cancel.note = f"/slots not available (HTTP {slots.status}): slot release not checked"
    after = run.client.post("/completion", {**GREEDY, "prompt": run.settings.prompts[0], "n_predict": 2})
    cancel.status_ok(after, "a request after the cancelled one")
    return [parallel, cancel]

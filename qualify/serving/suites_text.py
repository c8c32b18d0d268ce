"""Suites on plain text generation: readiness, greedy completion, streaming, chat templates and
long context. Each returns its cases; none raises on a bad answer (only `ServerGone` stops it).
"""

from __future__ import annotations

from typing import Any

from qualify.serving.cases import (
    GREEDY,
    Case,
    SuiteRun,
    greedy_from_chat,
    greedy_from_completion,
    repeated_tokens,
)
from qualify.serving.client import event_content

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Name three colours."},
]


def readiness(run: SuiteRun) -> list[Case]:
    case = Case("readiness", "health-props-models")
    if case.status_ok(run.client.get("/health"), "/health"):
        case.strict["health"] = 200
    props = run.props
    case.check(bool(props), "/props gave no JSON")
    case.check(run.slots >= 1, f"/props total_slots is {props.get('total_slots')!r}")
    case.check(run.slot_ctx > 0, "/props gives no per-slot n_ctx")
    case.strict.update(total_slots=props.get("total_slots"), slot_n_ctx=run.slot_ctx)
    models = run.client.get("/v1/models")
    if case.status_ok(models, "/v1/models"):
        case.check(bool(models.json.get("data")), "/v1/models lists no model")
        case.strict["models"] = len(models.json.get("data") or [])
    return [case]


def _completion_body(run: SuiteRun, prompt: Any) -> dict[str, Any]:
    return {
        **GREEDY,
        "prompt": prompt,
        "n_predict": run.settings.n_predict,
        "n_probs": run.settings.n_probs,
        "return_tokens": True,
    }


def completion(run: SuiteRun) -> list[Case]:
    cases: list[Case] = []
    for index, prompt in enumerate(run.settings.prompts):
        run.progress(f"completion {index + 1}/{len(run.settings.prompts)}")
        case = Case("completion", f"completion-{index}")
        reply = run.client.post("/completion", _completion_body(run, prompt))
        if case.status_ok(reply, "/completion"):
            body = reply.json
            timings = body.get("timings") or {}
            case.strict.update(prompt_n=body.get("tokens_evaluated"), status=reply.status)
            case.text.update(
                tokens=body.get("tokens"),
                predicted_n=body.get("tokens_predicted"),
                stop_type=body.get("stop_type"),
                truncated=body.get("truncated"),
                content=body.get("content"),
            )
            case.greedy = greedy_from_completion(body)
            case.check(case.greedy is not None, "no completion_probabilities with n_probs set")
            case.check(
                body.get("tokens_predicted") == timings.get("predicted_n", body.get("tokens_predicted")),
                "tokens_predicted differs from timings.predicted_n",
            )
            case.check(
                len(body.get("tokens") or []) == body.get("tokens_predicted"),
                "return_tokens length differs from tokens_predicted",
            )
        cases.append(case)
        oai = Case("completion", f"v1-completions-{index}", greedy_ref=case.name)
        reply = run.client.post(
            "/v1/completions",
            {**GREEDY, "prompt": prompt, "max_tokens": run.settings.n_predict},
        )
        if oai.status_ok(reply, "/v1/completions"):
            usage = reply.json.get("usage") or {}
            choice = (reply.json.get("choices") or [{}])[0]
            oai.strict.update(prompt_tokens=usage.get("prompt_tokens"), status=reply.status)
            oai.text.update(
                text=choice.get("text"),
                finish_reason=choice.get("finish_reason"),
                completion_tokens=usage.get("completion_tokens"),
            )
            oai.check(choice.get("finish_reason") in ("stop", "length"), "finish_reason missing")
            if case.text.get("content") is not None:
                oai.check(
                    choice.get("text") == case.text["content"],
                    "/v1/completions text differs from /completion's for the same prompt",
                )
        cases.append(oai)
    return cases


def streaming(run: SuiteRun) -> list[Case]:
    prompt = run.settings.prompts[0]
    plain = Case("streaming", "completion-stream")
    whole = run.client.post("/completion", _completion_body(run, prompt))
    streamed = run.client.stream("/completion", _completion_body(run, prompt))
    if plain.status_ok(whole, "/completion") and plain.check(
        streamed.status == 200 and not streamed.error, f"stream: HTTP {streamed.status} {streamed.error}"
    ):
        joined = "".join(str(e.get("content") or "") for e in streamed.events)
        plain.check(not streamed.unparsable, f"stream events that are not JSON: {streamed.unparsable[:2]}")
        plain.check(
            joined == whole.json.get("content"), "joined stream deltas differ from the non-streamed text"
        )
        last = streamed.events[-1] if streamed.events else {}
        plain.check(last.get("stop") is True, "the last event does not say stop")
        plain.check("timings" in last, "the last event carries no timings")
        plain.strict["events_parse"] = not streamed.unparsable
        plain.text["joined"] = joined
        plain.greedy_ref = "completion-0"
    chat = Case("streaming", "chat-stream", greedy_ref="chat-completion")
    body = {**GREEDY, "messages": CHAT, "max_tokens": run.settings.n_predict}
    whole = run.client.post("/v1/chat/completions", body)
    streamed = run.client.stream("/v1/chat/completions", {**body, "stream_options": {"include_usage": True}})
    if chat.status_ok(whole, "chat/completions") and chat.check(
        streamed.status == 200 and not streamed.error, f"stream: HTTP {streamed.status} {streamed.error}"
    ):
        events = streamed.events
        ids = {e.get("id") for e in events}
        chat.check(len(ids) == 1, f"{len(ids)} different ids in one stream")
        first = (events[0].get("choices") or [{}])[0].get("delta", {}) if events else {}
        chat.check(first.get("role") == "assistant", "the first delta does not carry the role")
        chat.check(bool(events) and "usage" in events[-1], "no usage in the last event")
        chat.check(streamed.done, "the stream did not end with [DONE]")
        chat.check(not streamed.unparsable, f"stream events that are not JSON: {streamed.unparsable[:2]}")
        finishes = [
            c.get("finish_reason") for e in events for c in e.get("choices") or [] if c.get("finish_reason")
        ]
        chat.check(len(finishes) == 1, f"{len(finishes)} finish reasons in one stream")
        joined = "".join(event_content(e) for e in events)
        message = ((whole.json.get("choices") or [{}])[0]).get("message") or {}
        chat.check(
            joined == (message.get("content") or ""), "joined deltas differ from the non-streamed text"
        )
        usage = events[-1].get("usage") if events else None
        chat.strict["prompt_tokens"] = (usage or {}).get("prompt_tokens")
        chat.text["joined"] = joined
    return [plain, chat]


def chat(run: SuiteRun) -> list[Case]:
    rendered = Case("chat", "apply-template")
    reply = run.client.post("/apply-template", {"messages": CHAT})
    if rendered.status_ok(reply, "/apply-template"):
        prompt = reply.json.get("prompt")
        rendered.check(isinstance(prompt, str) and bool(prompt), "no rendered prompt")
        rendered.strict["prompt"] = prompt
    case = Case("chat", "chat-completion")
    reply = run.client.post(
        "/v1/chat/completions",
        {
            **GREEDY,
            "messages": CHAT,
            "max_tokens": run.settings.n_predict,
            "logprobs": True,
            "top_logprobs": max(2, run.settings.n_probs),
        },
    )
    if case.status_ok(reply, "chat/completions"):
        body = reply.json
        choice = (body.get("choices") or [{}])[0]
        usage = body.get("usage") or {}
        case.check(choice.get("message", {}).get("role") == "assistant", "the reply's role is not assistant")
        case.check(choice.get("finish_reason") in ("stop", "length"), "finish_reason missing")
        case.strict.update(prompt_tokens=usage.get("prompt_tokens"), status=reply.status)
        case.text.update(
            content=choice.get("message", {}).get("content"),
            finish_reason=choice.get("finish_reason"),
            completion_tokens=usage.get("completion_tokens"),
        )
        case.greedy = greedy_from_chat(body)
    return [rendered, case]


def long_context(run: SuiteRun) -> list[Case]:
    """Near the slot context (must succeed) and past it (an error or truncation, never a 5xx)."""
    cases: list[Case] = []
    n_predict = 4
    for name, count in (
        ("near-limit", int(run.slot_ctx * 0.9) - n_predict),
        ("over-limit", run.slot_ctx + 16),
    ):
        case = Case("long-context", name)
        cases.append(case)
        prompt = repeated_tokens(run.client, count) if run.slot_ctx else None
        if not case.check(prompt is not None, "cannot build a prompt of known length (/tokenize, n_ctx)"):
            continue
        run.progress(f"long context: {name} ({count} tokens)")
        reply = run.client.post("/completion", {**GREEDY, "prompt": prompt, "n_predict": n_predict})
        case.check(reply.status != 0, f"no answer: {reply.error}")
        case.check(
            reply.status < 500, f"HTTP {reply.status} on a {count}-token prompt: {str(reply.body)[:200]}"
        )
        case.strict["status"] = reply.status
        case.strict["prompt_tokens"] = count
        if name == "near-limit":
            if case.status_ok(reply, f"{count}-token prompt"):
                evaluated = reply.json.get("tokens_evaluated")
                case.check(
                    evaluated is not None and evaluated >= count, f"tokens_evaluated {evaluated} < {count}"
                )
                case.strict["prompt_n"] = evaluated
        elif reply.status == 200:
            case.check(
                reply.json.get("truncated") is True, "a prompt past the context was accepted untruncated"
            )
            case.strict["truncated"] = reply.json.get("truncated")
        else:
            case.check(reply.status == 400, f"HTTP {reply.status} (expected 400 or truncation)")
            error = (reply.json.get("error") or {}) if reply.json else {}
            case.strict["error_type"] = error.get("type") if isinstance(error, dict) else None
    return cases

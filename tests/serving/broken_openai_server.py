"""A deliberately broken peer: a tiny OpenAI-compatible server (llama-server's endpoints) whose
faults are chosen on the command line, so that each serving suite and the timing gate are shown
to fail when they should.

It stands in for an inference server that misbehaves (a broken build's llama-server): no engine
runs here. Its "model" is a deterministic function of the prompt: token ids derived from a hash,
top-2 log-prob margins of 1 nat, so two healthy instances agree exactly.

Usage: broken_openai_server.py PORT [FAULT ...] where FAULT is one of
  bad-tool-json   tool-call arguments that are not JSON
  long-500        HTTP 500 for prompts longer than 64 tokens
  broken-stream   a streamed token is dropped and one event is not JSON
  slow            every generated token takes 40 ms longer
  never-healthy   /health answers 503 forever
  die-after=N     the process exits while answering its N-th POST
  diverge         the third generated token differs (where the margin is 1 nat: not a tie)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
FAULTS = set(sys.argv[2:])
N_CTX = 256
DIE_AFTER = next((int(f.split("=")[1]) for f in FAULTS if f.startswith("die-after=")), None)
TOKEN_DELAY_S = 0.002 + (0.04 if "slow" in FAULTS else 0.0)
posts = [0]  # POST requests answered so far
slot_prompts: dict[int, list[str]] = {}


def prompt_units(prompt: object) -> list[str]:
    if isinstance(prompt, list):
        return [str(t) for t in prompt]
    return str(prompt).split()


def generate(units: list[str], n: int, banned: set[int]) -> list[int]:
    seed = int(hashlib.sha256(" ".join(units).encode()).hexdigest()[:8], 16)
    ids = []
    for i in range(n):
        token = 100 + (seed + 37 * i) % 900
        if "diverge" in FAULTS and i == 2:
            token += 1
        while token in banned:
            token += 1
        ids.append(token)
    return ids


def probs(ids: list[int], n: int) -> list[dict]:
    out = []
    for token in ids:
        top = [{"id": token + k, "token": f" w{token + k}", "logprob": -0.1 - k} for k in range(n)]
        top[0]["id"] = token
        out.append({"id": token, "token": f" w{token}", "logprob": -0.1, "top_logprobs": top})
    return out


def render(messages: list[dict], tools: object) -> str:
    head = f"<tools>{json.dumps(tools)}</tools>" if tools else ""
    return head + "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt: str, *args: object) -> None:
        sys.stderr.write("broken-server: " + fmt % args + "\n")

    def send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events: list[object], delays: list[float]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event, delay in zip(events, delays, strict=True):
            time.sleep(delay)
            line = event if isinstance(event, str) else json.dumps(event)
            try:
                self.wfile.write(f"data: {line}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
        self.wfile.write(b"data: [DONE]\n\n")

    def do_GET(self) -> None:
        if self.path.startswith("/health"):
            if "never-healthy" in FAULTS:
                self.send(503, {"error": {"code": 503, "message": "Loading model"}})
            else:
                self.send(200, {"status": "ok"})
        elif self.path == "/props":
            self.send(
                200,
                {
                    "total_slots": 2,
                    "default_generation_settings": {"n_ctx": N_CTX},
                    "build_info": "broken-1",
                    "model_path": "toy",
                },
            )
        elif self.path == "/v1/models":
            self.send(200, {"data": [{"id": "toy"}]})
        elif self.path.startswith("/slots"):
            self.send(200, [{"id": i, "is_processing": False} for i in range(2)])
        else:
            self.send(404, {"error": {"code": 404, "message": "not found"}})

    def do_POST(self) -> None:
        posts[0] += 1
        if DIE_AFTER is not None and posts[0] >= DIE_AFTER:
            os._exit(1)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/tokenize":
            self.send(200, {"tokens": [17] * len(str(body.get("content", "")).split())})
        elif self.path == "/apply-template":
            self.send(200, {"prompt": render(body["messages"], body.get("tools"))})
        elif self.path in ("/completion", "/v1/completions"):
            self.completion(body)
        elif self.path == "/v1/chat/completions":
            self.chat(body)
        else:
            self.send(404, {"error": {"code": 404, "message": "not found"}})

    def too_long(self, units: list[str]) -> bool:
        if len(units) > N_CTX:
            self.send(
                400,
                {
                    "error": {
                        "code": 400,
                        "type": "exceed_context_size_error",
                        "message": "request exceeds the available context size",
                    }
                },
            )
            return True
        if "long-500" in FAULTS and len(units) > 64:
            self.send(500, {"error": {"code": 500, "message": "internal error"}})
            return True
        return False

    def completion(self, body: dict) -> None:
        units = prompt_units(body.get("prompt", ""))
        if self.too_long(units):
            return
        n = int(body.get("n_predict", body.get("max_tokens", 16)))
        banned = {int(b[0]) for b in body.get("logit_bias") or []}
        ids = generate(units, n, banned)
        if body.get("grammar"):
            ids = ids[:1]
        text = "yes" if body.get("grammar") else "".join(f" w{t}" for t in ids)
        slot = int(body.get("id_slot", -1))
        cached = 0
        if body.get("cache_prompt") and slot >= 0:
            previous = slot_prompts.get(slot, [])
            while cached < min(len(previous), len(units) - 1) and previous[cached] == units[cached]:
                cached += 1
            slot_prompts[slot] = units
        timings = {"prompt_n": len(units) - cached, "cache_n": cached, "predicted_n": len(ids)}
        if self.path == "/v1/completions":
            self.send(
                200,
                {
                    "choices": [{"text": text, "index": 0, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": len(units), "completion_tokens": len(ids)},
                },
            )
            return
        if body.get("stream"):
            events: list[object] = [{"content": f" w{t}", "tokens": [t], "stop": False} for t in ids]
            if "broken-stream" in FAULTS and len(events) > 2:
                events[1] = "{not json"
                del events[2]
            events.append({"content": "", "stop": True, "tokens_predicted": len(ids), "timings": timings})
            self.sse(events, [TOKEN_DELAY_S] * len(events))
            return
        time.sleep(TOKEN_DELAY_S * len(ids))
        reply = {
            "content": text,
            "tokens": ids if body.get("return_tokens") else [],
            "tokens_predicted": len(ids),
            "tokens_evaluated": len(units),
            "stop": True,
            "stop_type": "limit",
            "truncated": False,
            "timings": timings,
        }
        if body.get("n_probs"):
            reply["completion_probabilities"] = probs(ids, int(body["n_probs"]))
        self.send(200, reply)

    def chat(self, body: dict) -> None:
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        known = {"string", "integer", "number", "object", "array", "boolean", "null"}
        if any(p.get("type") not in known for p in (schema.get("properties") or {}).values()):
            self.send(400, {"error": {"code": 400, "type": "invalid_request_error", "message": "bad schema"}})
            return
        prompt = render(body["messages"], body.get("tools"))
        units = prompt.split()
        if self.too_long(units):
            return
        ids = generate(units, int(body.get("max_tokens", 16)), set())
        content = '{"answer": "yes"}' if schema else "".join(f" w{t}" for t in ids)
        calls = []
        if body.get("tools") and body.get("tool_choice") == "required":
            arguments = '{"city": Paris' if "bad-tool-json" in FAULTS else '{"city": "Paris"}'
            calls = [
                {
                    "type": "function",
                    "id": "call-1",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ]
            content = ""
        usage = {
            "prompt_tokens": len(units),
            "completion_tokens": len(ids),
            "total_tokens": len(units) + len(ids),
        }
        if body.get("stream"):
            deltas: list[dict] = [{"role": "assistant", "content": None}]
            if calls:
                deltas.append({"tool_calls": [{"index": 0, **calls[0]}]})
            else:
                deltas += [{"content": f" w{t}"} for t in ids]
            events: list[object] = [
                {"id": "chat-1", "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
            ]
            if "broken-stream" in FAULTS and len(events) > 3:
                del events[2]
                events[1] = "{not json"
            events.append({"id": "chat-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                events.append({"id": "chat-1", "choices": [], "usage": usage})
            self.sse(events, [TOKEN_DELAY_S] * len(events))
            return
        time.sleep(TOKEN_DELAY_S * len(ids))
        message: dict = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        choice: dict = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "length"}
        if body.get("logprobs") and not calls and not schema:
            choice["logprobs"] = {"content": probs(ids, int(body.get("top_logprobs") or 2))}
        self.send(200, {"id": "chat-1", "choices": [choice], "usage": usage})


ThreadingHTTPServer.allow_reuse_address = False
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()

"""The bench measured as requests to resident servers, interleaved (`format = "llama-server"`).

Why: where the host's speed changes from one second to the next (a virtual machine's CPUs
shared with other tenants), whole engine processes run seconds apart see different hosts, and
the difference between two such units is mostly the host's. Here every role's server is started
at once and stays resident for a block; then, round by round, each server gets the same prompt
processing request and the same generation request in turn (the order rotates every round), so
the roles' measurements of one round lie a fraction of a second apart and every role samples
the same stretch of the host's states. A block is one pair for every candidate: the unit of a
role is its block's rounds (each a repetition), the block's unit values are compared as pairs
exactly as llama-bench units are.

The throughput is the server's own account of each request (`timings.prompt_per_second` for a
prompt of `prompt_tokens` tokens with one token generated, `timings.predicted_per_second` for
`gen_tokens` tokens generated from a short prompt, end of sequence ignored), with the prompt
cache off, so that every request processes its whole prompt. The prompt is tokens of a fixed
text tokenized by pinned's server and sent to every server as token ids. A request that
processed another number of tokens than asked is an error of the unit, not a value.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

import httpx

from qualify.bench import gputelemetry, machine
from qualify.bench.data import UnitTest, llama_label
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.loopback import answers, on_free_port
from qualify.core.process import Server
from qualify.core.runstore import now_iso

#: Words for the prompt: tokenized once, repeated to the length asked (any text would do; this
#: one tokenizes to ordinary word pieces in every vocabulary).
TEXT = (
    "The toolchain that built this engine is measured against the one it replaces: the same "
    "prompt, the same tokens, the same model, one request after another on every server. "
)
#: Tokens of the generation request's prompt.
SHORT_PROMPT = 16
#: Server flags that are configuration the roles must share (or `allow_config_diff` names).
FLAGS = {
    "-b": "n_batch", "--batch-size": "n_batch", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch",
    "-c": "n_ctx", "--ctx-size": "n_ctx", "-np": "n_parallel", "--parallel": "n_parallel",
    "-t": "n_threads", "--threads": "n_threads", "-ngl": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
    "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v", "--cache-type-v": "type_v",
    "-fa": "flash_attn", "--flash-attn": "flash_attn",
}  # fmt: skip


class RequestFailed(QualifyError):
    """A measuring request did not give a throughput."""


@dataclass
class Resident:
    """One role's server for a block: its process, an HTTP client, what `/props` said."""

    role: str
    process: Server
    http: httpx.Client
    props: dict[str, Any]

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """(status, parsed body) of a POST; a transport failure is the request's failure, named
        as the server's exit when its process is gone."""
        try:
            response = self.http.post(path, json=body)
        except httpx.HTTPError as exc:
            gone = "" if self.process.alive() else " (its server exited)"
            raise RequestFailed(f"{self.role}: {path} failed{gone}: {type(exc).__name__}: {exc}") from exc
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text[:300]

    def describe(self) -> dict[str, Any]:
        return {
            "argv": self.process.recorded_argv(),
            "build_info": self.props.get("build_info"),
            "total_slots": self.props.get("total_slots"),
            "model_path": self.props.get("model_path"),
        }


def start(
    ctx: CheckContext, stack: ExitStack, role: str, template: str, ready_s: float, request_s: float
) -> Resident:
    """`template` for `role` on a free loopback port, ready (`/health`), stopped with `stack`."""

    def serve(port: int) -> AbstractContextManager[Server]:
        url = f"http://127.0.0.1:{port}/health"
        return ctx.serve(role, ctx.argv(template, role, port=str(port)), lambda: answers(url), ready_s)

    base_url, server = stack.enter_context(
        on_free_port(serve, retried=lambda why: ctx.echo(f"{role}: {why}"))
    )
    http = stack.enter_context(httpx.Client(base_url=base_url, timeout=request_s))
    try:
        reply = http.get("/props")
        props = reply.json() if reply.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        props = {}
    return Resident(role, server, http, props if isinstance(props, dict) else {})


def server_config(argv: Sequence[str]) -> dict[str, Any]:
    """The configuration a server's command line sets, by llama-bench's field names."""
    config: dict[str, Any] = {}
    for flag, value in itertools.pairwise(argv):
        if flag in FLAGS:
            config[FLAGS[flag]] = value
    return config


def prompt_ids(server: Resident, tokens: int) -> list[int]:
    """`tokens` token ids of the fixed text, tokenized by `server`."""
    status, body = server.post("/tokenize", {"content": TEXT, "add_special": False})
    ids = body.get("tokens") if status == 200 and isinstance(body, dict) else None
    if not ids or not all(isinstance(i, int) for i in ids):
        raise RequestFailed(f"{server.role}: /tokenize answered {status}", str(body)[:300])
    return [ids[i % len(ids)] for i in range(tokens)]


def measure_one(server: Resident, kind: str, prompt: list[int], gen_tokens: int) -> float:
    """One request's throughput in tokens/s as the server timed it: prompt processing (`pp`)
    or generation (`tg`)."""
    body: dict[str, Any] = {"prompt": prompt, "cache_prompt": False, "temperature": 0.0, "seed": 1}
    body |= {"n_predict": 1} if kind == "pp" else {"n_predict": gen_tokens, "ignore_eos": True}
    status, answer = server.post("/completion", body)
    timings = answer.get("timings") if status == 200 and isinstance(answer, dict) else None
    if not isinstance(timings, dict):
        raise RequestFailed(
            f"{server.role}: a {kind} request answered {status} without timings", str(answer)[:300]
        )
    if kind == "pp":
        done, asked = timings.get("prompt_n"), len(prompt)
    else:
        done, asked = timings.get("predicted_n"), gen_tokens
    rate = timings.get("prompt_per_second" if kind == "pp" else "predicted_per_second")
    if done != asked or not isinstance(rate, (int, float)) or rate <= 0:
        raise RequestFailed(
            f"{server.role}: a {kind} request processed {done} tokens of {asked} ({rate} t/s)",
            "the prompt cache must be off (cache_prompt false) and the context large enough",
        )
    return float(rate)


def rotated(order: Sequence[str], round_index: int) -> list[str]:
    """The block's order, rotated by the round: every role leads equally often."""
    shift = round_index % len(order)
    return [*order[shift:], *order[:shift]]


def run_block(schedule: Any, order: Sequence[str], phase: str, pair: int | None) -> bool:
    """One block: every role's server resident at once, `warmup_requests` of each kind thrown
    away per role, then `rounds` rounds of interleaved requests. Adds one unit per role to
    `schedule` (a `qualify.bench.schedule.Schedule`); False when a server or request failed."""
    ctx, params = schedule.ctx, schedule.params
    pp, tg = params.prompt_tokens, params.gen_tokens
    labels = {"pp": llama_label(pp, 0, 0), "tg": llama_label(0, tg, 0)}
    values: dict[str, dict[str, list[float]]] = {role: {"pp": [], "tg": []} for role in order}
    before, procs_before = schedule.between, schedule.between_procs
    started_at, started = now_iso(), time.monotonic()
    sampler = gputelemetry.UnitSampler(schedule.gpu_source)
    described: dict[str, dict[str, Any]] = {}
    failure: tuple[str, str, str | None, bool] | None = None  # (role, message, hint, harness)
    current = order[0]  # the role whose server or request is under way, to name in a failure
    sampler.start()
    try:
        with ExitStack() as stack:
            servers: dict[str, Resident] = {}
            ready_s, request_s = float(params.ready_timeout), float(params.request_timeout)
            # The servers start side by side (a GPU server takes seconds to load, a block's
            # roles would wait for each other's); each goes into the stack as it comes up, so
            # that every one started is stopped whatever the others did.
            with ThreadPoolExecutor(len(order)) as pool:
                starting = {
                    role: pool.submit(start, ctx, stack, role, params.run, ready_s, request_s)
                    for role in order
                }
            for role in order:
                current = role
                servers[role] = starting[role].result()
                described[role] = servers[role].describe()
            current = order[0]
            long_prompt = prompt_ids(servers[order[0]], pp)
            short_prompt = long_prompt[:SHORT_PROMPT]
            prompts = {"pp": long_prompt, "tg": short_prompt}
            for role in order:
                current = role
                for _ in range(params.warmup_requests):
                    for kind in ("pp", "tg"):
                        measure_one(servers[role], kind, prompts[kind], tg)
            for index in range(params.rounds):
                for kind in ("pp", "tg"):
                    for role in rotated(order, index):
                        current = role
                        values[role][kind].append(measure_one(servers[role], kind, prompts[kind], tg))
    except RequestFailed as exc:
        failure = (current, exc.message, exc.hint, False)
    except QualifyError as exc:  # a server that did not start (ToolMissing: no such binary)
        failure = (current, f"{current}: {exc.message}", exc.hint, isinstance(exc, ToolMissing))
    finally:
        gpu = sampler.stop()
    duration = time.monotonic() - started
    after = schedule.between = machine.snapshot()
    schedule.between_procs = machine.process_times()
    host = machine.foreign_load(before, after, procs_before, schedule.between_procs)
    # A failed block keeps the unit of the role that failed only: the others were stopped by it,
    # and their measurements of the block are incomplete (no pair is formed from it).
    roles = [failure[0]] if failure else list(order)
    for role in roles:
        index = len(schedule.units)
        entry: dict[str, Any] = {"index": index, "role": role, "phase": phase, "pair": pair}
        entry.update(started_at=started_at, duration_s=round(duration, 3), block_roles=list(order))
        entry["server"] = described.get(role, {})
        tests: list[UnitTest] = []
        if failure is None:
            config = server_config(described[role].get("argv") or [])
            engine = {"build_info": described[role].get("build_info")}
            tests = [
                UnitTest(labels[kind], "t/s", True, tuple(values[role][kind]),
                         {**config, "n_prompt": pp if kind == "pp" else SHORT_PROMPT,
                          "n_gen": 1 if kind == "pp" else tg}, engine)
                for kind in ("pp", "tg")
            ]  # fmt: skip
            entry.update(outcome="ok", ok=True)
        else:
            _, message, hint, harness = failure
            entry.update(ok=False, outcome=message, output_tail=(hint or "").splitlines()[-8:])
            if harness:  # no such binary: the harness's fault, not the build's
                entry["error"] = {"message": message, "hint": hint}
        schedule.record(entry, tests, (before, after), host, gpu, f"block {pair} ({role})")
    return failure is None

"""A deliberately broken peer for the soak tests: a tiny OpenAI-compatible streaming chat server
that leaks memory per request or stalls mid-stream on purpose.

It stands in for an inference server only to prove that the soak's gates fail: a leak must
trip the leak rule and a hang must trip the watchdog, and a real engine cannot be made to leak
or hang on demand. With no fault asked for it is the well-behaved counterpart the broken one is
compared with (the same program, so the fault is the only difference between the roles).

Usage: broken_chat_server.py PORT [--leak-kib N] [--stall-at REQUEST] [--tokens N] [--token-ms MS]
- `--leak-kib N`: keep N KiB of touched memory per request, forever (RSS grows linearly);
- `--stall-at R`: the R-th request (from 0) sends one token, then nothing, without closing.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("--leak-kib", type=int, default=0)
parser.add_argument("--stall-at", type=int, default=-1)
parser.add_argument("--tokens", type=int, default=8)
parser.add_argument("--token-ms", type=float, default=5.0)
args = parser.parse_args()

hoard: list[bytearray] = []
count = [0]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *rest: object) -> None:  # quiet: the test reads the soak, not this log
        pass

    def do_GET(self) -> None:
        body = b'{"status":"ok"}' if self.path == "/health" else b'{"total_slots": 2}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        with lock:
            index = count[0]
            count[0] += 1
            if args.leak_kib:
                block = bytearray(args.leak_kib * 1024)
                block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not just mapped
                hoard.append(block)
        tokens = min(int(request.get("max_tokens") or args.tokens), args.tokens)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(tokens):
            self.chunk({"choices": [{"index": 0, "delta": {"content": f" t{i}"}}]})
            if index == args.stall_at:
                time.sleep(3600)  # hold the connection open and say nothing: a silent hang
            time.sleep(args.token_ms / 1000)
        self.chunk({"choices": [], "usage": {"completion_tokens": tokens}})
        self.write(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def chunk(self, payload: object) -> None:
        self.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def write(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()

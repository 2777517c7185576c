"""A scripted stand-in for the Anthropic Messages API on loopback, for driving a real Claude Code.

Claude Code (``ANTHROPIC_BASE_URL`` pointed here, any ``ANTHROPIC_API_KEY``) sends
``POST /v1/messages?beta=true`` with ``stream: true`` and reads Server-Sent Events
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``); it probes the base
URL with ``HEAD /`` first. The stand-in records every request, so a test asserts on what the
model was shown (hook context, tool results, Lore's ask), and answers from a script: the reply to
a request is the script's turn numbered by the assistant messages already in that request, so a
side request (or a retried one) never shifts the script. Past the script's end it says "Done.".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]


def text(words: str) -> Block:
    return {"type": "text", "text": words}


def tool_use(name: str, arguments: dict[str, Any]) -> Block:
    return {"type": "tool_use", "name": name, "input": arguments}


@dataclass
class Standin:
    """The script (one list of blocks per assistant turn) and what was asked of it."""

    turns: Sequence[Sequence[Block]] = ()
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # (method, path, JSON body)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def messages(self) -> list[dict[str, Any]]:
        """The bodies of the ``/v1/messages`` requests, in order."""
        with self.lock:
            return [b for m, p, b in self.requests if m == "POST" and p.split("?")[0] == "/v1/messages"]

    def seen(self) -> list[str]:
        """Each ``/v1/messages`` request as the text the model was shown (system, messages, tools)."""
        return [json.dumps(body, ensure_ascii=False) for body in self.messages()]

    def reply(self, body: dict[str, Any]) -> list[Block]:
        turn = sum(1 for m in body.get("messages", ()) if m.get("role") == "assistant")
        blocks = self.turns[turn] if turn < len(self.turns) else [text("Done.")]
        return [
            {**b, "id": f"toolu_{turn}_{i}"} if b["type"] == "tool_use" else dict(b)
            for i, b in enumerate(blocks)
        ]


def _events(message_id: str, model: str, blocks: list[Block]) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 1, "output_tokens": 1}
    start = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": []}
    yield (
        "message_start",
        {"type": "message_start", "message": {**start, "stop_reason": None, "usage": usage}},
    )
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    delta = {"stop_reason": stop, "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 1}}
    yield "message_stop", {"type": "message_stop"}


def _handler(standin: Standin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: bytes = b"", kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_HEAD(self) -> None:
            with standin.lock:
                standin.requests.append(("HEAD", self.path, None))
            self._send(200)

        def do_GET(self) -> None:
            with standin.lock:
                standin.requests.append(("GET", self.path, None))
            self._send(404, b"{}")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw) if raw else {}
            with standin.lock:
                standin.requests.append(("POST", self.path, body))
                number = len(standin.requests)
            path = self.path.split("?")[0]
            if path.endswith("/count_tokens"):
                self._send(200, json.dumps({"input_tokens": len(raw) // 4}).encode())
                return
            if path != "/v1/messages":
                self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"stand-in"}}')
                return
            blocks, model, message_id = standin.reply(body), str(body.get("model")), f"msg_{number}"
            if not body.get("stream"):
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                message = {"id": message_id, "type": "message", "role": "assistant", "model": model}
                usage = {"input_tokens": 1, "output_tokens": 1}
                answer = {
                    **message,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
                self._send(200, json.dumps(answer).encode())
                return
            stream = "".join(
                f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in _events(message_id, model, blocks)
            )
            self._send(200, stream.encode(), "text/event-stream")

    return Handler


@contextmanager
def model_standin(turns: Sequence[Sequence[Block]] = ()) -> Iterator[tuple[str, Standin]]:
    """The stand-in's base URL (``http://127.0.0.1:<port>``) and its record, while it serves."""
    standin = Standin(turns)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", standin
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

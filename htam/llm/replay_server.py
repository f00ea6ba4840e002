"""A scripted model behind a real HTTP server speaking the OpenAI chat-completions protocol.

It listens on 127.0.0.1 (an ephemeral port) and answers ``POST /v1/chat/completions`` from a
script: normal replies (with optional ``reasoning_content`` and usage), HTTP errors with headers
(429 + Retry-After, 500, 503), raw malformed bodies, and replies delayed past a client's timeout.
Every request is recorded, headers included, so tests can check what a client sent.

Script file (JSON), for ``ReplayServer.from_file`` / ``--llm replay`` style use::

    {"model": "replay-model",
     "replies": [
       {"content": "```python\\nclass ModelNew...```", "reasoning": "optional thoughts",
        "prompt_tokens": 100, "completion_tokens": 50},
       {"status": 429, "headers": {"Retry-After": "1"}},
       {"body": "{not json", "status": 200},
       {"delay_s": 5.0, "content": "too late"},
       {"when": "strategy_id", "content": "{\\"strategy_id\\": \\"x\\"}", "repeat": true}
     ]}

Each request is answered by the first unused reply whose ``when`` (a substring of the request's
message texts) matches, or that has no ``when``; a reply is used once unless ``repeat`` is true.
A top-level list is read as the ``replies``. A request no reply matches gets HTTP 400
"replay script exhausted", which clients do not retry.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Scripted:
    content: str = ""
    reasoning: str | None = None  # sent as message.reasoning_content (DeepSeek style)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # raw response body instead of the generated JSON
    delay_s: float = 0.0  # wait before answering
    prompt_tokens: int | None = None  # default: words in the request's messages
    completion_tokens: int | None = None  # default: words in content + reasoning
    finish_reason: str = "stop"
    when: str | None = None
    repeat: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scripted:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown replay reply keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)

    @classmethod
    def error(cls, status: int, message: str = "", retry_after: float | None = None) -> Scripted:
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        return cls(content=message, status=status, headers=headers)

    @classmethod
    def malformed(cls, body: str = '{"id": "chatcmpl-broken", "choices": [') -> Scripted:
        return cls(body=body)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: str

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def text(self) -> str:
        """All message contents of a chat request, joined (what ``when`` matches against)."""
        data = self.json if self.path == CHAT_PATH else None
        messages = (data or {}).get("messages", [])
        return "\n".join(str(m.get("content", "")) for m in messages)


Matcher = Callable[[RecordedRequest], Scripted | None]


class ReplayServer:
    def __init__(
        self,
        script: list[Scripted] | None = None,
        *,
        matcher: Matcher | None = None,
        model: str = "replay-model",
    ):
        self.script = list(script or [])
        self.matcher = matcher  # asked first; returning None falls through to the script
        self.model = model
        # The answer to ``GET /v1/models`` (a preflight check); None lists ``model``.
        self.models_reply: Scripted | None = None
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0  # most chat requests answered at the same time
        self._in_flight = 0
        self._used: set[int] = set()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: str | Path) -> ReplayServer:
        data = json.loads(Path(path).read_text())
        if isinstance(data, list):
            data = {"replies": data}
        replies = [Scripted.from_dict(r) for r in data.get("replies", [])]
        return cls(replies, model=data.get("model", "replay-model"))

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the replay server is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    def add(self, *replies: Scripted) -> None:
        with self._lock:
            self.script.extend(replies)

    def start(self) -> ReplayServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A handler still sleeping past a client's timeout must not block close().
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join()
            self._httpd = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _pick(self, request: RecordedRequest) -> Scripted | None:
        with self._lock:
            if self.matcher is not None and (chosen := self.matcher(request)) is not None:
                return chosen
            text = request.text()
            for i, reply in enumerate(self.script):
                if i in self._used or (reply.when is not None and reply.when not in text):
                    continue
                if not reply.repeat:
                    self._used.add(i)
                return reply
            return None

    def completion(self, reply: Scripted, request: RecordedRequest) -> dict[str, Any]:
        """The OpenAI chat.completion object for a normal scripted reply."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = len(request.text().split())
        completion = reply.completion_tokens
        if completion is None:
            completion = len(reply.content.split()) + len((reply.reasoning or "").split())
        return {
            "id": f"chatcmpl-replay-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (request.json or {}).get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests
            return

        def do_GET(self) -> None:
            self._record("")
            reply = server.models_reply
            if self.path == "/v1/models" and reply is not None and reply.status >= 400:
                self._send(reply.status, _error_body(reply.content, reply.status), reply.headers)
            elif self.path == "/v1/models":
                self._send(
                    200, {"object": "list", "data": [{"id": server.model, "object": "model"}]}
                )
            else:
                self._send(404, _error_body(f"no route {self.path}", 404))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = self._record(self.rfile.read(length).decode())
            if self.path != CHAT_PATH:
                self._send(404, _error_body(f"no route {self.path}", 404))
                return
            reply = server._pick(request)
            if reply is None:
                self._send(400, _error_body("replay script exhausted", 400))
                return
            server._enter()
            try:
                time.sleep(reply.delay_s)
                self._send(reply.status, _payload(server, reply, request), reply.headers)
            finally:
                server._leave()

        def _record(self, body: str) -> RecordedRequest:
            request = RecordedRequest(self.command, self.path, dict(self.headers.items()), body)
            server._record(request)
            return request

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout) before the scripted delay ended

    return Handler


def _payload(server: ReplayServer, reply: Scripted, request: RecordedRequest) -> Any:
    if reply.body is not None:
        return reply.body
    if reply.status >= 400:
        return _error_body(reply.content or f"scripted HTTP {reply.status}", reply.status)
    return server.completion(reply, request)


def _error_body(message: str, status: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "replay_error", "code": status}}


def dump_script(replies: list[Scripted], model: str = "replay-model") -> str:
    """The JSON text of a script file (the inverse of ``ReplayServer.from_file``)."""
    return json.dumps({"model": model, "replies": [asdict(r) for r in replies]}, indent=1)

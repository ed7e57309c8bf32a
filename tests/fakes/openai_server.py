"""An OpenAI-compatible chat-completions server on loopback, so the planner
is tested against a real server.

The openai SDK talks through its own HTTP stack, so nothing short of a real server
can stand in for the LLM. ``FakeLLM`` runs a ``ThreadingHTTPServer`` on
``127.0.0.1:0`` and answers ``POST /v1/chat/completions`` from a scripted queue,
first in, first out, recording every request body::

    llm = FakeLLM().start()
    llm.reply_json({"name": "x", "steps": [...]})          # content: the JSON text
    llm.reply(tool_calls=[tool_call("geocode", {"city": "Oslo"})])
    llm.reply("```json\n{...}\n```")                        # fenced content
    llm.fail(429, headers={"Retry-After": "0"})             # an error answer
    llm.reply(handler=lambda request: {...})                # computed from the request
    client = LLMClient(base_url=llm.base_url, api_key="k", model="m")

When the queue is empty the server answers 400 ("no scripted reply left"), which
the client treats as fatal, so a test that asks more than it scripted fails fast.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.http import LoopbackServer

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def tool_call(name: str, arguments: Any, *, call_id: str | None = None) -> dict:
    """One tool call as the API sends it; ``arguments`` may be a dict or raw text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


@dataclass
class ChatRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    status: int | None = None  # what was answered

    @property
    def body(self) -> dict:
        return json.loads(self.raw or b"{}")

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def text(self) -> str:
        """The body as text: what a secret search looks through."""
        return self.raw.decode("utf-8", errors="replace")


@dataclass
class Scripted:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    handler: Callable[[ChatRequest], Any] | None = None


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict] | None = None,
    usage: dict | None = None,
    model: str = "fake-model",
    finish_reason: str | None = None,
) -> dict:
    """A chat.completion document."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": dict(usage or DEFAULT_USAGE),
    }


class FakeLLM(LoopbackServer):
    """The server, its queue of scripted answers and the requests it received."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Scripted] = deque()
        self._requests: list[ChatRequest] = []
        self.model_listings: list[ChatRequest] = []  # GET /v1/models (health checks)
        self.models_status = 200  # what GET /v1/models answers
        self._fallback: Callable[[ChatRequest], Any] | None = None

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    # --- scripting -------------------------------------------------------------

    def reply(
        self,
        content: str | None = None,
        *,
        tool_calls: list[dict] | None = None,
        usage: dict | None = None,
        handler: Callable[[ChatRequest], Any] | None = None,
    ) -> FakeLLM:
        """Queue a 200 answer; ``handler(request)`` computes a completion dict instead."""
        if handler is not None:
            return self._push(Scripted(handler=handler))
        doc = completion(content, tool_calls=tool_calls, usage=usage)
        return self._push(Scripted(200, json.dumps(doc).encode(), _JSON))

    def always(self, handler: Callable[[ChatRequest], Any]) -> FakeLLM:
        """Answer with ``handler(request)`` whenever the queue is empty (a scripted model
        that answers any number of requests, e.g. tests/fakes/planner_script.py)."""
        with self._lock:
            self._fallback = handler
        return self

    def reply_json(self, data: Any, *, usage: dict | None = None) -> FakeLLM:
        return self.reply(json.dumps(data), usage=usage)

    def fail(
        self,
        status: int,
        *,
        message: str = "fake failure",
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> FakeLLM:
        """Queue ``times`` error answers in the OpenAI error shape."""
        body = json.dumps({"error": {"message": message, "type": "fake", "code": status}})
        for _ in range(times):
            self._push(Scripted(status, body.encode(), {**_JSON, **(headers or {})}))
        return self

    def raw(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> FakeLLM:
        """Queue an answer exactly as given (e.g. a body that is not JSON)."""
        return self._push(Scripted(status, body, dict(headers or {})))

    def _push(self, item: Scripted) -> FakeLLM:
        with self._lock:
            self._queue.append(item)
        return self

    # --- what happened -------------------------------------------------------------

    @property
    def requests(self) -> list[ChatRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def all_text(self) -> str:
        """Every recorded request body, joined: where a secret must never be."""
        return "\n".join(r.text for r in self.requests)

    def _next(self, request: ChatRequest) -> Scripted:
        with self._lock:
            self._requests.append(request)
            if not self._queue and self._fallback is not None:
                item = Scripted(handler=self._fallback)
            elif not self._queue:
                body = {"error": {"message": "fake LLM: no scripted reply left", "code": 400}}
                return Scripted(400, json.dumps(body).encode(), _JSON)
            else:
                item = self._queue.popleft()
        if item.handler is not None:
            doc = item.handler(request)
            return Scripted(200, json.dumps(doc).encode(), _JSON)
        return item


_JSON = {"Content-Type": "application/json"}


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = ChatRequest(self.path, headers, raw)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(Scripted(404, b'{"error": {"message": "not found"}}', _JSON), request)
            return
        self._send(self.server.fake._next(request), request)  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        """``GET /v1/models``: the model list (``fake.models_status`` decides the status)."""
        fake = self.server.fake  # type: ignore[attr-defined]
        request = ChatRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, b"")
        if self.path.rstrip("/") != "/v1/models":
            self._send(Scripted(404, b'{"error": {"message": "not found"}}', _JSON), request)
            return
        fake.model_listings.append(request)
        body = {"object": "list", "data": [{"id": "fake-planner", "object": "model"}]}
        if fake.models_status != 200:
            body = {"error": {"message": "fake failure", "code": fake.models_status}}
        self._send(Scripted(fake.models_status, json.dumps(body).encode(), _JSON), request)

    def _send(self, item: Scripted, request: ChatRequest) -> None:
        request.status = item.status
        self.send_response(item.status)
        for name, value in item.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(item.body)))
        self.end_headers()
        self.wfile.write(item.body)

    def log_message(self, format, *args) -> None:
        pass


FakeLLM.handler = _Handler

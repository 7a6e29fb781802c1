"""The mock server's HTTP side: OpenAI's chat completions endpoint over http.server, the
in-process ``MockLLMServer`` with its counters, and ``serve_forever`` for the command."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .extract import extract
from .faults import Fault, FaultPlan, ItemScript
from .judge import JudgeDrift, draft_reply, judge_answer
from .policy import FORCED_ERROR_RE, MODEL_ID, content_text, count_tokens, decide, format_answer
from .tools import tool_answer
from .variance import AnswerVariance, user_text


class _Headers(dict):
    """Request headers by lower-cased name; ``get`` in any case."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> Any:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "prompt-gate-mock-llm/1"
    timeout = 120  # idle keep-alive connections end after this
    disable_nagle_algorithm = True  # headers and body are separate writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        if self.server.mock.verbose:
            super().log_message(format, *args)

    def setup(self) -> None:
        super().setup()
        self.server.mock._track(self.connection, True)

    def parse_request(self) -> bool:
        """The request line and headers, without http.server's header parser (the email
        package was the largest part of this server's CPU per request; bench/README.md).
        The server stands in for a provider in benchmarks that share the machine's cores
        with the gate."""
        self.received_at = time.monotonic()  # the latency counts from here
        # raw_requestline: set by handle_one_request, undeclared in typeshed; command None: as
        # http.server's own parse_request starts (typeshed says str)
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")  # type: ignore[attr-defined]
        self.requestline, self.command, self.request_version = line, None, "HTTP/1.1"  # type: ignore[assignment]  # errors get a status line
        self.close_connection = True
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self.send_error(400, f"Bad request line {line!r}")
            return False
        self.command, self.path, self.request_version = parts
        fields: dict[str, str] = {}
        while True:
            raw = self.rfile.readline(65537)
            if len(raw) > 65536 or len(fields) > 100:
                self.send_error(431, "Request header fields too large")
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("iso-8859-1").partition(":")
            if not sep:
                self.send_error(400, f"Bad header line {raw[:80]!r}")
                return False
            fields[name.strip().lower()] = value.strip()
        self.headers = _Headers(fields)
        connection = fields.get("connection", "").lower()
        self.close_connection = connection == "close" or (parts[2] == "HTTP/1.0" and connection != "keep-alive")
        return True

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.mock._track(self.connection, False)

    # --- routing
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            self._json(
                200,
                {
                    "object": "list",
                    "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "prompt-gate"}],
                },
            )
        elif path == "/stats":
            self._json(200, self.server.mock.stats())
        elif path in ("/health", ""):
            self._json(200, {"status": "ok"})
        else:
            self._error(404, f"no route GET {path}", "not_found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        body = self._read_body()
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route POST {path}", "not_found")
            return
        self.server.mock._chat(self, body)

    # --- I/O helpers
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": kind, "param": None}}, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, mock: MockLLMServer):
        self.mock = mock
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a killed worker) is routine, not a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class MockLLMServer:
    """The mock server, in-process. ``with MockLLMServer(latency_ms=5) as s: s.base_url``.

    Counters (``stats()``, also ``GET /stats``): ``requests`` (chat requests received) and
    ``outcomes`` per kind: ok, garbage, error (500), rate_limited (429), timeout (hung),
    forced_error (mock-error-NNN), unauthorized (401), bad_request (400), aborted (the
    server stopped during the latency); plus ``in_flight`` and ``max_in_flight``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        error_rate: float = 0.0,
        rate_limit_rpm: int = 0,
        timeout_rate: float = 0.0,
        garbage_rate: float = 0.0,
        rate_limit_rate: float = 0.0,
        retry_after_ms: float = 1000.0,
        seed: int = 0,
        hang_seconds: float = 60.0,
        api_key: str | None = None,
        verbose: bool = False,
        judge_drift_after: int | None = None,
        tool_wrong_rate: float = 0.0,
        tool_skip_rate: float = 0.0,
        on_request: Callable[[dict], None] | None = None,
    ):
        self.host, self.port = host, port
        self.faults = FaultPlan(
            latency_ms=latency_ms,
            jitter_ms=jitter_ms,
            error_rate=error_rate,
            rate_limit_rpm=rate_limit_rpm,
            timeout_rate=timeout_rate,
            garbage_rate=garbage_rate,
            rate_limit_rate=rate_limit_rate,
            retry_after_ms=retry_after_ms,
            seed=seed,
        )
        self.variance = AnswerVariance(seed)  # flaky models and scripted answers (variance.py)
        self.drift = JudgeDrift(judge_drift_after)  # judges that drift mid-run (judge.py)
        self.script = ItemScript()  # an item's own delay or status (faults.py)
        self.on_request = on_request  # a test's hook: called with each chat request, before it is answered
        self.hang_seconds = hang_seconds
        self.tool_rates = (tool_wrong_rate, tool_skip_rate)  # tool calls: wrong arguments, no call (tools.py)
        self.api_key = api_key
        self.verbose = verbose
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._outcomes: Counter[str] = Counter()
        self._requests = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._connections: set[socket.socket] = set()
        self._recent: deque[dict] = deque(maxlen=100)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle
    def start(self) -> MockLLMServer:
        if self._server is not None:
            return self
        self._stop.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"mock-llm:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at once: hanging requests wake up, open connections are closed."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stop.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MockLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- counters
    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self._requests,
                "outcomes": dict(self._outcomes),
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
            }

    def recent_requests(self) -> list[dict]:
        """The last 100 well-formed chat request bodies, oldest first (in-process only)."""
        with self._lock:
            return list(self._recent)

    def drift_judges(self, after: int | None) -> None:
        """From ``after`` more judging requests on, every judge's verdict flips (None: never)."""
        self.drift.arm(after)

    def reset_stats(self) -> None:
        with self._lock:
            self._recent.clear()
            self._outcomes.clear()
            self._requests = 0
            self._max_in_flight = self._in_flight
        self.variance.reset()

    def _count(self, outcome: str) -> None:
        with self._lock:
            self._outcomes[outcome] += 1

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    # --- the chat endpoint
    def _chat(self, handler: _Handler, body: bytes) -> None:
        """Count first, then answer: a client that has its answer sees it counted."""
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        reply = None
        try:
            reply = self._answer(handler, body)
        finally:
            with self._lock:
                self._in_flight -= 1
                if reply is not None and reply.outcome:
                    self._outcomes[reply.outcome] += 1
        if reply.status is None:
            handler.close_connection = True  # hung or aborted: nothing is sent
        elif reply.status == 200:
            handler._json(200, reply.payload)
        else:
            handler._error(reply.status, reply.payload, reply.kind, reply.headers)

    def _answer(self, handler: _Handler, body: bytes) -> _Reply:
        if self.api_key is not None and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _Reply("unauthorized", 401, "Incorrect API key provided.", "invalid_api_key")
        request, problem = _parse_request(body)
        if problem:
            return _Reply("bad_request", 400, problem, "invalid_request_error")
        with self._lock:
            self._recent.append(request)
        if self.on_request is not None:
            self.on_request(request)
        text = user_text(request["messages"])
        forced = FORCED_ERROR_RE.match(request["model"])
        status = int(forced.group(1)) if forced else self.script.status(text)
        if status == 429 and not forced:  # an item's 429 asks to wait, as a provider's does
            return _rate_limited(self.faults.retry_after_ms / 1000.0)
        if status:
            why = f"model {request['model']}" if forced else "the item's status line"
            return _Reply("forced_error", status, f"forced error {status} ({why})", "forced_error")
        wait = self.faults.rate_limited()
        if wait is not None:
            return _rate_limited(wait)
        fault = self.faults.draw()
        if fault.kind == "rate_limited":
            return _rate_limited(self.faults.retry_after_ms / 1000.0)
        scripted = self.script.delay(text)
        if scripted is not None:
            fault = Fault(fault.kind, scripted)
        if fault.kind == "timeout":
            self._count("timeout")  # counted when the hang starts
            self._stop.wait(fault.delay + self.hang_seconds)
            return _Reply(None, None)
        if fault.kind == "error":
            reply = _Reply("error", 500, "The server had an error while processing your request.", "server_error")
        else:
            reply = _Reply(
                "garbage" if fault.kind == "garbage" else "ok",
                200,
                _completion(request, self._content(request, fault.kind == "garbage")),
            )
        # the answer is ready: it goes out ``delay`` after the request arrived, so the
        # latency a client sees is the one configured, not that plus this server's own work
        remaining = getattr(handler, "received_at", time.monotonic()) + fault.delay - time.monotonic()
        if remaining > 0 and self._stop.wait(remaining):
            return _Reply("aborted", None)
        return reply

    def _content(self, request: dict, garbage: bool) -> str | dict:
        """The answer's text: a tool call (``tools``: a message), a judge's verdict or a drafted
        reply (``judge``), extracted fields as JSON (``extract``), else a label."""
        called = None if garbage else tool_answer(request, *self.tool_rates)
        if called is not None:
            return called
        judged = judge_answer(request["messages"], self.drift)
        if judged is not None:
            return format_answer(self.faults.pick(("maybe",)) if garbage else judged, request.get("response_format"))
        reply = draft_reply(request["messages"])
        if reply is not None:
            return reply
        extracted = extract(request["messages"])
        if extracted is not None:
            return self.faults.pick(()) if garbage else extracted
        label, policy = decide(request["messages"])
        label = self.variance.answer(request, label, policy)
        if garbage:
            label = self.faults.pick(policy.labels or (label,))
        return format_answer(label, request.get("response_format"))


def _rate_limited(wait: float) -> _Reply:
    """A 429 asking the client to wait ``wait`` seconds (Retry-After in whole seconds, at
    least 1, and the exact wait in retry-after-ms, as OpenAI sends them)."""
    headers = {"Retry-After": str(max(1, int(wait + 0.999))), "retry-after-ms": str(int(wait * 1000))}
    return _Reply(
        "rate_limited", 429, "Rate limit reached for requests; try again later.", "rate_limit_exceeded", headers
    )


@dataclass(frozen=True)
class _Reply:
    outcome: str | None  # the counter to bump (None: already counted)
    status: int | None  # None: send nothing
    payload: Any = None  # the completion (200) or the error message
    kind: str = ""
    headers: dict[str, str] | None = None


def _parse_request(body: bytes) -> tuple[dict, str | None]:
    try:
        request = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        return {}, "the request body is not valid JSON"
    if not isinstance(request, dict):
        return {}, "the request body must be a JSON object"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return {}, "'messages' must be a non-empty list of message objects"
    if not isinstance(request.get("model"), str) or not request["model"]:
        return {}, "'model' is required"
    if request.get("stream"):
        return {}, "streaming is not supported by the mock server"
    return request, None


_ids = iter(range(1, 1 << 62))
_ids_lock = threading.Lock()


def _completion(request: dict, content: str | dict) -> dict:
    """A chat completion of ``content``: a text, or a message that calls tools."""
    with _ids_lock:
        n = next(_ids)
    prompt_tokens = sum(count_tokens(content_text(m.get("content"))) for m in request["messages"])
    if isinstance(content, dict):
        message, finish = content, "tool_calls" if content.get("tool_calls") else "stop"
        said = " ".join(c["function"]["arguments"] for c in content.get("tool_calls") or ())
    else:
        message, finish, said = {"role": "assistant", "content": content, "refusal": None}, "stop", content
    completion_tokens = count_tokens(said)
    return {
        "id": f"chatcmpl-mock-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request["model"],
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "logprobs": None,
                "message": message,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def serve_forever(host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Run the server until SIGINT or SIGTERM (what ``promptgate mock-llm`` calls)."""
    done = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: done.set())
    server = MockLLMServer(host, port, **options).start()
    print(
        f"mock-llm listening on {server.base_url} (a stand-in model server; "
        "point OPENAI_BASE_URL at a real endpoint for real use)",
        flush=True,
    )
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""A local OpenAI-compatible model server: the provider for the tests, the demo and the
benchmarks. It is a stand-in, not a model: for real use point ``OPENAI_BASE_URL`` at
OpenAI, vLLM, Ollama, llama.cpp's server or any OpenAI-compatible endpoint.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /stats`` (JSON
counters) and ``GET /health``.

Answer policy (deterministic, readable in a demo)
-------------------------------------------------

Rules are read from the **system** (and developer) messages, one per line::

    - urgent: outage, site is down, can't log in, charged twice, refund*
    - routine: password reset, invoice copy
    default: routine

* ``- <label>: keyword, keyword, ...`` (``*`` works as the bullet too) is one rule. The
  label is one or more words of letters, digits, ``_ . -``; the keywords are separated
  by commas; a final ``.`` and surrounding quotes are ignored.
* The text the rules are matched against is the **user** messages. Matching is
  case-insensitive and on whole words or phrases (``down`` does not match
  ``download``; spaces in a phrase match any whitespace). A keyword ending in ``*`` is a
  prefix (``refund*`` matches refund, refunds, refunded).
* Rules are tried **in order**; the first rule with a keyword in the text decides. A label
  may have several rules, so an exception can come first::

      - routine: no rush, not urgent
      - urgent: outage, down

* When no rule matches, the answer is the label of the ``default: <label>`` line (with or
  without a bullet); without one, the label of the last rule; without any rule, ``unknown``.
* The answer is the bare label. When the request has ``response_format`` of type
  ``json_object`` the answer is ``{"decision": "<label>"}``; for ``json_schema`` the key is
  the schema's first property.

So editing a prompt's keyword lists really changes its accuracy.

Fault injection (options of :class:`MockLLMServer` and of ``promptgate mock-llm``)
---------------------------------------------------------------------------------

``latency_ms`` + uniform ``jitter_ms`` per request, counted from the request's arrival (the
answer is prepared, then waits out the rest); ``error_rate`` (500);
``rate_limit_rpm`` (requests per minute in a sliding window, then 429 with
``Retry-After`` and ``retry-after-ms``); ``timeout_rate`` (the request hangs for
``hang_seconds``, default 60, longer than a sane client timeout, and stops hanging when the
server stops); ``garbage_rate`` (answers a word outside the labels); ``seed`` for the fault
RNG; ``api_key`` (when set, any other bearer token gets 401). A model named
``mock-error-<status>`` (e.g. ``mock-error-400``) always gets that HTTP status.
"""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Sequence

import click

MODEL_ID = "mock-llm"
NO_RULE_ANSWER = "unknown"
GARBAGE_WORDS = ("maybe", "perhaps", "unsure", "banana", "lorem")
FORCED_ERROR_RE = re.compile(r"^mock-error-(\d{3})$")

_BULLET = r"^\s*[-*\u2022]\s*"
_LABEL = r"[A-Za-z0-9_.\-]+(?:[ \t]+[A-Za-z0-9_.\-]+)*"
RULE_RE = re.compile(_BULLET + rf"(?P<label>{_LABEL})[ \t]*:[ \t]*(?P<keywords>.+?)\s*$")
DEFAULT_RE = re.compile(r"^\s*(?:[-*\u2022]\s*)?default[ \t]*:[ \t]*(?P<label>" + _LABEL + r")[ \t.]*$",
                        re.IGNORECASE)


# ----------------------------------------------------------------------------- policy

@dataclass(frozen=True)
class Rule:
    label: str
    keywords: tuple[str, ...]
    pattern: re.Pattern


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    default: str | None

    @property
    def labels(self) -> tuple[str, ...]:
        seen = dict.fromkeys(r.label for r in self.rules)
        if self.default:
            seen.setdefault(self.default)
        return tuple(seen)

    def answer(self, text: str) -> str:
        text = _normalize_quotes(text)
        for rule in self.rules:
            if rule.pattern.search(text):
                return rule.label
        if self.default:
            return self.default
        return self.rules[-1].label if self.rules else NO_RULE_ANSWER


def _normalize_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')


def _keyword_regex(keyword: str) -> str:
    prefix = keyword.endswith("*")
    words = keyword.rstrip("*").split()
    body = r"\s+".join(re.escape(w) for w in words)
    return rf"(?<!\w){body}" + (r"\w*" if prefix else r"(?!\w)")


def _split_keywords(raw: str) -> tuple[str, ...]:
    raw = raw.rstrip().rstrip(".")
    keywords = []
    for kw in raw.split(","):
        kw = _normalize_quotes(kw).strip().strip("\"'`").strip()
        if kw.rstrip("*"):
            keywords.append(kw.casefold())
    return tuple(keywords)


@lru_cache(maxsize=256)
def parse_rules(system_text: str) -> Policy:
    """The rules written in a system message (see the module docstring)."""
    rules, default = [], None
    for line in system_text.splitlines():
        d = DEFAULT_RE.match(line)
        if d:
            default = d.group("label")
            continue
        m = RULE_RE.match(line)
        if not m:
            continue
        keywords = _split_keywords(m.group("keywords"))
        if keywords:
            alternation = "|".join(_keyword_regex(k) for k in keywords)
            rules.append(Rule(m.group("label"), keywords, re.compile(alternation, re.IGNORECASE)))
    return Policy(tuple(rules), default)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):      # content parts: [{"type": "text", "text": ...}]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def decide(messages: Sequence[dict]) -> tuple[str, Policy]:
    """The label the policy picks for a chat request's messages."""
    system = "\n".join(_content_text(m.get("content")) for m in messages
                       if m.get("role") in ("system", "developer"))
    user = "\n".join(_content_text(m.get("content")) for m in messages if m.get("role") == "user")
    policy = parse_rules(system)
    return policy.answer(user), policy


def garbage_word(labels: Iterable[str], rng: random.Random) -> str:
    taken = {label.casefold() for label in labels}
    choices = [w for w in GARBAGE_WORDS if w not in taken]
    return rng.choice(choices) if choices else "zzz-not-a-label"


def format_answer(label: str, response_format: Any) -> str:
    if not isinstance(response_format, dict):
        return label
    kind = response_format.get("type")
    if kind == "json_object":
        return json.dumps({"decision": label})
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        props = list((schema.get("properties") or {}).keys())
        return json.dumps({props[0] if props else "decision": label})
    return label


def count_tokens(text: str) -> int:
    """A cheap estimate: words."""
    return len(text.split())


# ----------------------------------------------------------------------------- faults

@dataclass(frozen=True)
class Fault:
    kind: str                      # ok | garbage | error | timeout
    delay: float                   # seconds of latency before answering


class FaultPlan:
    """Draws, under one lock, the latency and the fault of each request from a seeded RNG,
    and keeps the sliding one-minute window of the rate limit."""

    def __init__(self, *, latency_ms: float = 0.0, jitter_ms: float = 0.0, error_rate: float = 0.0,
                 rate_limit_rpm: int = 0, timeout_rate: float = 0.0, garbage_rate: float = 0.0,
                 seed: int = 0):
        for name, rate in (("error_rate", error_rate), ("timeout_rate", timeout_rate),
                           ("garbage_rate", garbage_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {rate}")
        if error_rate + timeout_rate + garbage_rate > 1.0:
            raise ValueError("error_rate + timeout_rate + garbage_rate must not exceed 1")
        if latency_ms < 0 or jitter_ms < 0 or rate_limit_rpm < 0:
            raise ValueError("latency_ms, jitter_ms and rate_limit_rpm must not be negative")
        self.latency_ms, self.jitter_ms = latency_ms, jitter_ms
        self.error_rate, self.timeout_rate, self.garbage_rate = error_rate, timeout_rate, garbage_rate
        self.rate_limit_rpm = int(rate_limit_rpm)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._window: deque[float] = deque()

    def rate_limited(self, now: float | None = None) -> float | None:
        """Seconds until a slot frees up when the limit is reached, else None (and the
        request takes a slot)."""
        if not self.rate_limit_rpm:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._window and self._window[0] <= now - 60.0:
                self._window.popleft()
            if len(self._window) >= self.rate_limit_rpm:
                return max(0.001, self._window[0] + 60.0 - now)
            self._window.append(now)
            return None

    def draw(self) -> Fault:
        with self._lock:
            jitter = self._rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0.0
            roll = self._rng.random()
        delay = (self.latency_ms + jitter) / 1000.0
        if roll < self.timeout_rate:
            return Fault("timeout", delay)
        roll -= self.timeout_rate
        if roll < self.error_rate:
            return Fault("error", delay)
        roll -= self.error_rate
        if roll < self.garbage_rate:
            return Fault("garbage", delay)
        return Fault("ok", delay)

    def pick(self, seq: Sequence[str]) -> str:
        with self._lock:
            return garbage_word(seq, self._rng)


# ----------------------------------------------------------------------------- HTTP

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
    timeout = 120                   # idle keep-alive connections end after this
    disable_nagle_algorithm = True  # headers and body are separate writes
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:   # quiet by default
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
        self.received_at = time.monotonic()   # the latency counts from here
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline, self.command, self.request_version = line, None, "HTTP/1.1"   # errors get a status line
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
            self._json(200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "prompt-gate"}]})
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
        self._json(status, {"error": {"message": message, "type": kind, "code": kind, "param": None}},
                   headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, mock: "MockLLMServer"):
        self.mock = mock
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a killed worker) is routine, not a traceback."""
        import sys
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

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, latency_ms: float = 0.0,
                 jitter_ms: float = 0.0, error_rate: float = 0.0, rate_limit_rpm: int = 0,
                 timeout_rate: float = 0.0, garbage_rate: float = 0.0, seed: int = 0,
                 hang_seconds: float = 60.0, api_key: str | None = None, verbose: bool = False):
        self.host, self.port = host, port
        self.faults = FaultPlan(latency_ms=latency_ms, jitter_ms=jitter_ms, error_rate=error_rate,
                                rate_limit_rpm=rate_limit_rpm, timeout_rate=timeout_rate,
                                garbage_rate=garbage_rate, seed=seed)
        self.hang_seconds = hang_seconds
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
    def start(self) -> "MockLLMServer":
        if self._server is not None:
            return self
        self._stop.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"mock-llm:{self.port}", daemon=True)
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

    def __enter__(self) -> "MockLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- counters
    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self._requests, "outcomes": dict(self._outcomes),
                    "in_flight": self._in_flight, "max_in_flight": self._max_in_flight}

    def recent_requests(self) -> list[dict]:
        """The last 100 well-formed chat request bodies, oldest first (in-process only)."""
        with self._lock:
            return list(self._recent)

    def reset_stats(self) -> None:
        with self._lock:
            self._recent.clear()
            self._outcomes.clear()
            self._requests = 0
            self._max_in_flight = self._in_flight

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
            handler.close_connection = True       # hung or aborted: nothing is sent
        elif reply.status == 200:
            handler._json(200, reply.payload)
        else:
            handler._error(reply.status, reply.payload, reply.kind, reply.headers)

    def _answer(self, handler: _Handler, body: bytes) -> "_Reply":
        if self.api_key is not None and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _Reply("unauthorized", 401, "Incorrect API key provided.", "invalid_api_key")
        request, problem = _parse_request(body)
        if problem:
            return _Reply("bad_request", 400, problem, "invalid_request_error")
        with self._lock:
            self._recent.append(request)
        forced = FORCED_ERROR_RE.match(request["model"])
        if forced:
            status = int(forced.group(1))
            return _Reply("forced_error", status, f"forced error {status} (model {request['model']})",
                          "forced_error")
        wait = self.faults.rate_limited()
        if wait is not None:
            headers = {"Retry-After": str(max(1, int(wait + 0.999))), "retry-after-ms": str(int(wait * 1000))}
            return _Reply("rate_limited", 429, "Rate limit reached for requests; try again later.",
                          "rate_limit_exceeded", headers)
        fault = self.faults.draw()
        if fault.kind == "timeout":
            self._count("timeout")                # counted when the hang starts
            self._stop.wait(fault.delay + self.hang_seconds)
            return _Reply(None, None)
        if fault.kind == "error":
            reply = _Reply("error", 500, "The server had an error while processing your request.", "server_error")
        else:
            label, policy = decide(request["messages"])
            if fault.kind == "garbage":
                label = self.faults.pick(policy.labels or (label,))
            completion = _completion(request, format_answer(label, request.get("response_format")))
            reply = _Reply("garbage" if fault.kind == "garbage" else "ok", 200, completion)
        # the answer is ready: it goes out ``delay`` after the request arrived, so the
        # latency a client sees is the one configured, not that plus this server's own work
        remaining = getattr(handler, "received_at", time.monotonic()) + fault.delay - time.monotonic()
        if remaining > 0 and self._stop.wait(remaining):
            return _Reply("aborted", None)
        return reply


@dataclass(frozen=True)
class _Reply:
    outcome: str | None                   # the counter to bump (None: already counted)
    status: int | None                    # None: send nothing
    payload: Any = None                   # the completion (200) or the error message
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


def _completion(request: dict, content: str) -> dict:
    with _ids_lock:
        n = next(_ids)
    prompt_tokens = sum(count_tokens(_content_text(m.get("content"))) for m in request["messages"])
    completion_tokens = count_tokens(content)
    return {
        "id": f"chatcmpl-mock-{n}", "object": "chat.completion", "created": int(time.time()),
        "model": request["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": None}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


# ----------------------------------------------------------------------------- CLI entry points

def serve_forever(host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Run the server until SIGINT or SIGTERM (what ``promptgate mock-llm`` calls)."""
    done = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: done.set())
    server = MockLLMServer(host, port, **options).start()
    print(f"mock-llm listening on {server.base_url} (a stand-in model server; "
          "point OPENAI_BASE_URL at a real endpoint for real use)", flush=True)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@click.command("mock-llm")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--latency-ms", type=float, default=0.0, help="Fixed latency per request.")
@click.option("--jitter-ms", type=float, default=0.0, help="Uniform extra latency.")
@click.option("--error-rate", type=float, default=0.0, help="Fraction answered 500.")
@click.option("--rate-limit-rpm", type=int, default=0, help="Requests per minute before 429 + Retry-After.")
@click.option("--timeout-rate", type=float, default=0.0, help="Fraction that hang past the client timeout.")
@click.option("--garbage-rate", type=float, default=0.0, help="Fraction answered outside the labels.")
@click.option("--hang-seconds", type=float, default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--api-key", default=None, help="Require this bearer token.")
@click.option("--verbose", is_flag=True, help="Log every request.")
def command(**options):
    """Run the local OpenAI-compatible model server (a stand-in for tests and demos). The
    one declaration of its options: `promptgate mock-llm` and `python -m gate.mockllm`."""
    host, port = options.pop("host"), options.pop("port")
    serve_forever(host, port, **options)


if __name__ == "__main__":
    command()

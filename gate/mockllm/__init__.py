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

A prompt decided field by field (``decision: {type: fields}``) is answered with a JSON
object when its system message has extraction lines (``extract.py``)::

    - extract order_id: /ORD-[0-9]+/
    - extract amount: /([0-9]+[.][0-9]{2}) EUR/ as number
    - extract category: billing = refund*, charged twice; shipping = parcel; other

a pattern's first match (group 1 if any; ``as number``: a JSON number; no match: the
field is left out), or the first label whose keywords are in the text (else the part
without ``=``).

Fault injection (options of :class:`MockLLMServer` and of ``promptgate mock-llm``)
---------------------------------------------------------------------------------

``latency_ms`` + uniform ``jitter_ms`` per request, counted from the request's arrival (the
answer is prepared, then waits out the rest); ``error_rate`` (500);
``rate_limit_rpm`` (requests per minute in a sliding window, then 429 with
``Retry-After`` and ``retry-after-ms``); ``timeout_rate`` (the request hangs for
``hang_seconds``, default 60, longer than a sane client timeout, and stops hanging when the
server stops); ``garbage_rate`` (answers a word outside the labels); ``rate_limit_rate``
(that share of requests answered 429 at once, asking to wait ``retry_after_ms``, default
1000, in ``Retry-After`` and ``retry-after-ms``); ``seed`` for the fault RNG; ``api_key``
(when set, any other bearer token gets 401). A model named ``mock-error-<status>`` (e.g.
``mock-error-400``) always gets that HTTP status. ``on_request`` (in-process only): a
function called with each chat request before it is answered.

One item singled out (``faults.ItemScript``), by a line of its user message: ``status: 500``
answers its every request with that HTTP status (``status: 429`` as a rate limit: with a
``Retry-After`` of ``retry_after_ms``); ``delay_ms: 20000,0`` delays the k-th
request with that very text by the k-th value (the last one repeats).

Drafting and judging (``judge.py``): ``- reply when <keywords>: <text>`` lines draft a
reply; ``- judge pass <label>: <keywords>``, ``- judge otherwise: <label>``, ``- judge max
chars: N``, ``- judge wrong: P%`` and ``- judge position bias: P%`` lines judge the answer
between ``<answer>`` tags (or a pair between ``<answer_a>``/``<answer_b>``); a judge can be
made to drift mid-run (``judge_drift_after``).

A request with ``tools`` is answered with a tool call (``tools.py``): the classification
rules pick the function (a declared tool's name, or ``none``: no call), the extraction
lines fill the arguments it declares; ``- parallel: yes`` calls every function whose rule
matches; ``- wrong arguments: 20%``, ``- no call: 10%`` and ``- broken arguments: 5%``
(system lines, or the ``tool_wrong_rate`` / ``tool_skip_rate`` options) spoil that share
of the items, the same ones every time.

Models that do not answer the same way twice (for trials; ``variance.py``): a model named
``mock-flaky-<percent>`` answers that share of the items (by a hash of their text) with a
random label on each call; a user message with a line ``answers: yes,no,yes`` is answered
from that script, the k-th identical request getting the k-th answer.
"""

from __future__ import annotations

import click

SERVER_NAMES = ("MockLLMServer", "serve_forever")
FAULT_NAMES = ("Fault", "FaultPlan")
POLICY_NAMES = (
    "FORCED_ERROR_RE",
    "MODEL_ID",
    "NO_RULE_ANSWER",
    "Policy",
    "Rule",
    "count_tokens",
    "decide",
    "format_answer",
    "garbage_word",
    "parse_rules",
)


@click.command("mock-llm")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--latency-ms", type=float, default=0.0, help="Fixed latency per request.")
@click.option("--jitter-ms", type=float, default=0.0, help="Uniform extra latency.")
@click.option("--error-rate", type=float, default=0.0, help="Fraction answered 500.")
@click.option("--rate-limit-rpm", type=int, default=0, help="Requests per minute before 429 + Retry-After.")
@click.option("--timeout-rate", type=float, default=0.0, help="Fraction that hang past the client timeout.")
@click.option("--garbage-rate", type=float, default=0.0, help="Fraction answered outside the labels.")
@click.option("--rate-limit-rate", type=float, default=0.0, help="Fraction answered 429 with a Retry-After.")
@click.option("--retry-after-ms", type=float, default=1000.0, show_default=True, help="The wait those 429s ask for.")
@click.option("--hang-seconds", type=float, default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--api-key", default=None, help="Require this bearer token.")
@click.option("--judge-drift-after", type=int, default=None, help="Judging requests before every verdict flips.")
@click.option("--tool-wrong-rate", type=float, default=0.0, help="Fraction of tool calls with one argument wrong.")
@click.option("--tool-skip-rate", type=float, default=0.0, help="Fraction of tool requests answered with no call.")
@click.option("--verbose", is_flag=True, help="Log every request.")
def command(**options):
    """Run the local OpenAI-compatible model server (a stand-in for tests and demos). The
    one declaration of its options: `promptgate mock-llm` and `python -m gate.mockllm`."""
    from .server import serve_forever

    host, port = options.pop("host"), options.pop("port")
    serve_forever(host, port, **options)


def __getattr__(name: str):
    """The server and its parts (``http.server``, ``random``, ``hashlib``: ~0.1 s of imports)
    only when one is run or asked for, not with every `promptgate` command (the CLI lists
    `mock-llm` with its options)."""
    if name in SERVER_NAMES:
        from . import server

        return getattr(server, name)
    if name in FAULT_NAMES:
        from . import faults

        return getattr(faults, name)
    if name in POLICY_NAMES:
        from . import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORCED_ERROR_RE",
    "MODEL_ID",
    "NO_RULE_ANSWER",
    "Fault",
    "FaultPlan",
    "MockLLMServer",
    "Policy",
    "Rule",
    "command",
    "count_tokens",
    "decide",
    "format_answer",
    "garbage_word",
    "parse_rules",
    "serve_forever",
]

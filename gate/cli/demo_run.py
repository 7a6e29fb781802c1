"""`promptgate demo`: the whole gate on one machine in under 30 seconds.

Embedded SQLite in a temporary folder (or --database-url), the local model server started
and stopped here, the example datasets and bars registered, the live prompts applied,
then two candidate edits of ticket-urgency: one that misses the hard-cases bar (REJECTED,
live unchanged) and one that clears every bar (APPLIED, live version +1), and a candidate
edit of support-extract, an extraction prompt decided field by field, that fixes two
categories and misreads amounts (REJECTED: protected emails broke, the amount field missed
its bar), a candidate edit of support-reply, a reply-drafting prompt graded by the judge
reply-judge (itself gated on its agreement with people), whose vaguer replies the judge
fails (REJECTED, with the judge's agreement and the pass rate corrected for its errors),
and a candidate edit of support-router, a router decided by its tool call over
conversations from the dataset, that routes four more conversations right and reads
amounts without their cents (REJECTED: the amount argument missed its bar). Each gets the
report a pull request would get.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gate.domain import Gate
from gate.prompt.spec import load_spec
from gate.report.update import UpdateReport
from gate.settings import Settings

PROMPT = "ticket-urgency"
WEAK = "candidates/ticket-urgency-v2-weak.yaml"
GOOD = "candidates/ticket-urgency-v2.yaml"
EXTRACT = "support-extract"
EXTRACT_CANDIDATE = "candidates/support-extract-v2.yaml"
REPLY = "support-reply"  # a generative prompt, graded by the judge reply-judge
REPLY_CANDIDATE = "candidates/support-reply-v2.yaml"
ROUTER = "support-router"
ROUTER_CANDIDATE = "candidates/support-router-v2.yaml"


def locate_examples(examples: str | Path | None) -> Path:
    """./prompts-example when run from a checkout, else the copy shipped in the package
    (``gate.example``: a folder of data without ``__init__``, so a namespace package whose
    ``importlib.resources.files`` is a ``MultiplexedPath``, not a path: its folder is read
    from the import system's search locations instead), else the checkout this module is in."""
    if examples:
        return Path(examples)
    here = Path.cwd() / "prompts-example"
    if (here / "gate.yaml").is_file():
        return here
    packaged = packaged_examples()
    if packaged is not None:
        return packaged
    return Path(__file__).resolve().parents[2] / "prompts-example"


def packaged_examples() -> Path | None:
    """The folder of the examples installed with the package (a wheel's ``gate/example``, an
    editable install's ``prompts-example``), or None when none has ``gate.yaml``."""
    from importlib.util import find_spec

    try:
        spec = find_spec("gate.example")
    except ImportError:
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(location) / "gate.yaml").is_file():
            return Path(location)
    return None


@contextlib.contextmanager
def _environ(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_demo(
    database_url: str | None = None,
    examples: str | Path | None = None,
    fmt: str = "text",
    echo: Callable[[str], None] = print,
) -> bool:
    from gate.gateconfig import sync
    from gate.mockllm import MockLLMServer

    root = locate_examples(examples)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="promptgate-demo-") as tmp,
        MockLLMServer(latency_ms=20, jitter_ms=20, seed=1) as llm,
        _environ(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="demo-key"),
    ):
        url = database_url or f"sqlite:///{tmp}/demo.db"
        settings = Settings.from_env().with_(database_url=url, poll_interval=0.02, poll_max_interval=0.1)
        gate = Gate.connect(settings=settings, upgrade=True)
        try:
            heading = "# " if fmt == "markdown" else ""
            echo(f"{heading}prompt-gate demo: database {url}, model server {llm.base_url} (a local stand-in)\n")
            result = sync(gate, root / "gate.yaml")
            kinds = [c.kind for c in result.changes]
            echo(
                f"synced {root / 'gate.yaml'}: {kinds.count('dataset-added')} datasets, "
                f"{kinds.count('bar-added')} bars\n"
            )
            ok, summary = _walk_through(gate, root, lambda path, title: _evaluate(gate, root, path, title, fmt, echo))
            echo(
                f"{'## ' if fmt == 'markdown' else ''}result: {summary} {'As expected.' if ok else 'NOT as expected.'} "
                f"({time.monotonic() - started:.1f}s)"
            )
            return ok
        finally:
            gate.close()


def _evaluate(gate: Gate, root: Path, path: Path, title: str, fmt: str, echo: Callable[[str], None]) -> UpdateReport:
    """Submit one prompt file to apply, run the workers until it ends, and show its report
    (the live versions applied first: one line each)."""
    from workers.supervisor import run_until_terminal

    update_id = gate.submit(load_spec(path), "apply", {"path": str(path.relative_to(root)), "key": "demo"})
    (report,) = run_until_terminal(gate, [update_id], timeout=60, concurrency=16)
    if title.startswith(LIVE_TITLE):
        echo(f"{title}: update {update_id} {report.status}")
        return report
    echo(f"\n{'## ' if fmt == 'markdown' else '== '}{title}\n")
    echo(_render(report, fmt))
    return report


LIVE_TITLE = "the current "


def _walk_through(gate: Gate, root: Path, evaluate: Callable[[Path, str], UpdateReport]) -> tuple[bool, str]:
    """The example prompts applied as the live versions, then the candidate edits: one that
    adds keywords (applied), and four rejected with live unchanged: one that drops keywords,
    an extraction that misreads amounts, a reply its judge fails, a router that breaks an
    argument. Whether each went so, and in a sentence."""
    for path in sorted((root / "prompts").glob("*.yaml")):
        evaluate(path, f"the current {load_spec(path).name}, applied as the live version")
    before = gate.live(PROMPT).version
    weak = evaluate(root / WEAK, f"a candidate edit of {PROMPT} that drops keywords ({WEAK})")
    after_weak = gate.live(PROMPT).version
    good = evaluate(root / GOOD, f"a candidate edit of {PROMPT} that adds keywords ({GOOD})")
    after_good = gate.live(PROMPT).version
    extract = evaluate(
        root / EXTRACT_CANDIDATE,
        f"a candidate edit of {EXTRACT}, an extraction prompt decided "
        f"field by field, that misreads amounts ({EXTRACT_CANDIDATE})",
    )
    reply = evaluate(
        root / REPLY_CANDIDATE,
        f"a candidate edit of {REPLY}, a reply-drafting prompt graded by the judge reply-judge, "
        f"whose replies turn vague ({REPLY_CANDIDATE})",
    )
    ok = (
        weak.status == "REJECTED"
        and after_weak == before
        and good.status == "APPLIED"
        and after_good == before + 1
        and extract.status == "REJECTED"
        and gate.live(EXTRACT).version == 1
        and reply.status == "REJECTED"
        and gate.live(REPLY).version == 1
    )
    router_ok, router = _router_step(gate, root, evaluate)
    statuses = [weak.status, good.status, extract.status, reply.status, router.status]
    summary = (
        f"{statuses.count('REJECTED')} changes REJECTED, {statuses.count('APPLIED')} APPLIED — {PROMPT}: weak "
        f"candidate {weak.status} (live stays v{after_weak}), good candidate {good.status} (live now "
        f"v{after_good}); {EXTRACT}: candidate {extract.status} (live stays v{gate.live(EXTRACT).version}); "
        f"{REPLY}: candidate {reply.status} by its judge (live stays v{gate.live(REPLY).version}); "
        f"{ROUTER}: candidate {router.status} (live stays v{gate.live(ROUTER).version})."
    )
    return ok and router_ok, summary


def _router_step(gate: Gate, root: Path, evaluate: Callable[[Path, str], UpdateReport]) -> tuple[bool, UpdateReport]:
    """The router's candidate: better routing, a broken argument: REJECTED, live unchanged."""
    before = gate.live(ROUTER).version
    router = evaluate(
        root / ROUTER_CANDIDATE,
        f"a candidate edit of {ROUTER}, a router decided by its tool call, that routes better and "
        f"reads amounts without their cents ({ROUTER_CANDIDATE})",
    )
    return router.status == "REJECTED" and gate.live(ROUTER).version == before, router


def _render(report, fmt: str) -> str:
    if fmt == "text":
        from gate.report.text import render_text

        return render_text(report)
    from gate.report.markdown import render_report_markdown

    return render_report_markdown(report)

"""`promptgate demo` end to end, and the production runtime reading the live version
through the same call path the gate evaluated with."""

from __future__ import annotations

import re

import pytest
from support.cli import ROOT, run_cli
from support.helpers import rules_spec, write_rule_rows
from support.judging import live_judge, reply_spec, write_tickets

import workers.execute.executor
from gate import runtime as gate_runtime
from gate.calls import llm as gate_llm
from gate.errors import NotFound
from gate.mockllm import MockLLMServer
from gate.runtime import PromptRuntime
from workers.supervisor import run_until_terminal


def test_demo_shows_two_rejected_and_one_applied_change(tmp_path):
    """Issue 35.8: `make demo` printed 675 lines of Markdown with raw Mermaid blocks and a
    summary that did not match README: the readable text form by default, one summary line
    as README says it, the pull request's Markdown on request (`--format markdown`)."""
    result = run_cli("demo", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "```" not in out and "| urgency-hard |" not in out and len(out.splitlines()) < 200, out
    (summary,) = [line for line in out.splitlines() if line.startswith("result: ")]
    assert summary.startswith(
        "result: 4 changes REJECTED, 1 APPLIED — ticket-urgency: weak candidate REJECTED "
        "(live stays v1), good candidate APPLIED (live now v2); support-extract: candidate "
        "REJECTED (live stays v1); support-reply: candidate REJECTED by its judge (live stays v1); "
        "support-router: candidate REJECTED (live stays v1). As expected."
    ), summary
    readme = (ROOT / "README.md").read_text()
    assert (
        "make demo    # the gate end to end in under 30 s: four changes REJECTED "
        "(one by a judge, one on a tool call's argument), one APPLIED" in readme
    )
    # the text report, per dataset; whether the weak candidate's hard run stops early depends on
    # how its answers arrive, so its figure does too, and a stopped run's items are "not scored"
    assert re.search(r"^  urgency-hard: \d+\.\d% vs bar 80% \[FAIL\] \d+/16 scored", out, re.M), out
    # a reply-drafting prompt graded by a judge: rejected, with the judge's figures and the corrected rate
    assert "judge reply-judge v1: agrees with humans on 88.3% of 60 items" in out
    assert "corrected for the judge's error rates 25.8%" in out
    assert not list(tmp_path.iterdir())  # nothing left behind in the working directory
    # `--format markdown` (the pull request's Markdown) is checked on the installed wheel's demo
    # (test_wheel_demo.py): one demo run fewer (~7 s of CPU), the same program from the same tree


def test_runtime_reads_the_live_version_and_uses_the_gate_call_path(gate, tmp_path, monkeypatch):
    # production and the executor call the very same function object, not a copy
    assert gate_runtime.call_prompt is gate_llm.call_prompt is workers.execute.executor.call_prompt
    gate_ = gate
    gate_.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 10)))
    gate_.map_dataset("p1", "d", "0.9")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        rt = PromptRuntime(gate_.settings.database_url, ttl=0)
        with pytest.raises(NotFound):
            rt.prompt("p1")
        (first,) = run_until_terminal(gate_, [gate_.submit(rules_spec("p1", "v1"), "apply")], timeout=60)
        assert first.status == "APPLIED"
        handle = rt.prompt("p1")
        assert handle.version == 1
        assert handle.decide({"text": "alpha here"}).decision == "yes"
        assert handle.decide({"text": "beta there"}).decision == "no"
        (second,) = run_until_terminal(gate_, [gate_.submit(rules_spec("p1", "v2"), "apply")], timeout=60)
        assert second.status == "APPLIED"
        assert rt.prompt("p1").version == 2  # ttl 0: re-read at once
        cached = PromptRuntime(gate_.settings.database_url, ttl=3600)
        assert cached.prompt("p1").version == 2


def test_a_runtime_call_that_cannot_connect_is_one_line(gate, tmp_path, monkeypatch):
    """Issue 35.9: without a reachable OPENAI_BASE_URL production got a long chained traceback;
    the ModelCallError now stands alone (no SDK exception chained behind it), one line naming
    the provider, its URL and where the URL came from."""
    import socket

    from gate.errors import ModelCallError

    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 4)))
    gate.map_dataset("p1", "d", "0.5")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (applied,) = run_until_terminal(gate, [gate.submit(rules_spec("p1", "v1"), "apply")], timeout=60)
        assert applied.status == "APPLIED"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", closed)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with pytest.raises(ModelCallError) as failed:
        PromptRuntime(gate.settings.database_url, ttl=0).prompt("p1").decide({"text": "alpha"})
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
    assert "\n" not in str(failed.value) and "cannot reach provider default" in str(failed.value)
    assert closed in str(failed.value) and "OPENAI_BASE_URL" in str(failed.value)


def test_runtime_returns_a_generative_prompts_answer_text(gate, tmp_path, monkeypatch):
    """A prompt graded by a judge in the gate answers with its text in production."""
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        live_judge(gate, tmp_path, lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0], rows=30)
        gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 6)))
        gate.map_dataset("reply", "tickets", "0.5")
        (applied,) = run_until_terminal(gate, [gate.submit(reply_spec(), "apply")], timeout=60)
        assert applied.status == "APPLIED", applied.update.reason
        result = PromptRuntime(gate.settings.database_url, ttl=0).prompt("reply").decide({"ticket": "refund please"})
        assert (
            result.valid
            and result.decision == result.raw_output == "We are sorry: a refund has been issued to your card."
        )

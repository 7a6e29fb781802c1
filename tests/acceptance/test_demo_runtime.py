"""`promptgate demo` end to end, and the production runtime reading the live version
through the same call path the gate evaluated with."""

from __future__ import annotations

import pytest
from support.cli import run_cli
from support.helpers import rules_spec, write_rule_rows
from support.judging import live_judge, reply_spec, write_tickets

import workers.execute.executor
from gate import runtime as gate_runtime
from gate.calls import llm as gate_llm
from gate.errors import NotFound
from gate.mockllm import MockLLMServer
from gate.runtime import PromptRuntime
from workers.supervisor import run_until_terminal


def test_demo_shows_one_rejected_and_one_applied_change(tmp_path):
    result = run_cli("demo", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "weak candidate REJECTED (live stays v1)" in out
    assert "good candidate APPLIED (live now v2)" in out
    assert "As expected." in out
    assert "| urgency-hard |" in out  # the pull-request report, per dataset
    # a reply-drafting prompt graded by a judge: rejected, with the judge's figures and the corrected rate
    assert "support-reply: candidate REJECTED by its judge (live stays v1)" in out
    assert "judge reply-judge v1 (" in out and "agrees with humans on 88.3% of 60 items" in out
    assert "corrected for the judge's error rates 25.8%" in out
    assert not list(tmp_path.iterdir())  # nothing left behind in the working directory


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


def test_runtime_returns_a_generative_prompts_answer_text(gate, tmp_path, monkeypatch):
    """A prompt graded by a judge in the gate answers with its text in production."""
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        live_judge(gate, tmp_path, lambda update_id: run_until_terminal(gate, [update_id], timeout=60)[0], rows=20)
        gate.register_dataset("tickets", str(write_tickets(tmp_path / "tickets.csv", 6)))
        gate.map_dataset("reply", "tickets", "0.5")
        (applied,) = run_until_terminal(gate, [gate.submit(reply_spec(), "apply")], timeout=60)
        assert applied.status == "APPLIED", applied.update.reason
        result = PromptRuntime(gate.settings.database_url, ttl=0).prompt("reply").decide({"ticket": "refund please"})
        assert (
            result.valid
            and result.decision == result.raw_output == "We are sorry: a refund has been issued to your card."
        )

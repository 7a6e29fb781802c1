"""Guarantees that held when probed by hand, pinned on MariaDB with real worker processes,
the real CLI and the local model server: a lease renewed under a call that outlives it;
a live row changed behind the gate; the confusion matrix against the item rows; the exit
codes of `promptgate wait --sha`."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import select, update
from support.cli import run_cli
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.states import UpdateStatus, Verdict
from gate.store import schema
from gate.store.schema import prompt_run_item
from gate.verdict.scoring import INVALID_DECISION
from workers.supervisor import run_until_terminal

# seconds: renewed every half lease, so a renewal may be 1 s late under load (at 1.0: 8 calls for 4 items, load ~15)
LEASE = 2.0


def map_rules(gate, tmp_path, prompt, n, bar="0.5", wrong_every=0, dataset=None):
    dataset = dataset or f"d-{prompt}"
    gate.register_dataset(dataset, str(write_rule_rows(tmp_path / f"{dataset}.csv", n, wrong_every)))
    gate.map_dataset(prompt, dataset, bar)


def test_a_call_that_outlives_two_and_a_half_leases_keeps_its_items(mysql_gate, tmp_path):
    """Calls of 2.5 leases, two worker processes: the lease is renewed under the calls, so
    the other process never re-claims the items: one call per item at the model server."""
    gate = mysql_gate
    map_rules(gate, tmp_path, "p1", 4, bar="1")
    with MockLLMServer(latency_ms=2.5 * LEASE * 1000) as llm:
        fleet = WorkerFleet(worker_env(gate.settings.database_url, llm.base_url, lease_seconds=LEASE), tmp_path)
        try:
            fleet.start(2)
            uid = gate.submit(rules_spec("p1"), "apply")
            report = gate.wait(uid, timeout=90)
            calls = llm.stats()["requests"]
        finally:
            fleet.stop_all()
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    assert calls == 4, f"{calls} calls for 4 items: a lease ran out under a call"
    assert "dropped: the lease was lost" not in fleet.logs()
    assert report.attempts["max_attempt"] == 1


def test_a_live_row_changed_behind_the_gate_fails_the_update_and_stays(mysql_gate, tmp_path, monkeypatch):
    gate = mysql_gate
    map_rules(gate, tmp_path, "p1", 6)
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (first,) = run_until_terminal(gate, [gate.submit(rules_spec("p1", "first"), "apply")], timeout=60)
        assert first.status == UpdateStatus.APPLIED and gate.live("p1").version == 1
        uid = gate.submit(rules_spec("p1", "second"), "apply")  # base version 1
        behind = {"description": "written behind the gate", "labels": ["yes", "no"]}
        with gate.engine.begin() as conn:  # someone writes the live row directly
            conn.execute(
                update(schema.prompt)
                .where(schema.prompt.c.name == "p1")
                .values(version=2, config=behind, config_hash="x" * 64)
            )
        (report,) = run_until_terminal(gate, [uid], timeout=60)
    assert report.status == UpdateStatus.FAILED
    assert "the live version is 2, not 1" in report.update.reason
    live = gate.live("p1")
    assert (live.version, live.config, live.applied_update_id) == (2, behind, first.update.id)
    assert [v["update_id"] for v in gate.history("p1")] == [first.update.id]


def test_the_confusion_matrix_is_the_one_the_item_rows_give(mysql_gate, tmp_path, monkeypatch):
    """A run with mismatches and invalid answers: its metrics, recomputed here from the item
    rows one by one (not through the GROUP BY finalize uses), agree in every cell."""
    gate = mysql_gate
    map_rules(gate, tmp_path, "p1", 300, wrong_every=7)
    with MockLLMServer(garbage_rate=0.1, seed=5) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "check")], timeout=90)
    run = report.runs[0]
    i = prompt_run_item
    with gate.engine.connect() as conn:
        rows = conn.execute(
            select(i.c.expected_decision, i.c.actual_decision, i.c.verdict).where(i.c.run_id == run.run_id)
        ).all()
    confusion: dict[str, Counter] = {}
    for expected, actual, verdict in rows:
        assert verdict in (Verdict.MATCH, Verdict.MISMATCH)
        assert (verdict == Verdict.MATCH) == (actual == expected)
        confusion.setdefault(expected, Counter())[actual or INVALID_DECISION] += 1
    matches = sum(1 for r in rows if r.verdict == Verdict.MATCH)
    invalid = sum(1 for r in rows if r.actual_decision == INVALID_DECISION)
    metrics = run.metrics
    assert {e: dict(c) for e, c in confusion.items()} == metrics["confusion"]
    assert (metrics["total"], metrics["scored"], metrics["matches"], metrics["mismatches"], metrics["invalid"]) == (
        300,
        300,
        matches,
        300 - matches,
        invalid,
    )
    assert metrics["accuracy"] == matches / 300
    assert invalid > 0 and 300 - matches - invalid > 0  # both kinds of miss are in the matrix


def test_wait_sha_exit_codes_through_the_cli(mysql_gate, tmp_path, monkeypatch):
    """0 every update of the commit cleared, 1 one was rejected, 2 one failed or was
    cancelled, 3 still open when the timeout passed; several prompts' codes combine."""
    gate = mysql_gate
    shas = {
        name: c * 40 for name, c in (("ok", "a"), ("rejected", "b"), ("cancelled", "c"), ("mixed", "d"), ("open", "e"))
    }
    for prompt in ("p1", "p2"):
        map_rules(gate, tmp_path, prompt, 10, bar="0.9", dataset=f"d-{prompt}")
    bad = parse_spec(
        {
            "name": "p2",
            "model": "mock-1",
            "messages": [  # its rules answer every row wrong
                {"role": "system", "content": "- yes: beta\n- no: alpha\ndefault: yes"},
                {"role": "user", "content": "{{ item.text }}"},
            ],
        }
    )

    def submit(spec, sha, key):
        return gate.submit(spec, "check", {"sha": sha, "key": key})

    ids = [
        submit(rules_spec("p1"), shas["ok"], "ok"),
        submit(bad, shas["rejected"], "rejected"),
        submit(bad, shas["mixed"], "mixed-2"),
    ]
    for sha, key in ((shas["cancelled"], "cancelled"), (shas["mixed"], "mixed-1")):
        gate.cancel(submit(rules_spec("p1"), sha, key))
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        run_until_terminal(gate, ids, timeout=60)
    submit(rules_spec("p1"), shas["open"], "open")  # no worker runs any more
    url = gate.settings.database_url
    codes = {
        name: run_cli("wait", "--sha", sha, "--mode", "check", "--timeout", "1", "--database-url", url).returncode
        for name, sha in shas.items()
    }
    # mixed: p1's update cancelled, p2's rejected; failed or cancelled comes first
    assert codes == {"ok": 0, "rejected": 1, "cancelled": 2, "mixed": 2, "open": 3}
    only_p2 = run_cli("wait", "--sha", shas["mixed"], "--mode", "check", "--prompt", "p2", "--database-url", url)
    assert only_p2.returncode == 1, only_p2.stdout

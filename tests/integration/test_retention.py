"""`prune` (MariaDB and SQLite): it deletes finished runs' items, unused dataset versions and
kept answers older than the cutoff, in bounded batches, and never the evidence of a live
version, a current version or what an open run reads; on MariaDB every DELETE it runs is
driven by an index (EXPLAIN)."""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import event, func, insert, select, text
from support.helpers import RULES, rules_spec, write_rule_rows

from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.store.schema import EPOCH, answer, dataset_row, dataset_version, prompt_run_item
from workers.supervisor import run_until_terminal

LATER = datetime(2999, 1, 1)


def count(gate, table, **where) -> int:
    stmt = select(func.count()).select_from(table)
    for column, value in where.items():
        stmt = stmt.where(table.c[column] == value)
    with gate.engine.connect() as conn:
        return conn.execute(stmt).scalar()


def other_template():
    """The rules prompt with another user message: requests (and kept answers) of its own."""
    return parse_spec(
        dict(
            rules_spec("p1").to_config(),
            messages=[{"role": "system", "content": RULES}, {"role": "user", "content": "Msg: {{ item.text }}"}],
        )
    )


def scenario(gate, tmp_path, monkeypatch):
    """v1 of a dataset read by the live version's update and by a finished check; v2 (a
    refresh) current; an open update pinned to v2; v3 read by nothing."""
    path = write_rule_rows(tmp_path / "d.csv", 12)
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.5")
    v1 = gate.dataset_version("d").id
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (live,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "apply")], timeout=60)
        (check,) = run_until_terminal(gate, [gate.submit(other_template(), "check")], timeout=60)
    write_rule_rows(path, 13)
    gate.refresh_dataset("d")
    v2 = gate.dataset_version("d").id
    write_rule_rows(path, 14)
    gate.refresh_dataset("d")
    v3 = gate.dataset_version("d").id
    write_rule_rows(path, 13)
    gate.refresh_dataset("d")  # back to v2's rows: v2 is current again
    assert gate.dataset_version("d").id == v2
    open_id = gate.submit(rules_spec("p1", description="open"), "check")
    return live, check, open_id, (v1, v2, v3)


def test_prune_keeps_the_live_evidence_and_what_is_open(gate, tmp_path, monkeypatch):
    live, check, open_id, (v1, v2, v3) = scenario(gate, tmp_path, monkeypatch)
    dry = gate.prune(0, dry_run=True)
    assert (dry.runs, dry.items, dry.versions) == (1, 12, 1)
    assert count(gate, prompt_run_item, run_id=check.runs[0].run_id) == 12  # nothing deleted yet
    done = gate.prune(0, batch=5)
    assert (done.runs, done.items, done.versions, done.version_rows) == (1, 12, 1, 14)
    assert count(gate, prompt_run_item, run_id=check.runs[0].run_id) == 0
    assert count(gate, prompt_run_item, run_id=live.runs[0].run_id) == 12  # the live version's evidence
    assert gate.status(check.update.id).runs[0].metrics["matches"] == 12  # summaries stay
    assert count(gate, dataset_version, id=v3) == 0 and count(gate, dataset_row, version_id=v3) == 0
    assert count(gate, dataset_row, version_id=v1) == 12  # read by the live version
    assert count(gate, dataset_row, version_id=v2) == 13  # current, and pinned
    assert count(gate, answer, update_id=live.update.id) == 12
    assert count(gate, answer, update_id=check.update.id) == 0
    assert gate.prune(0).items == 0  # idempotent
    assert gate.status(open_id).runs[0].dataset_version_id == v2


def test_a_version_made_current_again_while_prune_runs_is_kept(gate, tmp_path, monkeypatch):
    """Prune lists v3, then (before it takes v3) a refresh brings v3's rows back: v3 is
    current again, so prune must leave it whole and the dataset usable."""
    live, check, open_id, (v1, v2, v3) = scenario(gate, tmp_path, monkeypatch)
    take = gate._retention._take_versions

    def revert_then_take(versions, older_than, batch):
        assert v3 in [v for v, *_ in versions]
        write_rule_rows(tmp_path / "d.csv", 14)
        gate.refresh_dataset("d")  # v3's rows again: v3 is current
        return take(versions, older_than, batch)

    monkeypatch.setattr(gate._retention, "_take_versions", revert_then_take)
    report = gate.prune(0, batch=5)
    assert report.versions == 0
    assert gate.dataset_version("d").id == v3 and count(gate, dataset_row, version_id=v3) == 14
    assert gate.status(gate.submit(rules_spec("p1"), "check")).runs[0].dataset_version_id == v3


def test_a_recent_cutoff_deletes_nothing(gate, tmp_path, monkeypatch):
    scenario(gate, tmp_path, monkeypatch)
    report = gate.prune(3600)
    assert (report.runs, report.items, report.versions, report.answers) == (0, 0, 0, 0)


def test_every_delete_of_prune_uses_an_index(mysql_gate, tmp_path, monkeypatch):
    gate = mysql_gate
    scenario(gate, tmp_path, monkeypatch)
    with gate.engine.begin() as conn:  # tables of a real size, so that a scan would cost
        conn.execute(
            insert(prompt_run_item),
            [
                dict(run_id=1000 + r, position=i, item_id=f"{r}-{i}", expected_decision="yes", lease_until=EPOCH)
                for r in range(40)
                for i in range(500)
            ],
        )
        conn.execute(
            insert(dataset_row),
            [
                dict(
                    version_id=1000 + v,
                    position=i,
                    item_id=f"{v}-{i}",
                    expected_decision="yes",
                    input={},
                    row_hash="0" * 64,
                )
                for v in range(40)
                for i in range(500)
            ],
        )
        conn.execute(
            insert(answer),
            [
                dict(request_key=f"{k:064x}", actual_decision="yes", update_id=999, run_id=999, created_at=LATER)
                for k in range(20000)
            ],
        )  # not pruned
        conn.execute(text("ANALYZE TABLE prompt_run_item, dataset_row, dataset_version, answer"))
    plans = []

    def explain(conn, cursor, statement, parameters, context, executemany):
        """Each DELETE's plan, asked on another connection just before it runs."""
        if statement.lstrip().upper().startswith("DELETE"):
            sql = cursor.mogrify(statement, parameters)
            with gate.engine.connect() as other:
                plans.append((sql, other.execute(text("EXPLAIN " + sql)).mappings().all()))

    event.listen(gate.engine, "before_cursor_execute", explain)
    try:
        gate.prune(0, batch=5)
    finally:
        event.remove(gate.engine, "before_cursor_execute", explain)
    tables = {re.search(r"DELETE FROM (\w+)", sql).group(1) for sql, _ in plans}
    assert tables == {
        "prompt_run_item",
        "prompt_run_tally",
        "prompt_run_sentinel",  # a judged run's sentinels go with its items
        "dataset_row",
        "dataset_version",
        "answer",
    }
    for sql, plan in plans:
        assert all(row["key"] for row in plan), (sql, plan)
        assert all(row["type"] in ("range", "ref", "const", "eq_ref") for row in plan), (sql, plan)


def test_prune_keeps_the_live_answers_an_open_update_is_compared_with(gate, tmp_path, monkeypatch):
    """An earlier update scored the live version on the current dataset version (a baseline
    run) and finished; a later update reuses that run as its baseline and is still open.
    prune must keep the baseline's items until the open update is reconciled: without them
    max_broken could not be checked (and, half deleted, would be undercounted)."""
    path = write_rule_rows(tmp_path / "d.csv", 12)
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.5", bars={"max_broken": 0})
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (live,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "apply")], timeout=60)
        write_rule_rows(path, 13)
        gate.refresh_dataset("d")  # the live version never saw this one
        (earlier,) = run_until_terminal(gate, [gate.submit(other_template(), "check")], timeout=60)
        baseline_id = earlier.runs[0].comparison["live_run_id"]
        assert earlier.runs[0].comparison["live_scored_now"] and count(gate, prompt_run_item, run_id=baseline_id) == 13
        later = gate.submit(rules_spec("p1", description="later"), "check")  # open, compared with it
        assert gate.status(later).runs[0].pinned["baseline"]["run_id"] == baseline_id  # reused, not staged again
        pruned = gate.prune(0, batch=5)
        assert count(gate, prompt_run_item, run_id=baseline_id) == 13
        assert pruned.items == 13 and count(gate, prompt_run_item, run_id=earlier.runs[0].run_id) == 0
        (report,) = run_until_terminal(gate, [later], timeout=60)
    c = report.runs[0].comparison
    assert report.status == "PASSED" and (c["paired"], c["broken"]) == (13, 0)

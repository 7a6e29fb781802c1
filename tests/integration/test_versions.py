"""Dataset versions stored in the gate (MariaDB and SQLite): registering imports the rows as
an immutable version keyed by content, identical content makes no new version, a failed
import leaves nothing, a run reads the version it pinned (not the file, not a later
version), and versions are listed, previewed and compared."""

from __future__ import annotations

import shutil
from dataclasses import fields

import pytest
from sqlalchemy import func, select
from support.helpers import rules_spec, write_rule_rows

from gate.errors import DatasetError, NotFound
from gate.mockllm import MockLLMServer
from gate.records.pinned import Pinned
from gate.store.schema import dataset_row, dataset_version
from workers.supervisor import run_until_terminal


def version_rows(gate, version_id) -> int:
    with gate.engine.connect() as conn:
        return conn.execute(
            select(func.count()).select_from(dataset_row).where(dataset_row.c.version_id == version_id)
        ).scalar()


def test_registering_imports_a_version_and_identical_content_makes_none(gate, tmp_path):
    path = write_rule_rows(tmp_path / "d.csv", 30)
    ds = gate.register_dataset("d", str(path))
    first = gate.dataset_version("d")
    assert ds.current_version_id == first.id and first.row_count == 30 == version_rows(gate, first.id)
    assert first.labels == {"yes": 15, "no": 15} and len(first.content_hash) == 64
    gate.register_dataset("d", str(path))  # the same file again
    _, data = gate.refresh_dataset("d")
    assert data is None  # the file says it has not changed
    copy = tmp_path / "copy.csv"
    shutil.copy(path, copy)
    gate.register_dataset("d", str(copy))  # same rows, another file
    assert gate.dataset_version("d").id == first.id
    assert [v.id for v in gate.dataset_versions("d")[1]] == [first.id]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1] + [lines[-1].replace("message", "note")]) + "\n")
    gate.register_dataset("d", str(path))
    second = gate.dataset_version("d")
    assert second.id != first.id and second.content_hash != first.content_hash
    ds, versions = gate.dataset_versions("d")
    assert [v.id for v in versions] == [second.id, first.id] and ds.current_version_id == second.id


@pytest.mark.parametrize(
    "content, problem",
    [
        ("item_id,expected_decision,text\na,yes,x\nb,no,y\na,no,z\n", "duplicate item ids: a"),
        ("item_id,expected_decision,text\na,yes,x\nb,,y\n", "line 3: item b: missing label"),
        ("item_id,expected_decision,text\n", "has no rows"),
    ],
)
def test_a_failed_import_leaves_nothing(gate, tmp_path, content, problem):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(DatasetError, match=problem):
        gate.register_dataset("bad", str(path))
    with pytest.raises(NotFound):
        gate.get_dataset("bad")  # a new dataset whose first import failed is not registered
    with gate.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(dataset_version)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(dataset_row)).scalar() == 0


def test_a_duplicate_across_pages_is_caught_by_the_version(gate, tmp_path):
    rows = "".join(f"i{i},yes,x\n" for i in range(40)) + "i3,no,again\n"
    (tmp_path / "d.csv").write_text("item_id,expected_decision,text\n" + rows)
    small = gate.__class__(gate.engine, gate.settings.with_(page_size=8))
    with pytest.raises(DatasetError, match="duplicate item ids: i3"):
        small.register_dataset("d", str(tmp_path / "d.csv"))


def test_a_run_reads_its_pinned_version_even_after_the_file_is_gone(gate, tmp_path, monkeypatch):
    """Any worker runs any dataset: the checkout that registered it can be gone, and a
    refresh after submit does not change what the run reads."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    path = write_rule_rows(checkout / "d.csv", 20, wrong_every=5)  # 16 of 20 right
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.8")
    uid = gate.submit(rules_spec("p1"), "check")
    pinned = gate.dataset_version("d")
    write_rule_rows(path, 20)  # all right now...
    gate.refresh_dataset("d")  # ...as a new version
    assert gate.dataset_version("d").id != pinned.id
    shutil.rmtree(checkout)  # and the file is gone
    later = gate.submit(rules_spec("p1"), "check", source={"key": "later"})  # submitted without it
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        report, later_report = run_until_terminal(gate, [uid, later], timeout=60)
    assert later_report.status == "PASSED" and later_report.runs[0].matches == 20
    run = report.runs[0]
    assert report.status == "PASSED", report.update.reason
    assert run.dataset_version_id == pinned.id and (run.matches, run.scored) == (16, 20)
    assert run.content_hash == pinned.content_hash and run.pinned["rows"] == 20
    assert run.pinned["call_path"].endswith("call-path-1") and run.pinned["model"] == "mock-1"
    assert set(run.pinned) <= {f.name for f in fields(Pinned)}  # every key submit pins is a field of the record


def test_labels_in_another_case_are_mapped_and_unknown_labels_end_the_run(gate, tmp_path, monkeypatch):
    (tmp_path / "case.csv").write_text("item_id,expected_decision,text\na,YES,alpha\nb,No,beta\n")
    (tmp_path / "odd.csv").write_text("item_id,expected_decision,text\na,yes,alpha\nb,maybe,beta\n")
    gate.register_dataset("case", str(tmp_path / "case.csv"))
    gate.register_dataset("odd", str(tmp_path / "odd.csv"))
    gate.map_dataset("p1", "case", "1")
    gate.map_dataset("p2", "odd", "0.5")
    ids = [gate.submit(rules_spec("p1"), "check"), gate.submit(rules_spec("p2"), "check")]
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        good, odd = run_until_terminal(gate, ids, timeout=60)
    assert good.status == "PASSED" and good.runs[0].matches == 2
    assert odd.status == "FAILED" and "1 row(s) with 1 label(s) the prompt does not have" in odd.runs[0].reason
    assert "maybe" not in odd.runs[0].reason and "maybe" not in odd.update.reason  # which: the item detail
    assert odd.runs[0].metrics["item_detail"]["examples"] == [{"item_id": "b", "expected": "maybe"}]


def test_versions_are_previewed_and_compared(gate, tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("item_id,expected_decision,text\na,yes,x\nb,no,y\nc,no,z\n")
    gate.register_dataset("d", str(path))
    first = gate.dataset_version("d").id
    path.write_text("item_id,expected_decision,text\na,no,x\nb,no,y2\nd,yes,w\n")
    gate.refresh_dataset("d")
    second = gate.dataset_version("d").id
    d = gate.diff_versions("d", first, second)
    assert (d.added, d.removed, d.relabelled, d.changed) == (1, 1, 1, 1)
    assert d.examples["relabelled"] == ["a: yes → no"] and d.examples["removed"] == ["c (no)"]
    old = gate.preview_dataset("d", rows=2, version=first)
    assert [r.item_id for r in old.first_rows] == ["a", "b"] and old.row_count == 3
    assert old.label_counts == {"no": 2, "yes": 1}
    with pytest.raises(NotFound):
        gate.preview_dataset("d", version=second + 100)


def test_submit_pins_the_current_version_and_needs_one(gate, tmp_path):
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 4)))
    gate.map_dataset("p1", "d", "0.5")
    uid = gate.submit(rules_spec("p1"), "check")
    run = gate.status(uid).runs[0]
    assert run.dataset_version_id == gate.dataset_version("d").id
    assert run.pinned["bar"] == "0.5" and run.pinned["config_hash"] == rules_spec("p1").config_hash


def _delete_rows(gate, version_id: int, positions: list[int]) -> None:
    r = dataset_row
    with gate.engine.begin() as conn:
        conn.execute(r.delete().where(r.c.version_id == version_id, r.c.position.in_(positions)))


def test_a_run_never_passes_on_part_of_its_pinned_rows(gate, tmp_path, monkeypatch):
    """Rows of a pinned version gone (a fault, or an old prune racing a revert): the run
    ends ERROR naming them, instead of judging the rows that are left."""
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 20)))
    gate.map_dataset("p1", "d", "0.5")
    uid = gate.submit(rules_spec("p1"), "check")
    _delete_rows(gate, gate.dataset_version("d").id, list(range(5, 20)))
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [uid], timeout=60)
    assert report.status == "FAILED" and report.runs[0].status == "ERROR"
    assert "missing rows" in report.runs[0].reason and report.runs[0].scored == 0


def test_an_item_whose_row_is_gone_ends_error_uncalled(gate, tmp_path, monkeypatch):
    import threading

    from workers.materialize import Materializer

    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 6)))
    gate.map_dataset("p1", "d", "0.5")
    uid = gate.submit(rules_spec("p1"), "check")
    while Materializer(gate.engine, gate.settings, threading.Event()).poll() == 0:  # items in, none scored yet
        pass
    _delete_rows(gate, gate.dataset_version("d").id, [2])
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [uid], timeout=60)
        calls = llm.stats()["requests"]
    assert calls == 5 and report.runs[0].errors == 1
    assert "missing from dataset version" in report.runs[0].failures[0].error

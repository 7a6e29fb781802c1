"""The reads reconcile makes by item id (the gate config's protected ids and accepted
breaks) on MariaDB: through the version's (version_id, item_id) key and the items' primary
key, never a scan of a run's items, which have no item-id index (EXPLAIN)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, text

from gate.store.policy import items_by_id, items_by_id_query
from gate.store.schema import dataset, dataset_row, dataset_version, prompt_run_item

E = datetime(2000, 1, 1)


def test_items_by_id_reads_by_key_not_by_scanning_the_run(mysql_gate):
    g = mysql_gate
    with g.engine.begin() as c:
        c.execute(insert(dataset).values(id=1, name="d", source_uri="x", options={}, created_at=E))
        c.execute(
            insert(dataset_version).values(
                id=1,
                dataset_id=1,
                status="READY",
                content_hash="h",
                row_count=5000,
                labels={},
                source_uri="x",
                source_options={},
                created_at=E,
            )
        )
        c.execute(
            insert(dataset_row),
            [
                dict(
                    version_id=1,
                    position=i,
                    item_id=f"i{i}",
                    expected_decision="yes",
                    input={"text": str(i)},
                    row_hash="0" * 64,
                    protected=i % 50 == 0,
                )
                for i in range(5000)
            ],
        )
        c.execute(
            insert(prompt_run_item),
            [
                dict(
                    run_id=r,
                    position=i,
                    item_id=f"i{i}",
                    expected_decision="yes",
                    verdict="MATCH",
                    attempt=1,
                    lease_until=E,
                )
                for r in (7, 8)
                for i in range(5000)
            ],
        )
        c.execute(text("ANALYZE TABLE dataset_row, prompt_run_item"))
    ids = ["i10", "i4000", "nope"]
    query = items_by_id_query(7, 8, 1, ids)
    sql = str(query.compile(g.engine, compile_kwargs={"literal_binds": True}))
    with g.engine.connect() as conn:
        plan = conn.execute(text("EXPLAIN " + sql)).mappings().all()
        found = items_by_id(conn, 7, 8, 1, ids)
    assert [(r["item_id"], r["position"], r["live_verdict"]) for r in found] == [
        ("i10", 10, "MATCH"),
        ("i4000", 4000, "MATCH"),
    ]
    rows = {p["table"]: p for p in plan}
    assert rows["dataset_row"]["key"] == "uq_dataset_row_item", plan
    assert rows["cand"]["key"] == "PRIMARY" and rows["cand"]["type"] == "eq_ref", plan
    assert rows["live"]["key"] == "PRIMARY" and rows["live"]["type"] == "eq_ref", plan
    assert all(int(p["rows"] or 0) <= 10 for p in plan), plan

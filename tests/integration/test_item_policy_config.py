"""The gate config's item policy (slices, protected ids, accepted breaks) and the bars of a
fields decision, synced into the gate (MariaDB and SQLite): pinned with runs like every
bar, an accepted break keeps the commit of the sync that accepted it, and a config that is
only diffed (a pull request's) accepts nothing."""

from __future__ import annotations

import pytest
import yaml
from support.helpers import write_rule_rows

from gate import gateconfig
from gate.errors import SpecError, UsageError

A, B = "a" * 40, "b" * 40


def config(tmp_path, **entry):
    write_rule_rows(tmp_path / "d.csv", 4)
    path = tmp_path / "gate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "datasets": {"d": {"source": "d.csv"}},
                "prompts": {"p1": [{"dataset": "d", "min_accuracy": 0.5, **entry}]},
            }
        )
    )
    return path


def accepted(gate):
    (m,) = gate.mappings("p1")
    return [(a["item"], a["reason"], a.get("commit")) for a in (m.bars or {}).get("accept_breaks", [])]


def test_an_accepted_break_records_the_commit_that_accepted_it(gate, tmp_path):
    path = config(
        tmp_path,
        slice_by="channel",
        min_slice_accuracy=0.8,
        protected=["i2"],
        min_field_accuracy={"amount": 0.9},
        accept_breaks=[{"item": "i1", "reason": "ambiguous"}],
    )
    planned = gateconfig.diff(gate, path)  # a pull request's view: nothing is mapped
    assert any("1 accepted break (i1)" in line for line in planned.lines()) and gate.mappings("p1") == []
    first = gateconfig.sync(gate, path, commit=A.upper())
    assert (
        "bar p1 × d: new, min accuracy 0.5, amount read right ≥ 90%, every slice of ≥ 20 items ≥ 80%, sliced by "
        "channel, 1 protected item, 1 accepted break (i1)" in first.lines()
    )
    assert accepted(gate) == [("i1", "ambiguous", A)]
    assert gateconfig.sync(gate, path, commit=B).changes == ()  # the same declaration: nothing changes

    cfg = yaml.safe_load(path.read_text())
    cfg["prompts"]["p1"][0]["accept_breaks"].append({"item": "i3", "reason": "new"})
    path.write_text(yaml.safe_dump(cfg))
    gateconfig.sync(gate, path, commit=B)
    assert accepted(gate) == [("i1", "ambiguous", A), ("i3", "new", B)]  # i1 keeps the commit that accepted it
    cfg["prompts"]["p1"][0]["accept_breaks"] = [{"item": "i1", "reason": "ambiguous"}]
    cfg["prompts"]["p1"][0]["min_accuracy"] = 0.6
    path.write_text(yaml.safe_dump(cfg))
    gateconfig.sync(gate, path)  # no commit known: kept where recorded
    assert accepted(gate) == [("i1", "ambiguous", A)]


@pytest.mark.parametrize(
    "entry, field, problem",
    [
        ({"min_slice_accuracy": 0.8}, "prompts.p1[0]", "need slice_by"),
        ({"slice_by": "c", "min_slice_items": -1}, "prompts.p1[0].min_slice_items", "whole number"),
        ({"protected": "i1"}, "prompts.p1[0].protected", "must be a list"),
        ({"accept_breaks": [{"item": "i1"}]}, "prompts.p1[0].accept_breaks", "give a reason"),
        ({"min_field_accuracy": {"amount": 1.5}}, "prompts.p1[0].min_field_accuracy", "outside [0, 1]"),
        ({"slice_for": "c"}, "prompts.p1[0].slice_for", "unknown field"),
    ],
)
def test_a_bad_entry_names_its_field(tmp_path, entry, field, problem):
    with pytest.raises(SpecError) as caught:
        gateconfig.load_config(config(tmp_path, **entry))
    assert caught.value.field == field and problem in caught.value.reason


def test_a_commit_that_is_not_a_full_id_is_refused(gate, tmp_path):
    with pytest.raises(UsageError, match="is not a full commit id"):
        gateconfig.sync(gate, config(tmp_path), commit="HEAD")


def test_slices_and_label_confusion_read_json_alike_on_both_databases(gate):
    """The figures reconcile and finalize read from JSON in SQL (``dialect.json_text``):
    text, numbers, booleans and absent values group the same on MariaDB and SQLite."""
    from datetime import datetime

    from sqlalchemy import insert

    from gate.store.fields import label_confusion
    from gate.store.policy import slice_counts
    from gate.store.schema import dataset, dataset_row, dataset_version, prompt_run_item

    epoch = datetime(2000, 1, 1)
    values = ["email", "email", 3, True, False, None, "chat", "chat"]
    expected = ['{"category":"billing"}', '{"category":"Billing"}', '{"category":"shipping"}'] * 3
    actual = [
        '{"category":"billing"}',
        '{"category":"shipping"}',
        '{"category":"refund"}',
        "(not a JSON object)",
        "{}",
        '{"category":"billing"}',
        '{"category":"shipping"}',
        '{"category":"shipping"}',
    ]
    with gate.engine.begin() as c:
        c.execute(insert(dataset).values(id=1, name="d", source_uri="x", options={}, created_at=epoch))
        c.execute(
            insert(dataset_version).values(
                id=1,
                dataset_id=1,
                status="READY",
                content_hash="h",
                row_count=8,
                labels={},
                source_uri="x",
                source_options={},
                created_at=epoch,
            )
        )
        c.execute(
            insert(dataset_row),
            [
                dict(
                    version_id=1,
                    position=i,
                    item_id=f"i{i}",
                    expected_decision=expected[i],
                    row_hash="0" * 64,
                    input={} if v is None else {"channel": v},
                    protected=0,
                )
                for i, v in enumerate(values)
            ],
        )
        c.execute(
            insert(prompt_run_item),
            [
                dict(
                    run_id=run,
                    position=i,
                    item_id=f"i{i}",
                    expected_decision=expected[i],
                    actual_decision=actual[i],
                    verdict="MATCH" if (i + run) % 3 else "MISMATCH",
                    attempt=1,
                    lease_until=epoch,
                    fields_wrong=0,
                    fields_missing=1 if actual[i] in ("{}", "(not a JSON object)") else 0,
                )
                for run in (1, 2)
                for i in range(8)
            ],
        )
    with gate.engine.connect() as conn:
        slices = slice_counts(conn, 1, 1, "channel", 2, 10)
        confusion = label_confusion(conn, 1, "category", 1, ["billing", "shipping"], "(missing)", "(other)")
    assert sorted((s["value"] or "", s["items"]) for s in slices) == [
        ("", 1),
        ("3", 1),
        ("chat", 2),
        ("email", 2),
        ("false", 1),
        ("true", 1),
    ]
    assert sorted(confusion) == sorted(
        [
            ("billing", "billing", 1),
            ("Billing", "shipping", 2),
            ("shipping", "(other)", 1),
            ("billing", "(missing)", 1),
            ("Billing", "(missing)", 1),
            ("shipping", "billing", 1),
            ("billing", "shipping", 1),
        ]
    )


def test_an_answer_nested_past_the_databases_json_depth_still_counts_its_label_field(gate):
    """Review: what a fields decision keeps of an answer (``reading.read_answer``) could nest
    a declared ``exact`` field (named before the label field) 40 deep (1,000 characters allow 500), and MariaDB's JSON
    functions give up past 32 levels (JSON_VALUE is NULL): the label field answered right
    counted as "(other)" in the confusion matrix while its mask said right."""
    from datetime import datetime

    from sqlalchemy import insert

    from gate.prompt.structured.compare import score
    from gate.prompt.structured.reading import read_answer
    from gate.prompt.structured.rule import parse_fields
    from gate.store.fields import label_confusion
    from gate.store.schema import prompt_run_item

    rule = parse_fields({"category": {"type": "label", "labels": ["billing", "shipping"]}, "aside": "exact"})
    answer = '{"category": "billing", "aside": ' + "[" * 40 + "]" * 40 + "}"
    actual, expected = read_answer(rule, answer), '{"aside":1,"category":"billing"}'
    outcome = score(rule, actual, expected)
    epoch = datetime(2000, 1, 1)
    with gate.engine.begin() as c:
        c.execute(
            insert(prompt_run_item).values(
                run_id=1,
                position=0,
                item_id="i0",
                expected_decision=expected,
                actual_decision=actual,
                verdict="MISMATCH",
                attempt=1,
                lease_until=epoch,
                fields_wrong=outcome.wrong,
                fields_missing=outcome.missing,
            )
        )
    with gate.engine.connect() as conn:
        confusion = label_confusion(
            conn, 1, "category", rule.bit("category"), rule.get("category").labels, "(missing)", "(other)"
        )
    assert outcome.wrong == rule.bit("aside") and confusion == [("billing", "billing", 1)]

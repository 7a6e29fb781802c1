"""Syncing the gate config into the gate (MariaDB and SQLite): idempotent, and the file is
the whole truth for the bars it manages (a mapping the CLI added is kept apart)."""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml
from support.action_harness import make_workspace

from gate import gateconfig


def test_sync_is_idempotent_and_the_file_is_the_whole_truth(gate, tmp_path):
    """Issue 35.9: README's quick start maps a dataset with `dataset map`; the next sync
    removed it. A mapping records who declared it: a sync manages the gate config's and
    leaves the CLI's alone."""
    ws = make_workspace(tmp_path)
    first = gateconfig.sync(gate, ws / "gate.yaml")
    assert first.applied and len(first.changes) == 16  # 8 datasets, 8 bars
    assert {(m.prompt_name, m.dataset_name, m.min_accuracy) for m in gate.mappings("ticket-urgency")} == {
        ("ticket-urgency", "urgency-hard", Decimal("0.8")),
        ("ticket-urgency", "urgency-regression", Decimal("0.9")),
    }
    assert gateconfig.sync(gate, ws / "gate.yaml").changes == ()
    assert {m.declared_in for m in gate.mappings()} == {str(ws / "gate.yaml")}
    # a bar the CLI added (`dataset map`), on a prompt the file does not list: a sync leaves it alone
    gate.map_dataset("unlisted-prompt", "urgency-hard", "0.5")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][1]["min_accuracy"] = 0.75
    del cfg["prompts"]["refund-eligibility"]
    cfg["datasets"]["urgency-hard"]["label_column"] = "expected_decision"
    del cfg["datasets"]["refund-hard"]
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    planned = gateconfig.diff(gate, ws / "gate.yaml")
    assert not planned.applied and sorted(planned.lines()) == sorted(
        [
            "bar refund-eligibility × refund-hard: removed (was 0.8)",
            "bar refund-eligibility × refund-regression: removed (was 0.9)",
            "bar ticket-urgency × urgency-hard: min accuracy 0.8 → 0.75",
            "dataset refund-hard: no longer declared (stays registered, gates nothing)",
        ]
    )
    assert len(gate.mappings()) == 9  # diff changed nothing
    gateconfig.sync(gate, ws / "gate.yaml")
    assert {(m.prompt_name, m.dataset_name, str(Decimal(m.min_accuracy).normalize())) for m in gate.mappings()} == {
        ("ticket-urgency", "urgency-hard", "0.75"),
        ("ticket-urgency", "urgency-regression", "0.9"),
        ("support-extract", "support-emails", "0.8"),
        ("unlisted-prompt", "urgency-hard", "0.5"),
        ("reply-judge", "reply-judge-labels", "0.85"),
        ("support-reply", "support-tickets", "0.75"),
        ("support-router", "support-conversations", "0.75"),
    }
    assert [m.declared_in for m in gate.mappings("unlisted-prompt")] == [None]
    assert gateconfig.diff(gate, ws / "gate.yaml").changes == ()
    assert "refund-hard" in {ds.name for ds, _ in gate.list_datasets()}


def test_extra_bars_are_synced_and_a_change_of_any_is_bar_changed(gate, tmp_path):
    from support.helpers import write_rule_rows

    write_rule_rows(tmp_path / "d.csv", 4)
    write_rule_rows(tmp_path / "e.csv", 4)
    cfg = {
        "datasets": {"d": {"source": "d.csv"}, "e": {"source": "e.csv"}},
        "prompts": {
            "p1": [
                {"dataset": "d", "min_accuracy": 0.9, "max_broken": 0, "min_recall": {"yes": 0.95}},
                {"dataset": "e", "min_accuracy": 0.8},
            ]
        },
    }
    path = tmp_path / "gate.yaml"

    def plan(**entry) -> list[str]:
        cfg["prompts"]["p1"][0] = {"dataset": "d", "min_accuracy": 0.9, **entry}
        path.write_text(yaml.safe_dump(cfg))
        return [line for line in gateconfig.diff(gate, path).lines() if line.startswith("bar ")]

    path.write_text(yaml.safe_dump(cfg))
    added = gateconfig.sync(gate, path)
    assert "bar p1 × d: new, min accuracy 0.9, max broken 0, recall[yes] ≥ 95%" in added.lines()
    assert "bar p1 × e: new, min accuracy 0.8" in added.lines()  # accuracy only: as before
    assert {m.dataset_name: m.bars for m in gate.mappings("p1")} == {
        "d": {"max_broken": 0, "min_recall": {"yes": "0.95"}},
        "e": None,
    }
    assert gateconfig.sync(gate, path).changes == ()  # idempotent

    assert plan(max_broken=0, min_recall={"yes": "0.950"}) == []  # the same values
    assert plan(max_broken=2, min_recall={"yes": 0.95}) == [
        "bar p1 × d: min accuracy 0.9, max broken 0, recall[yes] ≥ 95% → 0.9, max broken 2, recall[yes] ≥ 95%"
    ]
    assert plan(max_broken=0, min_recall={"yes": 0.95}, max_latency_p95_ms=250, max_cost_per_1k_items=0.5) == [
        "bar p1 × d: min accuracy 0.9, max broken 0, recall[yes] ≥ 95% → 0.9, max broken 0, recall[yes] ≥ 95%, "
        "p95 latency ≤ 250 ms, cost ≤ $0.5 per 1k items"
    ]
    assert plan(min_precision={"no": 0.5}) == [
        "bar p1 × d: min accuracy 0.9, max broken 0, recall[yes] ≥ 95% → 0.9, precision[no] ≥ 50%"
    ]
    gateconfig.sync(gate, path)
    assert {m.dataset_name: m.bars for m in gate.mappings("p1")}["d"] == {"min_precision": {"no": "0.5"}}
    assert plan() == ["bar p1 × d: min accuracy 0.9, precision[no] ≥ 50% → 0.9"]
    gateconfig.sync(gate, path)
    assert {m.dataset_name: m.bars for m in gate.mappings("p1")} == {"d": None, "e": None}
    del cfg["prompts"]["p1"][1]
    cfg["prompts"]["p1"][0]["max_broken"] = 1
    path.write_text(yaml.safe_dump(cfg))
    gateconfig.sync(gate, path)
    cfg["prompts"]["p1"] = [{"dataset": "e", "min_accuracy": 0.8}]
    path.write_text(yaml.safe_dump(cfg))
    assert sorted(gateconfig.diff(gate, path).lines()) == [
        "bar p1 × d: removed (was 0.9, max broken 1)",
        "bar p1 × e: new, min accuracy 0.8",
    ]


def test_prices_are_synced_changed_by_value_and_removed(gate, tmp_path):
    from gate.records import Price

    path = tmp_path / "gate.yaml"
    path.write_text("prices:\n  gpt-4o-mini: {input: 0.15, output: 0.60}\n  mock-1: {input: 1, output: 2}\n")
    planned = gateconfig.diff(gate, path)  # what a pull request's config shows: nothing is set
    assert planned.lines() == [
        "price gpt-4o-mini: new, $0.15 in / $0.60 out per 1M tokens",
        "price mock-1: new, $1.00 in / $2.00 out per 1M tokens",
    ]
    assert gate.prices() == {}
    assert gateconfig.sync(gate, path).changes == planned.changes
    assert gate.prices() == {
        "gpt-4o-mini": Price("gpt-4o-mini", Decimal("0.15"), Decimal("0.6")),
        "mock-1": Price("mock-1", Decimal("1"), Decimal("2")),
    }
    assert str(gate.prices()["gpt-4o-mini"].input_per_million) == "0.15"  # exact, not a float's
    assert gateconfig.sync(gate, path).changes == ()  # idempotent

    # the same values written differently are no change; a new model, a changed and a dropped one are
    path.write_text(
        "prices:\n  gpt-4o-mini: {input: 0.150, output: '0.6000'}\n  mock-1: {input: 1, output: 2.5}\n"
        "  mock-2: {input: 0.000125, output: 0}\n"
    )
    assert gateconfig.sync(gate, path).lines() == [
        "price mock-1: $1.00 in / $2.00 out per 1M tokens → $1.00 in / $2.50 out per 1M tokens",
        "price mock-2: new, $0.000125 in / $0.00 out per 1M tokens",
    ]
    path.write_text("prices:\n  mock-2: {input: 0.000125, output: 0}\n")
    assert gateconfig.sync(gate, path).lines() == [
        "price gpt-4o-mini: removed (was $0.15 in / $0.60 out per 1M tokens)",
        "price mock-1: removed (was $1.00 in / $2.50 out per 1M tokens)",
    ]
    assert gate.prices() == {"mock-2": Price("mock-2", Decimal("0.000125"), Decimal("0"))}
    path.write_text("datasets: {}\n")  # no prices: section: the table is emptied
    assert [c.kind for c in gateconfig.sync(gate, path).changes] == ["price-removed"]
    assert gate.prices() == {} and gateconfig.sync(gate, path).changes == ()


def test_the_service_sets_and_removes_a_price(gate):
    from gate.records import Price

    assert gate.set_price(Price("m1", Decimal("0.5"), Decimal("1.5"))) is True
    assert gate.set_price(Price("m1", Decimal("0.25"), Decimal("1.5"))) is False
    assert gate.prices() == {"m1": Price("m1", Decimal("0.25"), Decimal("1.5"))}
    assert gate.remove_price("m1") is True and gate.remove_price("m1") is False
    assert gate.prices() == {}


# --- the Markdown report ---------------------------------------------------------------------------------


def test_a_pull_requests_row_diff_reads_no_file_it_points_elsewhere(gate, tmp_path):
    """The pull request's gate.yaml re-declares a registered dataset on a link to a file
    outside its checkout, with that file's columns: the diff must not read it (nor show
    anything of it); the file compared is the registered one's place in the checkout."""
    from support.helpers import write_rule_rows

    main = tmp_path / "main"
    (main / "data").mkdir(parents=True)
    write_rule_rows(main / "data" / "d.csv", 10)
    (main / "gate.yaml").write_text(
        "datasets:\n  d: {source: data/d.csv}\nprompts:\n  p1:\n    - {dataset: d, min_accuracy: 0.5}\n"
    )
    gateconfig.sync(gate, main / "gate.yaml")
    secret = tmp_path / "outside" / "creds.csv"
    secret.parent.mkdir()
    secret.write_text("user,token\nalice,ghp_SECRET_TOKEN_123\nbob,AKIA_SECRET_456\n")
    pr = tmp_path / "pr"
    (pr / "data").mkdir(parents=True)
    (pr / "data" / "d.csv").symlink_to(secret)
    (pr / "gate.yaml").write_text(
        "datasets:\n  d: {source: data/d.csv, id_column: user, label_column: token}\n"
        "prompts:\n  p1:\n    - {dataset: d, min_accuracy: 0.5}\n"
    )
    cfg = gateconfig.load_config(pr / "gate.yaml", display_path="gate.yaml")
    try:
        result = gateconfig.diff(gate, cfg, changed_files=[pr / "data" / "d.csv", pr / "gate.yaml"])
        shown = " ".join(f"{c} {c.details}" for c in result.changes)
    except Exception as exc:  # refused, in one line
        shown = str(exc)
        assert "symbolic link" in shown
    assert "SECRET" not in shown and "alice" not in shown


def account_tier_spec(name: str = "ticket-urgency"):
    from gate.prompt.spec import parse_spec

    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "messages": [
                {"role": "system", "content": "Classify."},
                {
                    "role": "user",
                    "content": "{% if item.account_tier is defined %}[{{ item.account_tier }}] "
                    "{{ item.subject }}{% else %}{{ item.subject }}\n\n{{ item.text }}{% endif %}",
                },
            ],
        }
    )


def test_optional_fields_are_synced_diffed_and_let_a_field_no_row_has_through(gate, tmp_path):
    """Issue 23, item 6 on both databases: the account_tier template is refused at submit
    naming the field and the datasets; the gate config's optional_fields (synced, diffed
    like any change, idempotent, removed when the file drops them) let it through."""
    from gate.errors import UsageError

    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    with pytest.raises(
        UsageError,
        match=r"^the gate cannot evaluate what account_tier changes: no row of "
        r"urgency-hard, urgency-regression has it \(",
    ):
        gate.submit(account_tier_spec())
    assert gate.list_updates() == []

    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["optional_fields"] = {"ticket-urgency": ["account_tier", "region"]}
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    assert gateconfig.diff(gate, ws / "gate.yaml").lines() == [
        "prompt ticket-urgency: optional fields none → account_tier, region"
    ]
    assert gate.optional_fields() == {}  # a diff changes nothing
    assert [c.kind for c in gateconfig.sync(gate, ws / "gate.yaml").changes] == ["optional-fields"]
    assert gate.optional_fields() == {"ticket-urgency": ["account_tier", "region"]}
    assert gateconfig.sync(gate, ws / "gate.yaml").changes == ()  # idempotent
    update_id = gate.submit(account_tier_spec())
    runs = gate.status(update_id).runs
    assert {r.dataset: r.fields_read[0] for r in runs} == {
        "urgency-regression": {"field": "account_tier", "rows": 0, "of": 98, "optional": True},
        "urgency-hard": {"field": "account_tier", "rows": 0, "of": 16, "optional": True},
    }
    assert [r.pinned["fields"] for r in runs] == [
        {"read": {"account_tier": 0, "subject": n, "text": n}, "rows": n, "optional": ["account_tier"]}
        for n in [r.pinned["rows"] for r in runs]
    ]

    del cfg["optional_fields"]
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    assert gateconfig.sync(gate, ws / "gate.yaml").lines() == [
        "prompt ticket-urgency: optional fields account_tier, region → none"
    ]
    assert gate.optional_fields() == {}
    with pytest.raises(UsageError, match="account_tier"):
        gate.submit(account_tier_spec())


def test_a_version_imported_before_fields_were_counted_is_counted_once_at_submit(gate, tmp_path, monkeypatch):
    """A version whose fields are not stored (imported before migration 0011) is counted at
    the first submission that reads a field, in pages, and stored; a field only some rows
    have passes, with its coverage pinned."""
    from sqlalchemy import text
    from support.helpers import rules_spec, write_rule_rows

    from gate.domain import admission
    from gate.errors import UsageError

    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 30)))
    gate.map_dataset("p1", "d", "0.5")
    assert gate.dataset_version("d").fields == {"counts": {"text": 30}, "rows": 30, "capped": False}
    with gate.engine.begin() as conn:  # as before the migration, and only rows 0-9 have a text now
        conn.execute(text("UPDATE dataset_version SET fields = NULL"))
        conn.execute(text('UPDATE dataset_row SET input = \'{"text": ""}\' WHERE position >= 10'))
    monkeypatch.setattr(admission, "FIELD_PAGE", 7)  # several pages of the 30 rows
    with pytest.raises(
        UsageError, match="^the gate cannot evaluate what account_tier, subject change: no row of d has them"
    ):
        gate.submit(account_tier_spec("p1"))
    assert gate.dataset_version("d").fields == {"counts": {"text": 10}, "rows": 30, "capped": False}
    update_id = gate.submit(rules_spec("p1"))
    (run,) = gate.status(update_id).runs
    assert run.fields_read == [{"field": "text", "rows": 10, "of": 30, "optional": False}]

"""Production calls the provider its live version was evaluated with (issue 33.5), on MariaDB
and SQLite: the declaration pinned with the update that applied it travels with the live row
and its history row; an admin sync that moves the provider's URL moves the evaluations of
later updates, not production's calls; applying the prompt again through the gate (or a
rollback to a version evaluated elsewhere) does. Each check counts the requests that reached
each of two local model servers."""

from __future__ import annotations

import json
import logging

import yaml
from sqlalchemy import create_engine, text
from support.helpers import RULES, write_rule_rows
from support.migrated import migrated

from gate import db, gateconfig
from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.runtime import PromptRuntime
from gate.states import UpdateStatus
from workers.supervisor import run_until_terminal

SPEC = parse_spec(
    {
        "name": "p1",
        "model": "mock-1",
        "provider": "corp",
        "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": "{{ item.text }}"}],
    }
)


def declare(path, url: str) -> None:
    """The default branch's gate config: provider corp at ``url``, p1 gated on d."""
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {"corp": {"base_url": url}},
                "datasets": {"d": {"source": "d.csv"}},
                "prompts": {"p1": [{"dataset": "d", "min_accuracy": 0.5}]},
            }
        )
    )


def applied(gate: Gate) -> int:
    update_id = gate.submit(SPEC, "apply")
    (report,) = run_until_terminal(gate, [update_id], timeout=60)
    assert report.status == UpdateStatus.APPLIED, report.update.reason
    return update_id


def calls_of(runtime: PromptRuntime, *servers: MockLLMServer) -> list[int]:
    """One production call of p1; the requests each server received for it."""
    before = [s.stats()["requests"] for s in servers]
    assert runtime.prompt("p1").decide({"text": "alpha message"}).decision == "yes"
    return [s.stats()["requests"] - b for s, b in zip(servers, before)]


def test_a_provider_sync_never_moves_production_and_an_apply_or_rollback_does(db_url, tmp_path):
    write_rule_rows(tmp_path / "d.csv", 4)
    config = tmp_path / "gate.yaml"
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        with MockLLMServer() as a, MockLLMServer() as b:
            declare(config, a.base_url)
            gateconfig.sync(gate, config)
            applied(gate)
            runtime = PromptRuntime(gate=gate, ttl=0)
            assert calls_of(runtime, a, b) == [1, 0]

            declare(config, b.base_url)  # an admin's sync moves corp: nothing evaluated there yet
            planned = gateconfig.diff(gate, config).lines()
            synced = gateconfig.sync(gate, config).lines()
            assert calls_of(runtime, a, b) == [1, 0]  # production still calls what was evaluated
            note = (
                "provider corp: live prompts keep calling the declaration they were evaluated with until an update "
                f"applies them again through the gate: p1 at {a.base_url}"
            )
            assert note in planned and note in synced

            evaluated = b.stats()["requests"]
            second = applied(gate)  # the same config, applied again through the gate: evaluated at B
            assert b.stats()["requests"] - evaluated == 4  # every item called afresh: another endpoint
            run = gate.status(second).runs[0]
            assert not run.pinned["baseline"].get("same_config")  # compared with the answers A gave
            assert calls_of(runtime, a, b) == [0, 1]
            assert gateconfig.diff(gate, config).lines() == []  # nothing pinned elsewhere any more

            gate.rollback("p1", reason="B answers slowly", actor="alice", to_version=1)
            assert calls_of(runtime, a, b) == [1, 0]  # the restored version's provider with it
    finally:
        gate.close()


def test_a_version_with_no_provider_on_record_calls_todays_and_says_so_once(db_url, tmp_path, caplog):
    """A version live since before providers were pinned, with no update on record to take
    its declaration from (the migration pins every other): the runtime resolves the
    provider as the gate declares it now, as before, and its log says so once."""
    write_rule_rows(tmp_path / "d.csv", 4)
    config = tmp_path / "gate.yaml"
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        with MockLLMServer() as a, MockLLMServer() as b:
            declare(config, a.base_url)
            gateconfig.sync(gate, config)
            applied(gate)
            with gate.engine.begin() as conn:  # as the migration leaves a version it cannot pin
                for table in ("prompt", "prompt_version"):
                    conn.execute(text(f"UPDATE {table} SET provider = NULL, provider_pinned = 0"))
            declare(config, b.base_url)
            assert not any(c.kind == "provider-pinned" for c in gateconfig.sync(gate, config).changes)
            runtime = PromptRuntime(gate=gate, ttl=0)
            with caplog.at_level(logging.WARNING, logger="gate.runtime"):
                assert calls_of(runtime, a, b) == [0, 1]
                assert calls_of(runtime, a, b) == [0, 1]
            said = [r.getMessage() for r in caplog.records if r.name == "gate.runtime"]
            assert said == [
                "prompt p1 v1 has no provider pinned with it (it went live before the gate pinned providers): "
                "its calls go to provider corp as the gate declares it now; apply it again through the gate to pin it"
            ]
    finally:
        gate.close()


def test_the_migration_pins_each_live_version_to_its_updates_declaration(db_url):
    """A database at migration 14 with live versions (one applied by an update that pinned a
    provider, one by an update on the default provider, a rollback of the first, and a row
    no update is on record for), upgraded: each version carries its update's declaration."""
    engine = create_engine(db_url)
    dialect = engine.dialect.name
    corp = '{"name":"corp","base_url":"https://a.example/v1","api_key_env":null,"models":[]}'
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {db.MIGRATION_TABLE} (version INT NOT NULL PRIMARY KEY, "
                "name VARCHAR(255) NOT NULL, applied_at VARCHAR(32) NOT NULL)"
            )
        )
        for version, name, sql in db.migrations(dialect):
            if version <= 14:
                for statement in db.split_statements(sql):
                    conn.execute(text(statement))
                record = text(f"INSERT INTO {db.MIGRATION_TABLE} VALUES (:v, :n, 'then')")
                conn.execute(record, {"v": version, "n": name})
        for uid, provider in ((1, corp), (2, None)):
            conn.execute(
                text(
                    "INSERT INTO prompt_update (id, prompt_name, mode, status, candidate_config, candidate_hash, "
                    "base_version, source, source_key, created_at, provider) VALUES (:id, :p, 'apply', 'APPLIED', "
                    "'{}', :h, 0, '{}', 'cli', '2026-01-01', :provider)"
                ),
                {"id": uid, "p": f"p{uid}", "h": "0" * 64, "provider": provider},
            )
        live = [("p1", 2, 1), ("p2", 1, 2), ("p3", 1, None)]  # (name, version, applying update)
        for name, version, uid in live:
            conn.execute(
                text(
                    "INSERT INTO prompt (name, version, config, config_hash, applied_update_id, updated_at) "
                    "VALUES (:n, :v, '{}', :h, :u, '2026-01-01')"
                ),
                {"n": name, "v": version, "h": "0" * 64, "u": uid},
            )
        for name, version, uid, kind in [("p1", 1, 1, "apply"), ("p1", 2, 1, "rollback"), ("p2", 1, 2, "apply")]:
            conn.execute(
                text(
                    "INSERT INTO prompt_version (prompt_name, version, config, config_hash, update_id, applied_at, "
                    "kind) VALUES (:n, :v, '{}', :h, :u, '2026-01-01', :k)"
                ),
                {"n": name, "v": version, "h": "0" * 64, "u": uid, "k": kind},
            )
    engine.dispose()
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        with gate.engine.connect() as conn:
            pinned = {
                (r.name, r.provider_pinned, r.provider)
                for r in conn.execute(text("SELECT name, provider_pinned, provider FROM prompt"))
            }
            rows = conn.execute(text("SELECT prompt_name, version, provider_pinned, provider FROM prompt_version"))
            history = {(r.prompt_name, r.version): (r.provider_pinned, r.provider) for r in rows}
        assert pinned == {("p1", 1, corp), ("p2", 1, None), ("p3", 0, None)}
        assert history == {("p1", 1): (1, corp), ("p1", 2): (1, corp), ("p2", 1): (1, None)}
        assert gate.live_providers() == {"p1": json.loads(corp), "p2": None}
    finally:
        gate.close()

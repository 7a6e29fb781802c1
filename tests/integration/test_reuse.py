"""Answers already paid for stand in for calls (MariaDB and SQLite), counted at the model
server: the apply after a passing check calls nothing, an unchanged re-run costs nothing,
a changed template calls every item, one changed row calls one item, and --no-reuse calls
every item. The report says how many answers were reused and from which update."""

from __future__ import annotations

from support.helpers import RULES, rules_spec, write_rule_rows

from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from workers.supervisor import run_until_terminal

ROWS = 24


def evaluate(gate, spec, llm, mode="check", reuse=True):
    """Submit, run to the end; the report and the calls the model server saw meanwhile."""
    before = llm.stats()["requests"]
    (report,) = run_until_terminal(gate, [gate.submit(spec, mode, reuse=reuse)], timeout=60)
    assert report.terminal, report.update.reason
    return report, llm.stats()["requests"] - before


def test_answers_are_reused_only_for_the_very_same_request(gate, tmp_path, monkeypatch):
    path = write_rule_rows(tmp_path / "d.csv", ROWS, wrong_every=6)
    gate.register_dataset("d", str(path))
    gate.map_dataset("p1", "d", "0.7")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        check, calls = evaluate(gate, rules_spec("p1"), llm)
        assert (check.status, calls) == ("PASSED", ROWS)

        apply, calls = evaluate(gate, rules_spec("p1"), llm, mode="apply")  # the merge of that check
        assert (apply.status, calls) == ("APPLIED", 0)
        run = apply.runs[0]
        assert run.reused == {check.update.id: ROWS} and run.matches == check.runs[0].matches

        _, calls = evaluate(gate, rules_spec("p1"), llm)  # an unchanged re-run
        assert calls == 0

        changed = parse_spec(
            dict(
                rules_spec("p1").to_config(),
                messages=[
                    {"role": "system", "content": RULES},
                    {"role": "user", "content": "Message: {{ item.text }}"},
                ],
            )
        )
        _, calls = evaluate(gate, changed, llm)  # a changed template
        assert calls == ROWS

        lines = path.read_text().splitlines()
        lines[3] = lines[3].replace("message", "note")  # one changed row
        path.write_text("\n".join(lines) + "\n")
        gate.refresh_dataset("d")
        report, calls = evaluate(gate, rules_spec("p1"), llm)
        assert calls == 1 and report.runs[0].reused_total == ROWS - 1

        _, calls = evaluate(gate, rules_spec("p1"), llm, reuse=False)  # --no-reuse
        assert calls == ROWS


def test_an_error_is_never_reused(gate, tmp_path, monkeypatch):
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 6)))
    gate.map_dataset("p1", "d", "0.5")
    broken = parse_spec(dict(rules_spec("p1").to_config(), model="mock-error-400"))
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        first, calls = evaluate(gate, broken, llm)
        assert (first.status, calls) == ("FAILED", 6)
        second, calls = evaluate(gate, broken, llm)
        assert calls == 6 and not second.runs[0].reused


def test_a_kept_answer_is_the_first_and_is_never_replaced(gate):
    """A key answered before keeps its first answer whatever is saved after it (a new key is
    inserted, a key of another chunk untouched): MariaDB's INSERT IGNORE, SQLite's OR IGNORE."""
    from sqlalchemy import select

    from gate.db import transaction
    from gate.records import Answer
    from gate.store.answers import save_answers
    from gate.store.schema import answer

    def kept(key, decision, update_id):
        return Answer(
            request_key=key,
            actual_decision=decision,
            raw_output=decision,
            latency_ms=5,
            prompt_tokens=1,
            completion_tokens=1,
            update_id=update_id,
            run_id=update_id,
        )

    transaction(gate.engine, lambda c: save_answers(c, [kept("a" * 64, "yes", 1), kept("c" * 64, "no", 1)]))
    transaction(gate.engine, lambda c: save_answers(c, [kept("a" * 64, "no", 2)]))  # first kept
    transaction(gate.engine, lambda c: save_answers(c, [kept("b" * 64, "maybe", 3), kept("a" * 64, "no", 3)]))
    with gate.engine.connect() as conn:
        rows = {r.request_key[0]: (r.actual_decision, r.update_id) for r in conn.execute(select(answer))}
    assert rows == {"a": ("yes", 1), "b": ("maybe", 3), "c": ("no", 1)}

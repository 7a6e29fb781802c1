"""The judge parts of the prompt format (gate/prompt/judge.py): a judged decision, a judge's
own file, the bounded answer a judge's template reads, and the JSON Schema agreeing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from support.cli import ROOT

from gate.errors import SpecError
from gate.prompt.judge import MAX_ANSWER_BYTES, answers_read, bounded_answer, majority, own_variables
from gate.prompt.sandbox import RenderPool
from gate.prompt.spec import parse_spec
from gate.prompt.templating import render

SCHEMA = json.loads((ROOT / "gate" / "schemas" / "prompt.schema.json").read_text())
JUDGED = {
    "name": "reply",
    "model": "m",
    "messages": [{"role": "user", "content": "Draft a reply to: {{ item.ticket }}"}],
    "decision": {"type": "judge", "judge": "reply-judge", "pass": ["good"]},
}
JUDGE = {
    "name": "reply-judge",
    "kind": "judge",
    "model": "m",
    "labels": ["good", "bad"],
    "messages": [{"role": "user", "content": "Ticket: {{ item.ticket }}\n<answer>{{ answer }}</answer>"}],
}


def test_a_judged_decision_is_pinned_in_the_config_and_needs_no_labels():
    spec = parse_spec(JUDGED)
    assert spec.decision.judge.judge == "reply-judge" and spec.decision.judge.passing == ("good",)
    assert spec.to_config()["decision"] == {"type": "judge", "judge": "reply-judge", "pass": ["good"]}
    assert "labels" not in spec.to_config()
    pairwise = parse_spec({**JUDGED, "decision": {"type": "judge", "judge": "j", "compare": "live", "judge_trials": 3}})
    assert pairwise.decision.to_dict() == {"type": "judge", "judge": "j", "compare": "live", "judge_trials": 3}
    assert parse_spec(JUDGED).config_hash != pairwise.config_hash


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ({"type": "judge", "judge": "j"}, "decision.pass"),
        ({"type": "judge", "judge": "j", "pass": ["good"], "compare": "live"}, "decision.pass"),
        ({"type": "judge", "judge": "J!", "pass": ["good"]}, "decision.judge"),
        ({"type": "judge", "judge": "j", "pass": []}, "decision.pass"),
        ({"type": "judge", "judge": "j", "pass": ["x" * 200]}, "decision.pass"),
        ({"type": "judge", "judge": "j", "compare": "baseline"}, "decision.compare"),
        ({"type": "judge", "judge": "j", "pass": ["good"], "judge_trials": 2}, "decision.judge_trials"),
        ({"type": "judge", "judge": "j", "pass": ["good"], "judge_trials": True}, "decision.judge_trials"),
        ({"type": "judge", "judge": "j", "pass": ["good"], "pattern": "x"}, "decision.pattern"),
    ],
)
def test_a_malformed_judged_decision_is_refused_in_one_line(decision, field):
    with pytest.raises(SpecError) as err:
        parse_spec({**JUDGED, "decision": decision})
    assert err.value.field == field and "\n" not in str(err.value)
    schema_sees = field in ("decision.judge", "decision.compare") or decision.get("pass") in ([], ["x" * 200])
    if schema_sees or isinstance(decision.get("judge_trials"), bool):  # the parser's rules beyond a shape: parser only
        assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors({**JUDGED, "decision": decision}))


def test_labels_and_trials_do_not_go_with_a_judged_decision():
    with pytest.raises(SpecError, match="judge's labels decide"):
        parse_spec({**JUDGED, "labels": ["a", "b"]})
    with pytest.raises(SpecError, match="judge_trials"):
        parse_spec({**JUDGED, "trials": 3})


def test_a_judge_reads_answer_and_only_a_judge_may():
    judge = parse_spec(JUDGE)
    assert judge.kind == "judge" and judge.to_config()["kind"] == "judge" and answers_read(judge) == ("answer",)
    assert "kind" not in parse_spec(JUDGED).to_config()  # a plain prompt's config (and hash) is unchanged
    with pytest.raises(SpecError, match="only 'item' is available"):
        parse_spec({**JUDGE, "kind": "prompt"})
    with pytest.raises(SpecError, match="decides with labels"):
        parse_spec(
            {
                **{k: v for k, v in JUDGE.items() if k != "labels"},
                "decision": {"type": "judge", "judge": "x", "pass": ["g"]},
            }
        )
    with pytest.raises(SpecError, match="kind"):
        parse_spec({**JUDGE, "kind": "grader"})
    for data in (JUDGED, JUDGE):
        assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data)) == []


def test_the_answer_a_judge_reads_is_bounded_text():
    assert bounded_answer("fine\u202e\x1b[2J reply\n") == "fine[2J reply\n"  # as the report drops them
    big = "é" * MAX_ANSWER_BYTES
    assert len(bounded_answer(big).encode()) <= MAX_ANSWER_BYTES and bounded_answer(big) == "é" * (
        MAX_ANSWER_BYTES // 2
    )
    assert bounded_answer(None) == "" and bounded_answer(12) == "12" and bounded_answer("\ud800x") == "\ufffdx"


def test_a_judges_own_evaluation_reads_its_answers_from_the_rows_columns():
    judge = parse_spec(JUDGE)
    assert own_variables(judge, [{"ticket": "t", "answer": "a"}, {"ticket": "u"}]) == [{"answer": "a"}, {}]
    assert own_variables(parse_spec(JUDGED), [{"answer": "a"}]) is None


def test_the_answer_is_a_value_never_a_template(tmp_path):
    hostile = "{{ 7 * 7 }} {% for x in range(10**9) %}x{% endfor %} {{ ''.__class__ }}"
    source = JUDGE["messages"][0]["content"]
    assert render(source, {"ticket": "t"}, {"answer": hostile}) == f"Ticket: t\n<answer>{hostile}</answer>"
    pool = RenderPool()
    try:  # a plain template renders here, a filtered one in the sandbox process: alike
        (out,) = pool.render_many([source], [{"ticket": "t"}], variables=[{"answer": hostile}])
        assert out == [f"Ticket: t\n<answer>{hostile}</answer>"] and pool.stats["plain"] == 1
        filtered = source.replace("{{ answer }}", "{{ answer | trim }}")
        (out,) = pool.render_many([filtered], [{"ticket": "t"}], variables=[{"answer": f" {hostile} "}])
        assert out == [f"Ticket: t\n<answer>{hostile}</answer>"] and pool.stats["sandboxed"] == 1
        (missing,) = pool.render_many([source], [{"ticket": "t"}], variables=[{}])
        assert "'answer' is undefined" in str(missing)  # a judge given no answer: an error, never an empty one
    finally:
        pool.close()


def test_majority_of_a_judges_trials():
    assert majority(["good", "bad", "good"]) == "good"
    assert majority(["good", None, "bad"]) is None
    assert majority(["good"]) == "good" and majority([None]) is None

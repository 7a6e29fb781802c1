"""The Action's parts that need no server: path globs, annotations on a file's line,
exit codes, the inputs, and gate config errors that name the file and field."""

from __future__ import annotations

import datetime as dt

import pytest

from gate import gateconfig
from gate.action import ActionOptions, PathFilter, Problem, compile_glob, exit_code_for, field_line
from gate.action.outcome import commit_state, overall_status
from gate.contract.release import combine_exit_codes
from gate.errors import SpecError, UsageError
from gate.records import Update
from gate.report.update import UpdateReport


@pytest.mark.parametrize(
    "pattern,path,expected",
    [
        ("prompts/**/*.yaml", "prompts/a.yaml", True),
        ("prompts/**/*.yaml", "prompts/team/x/a.yaml", True),
        ("prompts/**/*.yaml", "prompts/a.yml", False),
        ("prompts/**/*.yaml", "other/prompts/a.yaml", False),
        ("prompts/**/*.yaml", "prompts.yaml", False),
        ("prompts/*.yaml", "prompts/team/a.yaml", False),
        ("prompts/*.yaml", "prompts/a.yaml", True),
        ("**/*.yaml", "a.yaml", True),
        ("**/*.yaml", "deep/er/a.yaml", True),
        ("prompts/**", "prompts/x/y/z.txt", True),
        ("prompts/**", "prompts", True),
        ("prompts/*.{yaml,yml}", "prompts/a.yml", True),
        ("prompts/?.yaml", "prompts/ab.yaml", False),
        ("prompts/[ab].yaml", "prompts/b.yaml", True),
        ("./prompts/*.yaml", "prompts/a.yaml", True),
        ("prompts/a+b.yaml", "prompts/a+b.yaml", True),
        ("prompts/**/x/*.yaml", "prompts/x/a.yaml", True),
    ],
)
def test_globs(pattern, path, expected):
    assert bool(compile_glob(pattern).match(path)) is expected


def test_several_globs_and_exclusions():
    match = PathFilter("prompts/**/*.yaml\n# a comment\nextra/*.yaml\n!prompts/drafts/**")
    assert match("prompts/a.yaml") and match("extra/b.yaml")
    assert not match("prompts/drafts/c.yaml") and not match("README.md")


def test_field_line_finds_nested_fields():
    text = "name: p\nmodel: m\nparams:\n  temperature: 9\nmessages:\n  - role: user\n    content: hi\n  - role: bot\n"
    assert field_line(text, "params.temperature") == 4
    assert field_line(text, "messages[1].role") == 8
    assert field_line(text, "messages[1]") == 8
    assert field_line(text, "nope") is None
    assert field_line("a: [", "a") is None


def test_annotation_escapes_workflow_command_data():
    p = Problem("prompts/a,b:c.yaml", 3, "name", "bad\nname 100%")
    assert p.annotation() == "::error file=prompts/a%2Cb%3Ac.yaml,line=3,title=prompt-gate::name: bad%0Aname 100%25"


T0 = dt.datetime(2024, 5, 1, 12, 0, 0)


def test_exit_codes():
    def rep(status):
        u = Update(1, "p", "check", status, {}, "h", 0, {}, None, T0, None, None)
        return UpdateReport(u, [], {})

    assert exit_code_for([rep("PASSED"), rep("APPLIED")], []) == 0
    assert exit_code_for([rep("PASSED"), rep("REJECTED")], []) == 1
    assert exit_code_for([rep("REJECTED")], [], fail_on_reject=False) == 0
    assert exit_code_for([rep("REJECTED"), rep("RUNNING")], [], fail_on_reject=False) == 3
    assert exit_code_for([rep("REJECTED"), rep("FAILED")], []) == 2
    assert exit_code_for([rep("PASSED")], [Problem("f", None, None, "bad")]) == 2
    assert exit_code_for([], [Problem("f", None, None, "not gated", "warning")]) == 0
    assert combine_exit_codes([0, 3, 1]) == 1 and combine_exit_codes([]) == 0


def test_a_canary_s_state_is_in_the_commit_status_and_a_rollback_is_no_success():
    """An APPLIED update's canary (gate.report.canary): in progress the status says it is not
    yet judged by production; rolled back or undecided it is a failure with the figures."""
    u = Update(1, "p", "apply", "APPLIED", {}, "h", 0, {}, None, T0, None, None)
    rollout = {"id": 3, "status": "CANARY", "canary_version": 2, "stable_version": 1, "canary_percent": 10}
    during = UpdateReport(u, [], {}, rollout=rollout)
    assert during.exit_code == 0 and overall_status([during], []) == "applied"
    assert commit_state([during], [], 60) == (
        "success",
        "1 prompt applied every bar; p canary in progress, not yet judged by production",
    )
    arms = {"canary": {"n": 200, "correct": 119}, "stable": {"n": 1000, "correct": 919}}
    for status in ("ROLLED_BACK", "UNDECIDED"):
        ended = UpdateReport(u, [], {}, rollout={**rollout, **arms, "status": status})
        assert ended.exit_code == 1 and exit_code_for([ended], []) == 1
        assert overall_status([ended], []) == "rolled-back"
        state, said = commit_state([ended], [], 60)
        assert state == "failure" and said.startswith("p applied, then rolled back by rollout 3")
        assert "canary 59.5 % (200 outcomes) vs stable 91.9 % (1,000 outcomes)" in said
    promoted = UpdateReport(u, [], {}, rollout={**rollout, **arms, "status": "PROMOTED"})
    assert promoted.exit_code == 0 and commit_state([promoted], [], 60)[0] == "success"


def test_options_from_env_inputs():
    opts = ActionOptions.from_env(
        {
            "INPUT_PROMPTS": "a/*.yaml",
            "INPUT_GATE-CONFIG": "g.yaml",
            "INPUT_MODE": "check",
            "INPUT_RUN_WORKERS": "true",
            "INPUT_TIMEOUT": "12",
            "INPUT_FAIL_ON_REJECT": "false",
            "INPUT_COMMENT": "",
            "INPUT_GITHUB_TOKEN": "t",
        }
    )
    assert (
        opts.prompts,
        opts.gate_config,
        opts.mode,
        opts.run_workers,
        opts.timeout,
        opts.fail_on_reject,
        opts.comment,
        opts.github_token,
    ) == ("a/*.yaml", "g.yaml", "check", True, 12.0, False, True, "t")
    with pytest.raises(UsageError):
        ActionOptions.from_env({"INPUT_MODE": "yolo"})
    with pytest.raises(UsageError):
        ActionOptions.from_env({"INPUT_RUN_WORKERS": "maybe"})


# --- gate config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,field",
    [
        ("datasets: {}\nprompts: {}\nextra: 1\n", "extra"),
        ("datasets:\n  d1: {source: d.csv, colour: red}\n", "datasets.d1.colour"),
        ("datasets:\n  d1: {id_column: x}\n", "datasets.d1.source"),
        ("datasets:\n  d1: {source: missing.csv}\n", "datasets.d1.source"),
        ("datasets:\n  Bad Name: {source: d.csv}\n", "datasets.Bad Name"),
        (
            "datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d2, min_accuracy: 0.9}]\n",
            "prompts.p[0].dataset",
        ),
        (
            "datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d1, min_accuracy: 90}]\n",
            "prompts.p[0].min_accuracy",
        ),
        ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d1}]\n", "prompts.p[0].min_accuracy"),
        ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: []\n", "prompts.p"),
        (
            "datasets:\n  d1: {source: d.csv}\n"
            "prompts:\n  p: [{dataset: d1, min_accuracy: 0.9}, {dataset: d1, min_accuracy: 0.8}]\n",
            "prompts.p[1].dataset",
        ),
    ],
)
def test_gate_config_errors_name_file_and_field(tmp_path, text, field):
    (tmp_path / "d.csv").write_text("item_id,expected_decision,text\n1,yes,a\n")
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        gateconfig.load_config(path, display_path="gate.yaml")
    assert info.value.file == "gate.yaml" and info.value.field == field, str(info.value)

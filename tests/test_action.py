"""The GitHub Action: changed-file detection and globs, validation annotations, the one PR
comment (created, then edited), commit status, outputs and step summary, exit codes, the
gate config (synced on push, only shown on a PR), apply on push, the Markdown report
(escaping, the 65,536-character limit, golden files) and an end-to-end run of action.yml's
own `run:` steps against MariaDB, the local model server and a fake GitHub."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from fake_github import file_entry
from gate import gateconfig
from gate.action import ActionOptions, PathFilter, Problem, compile_glob, exit_code_for, field_line
from gate.service import combine_exit_codes
from gate.errors import NotFound, SpecError, UsageError
from gate.github import GitHubClient
from gate.llm import CallResult
from gate.markdown import (GITHUB_COMMENT_LIMIT, MARKER, UnescapedOutput, environment, md, render_markdown,
                           render_report_markdown)
from gate.models import ItemSample, Update
from gate.service import Gate, RunReport, UpdateReport
from gate.spec import load_spec

from action_harness import (BASE, GOLDEN, HEAD1, HEAD2, HOSTILE, REPO, ROOT, TOKEN, act, fast, github_env,
                            make_workspace, pr_payload, push_payload, read_outputs, unescaped_pipes, use_candidate)


# --- globs and changed files ------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,path,expected", [
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
])
def test_globs(pattern, path, expected):
    assert bool(compile_glob(pattern).match(path)) is expected


def test_several_globs_and_exclusions():
    match = PathFilter("prompts/**/*.yaml\n# a comment\nextra/*.yaml\n!prompts/drafts/**")
    assert match("prompts/a.yaml") and match("extra/b.yaml")
    assert not match("prompts/drafts/c.yaml") and not match("README.md")


def test_changed_files_are_listed_across_pages(github):
    files = [f"prompts/p{i:03}.yaml" for i in range(230)] + [file_entry("prompts/old.yaml", "removed")]
    github.add_pull(3, HEAD1, files)
    client = GitHubClient(TOKEN, REPO, github.base_url)
    changed = client.pull_request_files(3)
    assert len(changed) == 231 and len(github.calls_to("GET", r"/pulls/3/files$")) == 3
    assert [f.path for f in changed if not f.exists] == ["prompts/old.yaml"]


def test_push_files_use_compare_or_the_commit(github):
    client = GitHubClient(TOKEN, REPO, github.base_url)
    github.add_compare(BASE, HEAD1, ["gate.yaml", "prompts/a.yaml"])
    github.add_commit(HEAD1, ["prompts/only-head.yaml"])
    assert [f.path for f in client.push_files(BASE, HEAD1)] == ["gate.yaml", "prompts/a.yaml"]
    assert [f.path for f in client.push_files("0" * 40, HEAD1)] == ["prompts/only-head.yaml"]   # new branch
    assert [f.path for f in client.push_files("d4" * 20, HEAD1)] == ["prompts/only-head.yaml"]  # force push
    # the compare API stops at 300 files: then every pushed commit's files (paginated) count too
    many = [f"prompts/m{i:03}.yaml" for i in range(320)]
    github.add_commit("e5" * 20, many[:200])
    github.add_commit("f6" * 20, many[200:])
    github.add_compare(BASE, HEAD2, many, commits=["e5" * 20, "f6" * 20])
    assert sorted(f.path for f in client.push_files(BASE, HEAD2)) == many


def test_comment_upsert_finds_its_marker_only_at_the_start(github):
    github.add_pull(4, HEAD1, [])
    quoted = github.add_issue_comment(4, f"> {MARKER}\n> quoting the bot")
    client = GitHubClient(TOKEN, REPO, github.base_url)
    first, created = client.upsert_comment(4, f"{MARKER}\nv1")
    second, created_again = client.upsert_comment(4, f"{MARKER}\nv2")
    assert created and not created_again and first == second != quoted
    assert [c["body"] for c in github.comments_on(4)] == [f"> {MARKER}\n> quoting the bot", f"{MARKER}\nv2"]
    assert client.upsert_comment(5, "x", create=False) == (None, False)


# --- annotations -----------------------------------------------------------------------------------------

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


def test_options_from_env_inputs():
    opts = ActionOptions.from_env({"INPUT_PROMPTS": "a/*.yaml", "INPUT_GATE-CONFIG": "g.yaml", "INPUT_MODE": "check",
                                   "INPUT_RUN_WORKERS": "true", "INPUT_TIMEOUT": "12", "INPUT_FAIL_ON_REJECT": "false",
                                   "INPUT_COMMENT": "", "INPUT_GITHUB_TOKEN": "t"})
    assert (opts.prompts, opts.gate_config, opts.mode, opts.run_workers, opts.timeout, opts.fail_on_reject,
            opts.comment, opts.github_token) == ("a/*.yaml", "g.yaml", "check", True, 12.0, False, True, "t")
    with pytest.raises(UsageError):
        ActionOptions.from_env({"INPUT_MODE": "yolo"})
    with pytest.raises(UsageError):
        ActionOptions.from_env({"INPUT_RUN_WORKERS": "maybe"})


# --- gate config ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,field", [
    ("datasets: {}\nprompts: {}\nextra: 1\n", "extra"),
    ("datasets:\n  d1: {source: d.csv, colour: red}\n", "datasets.d1.colour"),
    ("datasets:\n  d1: {id_column: x}\n", "datasets.d1.source"),
    ("datasets:\n  d1: {source: missing.csv}\n", "datasets.d1.source"),
    ("datasets:\n  Bad Name: {source: d.csv}\n", "datasets.Bad Name"),
    ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d2, min_accuracy: 0.9}]\n", "prompts.p[0].dataset"),
    ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d1, min_accuracy: 90}]\n", "prompts.p[0].min_accuracy"),
    ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d1}]\n", "prompts.p[0].min_accuracy"),
    ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: []\n", "prompts.p"),
    ("datasets:\n  d1: {source: d.csv}\nprompts:\n  p: [{dataset: d1, min_accuracy: 0.9}, {dataset: d1, min_accuracy: 0.8}]\n",
     "prompts.p[1].dataset"),
])
def test_gate_config_errors_name_file_and_field(tmp_path, text, field):
    (tmp_path / "d.csv").write_text("item_id,expected_decision,text\n1,yes,a\n")
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        gateconfig.load_config(path, display_path="gate.yaml")
    assert info.value.file == "gate.yaml" and info.value.field == field, str(info.value)


def test_sync_is_idempotent_and_the_file_is_the_whole_truth(gate, tmp_path):
    ws = make_workspace(tmp_path)
    first = gateconfig.sync(gate, ws / "gate.yaml")
    assert first.applied and len(first.changes) == 8
    assert {(m.prompt_name, m.dataset_name, m.min_accuracy) for m in gate.mappings("ticket-urgency")} == {
        ("ticket-urgency", "urgency-hard", Decimal("0.8")), ("ticket-urgency", "urgency-regression", Decimal("0.9"))}
    assert gateconfig.sync(gate, ws / "gate.yaml").changes == ()
    # a bar the file does not declare, on a prompt the file does not list: unmapped by the next sync
    gate.map_dataset("unlisted-prompt", "urgency-hard", "0.5")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][1]["min_accuracy"] = 0.75
    del cfg["prompts"]["refund-eligibility"]
    cfg["datasets"]["urgency-hard"]["label_column"] = "expected_decision"
    del cfg["datasets"]["refund-hard"]
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    planned = gateconfig.diff(gate, ws / "gate.yaml")
    assert not planned.applied and sorted(planned.lines()) == sorted([
        "bar refund-eligibility × refund-hard: removed (was 0.8)",
        "bar refund-eligibility × refund-regression: removed (was 0.9)",
        "bar ticket-urgency × urgency-hard: min accuracy 0.8 → 0.75",
        "bar unlisted-prompt × urgency-hard: removed (was 0.5)",
        "dataset refund-hard: no longer declared (stays registered, gates nothing)"])
    assert len(gate.mappings()) == 5                                    # diff changed nothing
    gateconfig.sync(gate, ws / "gate.yaml")
    assert {(m.prompt_name, m.dataset_name, str(Decimal(m.min_accuracy).normalize())) for m in gate.mappings()} == {
        ("ticket-urgency", "urgency-hard", "0.75"), ("ticket-urgency", "urgency-regression", "0.9")}
    assert gateconfig.diff(gate, ws / "gate.yaml").changes == ()
    assert "refund-hard" in {ds.name for ds, _ in gate.list_datasets()}


# --- the Markdown report ---------------------------------------------------------------------------------

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)


def _run(ds, bar, matches, scored, failures=(), *, status="DONE", reason=None, confusion=None, errors=0,
         run_id=1, invalid=0):
    passed = None if status != "DONE" else matches / scored >= float(bar)
    metrics = None if status not in ("DONE", "ERROR") else {
        "total": scored + errors, "scored": scored, "matches": matches, "mismatches": scored - matches,
        "errors": errors, "invalid": invalid, "confusion": confusion or {}}
    return RunReport(run_id=run_id, dataset=ds, bar=Decimal(bar), status=status, total=scored + errors, scored=scored,
                     matches=matches, errors=errors, pending=0, accuracy=(matches / scored) if scored else None,
                     passed=passed, reason=reason, row_count=scored + errors, content_hash="3f" * 32,
                     source_version="sha256:" + "9e" * 32, source_uri="/ws/datasets/x.csv", metrics=metrics,
                     failures=list(failures))


def _update(uid, prompt, status, mode="check", reason=None, path=None):
    return Update(uid, prompt, mode, status, {"name": prompt, "model": "gpt-4o-mini"}, "h" * 64, 3,
                  {"repo": REPO, "pr": 12, "sha": HEAD1, "path": path or f"prompts/{prompt}.yaml", "author": "octocat"},
                  reason, T0, T0, T0)


def golden_reports(hostile: str = "") -> list[UpdateReport]:
    rejected = UpdateReport(
        _update(41, "ticket-urgency", "REJECTED", reason="missed: urgency-hard 43.8% < bar 80%"),
        [_run("urgency-hard", "0.8", 7, 16, run_id=1, confusion={"urgent": {"urgent": 1, "routine": 8},
                                                                  "routine": {"routine": 6, "urgent": 1}},
              failures=[ItemSample("urg-hard-01" + hostile, "urgent", "routine", "MISMATCH", "routine" + hostile, None),
                        ItemSample("urg-hard-02", "urgent", "(invalid)", "MISMATCH", "Perhaps? It depends.", None),
                        ItemSample("urg-hard-03", "urgent", None, "ERROR", None, "model call failed: 500 after 3 attempts")]),
         _run("urgency-regression", "0.9", 89, 98, run_id=2, confusion={"urgent": {"urgent": 32, "routine": 6},
                                                                        "routine": {"routine": 57, "urgent": 3}})],
        {"retried_items": 2, "extra_attempts": 3, "max_attempt": 3})
    passed = UpdateReport(
        _update(42, "refund-eligibility", "PASSED", reason="every bar cleared (refund-hard 92.3% ≥ 80%; "
                                                           "refund-regression 100.0% ≥ 90%)"),
        [_run("refund-hard", "0.8", 12, 13, run_id=3, confusion={"eligible": {"eligible": 6}, "not_eligible":
                                                                 {"not_eligible": 6, "eligible": 1}},
              failures=[ItemSample("ref-hard-07", "not_eligible", "eligible", "MISMATCH", "eligible", None)]),
         _run("refund-regression", "0.9", 70, 70, run_id=4, confusion={"eligible": {"eligible": 40},
                                                                       "not_eligible": {"not_eligible": 30}})],
        {"retried_items": 0, "extra_attempts": 0, "max_attempt": 1})
    return [rejected, passed]


def golden_pr_markdown(hostile: str = "", **kw) -> str:
    problems = [Problem("prompts/broken.yaml", 7, "params.temprature", "unknown parameter; known are temperature, ...")]
    config = gateconfig.SyncResult("gate.yaml", (
        gateconfig.Change("bar-changed", "ticket-urgency × urgency-hard", "0.8", "0.6", ("ticket-urgency", "urgency-hard")),
        gateconfig.Change("dataset-added", "urgency-extra", None, "datasets/urgency-extra.csv", ("urgency-extra",))),
        applied=False)
    context = {"event": "pull_request", "repo": REPO, "pr": 12, "sha": HEAD1, "mode": "check",
               "run_url": "https://github.example/acme/prompts/actions/runs/42",
               "skipped": [("prompts/new-prompt.yaml", "prompt new-prompt is not gated: no dataset is mapped to it")]}
    return render_markdown(golden_reports(hostile), validation_errors=problems, config_changes=config,
                           context=context, **kw)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PROMPTGATE_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with PROMPTGATE_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (PROMPTGATE_UPDATE_GOLDEN=1 rewrites it)"


def test_golden_pr_comment():
    text = golden_pr_markdown()
    assert text.startswith(MARKER) and "takes effect after merge" in text and "```mermaid" in text
    check_golden("pr_comment.md", text)


def test_golden_push_comment():
    reports = golden_reports()[1:]
    applied = UpdateReport(_update(43, "refund-eligibility", "APPLIED", mode="apply",
                                   reason=reports[0].update.reason), reports[0].runs, reports[0].attempts)
    config = gateconfig.SyncResult("gate.yaml", (gateconfig.Change(
        "bar-added", "refund-eligibility × refund-hard", None, "0.8", ("refund-eligibility", "refund-hard")),),
        applied=True)
    text = render_markdown([applied], config_changes=config,
                           context={"event": "push", "ref": "main", "sha": HEAD2, "mode": "apply"})
    check_golden("push_comment.md", text)


def test_golden_single_report_for_the_demo():
    text = render_report_markdown(golden_reports()[0])
    assert not text.startswith(MARKER)
    check_golden("demo_report.md", text)


@pytest.mark.parametrize("raw", [HOSTILE, "@org/team", "<img src=x onerror=alert(1)>", "a|b", "``` code",
                                 "https://evil.example/x", "line1\r\nline2\u2028line3", "\u202eevil", "- [ ] task",
                                 "#123 and GH-7", "$x^2$", "&lt;not an entity&gt;"])
def test_md_makes_text_inert(raw):
    out = md(raw)
    assert "\n" not in out and "\r" not in out and "\u2028" not in out and "\u202e" not in out
    assert "<" not in out and ">" not in out
    assert not re.search(r"@[A-Za-z0-9]", out)                         # no @-mention
    assert not re.search(r"(?<!\\)[`|\[\]*$]", out)                     # table, code, link, emphasis, math
    assert not re.search(r"https?://|www\.", out)                       # no autolink
    assert not re.search(r"#\d|GH-\d", out)                             # no issue reference
    assert not out.startswith("-")
    assert md(out) is out                                               # escaping is done once


def test_every_template_value_goes_through_a_filter():
    env = environment()
    with pytest.raises(UnescapedOutput):
        env.from_string("{{ x }}").render(x="<img src=x>")
    with pytest.raises(UnescapedOutput):
        env.from_string("{{ x ~ 'y' }}").render(x="a")
    assert env.from_string("{{ x|md }} {{ n }}").render(x="<b>", n=3) == "&lt;b&gt; 3"
    # every {{ }} in the shipped templates ends in a filter (the finalize hook backs this up)
    for template in (ROOT / "gate" / "templates").glob("*.j2"):
        for expr in re.findall(r"{{(.*?)}}", template.read_text(), re.S):
            assert "|" in expr or expr.strip() in {"marker", "headline", "icon", "v.icon", "n"}, (template.name, expr)


def test_hostile_rows_and_outputs_cannot_break_the_report():
    text = golden_pr_markdown(HOSTILE + "`" * 5 + "x" * 70000)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert "<img" not in text and "@org/team" not in text and "https://evil" not in text
    assert "[link](" not in text
    rows = [line for line in text.splitlines() if line.startswith("| urg-hard-01")]
    assert len(rows) == 1 and unescaped_pipes(rows[0]) == 5            # 4 cells, the hostile | escaped
    assert "x" * 200 not in text                                       # output excerpt cut
    # every table row keeps its column count
    for block in re.split(r"\n\n", text):
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        if lines:
            assert len({unescaped_pipes(ln) for ln in lines}) == 1, block


def test_report_stays_under_the_comment_limit_with_a_note():
    failures = [ItemSample(f"item-{i}", "yes", "no", "MISMATCH", "<b>" * 300 + "y" * 70000, None) for i in range(5)]
    many = [UpdateReport(_update(100 + i, f"prompt-{i}", "REJECTED", reason="missed"),
                         [_run(f"ds-{i}-{j}", "0.9", 1, 2, failures, run_id=j,
                               confusion={"yes": {"yes": 1}, "no": {"yes": 1}}) for j in range(3)], {})
            for i in range(12)]
    text = render_markdown(many, excerpt_chars=2000)
    assert len(text) <= GITHUB_COMMENT_LIMIT and text.startswith(MARKER)
    assert "left out to stay under GitHub's 65536-character limit" in text
    problems = [Problem(f"prompts/p{i}.yaml", i, "name", "bad " * 50) for i in range(3000)]
    huge = render_markdown([], validation_errors=problems)
    assert len(huge) <= GITHUB_COMMENT_LIMIT and "This report was cut" in huge


# --- the Action against a gate database ------------------------------------------------------------------

def test_pull_request_check_comment_status_outputs(mysql_gate, model, github, tmp_path):
    gate = fast(mysql_gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")                      # what main synced earlier
    use_candidate(ws, "ticket-urgency-v2")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][1]["min_accuracy"] = 0.1     # the PR tries to lower its own bar
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    github.add_pull(12, HEAD1, ["prompts/ticket-urgency.yaml", "gate.yaml", "README.md", "docs/prompts/x.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD1), "m" * 40, "refs/pull/12/merge")

    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    outputs = read_outputs(env["GITHUB_OUTPUT"])
    ids = json.loads(outputs["tracking-ids"])
    assert outputs["status"] == "passed" and len(ids) == 1
    report = gate.status(ids[0])
    assert report.status == "PASSED" and report.update.mode == "check"
    assert report.update.source == {"repo": REPO, "pr": 12, "sha": HEAD1, "path": "prompts/ticket-urgency.yaml",
                                    "author": "octocat"}
    assert {r.dataset: r.bar for r in report.runs}["urgency-hard"] == Decimal("0.8")   # the database's bar
    assert {m.dataset_name: m.min_accuracy for m in gate.mappings("ticket-urgency")}["urgency-hard"] == Decimal("0.8")
    comments = github.comments_on(12)
    assert len(comments) == 1 and comments[0]["body"].startswith(MARKER)
    body = comments[0]["body"]
    assert "takes effect after merge" in body and "min accuracy 0.8 → 0.1" in body and "PASSED" in body
    assert Path(outputs["report-path"]).read_text() == body
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().strip() == body.strip()
    assert [(s["sha"], s["state"], s["context"]) for s in github.repo.statuses] == [
        (HEAD1, "pending", "prompt-gate"), (HEAD1, "success", "prompt-gate")]
    assert github.repo.statuses[-1]["target_url"] == "https://github.example/acme/prompts/actions/runs/42"
    with pytest.raises(NotFound):
        gate.live("ticket-urgency")                               # check mode never goes live

    # a second push to the PR: a weaker candidate; the same comment is edited, not duplicated
    use_candidate(ws, "ticket-urgency-v2-weak")
    github.repo.pulls[12]["head"] = HEAD2
    env2 = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD2), "n" * 40, "refs/pull/12/merge")
    code, log = act(env2, gate, gate_config="gate.yaml")
    assert code == 1, log
    assert read_outputs(env2["GITHUB_OUTPUT"])["status"] == "rejected"
    comments = github.comments_on(12)
    assert len(comments) == 1 and "REJECTED" in comments[0]["body"] and "urgency-hard" in comments[0]["body"]
    assert len(github.calls_to("POST", r"/issues/12/comments$")) == 1
    assert len(github.calls_to("PATCH", r"/issues/comments/\d+$")) == 1
    assert github.repo.statuses[-1]["sha"] == HEAD2 and github.repo.statuses[-1]["state"] == "failure"

    # fail-on-reject off: the same verdict, exit 0, the status still says failure
    env3 = github_env(tmp_path, github, ws, "pull_request", pr_payload(12, HEAD2), "n" * 40, "refs/pull/12/merge")
    code, _ = act(env3, gate, gate_config="gate.yaml", fail_on_reject=False)
    assert code == 0 and github.repo.statuses[-1]["state"] == "failure"

    # release pipelines: wait --sha
    exit_code, reports = gate.wait_for_sha(HEAD2, timeout=5)
    assert exit_code == 1 and [r.status for r in reports] == ["REJECTED"]
    assert gate.wait_for_sha(HEAD1, prompt="ticket-urgency")[0] == 0
    with pytest.raises(NotFound):
        gate.wait_for_sha("f" * 40, timeout=0.2)


def test_invalid_prompt_gets_an_annotation_and_nothing_is_submitted(tmp_path, github, sqlite_url, model):
    gate = fast(Gate.connect(sqlite_url, upgrade=True))
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    (ws / "prompts" / "broken.yaml").write_text(
        "name: broken\nmodel: m\nparams:\n  temperature: 0\n  temprature: 1\nmessages:\n  - {role: user, content: hi}\n")
    (ws / "prompts" / "ungated.yaml").write_text("name: ungated\nmodel: m\nmessages:\n  - {role: user, content: hi}\n")
    (ws / "prompts" / "twin.yaml").write_text((ws / "prompts" / "refund-eligibility.yaml").read_text())
    github.add_pull(7, HEAD1, ["prompts/broken.yaml", "prompts/ungated.yaml", "prompts/refund-eligibility.yaml",
                               "prompts/twin.yaml", file_entry("prompts/gone.yaml", "removed")])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(7, HEAD1), "m" * 40, "refs/pull/7/merge")
    code, log = act(env, gate, gate_config="gate.yaml", run_workers=True)
    assert code == 2, log
    assert "::error file=prompts/broken.yaml,line=5,title=prompt-gate::params.temprature: unknown parameter" in log
    assert "::error file=prompts/twin.yaml,line=" in log and "also defined in prompts/refund-eligibility.yaml" in log
    assert "::warning file=prompts/ungated.yaml,title=prompt-gate::prompt ungated is not gated" in log
    assert "::warning file=prompts/gone.yaml" in log
    outputs = read_outputs(env["GITHUB_OUTPUT"])
    assert outputs["status"] == "invalid" and len(json.loads(outputs["tracking-ids"])) == 1   # the valid one ran
    body = github.comments_on(7)[0]["body"]
    assert "Invalid prompt files" in body and "temprature" in body and "Not evaluated" in body
    assert github.repo.statuses[-1]["state"] == "failure"
    assert [u.prompt_name for u in gate.list_updates()] == ["refund-eligibility"]
    gate.close()


def test_nothing_to_evaluate_writes_no_comment(tmp_path, github, sqlite_url):
    gate = Gate.connect(sqlite_url, upgrade=True)
    ws = make_workspace(tmp_path)
    github.add_pull(8, HEAD1, ["README.md", "prompts/notes.txt"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(8, HEAD1), "m" * 40, "refs/pull/8/merge")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    assert github.comments_on(8) == [] and github.repo.statuses[-1]["state"] == "success"
    assert read_outputs(env["GITHUB_OUTPUT"])["status"] == "skipped"
    with pytest.raises(UsageError, match="unmerged prompts live"):
        act(env, gate, mode="apply")
    gate.close()


def test_push_to_default_branch_syncs_then_applies(mysql_gate, model, github, tmp_path):
    gate = fast(mysql_gate)
    ws = make_workspace(tmp_path)
    gateconfig.sync(gate, ws / "gate.yaml")
    first = gate.submit(load_spec(ws / "prompts" / "ticket-urgency.yaml"), "apply", {"key": "seed"})
    from workers.supervisor import run_until_terminal
    assert run_until_terminal(gate, [first], timeout=30)[0].status == "APPLIED"
    assert gate.live("ticket-urgency").version == 1
    # the merged change: a better candidate, and a new bar in the gate config
    use_candidate(ws, "ticket-urgency-v2")
    cfg = yaml.safe_load((ws / "gate.yaml").read_text())
    cfg["prompts"]["ticket-urgency"][0]["min_accuracy"] = 0.85
    (ws / "gate.yaml").write_text(yaml.safe_dump(cfg))
    github.add_compare(BASE, HEAD2, ["gate.yaml", "prompts/ticket-urgency.yaml", "README.md"])
    env = github_env(tmp_path, github, ws, "push", push_payload(BASE, HEAD2), HEAD2, "refs/heads/main")
    code, log = act(env, gate, gate_config="gate.yaml")
    assert code == 0, log
    assert {m.dataset_name: m.min_accuracy for m in gate.mappings("ticket-urgency")}["urgency-regression"] == \
        Decimal("0.85")                                           # synced before the submit
    uid, = json.loads(read_outputs(env["GITHUB_OUTPUT"])["tracking-ids"])
    report = gate.status(uid)
    assert report.status == "APPLIED" and {r.dataset: r.bar for r in report.runs}["urgency-regression"] == \
        Decimal("0.85")
    live = gate.live("ticket-urgency")
    assert live.version == 2 and live.applied_update_id == uid
    assert read_outputs(env["GITHUB_OUTPUT"])["status"] == "applied"
    comment, = github.repo.commit_comments
    assert comment["sha"] == HEAD2 and "APPLIED" in comment["body"] and "Synced into the gate" in comment["body"]
    assert github.repo.statuses[-1]["sha"] == HEAD2 and github.repo.statuses[-1]["state"] == "success"
    # a push to another branch is only checked
    env2 = github_env(tmp_path, github, ws, "push", {**push_payload(BASE, HEAD2), "ref": "refs/heads/dev"},
                      HEAD2, "refs/heads/dev")
    code, _ = act(env2, gate, gate_config="gate.yaml")
    uid2, = json.loads(read_outputs(env2["GITHUB_OUTPUT"])["tracking-ids"])
    assert code == 0 and gate.status(uid2).update.mode == "check" and gate.live("ticket-urgency").version == 2


def test_hostile_dataset_rows_and_model_output_are_escaped_in_the_comment(tmp_path, github, sqlite_url):
    """Real pipeline: a dataset row with @org/team, <img>, | and backticks in its id, and a
    model that answers with a 70,000-character output (the executor keeps 4,000)."""
    from workers import ROLES
    from workers.supervisor import WorkerProcess
    gate = fast(Gate.connect(sqlite_url, upgrade=True))
    ws = make_workspace(tmp_path)
    with (ws / "datasets" / "hostile.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "text"])
        w.writerow(["row|@org/team<img src=x>`tick`", "yes", "first"])
        for i in range(5):
            w.writerow([f"ok-{i}", "no", "fine"])
    gate.register_dataset("hostile", "datasets/hostile.csv", base_dir=ws)
    gate.map_dataset("hostile-prompt", "hostile", "0.9")
    (ws / "prompts" / "hostile.yaml").write_text(
        "name: hostile-prompt\nmodel: m\nmessages:\n  - {role: user, content: '{{ item.text }}'}\n")

    def loud_model(spec, item, **_):
        if item["text"] == "first":
            return CallResult("no", True, "no " + HOSTILE + " ```" + "z" * 70000, 1)
        return CallResult("no", True, "no", 1)

    github.add_pull(9, HEAD1, ["prompts/hostile.yaml"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(9, HEAD1), "m" * 40, "refs/pull/9/merge")
    worker = WorkerProcess(gate, ROLES, call=loud_model).start()
    try:
        code, log = act(env, gate, run_workers=False, timeout=30)
    finally:
        worker.shutdown(10)
    assert code == 1, log
    body = github.comments_on(9)[0]["body"]
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert "<img" not in body and "@org/team" not in body and "https://evil" not in body and "z" * 500 not in body
    row, = [ln for ln in body.splitlines() if ln.startswith("| row")]
    assert unescaped_pipes(row) == 5 and "@\u200dorg/team" in row and "\\`tick\\`" in row


# --- action.yml, end to end ------------------------------------------------------------------------------

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(text, ctx: dict) -> str:
    """Substitute ${{ a.b.c }} the way a runner does (only plain property paths)."""
    if not isinstance(text, str):
        return str(text).lower() if isinstance(text, bool) else str(text)

    def one(m):
        value = ctx
        for part in m.group(1).split("."):
            if not isinstance(value, dict) or part not in value:
                raise AssertionError(f"expression {m.group(0)} is not available to the runner emulation")
            value = value[part]
        return str(value).lower() if isinstance(value, bool) else str(value)
    return EXPR.sub(one, text)


def workflow_from_docs() -> dict:
    doc = (ROOT / "docs" / "github-action.md").read_text()
    section = doc.split("## The workflow", 1)[1]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def test_action_yml_passes_inputs_only_through_env():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"database-url", "prompts", "gate-config", "mode", "run-workers", "timeout",
                                     "fail-on-reject", "comment", "github-token", "comment-author"}
    assert set(action["outputs"]) == {"status", "tracking-ids", "report-path"}
    for step in action["runs"]["steps"]:
        assert "${{" not in step["run"], f"step {step['id']} interpolates an expression into shell code"
    workflow = workflow_from_docs()
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write", "statuses": "write"}
    assert workflow[True if True in workflow else "on"].keys() >= {"pull_request", "push"}


def test_end_to_end_action_yml_steps(mysql_url, llm, github, tmp_path):
    setup = Gate.connect(mysql_url, upgrade=True)                  # the gate's operator ran db upgrade and
    ws = make_workspace(tmp_path)                                  # main synced the gate config earlier
    gateconfig.sync(setup, ws / "gate.yaml")
    setup.close()
    use_candidate(ws, "ticket-urgency-v2")
    github.add_pull(21, HEAD1, ["prompts/ticket-urgency.yaml", "README.md"])
    env = github_env(tmp_path, github, ws, "pull_request", pr_payload(21, HEAD1), "m" * 40, "refs/pull/21/merge")

    workflow = workflow_from_docs()
    steps = workflow["jobs"]["gate"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout")         # the workspace above stands in for it
    gate_step, = [s for s in steps if "prompt-gate@" in s.get("uses", "")]
    secrets = {"PROMPTGATE_DATABASE_URL": mysql_url, "OPENAI_API_KEY": "test-key"}
    wf_ctx = {"secrets": secrets, "github": {"token": TOKEN}}
    given = {k: evaluate(v, wf_ctx) for k, v in (gate_step.get("with") or {}).items()}
    step_env = {k: evaluate(v, wf_ctx) for k, v in (gate_step.get("env") or {}).items()}

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {}
    for name, spec in action["inputs"].items():
        inputs[name] = given[name] if name in given else evaluate(spec.get("default", ""), wf_ctx)
    assert not set(given) - set(action["inputs"]), "the documented workflow passes an unknown input"
    job_env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}, **env,
               "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_TOKEN": "",
               "OPENAI_BASE_URL": llm.base_url,                     # a repository variable in real use
               "PROMPTGATE_POLL_INTERVAL": "0.02", "PROMPTGATE_POLL_MAX_INTERVAL": "0.1",
               "PYTHONPATH": str(ROOT)}                             # the package as the skipped install left it
    ctx = {"inputs": inputs, "github": {"action_path": str(ROOT), "token": TOKEN}, "steps": {}}
    results = []
    for step in action["runs"]["steps"]:
        out_file = tmp_path / f"step-{step['id']}.out"
        out_file.write_text("")
        if step["id"] == "install":
            # Skipped: creating a venv and pip-installing the action's path needs the package
            # index. The package is importable from the checkout (PYTHONPATH), so the step's
            # only effect, its `python` output, is what it would be in a venv with it installed.
            probe = subprocess.run([sys.executable, "-c", "import gate.cli"], env=job_env, cwd=ws)
            assert probe.returncode == 0
            out_file.write_text(f"python={sys.executable}\n")
        else:
            assert step["shell"] == "bash"
            script = tmp_path / f"step-{step['id']}.sh"
            script.write_text(evaluate(step["run"], ctx))
            run_env = {**job_env, **step_env, **{k: evaluate(v, ctx) for k, v in (step.get("env") or {}).items()},
                       "GITHUB_OUTPUT": str(out_file)}
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=run_env,
                                  cwd=ws, capture_output=True, text=True, timeout=120)
            results.append(proc)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        ctx["steps"][step["id"]] = {"outputs": read_outputs(out_file)}
    outputs = {name: evaluate(spec["value"], ctx) for name, spec in action["outputs"].items()}
    assert outputs["status"] == "passed", results[-1].stdout
    ids = json.loads(outputs["tracking-ids"])
    assert len(ids) == 1 and Path(outputs["report-path"]).is_file()
    body, = [c["body"] for c in github.comments_on(21)]
    assert body.startswith(MARKER) and "ticket-urgency: PASSED" in body
    assert [s["state"] for s in github.repo.statuses] == ["pending", "success"]
    check = Gate.connect(mysql_url)
    try:
        assert check.status(ids[0]).update.source["sha"] == HEAD1
    finally:
        check.close()


# --- the CLI commands ---------------------------------------------------------------------------------

def cli_action(*args, env=None, cwd=None):
    """`promptgate ...` as the Action's step runs it (python -m gate)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("PROMPTGATE_DATABASE_URL", None) if "PROMPTGATE_DATABASE_URL" not in (env or {}) else None
    return subprocess.run([sys.executable, "-m", "gate", *map(str, args)], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=60)


def test_cli_sync_report_and_action_errors(tmp_path, sqlite_url):
    ws = make_workspace(tmp_path)
    dry = cli_action("sync", ws / "gate.yaml", "--dry-run", "--database-url", sqlite_url)
    assert dry.returncode == 0, dry.stderr
    assert "would: bar ticket-urgency × urgency-hard: new, min accuracy 0.8" in dry.stdout
    done = cli_action("sync", ws / "gate.yaml", "--json", "--database-url", sqlite_url)
    assert done.returncode == 0 and len(json.loads(done.stdout)["changes"]) == 8
    again = cli_action("sync", ws / "gate.yaml", "--database-url", sqlite_url)
    assert again.returncode == 0 and "already matches" in again.stdout
    (ws / "bad.yaml").write_text("datasets:\n  d: {source: nowhere.csv}\n")
    bad = cli_action("sync", ws / "bad.yaml", "--database-url", sqlite_url)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "datasets.d.source: no such file" in bad.stderr

    gate = Gate.connect(sqlite_url)
    uid = gate.submit(load_spec(ws / "prompts" / "ticket-urgency.yaml"), "check", {"sha": HEAD1})
    gate.close()
    report = cli_action("report", "--sha", HEAD1, "--database-url", sqlite_url)
    assert report.returncode == 0 and f"update {uid}" in report.stdout and "ticket-urgency: PENDING" in report.stdout

    no_db = cli_action("action", env={"GITHUB_EVENT_NAME": "pull_request"})
    assert no_db.returncode == 2 and "database-url" in no_db.stderr and "Traceback" not in no_db.stderr
    no_event = cli_action("action", "--database-url", sqlite_url, env={"GITHUB_EVENT_NAME": ""})
    assert no_event.returncode == 2 and "not running in GitHub Actions" in no_event.stderr

"""The GitHub glue over PyGithub against a fake GitHub over HTTP: changed files across
pages, a push's files, the one report comment found by its marker."""

from __future__ import annotations

from support.action_harness import BASE, HEAD1, HEAD2, REPO, TOKEN
from support.fake_github import file_entry

from gate.action.github import GitHubClient
from gate.report.markdown import MARKER


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
    assert [f.path for f in client.push_files("0" * 40, HEAD1)] == ["prompts/only-head.yaml"]  # new branch
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

"""A hostile promptfoo config handed to ``promptgate import`` (review of issue 50.2): a
``file://`` reference reads only a file in the config's folder or below (never ``../``, an
absolute path or a link out of it, whose text would be copied into the prompt files the
import writes and then sent to a model and the gate); the import overwrites no file of the
folder it writes into; an error leaves nothing half-written."""

from __future__ import annotations

import os

import pytest

from gate.errors import GateError
from gate.imports.promptfoo import import_promptfoo

SECRET = "zq-secret-of-the-machine"
TESTS = """
tests:
  - description: one
    vars: {ticket: hello}
    assert: [{type: contains, value: hello}]
"""


def _config(tmp_path, prompts: str, tests: str = TESTS):
    folder = tmp_path / "repo"
    folder.mkdir(exist_ok=True)
    path = folder / "promptfooconfig.yaml"
    path.write_text(f"prompts: {prompts}\nproviders: [openai:chat:gpt-4o-mini]\n{tests}")
    return path


def _written(to) -> str:
    return "".join(p.read_text() for p in to.rglob("*") if p.is_file())


@pytest.mark.parametrize("reference", ["../outside.txt", "{abs}", "link.txt", "sub/../../outside.txt"])
def test_a_file_reference_out_of_the_configs_folder_is_not_read(tmp_path, reference):
    (tmp_path / "outside.txt").write_text(f"{SECRET} {{{{ticket}}}}")
    config = _config(tmp_path, "[]")
    os.symlink(tmp_path / "outside.txt", config.parent / "link.txt")
    (config.parent / "sub").mkdir()
    target = reference.format(abs=tmp_path / "outside.txt")
    config = _config(tmp_path, f'["Reply to {{{{ticket}}}}", "file://{target}"]')
    bundle = import_promptfoo(config)
    bundle.write(tmp_path / "out")
    assert SECRET not in _written(tmp_path / "out")
    assert any(s.where == "prompts[2]" for s in bundle.skipped), bundle.lines()


def test_a_tests_csv_out_of_the_configs_folder_is_not_read(tmp_path):
    (tmp_path / "outside.csv").write_text(f"ticket,__expected\n{SECRET},contains:x\n")
    config = _config(tmp_path, '["Reply to {{ticket}}"]', "tests: [file://../outside.csv]\n")
    bundle = import_promptfoo(config)
    bundle.write(tmp_path / "out")
    assert SECRET not in _written(tmp_path / "out")
    assert any(s.what == "file://../outside.csv" for s in bundle.skipped), bundle.lines()


def test_the_import_overwrites_no_file_of_its_folder(tmp_path):
    to = tmp_path / "repo-root"
    (to / "prompts").mkdir(parents=True)
    (to / "prompts" / "prompt.yaml").write_text("mine\n")
    bundle = import_promptfoo(_config(tmp_path, '["Reply to {{ticket}}"]'))
    with pytest.raises(GateError, match="prompt.yaml exists"):
        bundle.write(to)
    assert (to / "prompts" / "prompt.yaml").read_text() == "mine\n"
    assert sorted(p.name for p in to.rglob("*")) == ["prompt.yaml", "prompts"]  # nothing else written


def test_an_import_the_gate_refuses_leaves_nothing_written(tmp_path):
    hostile = '["{{ ticket.__class__.__mro__[1].__subclasses__() }}"]'  # refused by the template check
    bundle = import_promptfoo(_config(tmp_path, hostile))
    with pytest.raises(GateError):
        bundle.write(tmp_path / "out")
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]  # no dataset left from before the check


def test_an_eval_file_nested_too_deep_is_one_line(tmp_path):
    """Review: ``{"a": [[[...]]]}`` 100,000 deep ended the import in a RecursionError traceback
    (the export's JSON was read catching ValueError only)."""
    from gate.errors import UsageError
    from gate.imports.openai_evals import import_openai_evals

    path = tmp_path / "deep.json"
    path.write_text('{"a":' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(UsageError, match="nested too deep to be an eval file"):
        import_openai_evals(path)


def test_a_big_csv_listed_many_times_is_read_until_the_limit_only(tmp_path, monkeypatch):
    """Review: ``tests:`` listing one 16 MiB CSV thousands of times (a 1 MiB config holds
    ~50,000 entries) read every one before counting the tests against ``MAX_TESTS``."""
    from gate.errors import UsageError
    from gate.imports import promptfoo

    monkeypatch.setattr(promptfoo, "MAX_TESTS", 50)
    config = _config(tmp_path, '["Reply to {{ticket}}"]', "tests: [" + ", ".join(["file://t.csv"] * 40) + "]\n")
    (config.parent / "t.csv").write_text("ticket,__expected\n" + "".join(f"t{i},contains:t\n" for i in range(30)))
    reads = []
    real = promptfoo.csv_tests
    monkeypatch.setattr(promptfoo, "csv_tests", lambda path: reads.append(path) or real(path))
    with pytest.raises(UsageError, match="over 50 tests"):
        import_promptfoo(config)
    assert len(reads) == 2, len(reads)  # the second file passed the limit: no third read


def test_a_tests_csv_leaves_the_process_csv_limit_alone_and_refuses_a_huge_cell(tmp_path):
    """Reading a promptfoo tests CSV must not change the process-wide ``csv.field_size_limit``
    (a dataset read afterwards, in the same process, would refuse its long cells); a cell over
    the import's own limit is still refused in one line."""
    import csv

    from gate.imports.promptfoo_csv import MAX_CELL, csv_tests

    before = csv.field_size_limit(1_000_000)  # what the process had chosen, whatever ran before
    try:
        small = tmp_path / "small.csv"
        small.write_text("ticket,__expected\nhello,contains:h\n")
        assert csv_tests(small)[0]["vars"] == {"ticket": "hello"}
        assert csv.field_size_limit() == 1_000_000
        huge = tmp_path / "huge.csv"
        huge.write_text("ticket,__expected\n" + "x" * (MAX_CELL + 1) + ",contains:x\n")
        with pytest.raises(GateError) as refused:
            csv_tests(huge)
        assert "\n" not in str(refused.value) and "a cell over" in str(refused.value)
    finally:
        csv.field_size_limit(before)

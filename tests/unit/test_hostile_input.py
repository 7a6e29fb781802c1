"""A pull request's prompt file, templates and decision rule, a dataset's rows and a model's
answers as an attacker would write them (docs/security.md, the table of attacks): each is
refused with one line, or costs a bounded time and memory. No server is needed here; the
worker-level, CLI and Action attacks are in test_hostile_workers.py, test_hostile_cli.py
and test_hostile_action.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import ROOT

from gate.calls.providers import ProviderDecl, endpoint_for, parse_decl, resolve
from gate.datasets.sources import SourceOptions, open_source
from gate.errors import DatasetError, SpecError, UsageError
from gate.kinds.label import parse_decision
from gate.prompt.decision import MAX_ANSWER_CHARS
from gate.prompt.sandbox import RenderBudget, RenderPool, plain_lookups, renders_here
from gate.prompt.spec import Decision, load_spec, parse_spec_text
from gate.prompt.templating import TemplateProblem
from gate.untrusted import terminal_safe, workflow_lines

PROMPT = """name: p
model: m
labels: [yes, no]
messages:
  - {role: user, content: "{{ item.text }}"}
"""


def refused(text: str, field: str | None = None, seconds: float = 1.0) -> SpecError:
    """The prompt text is refused with a SpecError, quickly."""
    started = time.monotonic()
    with pytest.raises(SpecError) as info:
        parse_spec_text(text, file="p.yaml")
    assert time.monotonic() - started < seconds
    if field is not None:
        assert info.value.field == field, str(info.value)
    assert "\n" not in str(info.value)
    return info.value


# --- 1: a prompt file cannot choose where requests go or which secret they carry ---------------


@pytest.mark.parametrize(
    "provider",
    [
        '{base_url: "http://attacker.example/v1", api_key_env: GITHUB_TOKEN}',
        '{base_url: "http://169.254.169.254/latest"}',
        "{api_key_env: PROMPTGATE_DATABASE_URL}",
    ],
)
def test_a_prompt_file_cannot_carry_a_url_or_a_key_variable(provider):
    err = refused(PROMPT + f"provider: {provider}\n", "provider")
    assert "may not carry a URL or a key variable" in err.reason


def test_a_prompt_names_only_declared_providers():
    spec = parse_spec_text(PROMPT + "provider: local\n")
    declared = {"local": ProviderDecl("local", "http://127.0.0.1:8000/v1", models=("m", "gpt-*"))}
    assert resolve(spec.provider, spec.model, declared, environ={}) == declared["local"]
    with pytest.raises(UsageError, match="provider 'attacker' is not declared"):
        resolve("attacker", "m", declared, environ={})
    with pytest.raises(UsageError, match="does not serve model 'other'"):
        resolve("local", "other", declared, environ={})
    assert resolve(None, "m", declared, environ={}) is None  # the default provider


@pytest.mark.parametrize(
    "decl, field",
    [
        ({"base_url": "file:///etc/passwd"}, "x.base_url"),
        ({"base_url": "http://user:secret@host/v1"}, "x.base_url"),
        ({"base_url": "https://h/v1", "api_key_env": "GITHUB_TOKEN"}, "x.api_key_env"),
        ({"base_url": "https://h/v1", "api_key_env": "PROMPTGATE_DATABASE_URL"}, "x.api_key_env"),
        ({"base_url": "https://h/v1", "api_key_env": "INPUT_GITHUB-TOKEN"}, "x.api_key_env"),
        ({"base_url": "https://h/v1", "key": "sk-1"}, "x.key"),
    ],
)
def test_even_the_gate_config_cannot_aim_a_provider_at_the_gates_own_secrets(decl, field):
    with pytest.raises(SpecError) as info:
        parse_decl("x", decl, "gate.yaml", "x")
    assert info.value.field == field


def test_the_key_comes_only_from_the_declared_variable():
    decl = ProviderDecl("azure", "https://h/v1", "AZURE_KEY")
    assert endpoint_for(decl, {"AZURE_KEY": "k1", "OPENAI_API_KEY": "other"}).api_key == "k1"
    with pytest.raises(UsageError, match="AZURE_KEY is not set"):
        endpoint_for(decl, {"OPENAI_API_KEY": "other"})


# --- 2, 3, 4: templates and rules that burn CPU or memory ---------------------------------------

BOMBS = [
    ("{{ (9**10000)**10000 > 1 }}", "big-number arithmetic"),
    ("{% for a in 'x'*1000000 %}{% for b in 'x'*1000000 %}{% endfor %}{% endfor %}", "nested loops"),
    ("{{ ('a'|center(1500000000))|length }}", "a growing filter"),
    ("{{ '%300000000s'|format('x') }}", "format"),
    ("{{ ('x' * 900000)|replace('x', 'yyyyyyyyyy') }}", "replace"),
    ("{% set s = 'x' * 900000 %}" + "{% set s = s ~ s %}" * 12 + "{{ s|length }}", "~ chains"),
]


@pytest.fixture(scope="module")
def pool():
    p = RenderPool(RenderBudget(cpu_seconds=1.0, memory_mb=64, processes=2))
    yield p
    p.close()


@pytest.mark.parametrize("template, what", BOMBS, ids=[w for _, w in BOMBS])
def test_template_bombs_end_within_their_budget(pool, template, what):
    parse_spec_text(PROMPT.replace("{{ item.text }}", template.replace('"', '\\"')))  # passes the submit checks
    started = time.monotonic()
    with pytest.raises(TemplateProblem) as info:
        pool.render([template], {"text": "x"})
    took = time.monotonic() - started
    assert took < pool.budget.wall_seconds + 1.0, what
    assert "budget" in str(info.value) or "over 1000000 characters" in str(info.value)
    assert pool.render(["{{ item.text|upper }}"], {"text": "still here"}) == ["STILL HERE"]


FOLDED = 200_000_000  # characters a constant expression of each template below makes when evaluated
FOLDING_BOMBS = [
    (f"{{{{ ('a'|center({FOLDED}))|length }}}}", "a filter on constants"),
    (f"{{{{ '%{FOLDED}s' % 'x' }}}}", "an operator on constants"),
    (f"{{{{ '%{FOLDED}s'|format('x') }}}}", "format on constants"),
    (f"{{{{ 'a b'|wordwrap(1)|indent({FOLDED}) }}}}", "a chain of filters"),
    (f"{{{{ item.text if ('a'|center({FOLDED})) else 'b' }}}}", "a condition"),
    (f"{{% autoescape ('a'|center({FOLDED}))|length > 1 %}}{{{{ item.text }}}}{{% endautoescape %}}", "autoescape"),
]


@pytest.mark.parametrize("template, what", FOLDING_BOMBS, ids=[w for _, w in FOLDING_BOMBS])
def test_checking_a_template_evaluates_none_of_it(template, what):
    """Hostile review: the submit checks (the service's too) asked Jinja which names a
    template reads, and Jinja's compiler folds constants: it ran the filter or operator, so
    a 40-byte template made the checking process allocate 200-600 MB here (10**10: gigabytes,
    the service killed). Only the sandbox process, under its budget, evaluates a template."""
    import tracemalloc

    tracemalloc.start()
    try:
        parse_spec_text(PROMPT.replace("{{ item.text }}", template.replace('"', '\\"')))  # passes the submit checks
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"{what}: {peak / 1e6:.0f} MB to check"


def test_rendering_in_this_process_only_for_plain_lookups():
    assert plain_lookups("Subject: {{ item.subject }}\n{{ item['text'] }} {{ item.a.b }}") == 3
    for template, _ in BOMBS + [
        ("{{ item.text|upper }}", ""),
        ("{% if item.x %}y{% endif %}", ""),
        ("{{ item[item.k] }}", ""),
        ("{{ item.text ~ 'x' }}", ""),
    ]:
        assert plain_lookups(template) is None, template


def _prompt_with(*templates: str) -> str:
    messages = "".join(f"  - {{role: user, content: {json.dumps(t)}}}\n" for t in templates)
    return PROMPT.split("messages:")[0] + "messages:\n" + messages


@pytest.mark.parametrize(
    "templates, what",
    [
        (["{{ item" + ".a" * 100 + " }}" * 1], "a lookup chain 100 deep"),
        (["{{ " + "(" * 200 + "item.a" + ")" * 200 + " }}"], "parentheses 200 deep"),
        (["{{ item.a" + "|upper" * 300 + " }}"], "300 filters in a chain"),
        ([("{{ item" + ".a" * 15 + " }}") * 400], "400 lookups 15 deep"),
        (["{{ item.a }}" * 1400] * 2, "two messages sharing the node budget"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_templates_nested_too_deep_or_too_big_are_refused_quickly(templates, what):
    """Jinja's compiler costs grow with the square of an expression's depth (300 lookups
    100 deep took 86 s to compile in a worker): the tree's depth and size are checked on
    the parsed template, without recursion, before anything compiles it."""
    error = refused(_prompt_with(*templates), seconds=2.0)
    assert any(why in str(error) for why in ("deeper than", "too deeply", "more than")), what


def test_many_lookups_render_in_the_sandbox_where_their_output_is_capped(pool):
    """A plain template prints each lookup in full: 2,000 copies of a 100 KB field is 200 MB
    from an innocent-looking template. Past 16 lookups it renders in the sandbox, whose
    output cap and memory limit end it."""
    assert renders_here(["{{ item.a }} {{ item.b }}" * 8])
    assert not renders_here(["{{ item.a }}" * 9, "{{ item.b }}" * 8])
    bomb = ["{{ item.t }}" * 1500]
    parse_spec_text(_prompt_with(*bomb))
    started = time.monotonic()
    with pytest.raises(TemplateProblem, match="budget|over 1000000 characters"):
        pool.render(bomb, {"t": "x" * 100_000})
    assert time.monotonic() - started < pool.budget.wall_seconds + 1.0


def test_the_sandbox_never_imports_a_checkouts_own_modules(tmp_path, monkeypatch):
    """A worker started inside a pull request's checkout must not let the checkout's
    ``jinja2/`` or ``gate/`` replace the real ones in its sandbox children."""
    marker = tmp_path / "imported"
    for package in ("jinja2", "gate", "markupsafe"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({package!r})\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    fresh = RenderPool(RenderBudget(cpu_seconds=1.0, memory_mb=64, processes=1))
    try:
        assert fresh.render(["{{ item.x|upper }}"], {"x": "real"}) == ["REAL"]
    finally:
        fresh.close()
    assert not marker.exists(), marker.read_text()


def test_the_sandbox_process_has_no_secrets_to_read(monkeypatch):
    """Even a sandbox escape would find no key: the child's environment is empty of them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    fresh = RenderPool(RenderBudget(cpu_seconds=1.0, memory_mb=64, processes=1))
    try:
        fresh.render(["{{ item.x|upper }}"], {"x": "warm"})
        (child,) = fresh._children
        environ = Path(f"/proc/{child.proc.pid}/environ").read_bytes()
        assert b"sk-secret" not in environ and b"OPENAI" not in environ
    finally:
        fresh.close()


HOLDER = """
import sys
sys.path.insert(0, sys.argv[1])
from gate.prompt.sandbox import RenderBudget, RenderPool
pool = RenderPool(RenderBudget(cpu_seconds=1.0, memory_mb=64, processes=1))
pool.render(["{{ item.x|upper }}"], {"x": "warm"})
child, = pool._children
print(child.proc.pid, flush=True)
sys.stdin.read()
pool.close()
"""


def _as_an_escaped_child():
    """The credentials a sandbox child has: the worker's user, or nobody when that is root."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)


def _read_as_an_escaped_child(path: str) -> bytes | str:
    out = subprocess.run(["cat", path], capture_output=True, preexec_fn=_as_an_escaped_child, timeout=20)
    return out.stdout if out.returncode == 0 else out.stderr.decode().strip()


def test_a_process_that_starts_sandboxes_hides_its_keys_from_its_own_user():
    """An escape from Jinja's sandbox runs as the worker's user: the worker's environment
    (its keys) must not be readable through /proc by such a process, and the child itself
    holds no root to read them with."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": "sk-holder-secret"},
    )
    try:
        child_pid = int(holder.stdout.readline())
        seen = _read_as_an_escaped_child(f"/proc/{holder.pid}/environ")
        assert isinstance(seen, str) and "Permission denied" in seen, seen[:200]
        uid = next(
            line.split()[1]
            for line in Path(f"/proc/{child_pid}/status").read_text().splitlines()
            if line.startswith("Uid:")
        )
        assert int(uid) == (65534 if os.geteuid() == 0 else os.geteuid())
    finally:
        holder.stdin.close()
        holder.wait(timeout=20)


def _parse_in_child(pattern: str, answer: str, timeout: float) -> float:
    """parse_decision in a child process (a catastrophic regex would hang this one)."""
    code = (
        "import sys, time; from gate.kinds.label import parse_decision; from gate.prompt.spec import Decision;"
        "d = Decision('regex', pattern=sys.argv[1]); t = time.process_time();"
        "parse_decision(d, ['a', 'b'], sys.argv[2]); print(time.process_time() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, pattern, answer],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


def test_a_catastrophic_regex_cannot_backtrack():
    parse_spec_text(PROMPT + "decision: {type: regex, pattern: '^(a+)+$'}\n")  # accepted: RE2 runs it linearly
    assert _parse_in_child("^(a+)+$", "a" * 40 + "b", timeout=20) < 0.1
    assert _parse_in_child("^(a+)+$", "a" * 30000 + "!", timeout=20) < 0.1


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)a", "x" * 1001, "((a|b){0,100}){9}c"])
def test_patterns_re2_cannot_run_are_refused_at_submit(pattern):
    refused(PROMPT + f"decision: {{type: regex, pattern: {json.dumps(pattern)}}}\n", "decision.pattern")


@pytest.mark.parametrize("pattern", [r"((a|b){0,20}){9}c", r"[a-z]{0,380}x", r"(\w{0,60}){3}x"])
def test_the_most_complex_pattern_accepted_stays_fast_on_the_longest_answer(pattern):
    """RE2 is linear, but past ~1,000 instructions it leaves its DFA and a 32 KiB answer took
    2 s: the program-size cap keeps every accepted pattern on the fast side of that cliff."""
    parse_spec_text(PROMPT + f"decision: {{type: regex, pattern: {json.dumps(pattern)}}}\n")
    assert _parse_in_child(pattern, "a" * MAX_ANSWER_CHARS, timeout=20) < 0.1


# --- 7: YAML that expands, recurses or is huge ------------------------------------------------

LAUGHS = """name: p
model: m
messages: [{role: user, content: "{{ item.text }}"}]
response_format: &a0 {type: json_object, x: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}
""" + "".join(
    f"x{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
    f"*a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 10)
)


@pytest.mark.parametrize(
    "text, why",
    [
        (LAUGHS, "anchor"),
        (PROMPT + "response_format: &a {type: json_object, x: *a}\n", "anchor"),
        (PROMPT + "response_format: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
        (PROMPT + "description: one\ndescription: two\n", "duplicate key"),
        (PROMPT + "params: {seed: " + "9" * 5000 + "}\n", "a number longer than 100 characters"),
    ],
)
def test_yaml_that_expands_recurses_or_repeats_is_refused(text, why):
    err = refused(text)
    assert why in str(err)


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_deep_flow_nesting_is_refused_before_the_scanner_reads_on(opening):
    """The depth was checked where nodes are composed, and PyYAML's scanner reads about a
    thousand tokens ahead of that, re-checking every open bracket on each: 0.2 s of CPU for
    a 10 KB file, over a second on a loaded CI machine. CPU time, not wall time, is bounded."""
    closing = "]" if opening == "[" else "}"
    text = PROMPT + "response_format: " + opening * 5000 + "1" + closing * 5000 + "\n"
    started = time.process_time()
    err = refused(text)
    assert time.process_time() - started < 0.05 and "nested deeper than 32 levels" in str(err)


def test_a_huge_prompt_file_is_refused_after_reading_only_the_limit(tmp_path):
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as fh:  # 200 MB, sparse: nothing is read past the limit
        fh.truncate(200 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(SpecError, match="over the 256 KiB limit"):
        load_spec(huge)
    assert time.monotonic() - started < 1.0


# --- 8: a dataset row nested to the decoder's limit ------------------------------------------


def test_a_row_nested_too_deep_is_a_dataset_error_naming_the_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"item_id": "a", "expected_decision": "yes", "text": "ok"}\n'
        '{"item_id": "b", "expected_decision": "yes", "text": ' + "[" * 20000 + "]" * 20000 + "}\n"
    )
    reader = open_source(str(path), SourceOptions())
    with pytest.raises(DatasetError, match="line 2: row is nested deeper than 32 levels"):
        reader.read_page(None, 10)


# --- 9: a long answer --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "<think>" * 16000,
        "<think>" * 8000 + "</think>" + "yes",
        "```" * 20000,
        "{" * 50000,
        "[" * 50000 + "yes",
    ],
)
@pytest.mark.parametrize(
    "decision", [Decision(), Decision("json", field="decision"), Decision("regex", pattern=r"(?i)\b(yes|no)\b")]
)
def test_a_hostile_answer_is_parsed_in_bounded_time(answer, decision):
    """CPU time of this thread, not wall time: a catastrophic parse costs CPU, and a loaded
    machine stretched the wall-clock figure past the bound with nothing wrong."""
    started = time.thread_time()
    parse_decision(decision, ["yes", "no"], answer)
    assert time.thread_time() - started < 0.2


def test_only_the_start_of_an_answer_is_read():
    assert parse_decision(Decision(), ["yes", "no"], "yes " + "x" * 10 * MAX_ANSWER_CHARS) == "yes"
    assert parse_decision(Decision("regex", pattern="(no)$"), ["yes", "no"], "x" * MAX_ANSWER_CHARS + "no") is None


# --- 10, 11: reserved labels, parameters out of range ---------------------------------------------


@pytest.mark.parametrize("labels", ['["(invalid)", ok]', '["(none)", ok]', '["ok\\u001b[2J", no]'])
def test_labels_cannot_look_like_the_gates_markers_or_hold_control_characters(labels):
    refused(PROMPT.replace("labels: [yes, no]", f"labels: {labels}"), "labels")


@pytest.mark.parametrize(
    "params, field",
    [
        ("{temperature: .nan}", "params.temperature"),
        ("{top_p: .inf}", "params.top_p"),
        ("{max_tokens: 1000000000000}", "params.max_tokens"),
        ("{seed: 100000000000000000000000000000}", "params.seed"),
        ("{stop: [a, b, c, d, e]}", "params.stop"),
        ("{logit_bias: {'x': 1}}", "params.logit_bias"),
        ("{reasoning_effort: 'rm -rf'}", "params.reasoning_effort"),
    ],
)
def test_parameters_out_of_range_are_refused_at_submit(params, field):
    refused(PROMPT + f"params: {params}\n", field)


def test_yaml_1_2_reads_yes_and_no_as_the_labels_they_look_like():
    assert parse_spec_text(PROMPT).labels == ("yes", "no")
    assert parse_spec_text(PROMPT.replace("[yes, no]", "[on, off]")).labels == ("on", "off")


# --- 5, 12: untrusted text in a terminal and in the Actions log ------------------------------------


def test_terminal_and_log_text_cannot_carry_commands_or_escapes():
    hostile = "row\x1b]0;pwned\x07\r\n::add-mask::secret\n##[warning]x\u202etxt"
    assert "\x1b" not in terminal_safe(hostile) and "\n" not in terminal_safe(hostile)
    for line in workflow_lines(f"ok\n{hostile}\n::set-output name=x::y").splitlines():
        assert not line.strip().startswith(("::", "##["))

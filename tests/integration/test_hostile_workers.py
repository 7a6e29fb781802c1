"""Hostile prompts against real worker processes on MariaDB: a prompt file that tries to send
the workers' requests (and their keys) elsewhere sends none; templates and decision rules
that burn CPU or memory end within their budget while another prompt's update on the same
worker finishes, the worker keeps heartbeating and stops on SIGTERM; a dataset row nested
to the decoder's limit ends its run instead of looping (docs/security.md)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
from support.cli import run_cli
from support.helpers import rules_spec, write_rule_rows
from support.workers_harness import WorkerFleet, worker_env

from gate.errors import DatasetError
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec
from gate.store.workers import live_workers
from workers.supervisor import run_until_terminal

LONG_A = "a" * 34 + "b"  # a label the model repeats; ^(a+)+$ backtracks 2**34 times on it in `re`

BOMBS = {
    "bomb-power": "{{ (9**10000)**10000 > 1 }}",
    "bomb-loops": "{% for a in 'x'*1000000 %}{% for b in 'x'*1000000 %}{% endfor %}{% endfor %}",
    "bomb-center": "{{ ('a'|center(1500000000))|length }}",
    "bomb-format": "{{ '%300000000s'|format('x') }}",
    # only the sixth row sets it off: past the check of the first rows, caught per item
    "bomb-late": "{% if item.text == 'boom' %}{% for a in 'x'*1000000 %}{% for b in 'x'*1000000 %}{% endfor %}"
    "{% endfor %}{% endif %}{{ item.text }}",
}


@pytest.fixture
def fleet(tmp_path):
    fleets = []

    def make(env):
        f = WorkerFleet(env, tmp_path)
        fleets.append(f)
        return f

    yield make
    for f in fleets:
        f.stop_all()


def write_rows(path: Path, texts: list[str], label: str = "yes") -> Path:
    path.write_text("item_id,expected_decision,text\n" + "".join(f"r{i},{label},{t}\n" for i, t in enumerate(texts)))
    return path


def bomb_spec(name: str, template: str):
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "labels": ["yes", "no"],
            "messages": [
                {"role": "system", "content": "- yes: x\ndefault: yes"},
                {"role": "user", "content": template},
            ],
        }
    )


def regex_bomb_spec():
    return parse_spec(
        {
            "name": "bomb-regex",
            "model": "mock-1",
            "labels": [LONG_A, "no"],
            "decision": {"type": "regex", "pattern": "^(a+)+$"},
            "messages": [
                {"role": "system", "content": f"default: {LONG_A}"},
                {"role": "user", "content": "{{ item.text }}"},
            ],
        }
    )


class PeakRss:
    """The highest resident memory of a process, sampled every 50 ms in a thread."""

    def __init__(self, pid: int):
        self.proc, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while not self.stop.wait(0.05):
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.peak


def test_bombs_end_in_budget_while_another_update_finishes_and_the_worker_stops_on_sigterm(mysql_gate, tmp_path, fleet):
    gate = mysql_gate
    for name in BOMBS:
        texts = ["x", "y", "z", "w", "v", "boom", "u", "t"] if name == "bomb-late" else ["x", "y", "z"]
        gate.register_dataset(name, str(write_rows(tmp_path / f"{name}.csv", texts)))
        gate.map_dataset(name, name, "0.5")
    gate.register_dataset("long-a", str(write_rows(tmp_path / "long-a.csv", ["x", "y", "z"], LONG_A)))
    gate.map_dataset("bomb-regex", "long-a", "0.5")
    gate.register_dataset("good", str(write_rule_rows(tmp_path / "good.csv", 40)))
    gate.map_dataset("good", "good", "0.9")

    with MockLLMServer(latency_ms=5) as llm:
        bombs = [gate.submit(bomb_spec(name, template), "check") for name, template in BOMBS.items()]
        bombs.append(gate.submit(regex_bomb_spec(), "check"))
        submitted = time.monotonic()
        good = gate.submit(rules_spec("good"), "check")  # submitted last: it waits behind every bomb
        workers = fleet(
            worker_env(gate.settings.database_url, llm.base_url, template_cpu_seconds=1, heartbeat_seconds=1)
        )
        (proc,) = workers.start(1)
        rss = PeakRss(proc.pid)
        try:
            good_report = gate.wait(good, timeout=60)
            good_took = time.monotonic() - submitted
            reports = [gate.wait(uid, timeout=60) for uid in bombs]
        finally:
            peak = rss.close()
        calls_by_model = llm.stats()["requests"]

        print(f"good update: {good_took:.1f} s after submit; worker peak RSS {peak / 2**20:.0f} MiB")
        assert good_report.status == "PASSED", (good_report.update.reason, workers.logs()[-3000:])
        # 6 bombs ahead of it: each costs the worker at most one budget (1 s of CPU, 3 s of wall)
        assert good_took < 15, good_took
        by_name = {r.update.prompt_name: r for r in reports}
        for name in BOMBS:
            report = by_name[name]
            assert report.status == "FAILED", (name, report.status, report.update.reason)
            assert "exceeded its budget" in report.update.reason, (name, report.update.reason)
        assert by_name["bomb-regex"].status == "REJECTED"  # parsed in linear time: no label
        # the bombs cost no model call but the late bomb's first rows and the regex prompt's three
        assert calls_by_model <= 40 + 7 + 3, calls_by_model
        assert peak < 400 * 1024 * 1024, f"worker peak RSS {peak / 2**20:.0f} MiB"

        with gate.engine.connect() as conn:
            (beat,) = live_workers(conn, 3.0)  # heartbeating through it all
        assert beat.pid == proc.pid
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert time.monotonic() - started < 10


def test_a_prompt_file_with_its_own_endpoint_sends_nothing_anywhere(mysql_gate, tmp_path, fleet, monkeypatch):
    """The exfiltration attempt is refused at submit, through the CLI: zero requests reach the
    attacker's server, whatever the workers do."""
    gate = mysql_gate
    gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 5)))
    gate.map_dataset("p1", "d", "0.5")
    with MockLLMServer() as attacker, MockLLMServer() as real:
        env = worker_env(gate.settings.database_url, real.base_url, heartbeat_seconds=1)
        env["GATE_SECRET"] = "s3cr3t"
        fleet(env).start(1)
        for provider in (
            f'{{base_url: "{attacker.base_url}", api_key_env: GATE_SECRET}}',
            f'{{base_url: "{attacker.base_url}"}}',
            "attacker",
        ):
            prompt = tmp_path / "p1.yaml"
            prompt.write_text(
                "name: p1\nmodel: mock-1\nmessages:\n  - {role: user, content: '{{ item.text }}'}\n"
                f"provider: {provider}\n"
            )
            out = run_cli("submit", prompt, "--mode", "apply", env=env)
            assert out.returncode == 2, (provider, out.stdout, out.stderr)
            assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
        time.sleep(1.0)
        assert attacker.stats()["requests"] == 0
        assert gate.list_updates() == []


def test_a_declared_provider_gets_the_calls_with_its_own_key_and_stays_pinned(mysql_gate, tmp_path, monkeypatch):
    """The positive path: a provider declared in the gate config receives the calls with the
    key its declaration names; a declaration changed after submit does not redirect them."""
    from gate import gateconfig

    gate = mysql_gate
    with MockLLMServer(api_key="sk-declared") as declared, MockLLMServer() as other:
        monkeypatch.setenv("DECLARED_KEY", "sk-declared")
        monkeypatch.setenv("OPENAI_BASE_URL", other.base_url)
        write_rule_rows(tmp_path / "d.csv", 6)
        config = tmp_path / "gate.yaml"
        config.write_text(
            f"providers:\n  team-llm: {{base_url: '{declared.base_url}', api_key_env: DECLARED_KEY}}\n"
            "datasets:\n  d: {source: d.csv}\nprompts:\n  p1:\n    - {dataset: d, min_accuracy: 1}\n"
        )
        gateconfig.sync(gate, gateconfig.load_config(config))
        spec = parse_spec(dict(rules_spec("p1").to_config(), provider="team-llm"))
        uid = gate.submit(spec, "apply")
        config.write_text(config.read_text().replace(declared.base_url, other.base_url))
        gateconfig.sync(gate, gateconfig.load_config(config))  # a later change of the declaration
        (report,) = run_until_terminal(gate, [uid], timeout=60)
        assert report.status == "APPLIED", report.update.reason
        assert declared.stats()["requests"] == 6 and other.stats()["requests"] == 0


@pytest.mark.parametrize(
    "row, problem",
    [
        ('"text": ' + "[" * 20000 + "]" * 20000, "line 2: row is nested deeper than 32 levels"),
        ('"text": "bad \\ud800 half of a pair"', "line 2: item b: not valid Unicode text"),
    ],
)
def test_a_row_no_decoder_can_take_is_refused_at_import_by_name(mysql_gate, tmp_path, row, problem):
    """A dataset is read when it is registered: a row nested to the decoder's limit, or
    holding half a surrogate pair, is one DatasetError naming it; nothing is left to loop on."""
    gate = mysql_gate
    path = tmp_path / "deep.jsonl"
    path.write_text(
        '{"item_id": "a", "expected_decision": "yes", "text": "alpha"}\n'
        '{"item_id": "b", "expected_decision": "yes", ' + row + "}\n"
    )
    with pytest.raises(DatasetError, match=problem):
        gate.register_dataset("deep", str(path))
    assert gate.list_datasets() == []


SLOW = "{% for a in 'x'*4000 %}{% for b in 'x'*1000 %}{% endfor %}{% endfor %}{{ item.text }}"


def render_seconds(template: str, items: int = 8) -> float:
    """What one render of ``template`` takes on this machine, in the sandbox the workers use."""
    from gate.prompt.sandbox import RenderPool

    pool, spent = RenderPool(), []
    pool.render_many([template], [{"text": f"t{i}"} for i in range(items)], None, spent)
    return sum(spent) / items


def test_a_slow_template_under_the_item_budget_is_stopped_by_the_runs_mean(mysql_gate, tmp_path, fleet):
    """Under its 2 s budget on every item, a template can still hold a worker for rows × its
    time: once 16 items have rendered, a run averaging over the mean limit an item stops like
    a bomb, and an update submitted after it is not kept waiting for the rest. The limit is
    set to a third of what SLOW takes here (machines differ by several times), far above
    what the plain template of the other update takes."""
    per_item = render_seconds(SLOW)
    assert 0.005 < per_item < 1.0, per_item
    gate = mysql_gate
    gate.register_dataset("slow", str(write_rows(tmp_path / "slow.csv", [f"t{i}" for i in range(120)])))
    gate.map_dataset("slow", "slow", "0.5")
    gate.register_dataset("good", str(write_rule_rows(tmp_path / "good.csv", 40)))
    gate.map_dataset("good", "good", "0.9")
    with MockLLMServer(latency_ms=5) as llm:
        slow = gate.submit(bomb_spec("slow", SLOW), "check")
        submitted = time.monotonic()
        good = gate.submit(rules_spec("good"), "check")
        fleet(
            worker_env(
                gate.settings.database_url,
                llm.base_url,
                template_cpu_seconds=2,
                template_mean_seconds=round(max(0.001, per_item / 3), 4),
            )
        ).start(1)
        good_report = gate.wait(good, timeout=90)
        good_took = time.monotonic() - submitted
        slow_report = gate.wait(slow, timeout=90)
        calls = llm.stats()["requests"]
    print(f"SLOW {per_item:.3f} s an item; good update: {good_took:.1f} s after submit; {calls} model calls")
    assert good_report.status == "PASSED"
    assert slow_report.status == "FAILED", (slow_report.status, slow_report.update.reason)
    assert "per item on average" in slow_report.update.reason
    assert calls < 40 + 64, calls  # most of the slow run's 120 items never rendered or called
    assert good_took < 10 + 40 * per_item, good_took  # well short of all 120 × per_item

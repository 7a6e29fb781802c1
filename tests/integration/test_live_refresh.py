"""Issue 49.8, in headless Chromium: an update's page still changing updates itself in place —
no reload (the 5-s meta refresh closed what the reader had opened) — and stops once the update
is terminal. The reader opens a <details>; the update runs to its end; the page's badge and
figures change, the <details> is still open, the page was never reloaded, and the polling has
stopped (its count no longer moves). Under the pages' Content-Security-Policy (a static
script from this origin, no inline one)."""

from __future__ import annotations

import time

import pytest
from support.cdp import Chromium
from support.helpers import rules_spec, write_rule_rows
from support.service_harness import Service

from gate.domain import Gate
from gate.mockllm import MockLLMServer
from workers.supervisor import run_until_terminal

POLL_MS = 250  # the page's poll, set ahead of its script (the pages poll every 5 s)


@pytest.fixture
def llm(monkeypatch):
    with MockLLMServer(latency_ms=1) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield server


def test_the_page_updates_in_place_keeps_details_open_and_stops_when_terminal(mysql_url, tmp_path, chromium, llm):
    svc = Service(mysql_url, tmp_path, "--public-read")
    gate = Gate.connect(svc.db_url)
    browser = Chromium(chromium, tmp_path / "profile")
    try:
        gate.register_dataset("d", str(write_rule_rows(tmp_path / "d.csv", 6)))
        gate.map_dataset("p1", "d", "0.5")
        update_id = gate.submit(rules_spec("p1"), "check")  # no worker yet: PENDING

        poll_fast = f"window.PROMPTGATE_POLL_MS = {POLL_MS};"
        browser.open(f"{svc.url}/", before=poll_fast)  # the list polls while an update is open
        browser.evaluate("const f = document.querySelector('input[name=prompt]'); f.focus(); f.value = 'p1 typed';")
        browser.wait_for("Number(document.body.dataset.polls) >= 2", 10, "the list polling")
        assert browser.evaluate("document.querySelector('input[name=prompt]').value") == "p1 typed"
        assert browser.evaluate("document.activeElement.getAttribute('name')") == "prompt"  # still typing there

        browser.open(f"{svc.url}/updates/{update_id}", before=poll_fast)
        csp = browser.evaluate("document.querySelector('script[src=\"/static/live.js\"]') !== null")
        assert csp, "the page loads its one static script"
        assert browser.evaluate("document.querySelector('[data-live=badges]').textContent.trim()") == "PENDING"
        browser.evaluate("window.notReloaded = true; document.querySelector('main details').open = true;")
        browser.wait_for("Number(document.body.dataset.polls) >= 2", 10, "the page polling")  # unchanged so far
        assert browser.evaluate("document.querySelector('main details').open") is True

        (report,) = run_until_terminal(gate, [update_id], timeout=60)
        assert report.status == "PASSED", report.update.reason

        browser.wait_for("document.body.dataset.poll === 'stopped'", 15, "the polling to stop at a terminal state")
        assert browser.evaluate("document.querySelector('[data-live=badges]').textContent.trim()") == "PASSED"
        assert browser.evaluate("window.notReloaded === true"), "the page was reloaded"
        assert browser.evaluate("document.querySelector('main details').open") is True, "the reader's <details> closed"
        assert browser.evaluate("document.querySelector('.notice') === null")  # "Still pending" is gone
        assert "6 / 6" in browser.evaluate("document.querySelector('table.summary').textContent")  # the figure moved
        polls = browser.evaluate("Number(document.body.dataset.polls)")
        time.sleep(4 * POLL_MS / 1000)
        assert browser.evaluate("Number(document.body.dataset.polls)") == polls, "it kept polling a terminal update"
        assert not browser.evaluate("document.body.hasAttribute('data-refresh')")
    finally:
        browser.close()
        gate.close()
        svc.stop()

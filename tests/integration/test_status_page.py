"""The status page as a person sees it: a real `promptgate serve` on MariaDB, a real worker
process, the local model server, and Debian's Chromium in headless mode loading the
updates list and an update's page (DOM asserted, screenshots kept under test-artifacts/).
A hostile item id and a hostile model answer render as text. Who may look: 401 without
a token, a cookie from /login that opens the pages and never the JSON API."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import httpx2
import pytest
from support.cli import ROOT
from support.helpers import rules_spec, write_rule_rows
from support.service_harness import Service
from support.workers_harness import WorkerFleet, worker_env

from gate.domain import Gate
from gate.mockllm import MockLLMServer
from gate.prompt.spec import parse_spec

HOSTILE_ID = "<img src=x onerror=\"document.title='pwned'\">"
HOSTILE_KEY = "<img src=x onerror=document.title='pwned'>"  # no double quote: JSON keeps it as written
ARTIFACTS = ROOT / "test-artifacts"
SHA_APPLIED, SHA_HOSTILE = "1a2b3c4d" * 5, "9f8e7d6c" * 5


class Browser:
    """Headless Chromium as a subprocess, one throwaway profile."""

    def __init__(self, path: str, profile: Path):
        self.path, self.profile = path, profile

    def _run(self, url: str, *args: str) -> str:
        out = subprocess.run(
            [
                self.path,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile}",
                *args,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, f"chromium exited {out.returncode}: {out.stderr[-2000:]}"
        return out.stdout

    def dom(self, url: str) -> Page:
        """The DOM after load (a second of virtual time for any handler to have run)."""
        return Page(self._run(url, "--dump-dom", "--virtual-time-budget=1000"))

    def screenshot(self, url: str, path: Path) -> Path:
        self._run(url, f"--screenshot={path}", "--window-size=1280,1600")
        assert path.stat().st_size > 10_000, "the screenshot is (nearly) empty"
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(path, ARTIFACTS / path.name)
        return path


class Page(HTMLParser):
    """What a person sees in a DOM: its title, its text, each table's rows of cell texts,
    and every element by tag name."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.html, self.tags, self.title, self.tables = html, [], "", []
        self._texts, self._cell, self._in_title = [], None, False
        self.feed(html)
        self.text = " ".join(" ".join(self._texts).split())

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_title = tag == "title"
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        self._in_title = False
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif self.lasttag not in ("style", "script"):
            self._texts.append(data)
            if self._cell is not None:
                self._cell.append(data)

    def rows(self) -> list[list[str]]:
        return [row for table in self.tables for row in table]


def write_dataset(path: Path) -> Path:
    """12 rows the rules answer (every 5th labelled against them) and one whose id and text are markup."""
    write_rule_rows(path, 12, wrong_every=5)
    with path.open("a", newline="") as fh:
        csv.writer(fh).writerow([HOSTILE_ID, "yes", f"alpha {HOSTILE_ID}"])
    return path


def hostile_candidate():
    """The rules prompt asking for JSON whose one key is markup: the model's answer carries
    it, and names no label (every answer is invalid)."""
    config = rules_spec("support-triage").to_config()
    config["response_format"] = {
        "type": "json_schema",
        "json_schema": {
            "name": "triage",
            "schema": {"type": "object", "properties": {HOSTILE_KEY: {"type": "string"}}},
        },
    }
    config["decision"] = {"type": "json", "field": "decision"}
    return parse_spec(config)


@pytest.fixture
def public_service(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path, "--public-read")
    yield svc
    svc.stop()


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_status_page_in_chromium(public_service, chromium, tmp_path):
    svc, browser = public_service, Browser(chromium, tmp_path / "chromium-profile")
    gate = Gate.connect(svc.db_url)
    fleet = None
    try:
        with MockLLMServer(latency_ms=1) as llm, httpx2.Client(base_url=svc.url, timeout=30) as web:
            gate.register_dataset(  # a repository's file (a gate config declares it): its items are shown
                "tickets", str(write_dataset(tmp_path / "tickets.csv")), declared_in="gate.yaml"
            )
            gate.map_dataset("support-triage", "tickets", "0.6", bars={"max_broken": 0})
            applied = gate.submit(
                rules_spec("support-triage"), "apply", source={"sha": SHA_APPLIED, "pr": 12, "repo": "acme/prompts"}
            )
            check_a_pending_update(web, applied)
            fleet = WorkerFleet(worker_env(svc.db_url, llm.base_url, chunk_size=1), tmp_path)
            fleet.start(1)
            assert gate.wait(applied, timeout=60, poll=0.05).status == "APPLIED"
            hostile = gate.submit(
                hostile_candidate(), "check", source={"sha": SHA_HOSTILE, "key": "hostile"}, full=True
            )  # every item called: the page shows all of them
            assert gate.wait(hostile, timeout=60, poll=0.05).status == "REJECTED"
            check_a_running_update(gate, web, llm)
            check_the_list_filters_and_other_pages(web, applied)
        check_the_list_in_chromium(browser, svc.url, applied, hostile, tmp_path)
        check_an_update_in_chromium(browser, svc.url, hostile, tmp_path)
    finally:
        if fleet is not None:
            fleet.stop_all()
        gate.close()


def check_a_pending_update(web, update_id: int) -> None:
    """No worker yet: the page says so, shows 0 of the pinned rows, and reloads itself."""
    html = web.get(f"/updates/{update_id}").text
    assert "Still pending" in html and '<body data-refresh="5">' in html and 'src="/static/live.js"' in html
    assert re.search(r'<progress max="13" value="0"></progress> 0 / 13', html)


def check_a_running_update(gate, web, llm) -> None:
    """A run the provider stops after 4 answers (429, retry in about a minute): items
    scored / total and the accuracy so far, then cancelled."""
    llm.faults.rate_limit_rpm = 4  # the local model server's own fault option, from now on
    running = gate.submit(
        rules_spec("support-triage", description="v3"), "check", source={"key": "running"}, reuse=False
    )
    wait_for(lambda: (gate.status(running).runs[0].scored or 0) >= 4, 20, "4 answers scored")
    html = web.get(f"/updates/{running}").text
    assert "Still running" in html and "data-refresh=" in html
    assert re.search(
        r'value="4"></progress> 4 / 13</td>\s*<td class="num"><strong>\d+\.\d%</strong> '
        r'<span class="muted">\(\d/4\)</span> <span class="muted">so far</span>',
        html,
    ), html
    gate.cancel(running)


def check_the_list_filters_and_other_pages(web, applied: int) -> None:
    only_applied = web.get("/", params={"status": "APPLIED"}).text
    assert f'href="/updates/{applied}"' in only_applied and only_applied.count('href="/updates/') == 1
    by_sha = web.get("/", params={"sha": SHA_APPLIED[:7]}).text
    assert f'href="/updates/{applied}"' in by_sha and by_sha.count('href="/updates/') == 1
    bad = web.get("/", params={"sha": "not-hex"})
    assert bad.status_code == 400 and "a commit SHA is hex digits" in bad.text
    datasets = web.get("/datasets").text
    assert "tickets" in datasets and "accuracy ≥ 60%" in datasets and "max broken 0" in datasets
    prompt = web.get("/prompts/support-triage").text
    assert "Live version <strong>1</strong>" in prompt and f'<a href="/updates/{applied}">#{applied}</a>' in prompt
    workers = web.get("/workers").text
    assert re.search(r'<div class="big">1</div>live workers', workers)
    assert re.search(r"<td>all</td>.*?[\d.]+ s ago", workers, re.S)
    missing = web.get("/updates/999999")
    assert missing.status_code == 404 and "unknown update" in missing.text and "Traceback" not in missing.text


def check_the_list_in_chromium(browser, url: str, applied: int, hostile: int, tmp_path) -> None:
    page = browser.dom(url + "/")
    assert page.title == "Updates · prompt-gate"
    rows = {row[0]: row for row in page.rows() if row and row[0].startswith("#")}
    assert rows[f"#{applied}"][1:4] == ["support-triage", "APPLIED", "apply"]
    assert rows[f"#{applied}"][4] == SHA_APPLIED[:10] and rows[f"#{applied}"][5] == "PR #12 · acme/prompts"
    assert "tickets 76.9% ≥ 60%" in rows[f"#{applied}"][8]
    assert rows[f"#{hostile}"][1:4] == ["support-triage", "REJECTED", "check"]
    assert "tickets 0.0% < bar 60%" in rows[f"#{hostile}"][8]
    assert [r[2] for r in rows.values()].count("CANCELLED") == 1
    browser.screenshot(url + "/", tmp_path / "status-page-list.png")


def check_an_update_in_chromium(browser, url: str, hostile: int, tmp_path) -> None:
    page = browser.dom(f"{url}/updates/{hostile}")
    # the markup is text: no image element was made, no handler ran, the text is on the page
    assert "img" not in page.tags and page.title == f"#{hostile} support-triage REJECTED · prompt-gate"
    assert HOSTILE_ID in page.text and HOSTILE_KEY in page.text
    rows = page.rows()
    assert ["tickets", "13 / 13", "0.0% (0/13)", "60%", "✘ fail", "13", "13", "0"] in rows
    assert [
        "tickets",
        "76.9% [49.7–91.8] v1",
        "0.0% [0.0–22.8]",
        "-76.9 pts",
        "\u221276.9 pts [\u221291.8, \u221241.4] (95% interval)",
        "0",
        "10",
        "0.00195: the difference is significant at 5%",
    ] in rows
    assert ["tickets", "accuracy", "60%", "0.0%", "✘ fail"] in rows  # one plain name per bar (issue 49.6)
    assert ["tickets", "items broken against live", "0", "10", "✘ fail"] in rows
    assert ["expected ↓ · answered →", "(invalid)", "items"] in rows and ["yes", "8", "8"] in rows
    hostile_row = next(r for r in rows if r and r[0] == HOSTILE_ID)
    # side by side (issue 49): its input's first lines, live's answer (right), the candidate's, its raw answer
    assert hostile_row[1].startswith("text: alpha") and hostile_row[2:4] == ["yes", "(invalid)"]
    assert HOSTILE_KEY in hostile_row[4]
    shot = browser.screenshot(f"{url}/updates/{hostile}", tmp_path / "status-page-update.png")
    assert (ARTIFACTS / shot.name).exists()


# --- who may look ------------------------------------------------------------------------


def test_pages_need_a_token_and_the_cookie_opens_only_the_pages(service):
    with httpx2.Client(base_url=service.url, timeout=30) as anonymous:
        for path in ("/", "/updates/1", "/datasets", "/prompts/p1", "/workers"):
            refused = anonymous.get(path)
            assert refused.status_code == 401 and refused.headers["content-type"].startswith("text/html"), path
            assert 'action="/login"' in refused.text and "Sign in" in refused.text
        assert anonymous.get("/static/style.css").status_code == 200  # the sign-in page needs it
    with service.client("read") as header:
        assert header.get("/").status_code == 200

    with httpx2.Client(base_url=service.url, timeout=30, follow_redirects=False) as browser:
        assert browser.post("/login", data={"token": "pg_wrong"}).status_code == 401
        other_site = browser.post(
            "/login", data={"token": service.tokens["read"]}, headers={"Origin": "https://evil.example"}
        )
        assert other_site.status_code == 403 and "set-cookie" not in other_site.headers
        signed_in = browser.post("/login", data={"token": service.tokens["read"], "next": "//evil.example/x"})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"
        cookie = signed_in.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        page = browser.get("/")
        assert page.status_code == 200 and "test-read-" in page.text and "Sign out" in page.text
        # the cookie opens no JSON route: a form on another site cannot submit through it
        assert browser.get("/v1/updates").status_code == 401
        assert (
            browser.post("/v1/updates", content=b"name: p1\n", headers={"content-type": "application/yaml"}).status_code
            == 401
        )
        assert browser.post("/logout").status_code == 303
        assert browser.get("/").status_code == 401

        browser.post("/login", data={"token": service.tokens["submit"]})
        assert browser.get("/workers").status_code == 200
        with service.client("admin") as admin:
            name = next(t["name"] for t in admin.get("/v1/tokens").json() if t["scope"] == "submit")
            assert admin.post(f"/v1/tokens/{name}/revoke").status_code == 200
        assert browser.get("/workers").status_code == 401  # a revoked token's cookie opens nothing


def test_behind_a_tls_proxy_the_sign_in_cookie_is_secure(mysql_url, tmp_path):
    """With --forwarded-allow-ips the proxy's X-Forwarded-Proto is trusted: a browser that
    came over https gets a Secure cookie; a server not told so ignores the header."""
    from support.service_harness import Service

    for args, secure in ((("--forwarded-allow-ips", "127.0.0.1"), True), ((), False)):
        service = Service(mysql_url, tmp_path, *args)
        try:
            with httpx2.Client(base_url=service.url, follow_redirects=False) as browser:
                host = service.url.removeprefix("http://")
                signed_in = browser.post(
                    "/login",
                    data={"token": service.tokens["read"]},
                    headers={"X-Forwarded-Proto": "https", "Origin": f"https://{host}"},
                )
            assert signed_in.status_code == 303, signed_in.text
            cookie = signed_in.headers["set-cookie"].lower()
            assert ("; secure" in cookie) is secure and "httponly" in cookie and "samesite=strict" in cookie
        finally:
            service.stop()

"""The PR comment's chart as a reader sees it: each Mermaid block of the golden comments
drawn by a real Mermaid 11 (npm, installed by `make mermaid`) in Debian's headless
Chromium at GitHub's comment width, and the rendered SVG measured — one bar series (no
bar drawn on top of another), one bar per dataset × version, each bar its own row, as long
as its value says, named by a readable label beside it and labelled with its value; and the
bar each must clear named in each row's label (issue 49.4: a line across datasets whose bars
differ zig-zagged, and a one-row chart drew none), and drawn as a threshold where every row has
the same bar (issue 35.8: it was a third bar of the same colour, read as a measurement): a line
of another colour, straight, at that bar. And the
whole comment, Markdown rendered by marked (GitHub-flavoured) with its chart, screenshot at
800 px wide into test-artifacts/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.cli import ROOT

from gate.report.markdown import mermaid_chart

GOLDEN = ROOT / "tests" / "golden"
ARTIFACTS = ROOT / "test-artifacts"
NODE = ROOT / ".cache" / "mermaid" / "node_modules"
MERMAID_JS = NODE / "mermaid" / "dist" / "mermaid.min.js"
MARKED_JS = NODE / "marked" / "lib" / "marked.umd.js"
COMMENT_WIDTH = 760  # px: a comment's body in a pull request's conversation (800 px window)


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """Mermaid 11 and marked from the npm registry, installed once (`make mermaid`)."""
    if not (MERMAID_JS.exists() and MARKED_JS.exists()):
        out = subprocess.run(["make", "-s", "mermaid"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"`make mermaid` failed: {out.stderr[-2000:]}"
    return NODE


def chromium_run(chromium: str, profile: Path, url: str, *args: str) -> str:
    out = subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--allow-file-access-from-files",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=10000",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"chromium exited {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


MEASURE = """
const box = el => { const r = el.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; };
const measure = async (source, i) => {
  const {svg} = await mermaid.render('chart-' + i, source);
  const out = document.getElementById('out-' + i);
  out.innerHTML = svg;
  const root = out.querySelector('svg');
  const texts = sel => [...root.querySelectorAll(sel)].map(t => ({text: t.textContent, ...box(t)}));
  return {
    svg: box(root), series: root.querySelectorAll('g.plot > g').length,
    bars: [...root.querySelectorAll('g.plot rect')].map(box),
    fills: [...new Set([...root.querySelectorAll('g.plot rect')].map(r => r.getAttribute('fill')))],
    lines: [...root.querySelectorAll('g.plot path')].map(
      p => ({d: p.getAttribute('d'), stroke: p.getAttribute('stroke')})),
    labels: texts('g.left-axis g.label text'), values: texts('g.plot text'),
    title: root.querySelector('g.chart-title text')?.textContent || ''};
};
mermaid.initialize({startOnLoad: false});
(async () => {
  const drawn = [];
  for (const [i, source] of SOURCES.entries()) {
    try { drawn.push(await measure(source, i)); } catch (e) { drawn.push({error: String(e)}); }
  }
  document.getElementById('result').textContent = JSON.stringify(drawn);
})();
"""


def render_charts(chromium: str, folder: Path, sources: list[str]) -> dict[str, dict]:
    """Each source drawn by Mermaid in a box of its own (a comment's width), all in one page
    of one Chromium (one start, ~2 s of CPU, instead of one a chart): source → what was drawn
    (``error``: why Mermaid refused it)."""
    page = folder / "charts.html"
    boxes = "".join(f'<div id="out-{i}" style="width:{COMMENT_WIDTH}px"></div>' for i in range(len(sources)))
    page.write_text(f"""<!doctype html><html><head><meta charset="utf-8">
<script src="{MERMAID_JS.as_uri()}"></script></head>
<body style="margin:0;font-family:sans-serif">{boxes}<pre
id="result"></pre>
<script>const SOURCES = {json.dumps(sources)};{MEASURE}</script></body></html>""")
    dom = chromium_run(chromium, folder / "profile", page.as_uri(), "--dump-dom")
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found and found.group(1).strip(), "Mermaid drew nothing"
    drawn = json.loads(
        found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    )
    return dict(zip(sources, drawn, strict=True))


def drawn_right(drawn: dict) -> dict:
    assert "error" not in drawn, f"Mermaid refused the chart: {drawn['error']}"
    return drawn


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, re.S)


def declared(source: str, kind: str = "bar") -> tuple[list[str], list[float]]:
    """The chart's categories and the values of its one series of ``kind`` (bar, line), as
    the block declares them."""
    categories = re.findall(r'"([^"]*)"', re.search(r"x-axis \[(.*)\]", source).group(1))
    series = re.findall(rf"^\s*{kind} \[(.*)\]", source, re.M)
    assert len(series) == 1, f"{len(series)} {kind} series"
    return categories, [float(v) for v in series[0].split(",")]


def assert_reads_right(drawn: dict, source: str) -> None:
    has_line = bool(re.search(r"^\s*line \[", source, re.M))
    assert drawn["series"] == 1 + has_line, f"{drawn['series']} series: one of bars (and one line, the bar to clear)"
    categories, values = declared(source)
    assert all(re.search(r" · bar \d+(\.\d+)?%$", c) for c in categories), categories  # each row its own bar
    bars = sorted(drawn["bars"], key=lambda b: b["y"])
    assert len(bars) == len(categories) == len(values), (len(bars), categories, values)
    assert drawn["svg"]["w"] <= COMMENT_WIDTH + 0.5, "the chart is wider than a comment"
    for upper, lower in zip(bars, bars[1:]):  # each bar its own row: none covers another
        assert upper["y"] + upper["h"] <= lower["y"] + 0.5, (upper, lower)
    for bar in bars:
        assert bar["h"] >= 8 and bar["w"] > 0, bar
    # as long as its value says: width = a + b * value on one scale for every bar
    lo, hi = min(range(len(values)), key=values.__getitem__), max(range(len(values)), key=values.__getitem__)
    if values[hi] > values[lo]:
        scale = (bars[hi]["w"] - bars[lo]["w"]) / (values[hi] - values[lo])
        assert scale > 0
        for bar, value in zip(bars, values):
            assert abs(bar["w"] - (bars[lo]["w"] + scale * (value - values[lo]))) < 1.5, (bar, value)
    labels = sorted(drawn["labels"], key=lambda t: t["y"])
    assert [t["text"] for t in labels] == categories
    for label, bar in zip(labels, bars):  # beside its own bar, whole, readable, left of the bars
        assert bar["y"] <= label["y"] + label["h"] / 2 <= bar["y"] + bar["h"], (label, bar)
        assert label["h"] >= 11, f"label {label['text']!r} is {label['h']:.1f} px high"
        assert label["x"] >= drawn["svg"]["x"] - 0.5 and label["x"] + label["w"] <= bars[0]["x"] + 0.5, label
    for upper, lower in zip(labels, labels[1:]):
        assert upper["y"] + upper["h"] <= lower["y"] + 0.5, (upper, lower)
    shown = sorted(float(t["text"]) for t in drawn["values"])
    assert shown == sorted(values), "each bar carries its value"
    for t in drawn["values"]:
        assert t["x"] >= drawn["svg"]["x"] and t["x"] + t["w"] <= drawn["svg"]["x"] + drawn["svg"]["w"] + 0.5, t
    assert drawn["title"].startswith("Accuracy (%)")
    if has_line:
        assert_the_bar_is_a_threshold(drawn, source, bars, values)


def assert_the_bar_is_a_threshold(drawn: dict, source: str, bars: list, values: list) -> None:
    """The bar to clear: one line, of a colour no measured bar has, through each row at its
    dataset's bar on the bars' own scale."""
    _, thresholds = declared(source, "line")
    (line,) = drawn["lines"]
    assert len(drawn["fills"]) == 1 and line["stroke"].lower() != drawn["fills"][0].lower(), (line, drawn["fills"])
    points = [tuple(map(float, p.split(","))) for p in re.findall(r"[ML]([\d.]+,[\d.]+)", line["d"])]
    assert len(points) == len(bars) == len(thresholds) and len(set(thresholds)) == 1  # straight: no zig-zag
    known = [(v, b["w"]) for v, b in zip(values, bars) if v > 0]
    (v1, w1), (v2, w2) = min(known), max(known)
    scale = (w2 - w1) / (v2 - v1) if v2 > v1 else w1 / v1
    for (x, y), bar, threshold in zip(points, bars, thresholds):
        assert abs(x - (bar["x"] + w1 + scale * (threshold - v1))) < 1.5, (x, bar, threshold)
        assert bar["y"] <= y <= bar["y"] + bar["h"], (y, bar)


GOLDENS = ["pr_comment.md", "push_comment.md", "demo_report.md"]


def long_named_chart() -> str:
    """Six datasets with names at the cut (24 characters), live compared on some, one with
    nothing scored."""
    runs = [
        SimpleNamespace(
            dataset=f"support-tickets-{i}-" + "x" * 30,
            accuracy=None if i == 4 else 0.5 + i / 20,
            bar=Decimal(f"{0.8 + i / 100:.2f}"),
            comparison={"live_accuracy": 0.6 + i / 30} if i % 2 else None,
        )
        for i in range(6)
    ]
    return mermaid_chart(runs).strip("`").removeprefix("mermaid\n")


def one_row_chart() -> str:
    runs = [SimpleNamespace(dataset="invoices", accuracy=0.5, bar=Decimal("0.85"), comparison=None)]
    return mermaid_chart(runs).strip("`").removeprefix("mermaid\n")


@pytest.fixture(scope="module")
def drawn(chromium, node_modules, tmp_path_factory) -> dict[str, dict]:
    """Every chart of this module's tests (the golden comments', the long-named, the one-row)
    drawn in one Chromium: source → what was drawn."""
    sources = [block for name in GOLDENS for block in mermaid_blocks((GOLDEN / name).read_text())]
    return render_charts(chromium, tmp_path_factory.mktemp("charts"), [*sources, long_named_chart(), one_row_chart()])


@pytest.mark.parametrize("golden", GOLDENS)
def test_the_golden_comments_charts_read_right_in_mermaid(golden, drawn):
    blocks = mermaid_blocks((GOLDEN / golden).read_text())
    assert blocks, f"{golden} has no chart"
    for source in blocks:
        assert_reads_right(drawn_right(drawn[source]), source)


def test_a_chart_of_many_long_named_datasets_still_reads_right(drawn):
    """Six datasets with names at the cut (24 characters), live compared on some, one with
    nothing scored: no label runs off the chart, no bar hides another; a dataset without a
    comparison has no live bar, one with nothing scored no candidate bar."""
    source = long_named_chart()
    categories, _ = declared(source)
    assert "support-tickets-4-xxxxxx · candidate · bar 84%" not in categories  # nothing scored: no bar, not a 0
    assert len(categories) == 5 + 3 + 1 and categories[:2] == [
        "support-tickets-0-xxxxxx · candidate · bar 80%",
        "support-tickets-1-xxxxxx · live · bar 81%",
    ]
    assert "support-tickets-4-xxxxxx · nothing scored · bar 84%" in categories  # its bar still shows
    assert "line [" not in source  # bars that differ: no line joining them
    assert not any(c.endswith("· bar") for c in categories)  # the bar is no measurement
    assert_reads_right(drawn_right(drawn[source]), source)


def test_a_one_row_chart_still_shows_its_bar(drawn):
    """One dataset: its row is named with its bar (a line of one point drew nothing)."""
    source = one_row_chart()
    assert declared(source)[0] == ["invoices · candidate · bar 85%"]
    assert_reads_right(drawn_right(drawn[source]), source)


def test_the_rendered_pr_comment_screenshot(chromium, node_modules, tmp_path):
    """The golden PR comment as GitHub shows it (Markdown by marked, details opened, the
    chart by Mermaid) at 800 px wide, kept as test-artifacts/pr_comment.png."""
    text = (GOLDEN / "pr_comment.md").read_text()
    page = tmp_path / "comment.html"
    page.write_text(f"""<!doctype html><html><head><meta charset="utf-8">
<script src="{MARKED_JS.as_uri()}"></script><script src="{MERMAID_JS.as_uri()}"></script>
<style>body{{margin:0;font:14px/1.5 sans-serif;color:#1f2328}}
#c{{width:{COMMENT_WIDTH}px;padding:0 20px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #d0d7de;padding:3px 8px}} code{{background:#eff1f3}}</style></head>
<body><article id="c"></article><script>
const c = document.getElementById('c');
c.innerHTML = marked.parse({json.dumps(text)});
c.querySelectorAll('details').forEach(d => d.open = true);
c.querySelectorAll('code.language-mermaid').forEach(code => {{
  const div = document.createElement('div'); div.className = 'mermaid'; div.textContent = code.textContent;
  code.parentElement.replaceWith(div); }});
mermaid.initialize({{startOnLoad: false}});
mermaid.run({{querySelector: '.mermaid'}}).then(() => document.body.dataset.drawn = 'yes');
</script></body></html>""")
    shot = tmp_path / "pr_comment.png"  # the page's DOM and its screenshot from one Chromium start
    dom = chromium_run(
        chromium, tmp_path / "profile", page.as_uri(), "--dump-dom", f"--screenshot={shot}", "--window-size=800,2600"
    )
    assert 'data-drawn="yes"' in dom and dom.count('aria-roledescription="xychart"') == 2, "the charts were not drawn"
    assert shot.stat().st_size > 10_000, "the screenshot is (nearly) empty"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / shot.name)

"""Everything shown is escaped. A project whose commit subjects, branch, suite, model name,
server errors and log carry attacks (tests/helpers/hostile_repo.py): the published site run in real
headless Chromium runs none of them and fetches nothing; the pull request's summary and the
Markdown report hold no HTML, image, link or @mention the harness did not write, and one table
row per metric; the terminal gets no escape sequence and no rich markup read as markup."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness import escape
from harness.report.merge import Row, Shard, merged_markdown
from harness.report.summary import headline

from helpers.hostile_repo import RICH, SENTINEL, build_hostile

CHROMIUM = shutil.which("chromium")
CSP_META = '<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;'


class Beacon:
    """A loopback HTTP server that records every request: the payloads' URLs point here."""

    def __init__(self) -> None:
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def beacon():
    b = Beacon()
    yield b
    b.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, beacon):
    return build_hostile(tmp_path_factory.mktemp("hostile"), beacon.url)


def elements(dom: str) -> list[tuple[str, list]]:
    """Every element of a dumped DOM: (tag, attributes)."""
    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list) -> None:
            found.append((tag, attrs))

    Parser().feed(dom)
    return found


def pages(site: Path) -> list[Path]:
    return [site / "index.html", *sorted((site / "results").rglob("*.html"))]


@pytest.mark.timeout(900)
@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed")
def test_the_site_runs_no_payload_and_fetches_nothing_in_chromium(hostile, beacon):
    found = pages(hostile.site)
    assert len(found) == 3, found  # the index and the two A/Bs' report pages
    index = found[0].read_text()
    assert index.count("<h2") == 4  # 2 metrics of the suite, 2 of the forged one (escaped)
    assert "&lt;img src=" in index and "&lt;script&gt;" in index
    assert "<script" not in index.lower() and "<img" not in index.lower()
    for page in found:
        html = page.read_text()
        assert CSP_META in html, page
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip
        assert "</body>" in dom, (page, dom[-2000:])
        body = re.search(r"<body[^>]*>", dom).group()
        assert SENTINEL not in body, (page, body)
        tags = elements(dom)
        assert not [t for t in tags if t[0] in ("script", "iframe", "object", "embed")], page
        assert not [t for t in tags if any(k.startswith("on") for k, _ in t[1])], page
        images = [dict(a).get("src") for tag, a in tags if tag == "img"]
        assert all(HARNESS_IMAGES.fullmatch(src or "") for src in images), images
        assert len([t for t in tags if t[0] == "svg"]) == (4 if page == found[0] else 0), page
    assert all("&lt;img src=" in p.read_text() for p in found[1:])  # shown as text, escaped
    assert beacon.hits == []


def test_an_href_from_a_file_name_is_quoted(hostile):
    index = (hostile.site / "index.html").read_text()
    hrefs = re.findall(r'<a href="([^"]*)"', index)
    assert hrefs and all(re.fullmatch(r"[A-Za-z0-9_.~/%-]+", h) for h in hrefs), hrefs
    assert any("%22%3E%3Csvg" in h for h in hrefs), hrefs


GFM = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "linkify"])
try:  # linkify needs linkify-it-py: without it, check autolinks by the raw text only
    GFM.render("www.example.com")
except ModuleNotFoundError:
    GFM = MarkdownIt("commonmark", {"html": True}).enable("table")
HARNESS_IMAGES = re.compile(r"[\w.-]+-(rss|ttft|time|capacity|throughput|latency)\.png")


def check_markdown(text: str, metric_tables: int) -> None:
    """No raw HTML from the inputs, no image or link the harness did not make, no live
    @mention or escape sequence; each metric table one row per metric."""
    assert "\x1b" not in text and "\x07" not in text
    prose = re.sub(r"(`+)[^`].*?(?<!`)\1(?!`)", "", text)  # code spans show their text as is
    prose = re.sub(r"^(`{3,}).*?^\1$", "", prose, flags=re.S | re.M)  # and so do fences
    assert not re.search(r"(?<!\\)<\s*(img|script|svg)", prose, re.I), prose  # only as \\<
    assert not re.search(r"(?<!\w)@\w", prose), prose  # a live mention
    tokens = GFM.parse(text)
    inline = [t for tok in tokens if tok.children for t in tok.children]
    assert not [t for tok in tokens for t in [tok] if t.type in ("html_block", "html_inline")]
    assert not [t for t in inline if t.type == "html_inline"], text
    images = [t.attrs.get("src", "") for t in inline if t.type == "image"]
    assert all(HARNESS_IMAGES.fullmatch(str(src)) for src in images), images
    links = [t.attrs.get("href", "") for t in inline if t.type == "link_open"]
    assert links == [], links
    tables = [tok for tok in tokens if tok.type == "table_open"]
    rows_per_table = []
    in_body, count = False, 0
    for tok in tokens:
        if tok.type == "tbody_open":
            in_body, count = True, 0
        elif tok.type == "tbody_close":
            in_body = False
            rows_per_table.append(count)
        elif in_body and tok.type == "tr_open":
            count += 1
    assert len(tables) >= metric_tables
    return rows_per_table


def test_the_summary_and_the_report_show_the_payloads_as_text(hostile):
    summary = hostile.summary.read_text()
    print(summary)
    rows = check_markdown(summary, 1)
    assert rows[0] == 2, summary  # ttft_p50_ms, ttft_p95_ms: one row each
    assert "evil\\<img/src=x/onerror=" in summary  # the branch, shown as text
    invalid = hostile.invalid_summary.read_text()
    print(invalid)
    check_markdown(invalid, 0)
    assert "error \\<img src=" in invalid and "\\[bold red\\]" in invalid  # the server's error
    reports = {p.name: p.read_text() for p in hostile.ab_dir.glob("*.md")}
    assert len(reports) == 2, list(reports)
    text = next(t for name, t in reports.items() if "-vs-evil-" in name)
    check_markdown(text, 1)
    metrics = text.split("## Metrics", 1)[1].split("\n\n")[1]
    assert len([ln for ln in metrics.splitlines() if ln.startswith("| ttft")]) == 2, metrics
    assert "model `model <img src=" in text  # the served model, shown as code
    text = next(t for name, t in reports.items() if "-vs-evil-" not in name)
    check_markdown(text, 0)
    assert "error \\<img src=" in text


@pytest.mark.parametrize("command", ["run", "ab", "history"])
def test_the_terminal_gets_no_escape_sequence_and_no_markup(hostile, command):
    out = hostile.outputs[command]
    assert out, command
    bad = sorted({f"{ord(c):#04x}" for c in out if ord(c) < 32 and c not in "\n" or c == "\x7f"})
    assert bad == [], (bad, out)
    if command != "history":  # history prints the subjects of change points only: none here
        assert RICH in out, out
    assert "mallory" in out or command == "history"


def test_markdown_escaping_leaves_nothing_live():
    s = escape.markdown("<b>x</b> ![i](http://h/i.png) [l](javascript:x) @bob #12 a|b\nc `d`")
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(s)
    assert "<b>" not in html and "<img" not in html and "<a " not in html
    assert "@\u200bbob" in s and "|" not in s.replace("\\|", "") and "\n" not in s
    assert escape.markdown("snake_case_name") == "snake_case_name"  # inert inside a word
    assert escape.markdown("main@1a2b3c4d") == "main@1a2b3c4d"  # a ref's label: no mention
    assert escape.markdown("x@example.com") == "x@\u200bexample.com"  # no e-mail autolink
    assert escape.markdown("_emph_") == "\\_emph\\_"
    assert escape.markdown("\x1b[31mred\x1b[0m \x07") == "red \\\\x07"
    assert escape.markdown("2026-12-02 - 1. x") == "2026-12-02 - 1. x"
    assert escape.markdown("- x") == "\\- x" and escape.markdown("1. x") == "1\\. x"
    assert escape.markdown("---") == "\\---" and escape.markdown("8.0 GiB") == "8.0 GiB"


def test_a_code_span_and_a_fence_cannot_be_closed_from_inside():
    md = MarkdownIt("commonmark").enable("table")
    span = escape.code_span("a ``` b ` c")
    assert span.startswith("````") and md.render(span).count("<code>") == 1
    assert "a ``` b ` c" in md.render(span)
    assert escape.code_span("`x`") == "`` `x` ``"
    assert escape.code_span("a|b", table=True) == "`a\\|b`"
    block = escape.fence("line\n```\n<img src=x>\n````")
    html = md.render(block + "\n\n<b>after</b>")
    assert html.count("<pre>") == 1 and "&lt;img src=x&gt;" in html
    assert block.startswith("`````\n")


def test_terminal_escaping_drops_sequences_and_shows_controls():
    s = escape.terminal("\x1b[31mred\x1b]0;title\x07\x1b[2J\rover\nnext")
    assert s == "red\\x0dover / next"
    assert escape.terminal("a\nb", multiline=True) == "a\nb"
    assert escape.terminal("\u202eevil") == "\\x202eevil"


def test_a_newline_or_a_bar_in_a_name_adds_no_row_to_the_merged_table():
    evil = "s\n| forged | row | x | x | x | PASS | x |\n<img src=x onerror=alert(1)> @bob"
    rows = tuple(
        Row(evil, "m|x", name, "+1.0%", "[0%, 2%]", "PASS", "x\n.json")
        for name in ("ttft_p50_ms", "ttft_p95_ms")
    )
    text = merged_markdown([Shard(Path("a.json"), "ab", "PASS", 0, rows)])
    assert check_markdown(text, 1) == [2], text  # one row per metric, the forged one none
    assert all(line.count(" | ") == 6 for line in text.splitlines() if line.startswith("| s"))


def test_a_summary_escapes_what_names_and_messages_carry():
    said = headline("ab", "INVALID", 2, "s, main@1a2b vs x|<b>@bob", "first: ![i](http://h/i.png)")
    assert said.count("\n") == 0 and "main@1a2b" in said and "@\u200bbob" in said
    html = MarkdownIt("commonmark", {"html": True}).render(said)
    assert "<img" not in html and "<b>" not in html

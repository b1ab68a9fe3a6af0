"""The report layer on fake but realistic run records: file naming, section order, plots,
re-rendering from JSON, warnings, and the offline compare of two saved files."""

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from harness.report.ab_report import rerender_report, slug, to_plain, write_report
from harness.report.engagement import engagement
from harness.report.plots import arm_runs, label_rows
from harness.results.ab_result import ABResult, Round
from harness.results.errors import ComparisonError
from harness.runs.offline import compare_saved
from harness.stats.compare import compare_rounds

from helpers.fake_runs import crashed, realistic_run


def write_doc(result: dict | ABResult, out_dir) -> Path:
    """The report of an A/B result built here as `harness ab` saves one."""
    if isinstance(result, dict):
        result = ABResult.from_json(to_plain(result))
    return write_report(result, out_dir)


TOLERANCES = {"ttft_p50_ms": 0.10, "ttft_p95_ms": 0.10, "tok_s": 0.10, "peak_rss_bytes": 0.05}
SECTIONS = [
    "## Metrics",
    "## Rounds",
    "## Arms",
    "## Engagement counters",
    "## Machine and load",
    "## Minimum detectable effect",
    "## Warnings",
    "## Reproduce",
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def arm(label: str, commit: str) -> dict:
    return {
        "label": label,
        "ref": label,
        "commit": commit,
        "flags": ["--parallel", "4"],
        "env": {"ENGINE_LOG": "info"},
        "cmd": ["engine", "serve"],
    }


def ab_result(*, head_ttft=3300.0, head_commit="bbb2222", crash=None, rounds=4) -> dict:
    rng = np.random.default_rng(11)

    def run(ttft, commit):
        return realistic_run(rng, ttft_ms=ttft, tok_s=68.0, rss_peak=1.6e9, commit=commit)

    rnds = [
        {
            "round": i,
            "order": ["base", "head"] if i % 2 == 0 else ["head", "base"],
            "base": run(2900.0, "aaa1111"),
            "head": run(head_ttft, head_commit),
            "null": run(2900.0, "aaa1111"),
        }
        for i in range(rounds)
    ]
    for rnd in rnds:  # names with pipes reach table cells: a label value and a phase
        for side, n in (("base", 1.0), ("head", 5.0), ("null", 1.0)):
            rnd[side]["counters"]["load"]['odd_total{kind="a|b"}'] = n
            rnd[side]["counters"]["x|y"] = {"engine_decode_steps_total": 10.0 * n}
    return {
        "suite": "chat 4c",
        "base": arm("main", "aaa1111deadbeef"),
        "head": arm("feat/prefill|cap", "bbb2222feedface"),
        "rounds": rnds,
        "comparison": compare_rounds(rnds, TOLERANCES, 64 * 2**20, crash=crashed(crash)),
        "command": "harness ab --base main --head feat/prefill --suite chat-4c --rounds 4",
        "created": "2026-07-14T09:30:00+00:00",
        "crash": crash,
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    return write_doc(ab_result(), out)


def test_file_names_are_dated_and_path_safe(report):
    assert report.name == "2026-07-14-chat-4c-main-vs-feat-prefill-cap.md"
    assert report.with_suffix(".json").is_file()
    assert slug("../../etc/passwd") == "etc-passwd"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", slug("origin/HEAD~1 (dirty) ✓"))


def test_verdict_comes_first_then_sections_in_order(report):
    text = report.read_text()
    assert text.splitlines()[0].startswith("# REGRESSION: exit 1 (")
    assert "regressed: ttft_p50_ms" in text.splitlines()[0]
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)


def tables_of(text: str) -> list[list[str]]:
    """Each Markdown table of the text: its consecutive lines that start with a pipe."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables, current = [*tables, current], []
    return tables


def test_tables_keep_their_shape_despite_pipes_in_names(report):
    text = report.read_text()
    tables = tables_of(text)
    assert len(tables) >= 4
    for table in tables:  # every row has the header's number of unescaped pipes
        assert len({len(re.findall(r"(?<!\\)\|", row)) for row in table}) == 1, table
    assert '`odd_total{kind="a\\|b"}`' in text and "| x\\|y |" in text


def test_plots_are_real_pngs(report):
    for suffix in ("-rss.png", "-ttft.png", "-time.png", "-capacity.png"):
        png = report.with_name(report.stem + suffix)
        data = png.read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 1024
        assert f"]({png.name})" in report.read_text()


def test_rerender_from_json_gives_the_same_markdown(report, tmp_path):
    saved = tmp_path / "copy.json"
    saved.write_bytes(report.with_suffix(".json").read_bytes())
    raw = report.with_name(report.stem + ".raw.json.gz")
    (tmp_path / raw.name).write_bytes(raw.read_bytes())
    again = rerender_report(saved)
    assert again.parent == tmp_path and again.name == report.name
    assert again.read_text() == report.read_text()


def test_the_json_beside_a_report_is_slim_and_the_raw_data_compressed(report, tmp_path):
    slim, raw = report.with_suffix(".json"), report.with_name(report.stem + ".raw.json.gz")
    data = json.loads(slim.read_text())
    runs = [rnd[a] for rnd in data["rounds"] for a in ("base", "head") if rnd.get(a)]
    assert runs and not any("timeline" in r or "requests" in r for r in runs)
    assert all(r["request_count"] == 49 for r in runs) and data["raw"] == raw.name
    full = json.loads(gzip.decompress(raw.read_bytes()))
    assert all(rnd["base"]["timeline"]["t"] for rnd in full["rounds"])
    assert slim.stat().st_size < len(json.dumps(full)) / 3
    # the slim JSON alone: every table, no plots, and why
    (tmp_path / "alone.json").write_bytes(slim.read_bytes())
    text = rerender_report(tmp_path / "alone.json").read_text()
    assert f"Not drawn: the raw data ({raw.name}) is not here." in text
    assert "requests per run (median): 49" in text


def test_warns_when_an_arm_reports_another_commit(tmp_path):
    text = write_doc(ab_result(head_commit="ccc3333"), tmp_path).read_text()
    assert "head was asked for commit bbb2222feedface but reported ccc3333" in text
    assert "base was asked" not in text


def test_crash_is_invalid_with_the_log_tail(tmp_path):
    crash = {"arm": "head", "round": 2, "message": "server exited with code -9 under load",
             "log_tail": "RuntimeError: out of memory\nKilled"}  # fmt: skip
    text = write_doc(ab_result(crash=crash), tmp_path).read_text()
    assert text.startswith("# INVALID: exit 2 (")
    assert "invalid: arm head crashed" in text
    assert "```\nRuntimeError: out of memory\nKilled\n```" in text


def test_offline_compare_of_two_saved_files(tmp_path):
    ab = ab_result(head_ttft=2900.0)
    rng = np.random.default_rng(3)
    slower = [
        realistic_run(rng, ttft_ms=3800.0, tok_s=68.0, rss_peak=1.6e9, commit="ddd")
        for _ in range(3)
    ]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(ab, default=lambda o: o.to_json()))
    b.write_text(json.dumps({"runs": slower}))
    result = compare_saved(a, b, created="2026-07-15")
    comparison = result.comparison
    assert comparison.verdict == "REGRESSION" and comparison.rounds == 3
    assert any("only the first 3" in w for w in comparison.warnings)
    assert result.head.commit == "ddd" and result.head.label == "b"
    md = write_doc(result, tmp_path / "results")
    assert md.name == "2026-07-15-chat-4c-feat-prefill-cap-vs-b.md"
    slower[0]["fingerprint"] = "another-workload"
    b.write_text(json.dumps({"runs": slower}))
    with pytest.raises(ComparisonError, match="another-workload"):
        compare_saved(a, b)


def test_flags_and_env_are_separate_lines(report):
    text = report.read_text()
    assert "- flags: `--parallel 4`\n- env: `ENGINE_LOG=info`\n" in text


def test_engagement_shows_expected_and_differing_series_and_folds_the_rest():
    def run(steps: float, counters: bool = True) -> dict:
        rule = {"series": 'engine_prefill_forwards_total{path="batched"}'}
        deltas = {
            'engine_prefill_forwards_total{path="batched"}': 1.0,
            'engine_prefill_forwards_total{path="chunked"}': 0.0,
            "engine_decode_steps_total": steps,
            "engine_queue_depth": steps,  # a gauge: its delta means little
        }
        return {
            "summary": {},
            "phases": {"load": {"expect": [rule]}},
            "counters": {"load": deltas} if counters else {},
        }

    # null stands for a server without /metrics: it differs in nothing
    rounds = [{"base": run(100), "head": run(150), "null": run(0, False)} for _ in range(2)]
    arms, shown, folded = engagement(arm_runs([Round.from_json({"round": 1} | r) for r in rounds]))
    assert arms == ["base", "head", "null"]
    assert [(r.series, r.why) for r in shown] == [
        ('engine_prefill_forwards_total{path="batched"}', "expected"),
        ("engine_decode_steps_total", "differs"),
    ]
    assert [r.series for r in folded] == [
        'engine_prefill_forwards_total{path="chunked"}',
        "engine_queue_depth",
    ]
    assert shown[1].means == ["100", "150", "—"]


def test_phase_names_take_free_rows():
    # three names close together and one far away: no two on a row may overlap
    assert label_rows([0.10, 0.12, 0.14, 0.80], [0.05, 0.05, 0.05, 0.05]) == [0, 1, 2, 0]
    assert label_rows([0.1, 0.3], [0.1, 0.1]) == [0, 0]


def test_report_states_the_power_it_achieved(tmp_path):
    ab = ab_result()
    for i, rnd in enumerate(ab["rounds"]):
        rnd["wall_s"] = 60.0 + i
    text = write_doc(ab, tmp_path).read_text()
    mde = text.split("## Minimum detectable effect")[1].split("## Warnings")[0]
    power = [line for line in mde.splitlines() if "(null arm)" in line]
    assert len(power) == 3  # TTFT p50, p95, tok/s: the null arm is the noise floor
    # one look at 4 rounds: the whole 1% split over the three interval-judged metrics
    assert re.fullmatch(
        r"\| ttft_p50_ms \| \d+\.\d% \| \d+\.\d% \(null arm\) \| 0.0033 \| 1\.\d{3}x \|", power[0]
    )
    assert "Looks: 4 rounds (stopped after 4)" in mde
    assert "median 62 s per round (60, 61, 62, 63; 4.1 min in all)" in mde


def test_a_result_without_any_run_renders_without_plots(tmp_path):
    # an arm that cannot start in round 1 leaves rounds with no run: the report still renders
    ab = ab_result()
    for rnd in ab["rounds"]:
        rnd["base"] = rnd["head"] = rnd["null"] = None
    text = write_doc(ab, tmp_path).read_text()
    assert "Not drawn: no run completed." in text and not list(tmp_path.glob("*.png"))


def test_a_server_that_does_not_report_its_commit_is_not_held_to_one(tmp_path):
    ab = ab_result(head_commit="ccc3333")
    for rnd in ab["rounds"]:
        for arm in ("base", "head", "null"):
            rnd[arm]["arm"]["reports_commit"] = False
    text = write_doc(ab, tmp_path).read_text()
    assert "was asked for commit" not in text


def test_reports_are_readable_by_others_as_open_would_make_them(tmp_path):
    report = write_doc(ab_result(), tmp_path)
    for path in (report, report.with_suffix(".json")):
        assert path.stat().st_mode & 0o777 == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_no_python_none_no_empty_table_no_raw_bytes_and_a_pinned_reproduce(tmp_path):
    """What a newcomer reads: every table has rows, no `None`, memory in MiB/GiB, the
    reproduce line pinned to the commits each ref resolved to (shapes: a full A/B, one whose
    head crashed before any run, two command arms with no commit)."""
    full = ab_result()
    crashed = ab_result(crash={"arm": "head", "round": 0, "message": "exit 1", "log_tail": "x"})
    for rnd in crashed["rounds"]:
        rnd["base"] = rnd["head"] = rnd["null"] = None
    commands = ab_result()
    for side in ("base", "head"):
        commands[side] |= {"ref": None, "commit": None, "cmd": "{python} srv.py --port {port}"}
    for i, result in enumerate((full, crashed, commands)):
        text = write_doc(result, tmp_path / str(i)).read_text()
        assert not re.search(r"\bNone\b", text), text
        for table in tables_of(text):
            assert len(table) >= 3, table  # a header, its rule and at least one row
        assert not re.search(r"\b\d{7,}\b", text.split("## Reproduce")[0]), "a raw byte count"
    text = write_doc(full, tmp_path / "pinned").read_text()
    assert "harness ab --base aaa1111deadbeef --head bbb2222feedface --suite chat-4c" in text
    assert "- memory: 8.0 GiB" in text and "range [" in text


def test_two_results_of_one_day_and_arms_get_two_names_and_a_rerender_keeps_its_own(tmp_path):
    first = write_doc(ab_result(), tmp_path)
    later = ab_result() | {"created": "2026-07-14T17:05:09+00:00"}
    second = write_doc(later, tmp_path)
    assert second != first and second.name == first.stem + "-170509.md"
    assert rerender_report(first.with_suffix(".json")) == first  # its own name, not a third
    assert len(list(tmp_path.glob("*.md"))) == 2

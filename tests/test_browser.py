"""The committed reports in a real browser (headless Chromium through Playwright): report.html as written and
report.md as GitHub renders it. Every image decodes, no table is wider than its column, the headline is in the
first screen, every table has its rows. ``make audit`` installs the browser (scripts/setup-browser.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repro.core.analysis.rundata import load_run
from repro.report import mermaid
from repro.report.analyse import analyse
from repro.report.browser import BrowserUnavailable, check_run, chromium, find_mermaid
from repro.report.comment import render_comment
from repro.report.markdown import render_report
from repro.report.template import Page, Target, render_page

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.audit]

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
RUNS = sorted(p for base in (H200, H200.parent / "h100") for p in base.iterdir() if (p / "manifest.json").is_file())


@pytest.fixture(scope="module")
def browser():
    """One Chromium for this module's tests (closed before a test of another module runs: Playwright's sync API
    holds an event loop in this thread while it is open)."""
    try:
        with chromium() as started:
            yield started
    except BrowserUnavailable as exc:
        pytest.skip(f"no browser for this test here: {exc}")


def _expected_rows(run_dir: Path) -> dict[str, list[int]]:
    """Rows of every table each page shows, as the renderers recorded them (report.html shows report.md's)."""
    analysis = analyse(load_run(run_dir))
    md = render_report(analysis, []).tables
    comment = Page(Target.COMMENT)
    render_page(analysis, comment)
    assert render_comment(analysis)  # the same sections, limited to 16 KB (none is left out of these runs)
    rows = [len(t) for t in md]
    return {"report.md (GitHub)": rows, "pr-comment.md (GitHub comment)": [len(t) for t in comment.tables]}


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.name)
def test_committed_report_reads_well_in_a_browser(run_dir, tmp_path, browser):
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("logs", "screenshots"))
    checks = check_run(copy, browser=browser)
    assert [c.name for c in checks] == ["report.md (GitHub)", "pr-comment.md (GitHub comment)", "report.html"]
    rows = _expected_rows(run_dir)
    charts = len(mermaid.blocks((run_dir / "pr-comment.md").read_text()))
    for c in checks:
        assert c.problems == [], c.problems
        if c.name == "pr-comment.md (GitHub comment)":
            assert c.images == 0
            assert c.charts == (["xychart-beta"] * charts if find_mermaid() else [])  # each drawn by Mermaid
        else:
            assert c.images == len(list((run_dir / "plots").glob("*.png")))
        if c.name in rows:
            assert c.table_rows == rows[c.name], c.name
        else:
            assert sorted(c.table_rows) == sorted(rows["report.md (GitHub)"])  # the same tables, in HTML
        if c.name == "pr-comment.md (GitHub comment)":
            assert c.headline == "Purpose"  # the PR template's first heading; the verdict is its first line
        else:
            run = load_run(run_dir)
            timing_only = set(run.manifest["notebooks"]) == {"03-performance"}  # measures, reproduces nothing
            assert c.headline.startswith(
                ("Measurements" if timing_only else "Reproduced") if run.finished else "Incomplete"
            )
        assert c.screenshot.is_file() and c.screenshot.stat().st_size > 10_000
        assert c.screenshot.parent == copy / "screenshots"


def test_mermaid_itself_draws_the_charts_or_the_test_says_why_not(browser):
    if find_mermaid() is None:
        pytest.skip("no Mermaid build here: scripts/setup-mermaid.sh installs it with npm (or set REPRO_MERMAID)")


def test_a_wide_table_and_a_broken_image_are_caught(tmp_path, browser):
    run = tmp_path / "run"
    (run / "plots").mkdir(parents=True)
    (run / "plots" / "broken.png").write_bytes(b"not a png")
    wide = "| " + " | ".join(f"column-{k}-{'x' * 20}" for k in range(12)) + " |\n|" + "---|" * 12 + "\n"
    wide += "| " + " | ".join("value" for _ in range(12)) + " |\n"
    (run / "report.md").write_text("# Headline\n\n" + wide + "\n![broken](plots/broken.png)\n")
    chart = 'xychart-beta\n    title "t"\n    x-axis "x" [1, 2]\n    y-axis "y" 0 --> 1\n    bar [1, 0.5]'
    bad = chart.replace("bar [1, 0.5]", "bar [1, 0.5")
    long = chart.replace('title "t"', f'title "{"a long title " * 12}"')
    (run / "pr-comment.md").write_text(
        "## Purpose\n\n"
        + wide
        + "\n![relative](plots/broken.png)\n\n"
        + "".join(f"```mermaid\n{c}\n```\n\n" for c in (chart, bad, long))
    )
    report, comment = check_run(run, browser=browser)
    assert any("image not decoded" in p for p in report.problems)
    assert any("table 1 is" in p for p in report.problems)
    assert report.table_rows == [1]
    assert any("relative image plots/broken.png" in p for p in comment.problems)
    assert any("the first table (the verdict)" in p or "table 1 is" in p for p in comment.problems)
    if find_mermaid() is not None:
        assert comment.charts == ["xychart-beta", "xychart-beta"]  # the well-formed one and the long-titled one
        assert any("Mermaid cannot draw chart 2" in p for p in comment.problems)
        assert any("chart 3 cuts off its text" in p for p in comment.problems)

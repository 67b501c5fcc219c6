"""The committed reports in a real browser (headless Chromium through Playwright): report.html as written, report.md
and pr-comment.md as GitHub renders them, for every committed run folder (H200, H100 and CPU). Every image decodes, no
table is wider than its column, the headline is in the first screen, every table has its rows, and a comment holds no
relative image or link. README.md as GitHub renders it on the repository's page: both sentences of its answer end
within the first screen. ``make audit`` installs the browser (scripts/setup-browser.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repro.core.analysis.rundata import load_run
from repro.report import mermaid
from repro.report.analyse import analyse
from repro.report.comment import render_comment
from repro.report.markdown import render_report
from repro.report.template import Page, Target
from repro_audit.browser import BrowserUnavailable, check_run, chromium, find_mermaid
from repro_studies.report.readme_screen import check_readme

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.audit]

ROOT = Path(__file__).resolve().parents[1]
#: Every committed run folder, the GPUs' (H200, H100) and the CPU's (each comment is what a reviewer may be sent).
RUNS = sorted(p for p in (ROOT / "data").glob("*/*") if (p / "manifest.json").is_file())


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
    assert render_comment(analysis, page=comment)  # the sections that fit 16 KB
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
            # the verdict's class, as report.md's title states it (a run that only measures says so)
            title = (run_dir / "report.md").read_text().splitlines()[0].removeprefix("# ")
            assert c.headline.split(":")[0] == title.split(":")[0]
            assert c.headline.startswith("Incomplete") is not load_run(run_dir).finished
        assert c.screenshot.is_file() and c.screenshot.stat().st_size > 10_000
        assert c.screenshot.parent == copy / "screenshots"


def test_the_readme_answers_both_bugs_within_the_first_screen(tmp_path, browser):
    """README.md as GitHub renders it on the repository's page: the title, bug 1's and bug 2's sentences and the
    release check's line end within the first 900 px, and the table of both bugs fits the column."""
    from repro_studies.report import readme

    opening = ["Bug 1, the KV-cache reshape overrun", "Bug 2, the strided block-table gather", "Checked through vLLM"]
    text = (ROOT / "README.md").read_text()
    assert all(o.replace("Bug 1", "**Bug 1**").replace("Bug 2", "**Bug 2**") in text for o in opening)
    shot = tmp_path / "readme-github.png"
    check = check_readme(ROOT / "README.md", opening, shot, browser)
    assert check.problems == [], check.problems
    assert check.headline == "DeepSeek-V4 KV-cache bugs in vLLM, reproduced"
    assert check.table_rows[0] <= readme.TABLE_ROWS
    assert shot.stat().st_size > 10_000


def test_a_sentence_below_the_first_screen_is_caught(tmp_path, browser):
    page = tmp_path / "README.md"
    page.write_text("# Title\n\n" + "".join(f"Filler paragraph {k}.\n\n" for k in range(40)) + "The answer.\n")
    check = check_readme(page, ["The answer.", "Not there"], tmp_path / "shot.png", browser)
    assert any("the paragraph with 'The answer.' ends at" in p for p in check.problems)
    assert any("no paragraph holds 'Not there'" in p for p in check.problems)


def test_mermaid_itself_draws_the_charts_or_the_test_says_why_not(browser):
    if find_mermaid() is None:
        pytest.skip("no Mermaid build here: scripts/setup-mermaid.sh installs it with npm (or set REPRO_MERMAID)")


def test_a_wide_table_and_a_broken_image_are_caught(tmp_path, browser):
    run = tmp_path / "run"
    (run / "plots").mkdir(parents=True)
    (run / "plots" / "broken.png").write_bytes(b"not a png")
    wide = "| " + " | ".join(f"column-{k}-{'x' * 20}" for k in range(12)) + " |\n|" + "---|" * 12 + "\n"
    wide += "| " + " | ".join("value" for _ in range(12)) + " |\n"
    (run / "report.md").write_text(
        "# Headline\n\n[a row](results/a.csv#L2)\n\n" + wide + "\n![broken](plots/broken.png)\n"
    )
    chart = 'xychart-beta\n    title "t"\n    x-axis "x" [1, 2]\n    y-axis "y" 0 --> 1\n    bar [1, 0.5]'
    bad = chart.replace("bar [1, 0.5]", "bar [1, 0.5")
    long = chart.replace('title "t"', f'title "{"a long title " * 12}"')
    (run / "pr-comment.md").write_text(
        "## Purpose\n\n[a row](results/a.csv#L2), [a PR](https://github.com/vllm-project/vllm/pull/1)\n\n"
        + wide
        + "\n![relative](plots/broken.png)\n\n"
        + "".join(f"```mermaid\n{c}\n```\n\n" for c in (chart, bad, long))
    )
    report, comment = check_run(run, browser=browser)
    assert any("image not decoded" in p for p in report.problems)
    assert any("table 1 is" in p for p in report.problems)
    assert report.table_rows == [1]
    assert any("relative image plots/broken.png" in p for p in comment.problems)
    assert any("relative link results/a.csv#L2" in p for p in comment.problems)
    assert not any("relative link" in p for p in report.problems)  # a run folder's own page resolves them
    assert any("the first table (the verdict)" in p or "table 1 is" in p for p in comment.problems)
    if find_mermaid() is not None:
        assert comment.charts == ["xychart-beta", "xychart-beta"]  # the well-formed one and the long-titled one
        assert any("Mermaid cannot draw chart 2" in p for p in comment.problems)
        assert any("chart 3 cuts off its text" in p for p in comment.problems)

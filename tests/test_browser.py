"""The committed reports in a real browser (headless Chromium through Playwright): report.html as written and
report.md as GitHub renders it. Every image decodes, no table is wider than its column, the headline is in the
first screen, every table has its rows. ``make test`` installs the browser (scripts/setup-browser.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from repro.analysis.rundata import load_run
from repro.report import plots
from repro.report.blocks import build_blocks, outside_names
from repro.report.browser import BrowserUnavailable, check_run, find_browser

pytestmark = [pytest.mark.integration, pytest.mark.browser]

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
RUNS = sorted(p for p in H200.iterdir() if (p / "manifest.json").is_file())


def _browser_or_skip() -> None:
    try:
        import playwright  # noqa: F401

        find_browser()
    except (ImportError, BrowserUnavailable) as exc:
        pytest.skip(f"no browser for this test here: {exc}")


def _expected_rows(run_dir: Path) -> list[int]:
    run = load_run(run_dir)
    figures = plots.draw_all(run, outside_names(run))
    for fig in figures.values():
        plt.close(fig)

    def flat(blocks):
        return [x for b in blocks for x in ([b] if b.kind != "fold" else flat(b.children))]

    return [len(b.value) for b in flat(build_blocks(run, list(figures))) if b.kind == "table"]


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: p.name)
def test_committed_report_reads_well_in_a_browser(run_dir, tmp_path):
    _browser_or_skip()
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("logs", "screenshots"))
    checks = check_run(copy)
    assert [c.name for c in checks] == ["report.md (GitHub)", "report.html"]
    rows = _expected_rows(run_dir)
    for c in checks:
        assert c.problems == [], c.problems
        assert c.images == len(list((run_dir / "plots").glob("*.png")))
        assert c.table_rows == rows, c.name
        assert c.headline.startswith("Reproduced" if load_run(run_dir).finished else "Incomplete")
        assert c.screenshot.is_file() and c.screenshot.stat().st_size > 10_000
        assert c.screenshot.parent == copy / "screenshots"


def test_a_wide_table_and_a_broken_image_are_caught(tmp_path):
    _browser_or_skip()
    run = tmp_path / "run"
    (run / "plots").mkdir(parents=True)
    (run / "plots" / "broken.png").write_bytes(b"not a png")
    wide = "| " + " | ".join(f"column-{k}-{'x' * 20}" for k in range(12)) + " |\n|" + "---|" * 12 + "\n"
    wide += "| " + " | ".join("value" for _ in range(12)) + " |\n"
    (run / "report.md").write_text("# Headline\n\n" + wide + "\n![broken](plots/broken.png)\n")
    (check,) = check_run(run)
    assert any("image not decoded" in p for p in check.problems)
    assert any("table 1 is" in p for p in check.problems)
    assert check.table_rows == [1]

"""The README as GitHub shows it on the repository's page: its answer of both bugs (:mod:`repro_studies.report.readme`)
within the first screen, checked in the browser the report checks use (:mod:`repro_audit.browser`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from repro_audit.browser import MEASURE, VIEWPORT, PageCheck, github_page, judge

if TYPE_CHECKING:  # annotations only: Playwright is a development extra
    from playwright.sync_api import Browser

#: A README on a repository's page at the first screen's width: GitHub's Markdown body at 16 px in the README box of
#: the page's main column (1280 px less the page's margins, the 296 px sidebar and the box's padding).
README_COLUMN_PX = 830
README_CSS = f"""
.comment {{ width: {README_COLUMN_PX + 2 * 32}px; margin: 0 auto; border: 1px solid #d1d9e0; }}
.comment-header {{ display: none; }}
.markdown-body {{ padding: 32px; font-size: 16px; }}
"""


#: Where each paragraph that holds one of the given texts ends on the page (None: no paragraph holds it).
PARAGRAPHS = """(texts) => texts.map(text => {
  const p = [...document.querySelectorAll('.markdown-body p')]
    .find(e => e.innerText.replace(/\\s+/g, ' ').includes(text));
  if (!p) return null;
  const box = p.getBoundingClientRect();
  return {top: box.top, bottom: box.bottom};
})"""


def check_readme(readme: str | Path, paragraphs: list[str], screenshot: str | Path, browser: Browser) -> PageCheck:
    """A README as GitHub renders it on a repository's page (cmark-gfm, the README box at the first screen's width):
    each paragraph that holds one of ``paragraphs`` (plain text, as the page shows it) ends within the first screen,
    the title is there, every image decodes and no table is wider than the column. The first screen is saved to
    ``screenshot``."""
    readme = Path(readme)
    page = browser.new_page(viewport=VIEWPORT)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            rendered = Path(tmp) / "readme-github.html"
            rendered.write_text(github_page(readme.read_text(), readme.parent, readme.name, css=README_CSS))
            page.goto(rendered.resolve().as_uri(), wait_until="load")
            page.screenshot(path=str(screenshot))
            check = judge(readme.name, Path(screenshot), page.evaluate(MEASURE), VIEWPORT["height"])
            for text, box in zip(paragraphs, page.evaluate(PARAGRAPHS, paragraphs)):
                if box is None:
                    check.problems.append(f"{readme.name}: no paragraph holds {text!r}")
                elif box["bottom"] > VIEWPORT["height"]:
                    check.problems.append(
                        f"{readme.name}: the paragraph with {text!r} ends at {box['bottom']:.0f} px, below the first "
                        f"screen ({VIEWPORT['height']} px)"
                    )
        finally:
            page.close()
    return check

"""The report as a reader sees it, checked in a real browser (headless Chromium through Playwright).

Three pages per run folder: ``report.html`` as written, and ``report.md`` and ``pr-comment.md`` as GitHub
renders them (cmark-gfm, GitHub's own Markdown library, under GitHub's rules for tables, images and code,
in a comment column as wide as a pull request's; the comment with GitHub's line breaks and its Mermaid
charts parsed and drawn by Mermaid itself, as GitHub draws them). For each: every image decoded (and no image or
link relative in the comment), no table or chart wider than the column (GitHub scrolls such a table and cuts
columns off), the headline inside the first screen (and, in the comment, its first table: the verdict),
and the number of rows of every table. A screenshot of each first screen is kept in ``screenshots/``.

``python -m repro_audit.browser RUN_DIR...`` checks run folders and refreshes their screenshots.
"""

from __future__ import annotations

import html
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from repro.paths import repo_root

if TYPE_CHECKING:
    from playwright.sync_api import Browser

#: The browser: ``REPRO_CHROMIUM`` if set, else the first of these on PATH.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]
#: The first screen: a laptop window.
VIEWPORT = {"width": 1280, "height": 900}
#: Width of a pull-request comment's body on github.com at that window width (CSS pixels).
GITHUB_COLUMN_PX = 760
#: The comment body's padding on each side: an image is at most the column less twice this wide.
GITHUB_PADDING_PX = 16
SCREENSHOTS = "screenshots"

#: GitHub's rules for rendered Markdown that decide widths and the first screen (its markdown-body styles).
GITHUB_CSS = f"""
body {{ margin: 0; background: #fff; }}
.comment {{ width: {GITHUB_COLUMN_PX}px; margin: 24px auto; border: 1px solid #d1d9e0; border-radius: 6px; }}
.comment-header {{ background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; font: 14px sans-serif;
  color: #59636e; }}
.markdown-body {{ padding: {GITHUB_PADDING_PX}px; font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica,
  Arial, sans-serif; color: #1f2328; word-wrap: break-word; }}
.markdown-body h1 {{ font-size: 2em; font-weight: 600; padding-bottom: .3em; border-bottom: 1px solid #d1d9e0;
  margin: .67em 0 16px; line-height: 1.25; }}
.markdown-body h2 {{ font-size: 1.5em; font-weight: 600; padding-bottom: .3em; border-bottom: 1px solid #d1d9e0;
  margin: 24px 0 16px; line-height: 1.25; }}
.markdown-body p, .markdown-body ul, .markdown-body table, .markdown-body pre, .markdown-body details
  {{ margin-top: 0; margin-bottom: 16px; }}
.markdown-body ul {{ padding-left: 2em; }}
.markdown-body code {{ padding: .2em .4em; font-size: 85%; background: rgba(129,139,152,.12); border-radius: 6px;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }}
.markdown-body pre {{ padding: 16px; overflow: auto; font-size: 85%; line-height: 1.45; background: #f6f8fa;
  border-radius: 6px; }}
.markdown-body pre code {{ padding: 0; background: transparent; font-size: 100%; }}
.markdown-body table {{ border-spacing: 0; border-collapse: collapse; display: block; width: max-content;
  max-width: 100%; overflow: auto; }}
.markdown-body th, .markdown-body td {{ padding: 6px 13px; border: 1px solid #d1d9e0; }}
.markdown-body th {{ font-weight: 600; }}
.markdown-body tr:nth-child(2n) {{ background: #f6f8fa; }}
.markdown-body img {{ max-width: 100%; box-sizing: content-box; }}
"""


class BrowserUnavailable(RuntimeError):
    """No browser or no Playwright here; the message says which and how to install it."""


def find_browser() -> str:
    """The Chromium executable to drive, or :class:`BrowserUnavailable` saying how to get one."""
    env = os.environ.get("REPRO_CHROMIUM")
    if env:
        if Path(env).is_file():
            return env
        raise BrowserUnavailable(f"REPRO_CHROMIUM={env} is not a file")
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserUnavailable(
        f"no Chromium on PATH (looked for {', '.join(BROWSERS)}); scripts/setup-browser.sh installs Debian's "
        "chromium with apt where the machine allows it, or set REPRO_CHROMIUM to a Chromium or Chrome executable"
    )


def find_mermaid() -> Path | None:
    """Mermaid's browser build (``REPRO_MERMAID``, else what ``scripts/setup-mermaid.sh`` installed); None
    when there is none here."""
    env = os.environ.get("REPRO_MERMAID")
    if env:
        return Path(env) if Path(env).is_file() else None
    found = sorted((repo_root() / ".venv" / "mermaid").glob("mermaid-*.min.js"))
    return found[-1] if found else None


def github_page(markdown: str, base: Path | None, title: str, comment: bool = False, css: str = "") -> str:
    """``markdown`` rendered by cmark-gfm with GitHub's extensions, in a comment column styled like GitHub's (``css``
    restyles it: the README box of a repository's page, say). ``base``: relative links resolve against it (a run
    folder, as in a repository view); a posted comment has none. ``comment``: a line break inside a paragraph is a
    line break, as GitHub renders comments."""
    import cmarkgfm  # lazy: GitHub's renderer is a development extra
    from cmarkgfm.cmark import Options  # lazy: GitHub's renderer is a development extra

    options = Options.CMARK_OPT_UNSAFE | (Options.CMARK_OPT_HARDBREAKS if comment else 0)
    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=options)
    head = f'<base href="{base.resolve().as_uri()}/">' if base is not None else ""
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8">{head}'
        f"<title>{html.escape(title)}</title><style>{GITHUB_CSS}{css}</style></head><body>"
        f'<div class="comment"><div class="comment-header">{html.escape(title)}</div>'
        f'<div class="markdown-body">{body}</div></div></body></html>'
    )


#: Every mermaid block of the page parsed and drawn by Mermaid in place of its code, as GitHub shows it;
#: returns what Mermaid said about each.
DRAW_MERMAID = """async () => {
  mermaid.initialize({startOnLoad: false, securityLevel: 'strict'});
  const blocks = [...document.querySelectorAll('pre > code.language-mermaid, pre[lang="mermaid"] > code')];
  const out = [];
  for (const [i, code] of blocks.entries()) {
    const text = code.textContent;
    try {
      await mermaid.parse(text);
      const {svg} = await mermaid.render('chart' + i, text);
      const figure = document.createElement('div');
      figure.className = 'mermaid-chart';
      figure.innerHTML = svg;
      code.parentElement.replaceWith(figure);
      const box = figure.querySelector('svg').getBoundingClientRect();
      const cut = [...figure.querySelectorAll('svg text')].map(t => [t.textContent, t.getBoundingClientRect()])
        .filter(([, b]) => b.width && (b.left < box.left - 1 || b.right > box.right + 1)).map(([s]) => s);
      const kind = text.split('\\n').map(l => l.trim()).find(l => l && !l.startsWith('%%'));
      out.push({ok: true, kind: kind, width: box.width, height: box.height, cut: cut});
    } catch (e) {
      out.push({ok: false, error: String(e.message || e).split('\\n').slice(0, 3).join(' ')});
    }
  }
  return out;
}"""

#: Measured in the page: every ``<details>`` opened first, so folded tables and figures count too.
MEASURE = """() => {
  const heading = document.querySelector('h1, h2');
  const box = heading ? heading.getBoundingClientRect() : null;
  const first = document.querySelector('table');
  const column = (document.querySelector('.markdown-body, .repro-report') || document.body).getBoundingClientRect();
  document.querySelectorAll('details').forEach(d => d.open = true);
  return {
    images: [...document.images].map(i => ({src: i.getAttribute('src').slice(0, 60), complete: i.complete,
                                             width: i.naturalWidth})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    tables: [...document.querySelectorAll('table')].map(t => ({
      rows: t.querySelectorAll('tbody > tr').length,
      scroll: t.scrollWidth, client: t.clientWidth,
      right: t.getBoundingClientRect().right,
      container: (t.closest('.markdown-body, .repro-report') || document.body).getBoundingClientRect().right,
    })),
    charts: [...document.querySelectorAll('.mermaid-chart svg')].map(s => ({
      right: s.getBoundingClientRect().right, container: column.right})),
    headline: box ? {text: heading.innerText, top: box.top, bottom: box.bottom} : null,
    first_table_bottom: first ? first.getBoundingClientRect().bottom : null,
    page: {scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth},
  };
}"""


@dataclass
class PageCheck:
    """What a reader of one page gets; ``problems`` is empty when every check holds."""

    name: str
    screenshot: Path
    images: int = 0
    table_rows: list[int] = field(default_factory=list)
    headline: str = ""
    charts: list[str] = field(default_factory=list)  # each mermaid chart Mermaid drew, by its diagram type
    problems: list[str] = field(default_factory=list)


def judge(name: str, shot: Path, measured: dict, first_screen_px: int, comment: bool = False) -> PageCheck:
    check = PageCheck(name, shot, images=len(measured["images"]))
    for img in measured["images"]:
        if not img["complete"] or img["width"] == 0:
            check.problems.append(f"{name}: image not decoded: {img['src']}")
        if comment and not img["src"].startswith(("https://", "data:")):
            check.problems.append(f"{name}: relative image {img['src']}: a posted comment cannot show it")
    for href in measured.get("links", []):
        if comment and not href.startswith(("https://", "http://", "#")):
            check.problems.append(f"{name}: relative link {href}: it opens nothing once the comment is posted")
    for k, t in enumerate(measured["tables"]):
        check.table_rows.append(t["rows"])
        if t["scroll"] > t["client"] + 1 or t["right"] > t["container"] + 1:
            check.problems.append(
                f"{name}: table {k + 1} is {t['scroll']} px wide in a {t['client']} px column "
                f"(its right edge at {t['right']:.0f} px, the column's at {t['container']:.0f} px)"
            )
    for k, c in enumerate(measured["charts"]):
        if c["right"] > c["container"] + 1:
            check.problems.append(
                f"{name}: chart {k + 1} reaches {c['right']:.0f} px, the column ends at {c['container']:.0f} px"
            )
    page = measured["page"]
    if page["scroll"] > page["client"] + 1:
        check.problems.append(f"{name}: the page scrolls sideways ({page['scroll']} px in {page['client']} px)")
    h = measured["headline"]
    if h is None:
        check.problems.append(f"{name}: no headline (h1, or h2 in a comment)")
    else:
        check.headline = h["text"]
        if h["top"] < 0 or h["bottom"] > first_screen_px:
            check.problems.append(f"{name}: the headline is not inside the first screen ({h['top']}-{h['bottom']} px)")
    bottom = measured["first_table_bottom"]
    if comment and (bottom is None or bottom > first_screen_px):
        check.problems.append(f"{name}: the first table (the verdict) ends at {bottom} px, below the first screen")
    return check


#: The pages of a run folder: (name, source file, screenshot file, rendered as a comment).
PAGES = (
    ("report.md (GitHub)", "report.md", "report-md-github.png", False),
    ("pr-comment.md (GitHub comment)", "pr-comment.md", "pr-comment-github.png", True),
    ("report.html", "report.html", "report-html.png", False),
)


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium for one or more :func:`check_run` calls (each opens a page of its own), closed
    on leaving. Playwright's sync API runs an event loop of its own in this thread while it is open."""
    try:
        from playwright.sync_api import sync_playwright  # lazy: a development extra, and it may be missing
    except ImportError as exc:
        raise BrowserUnavailable(f"the playwright package is not installed ({exc}); pip install -e '.[dev]'") from None
    executable = find_browser()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def check_run(
    run_dir: str | Path, screenshots: str | Path | None = None, browser: Browser | None = None
) -> list[PageCheck]:
    """Open a run folder's report.md and pr-comment.md as GitHub renders them (the comment's mermaid charts
    drawn by Mermaid where it is installed) and its report.html; screenshot each first screen into
    ``screenshots`` (default ``RUN_DIR/screenshots``) and return what was found. ``browser``: one that
    :func:`chromium` opened (default: a browser started for this call)."""
    if browser is None:
        with chromium() as started:
            return check_run(run_dir, screenshots, started)
    run_dir = Path(run_dir)
    out = Path(screenshots) if screenshots else run_dir / SCREENSHOTS
    out.mkdir(parents=True, exist_ok=True)
    mermaid = find_mermaid()
    checks = []
    page = browser.new_page(viewport=VIEWPORT)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, source, shot_name, comment in PAGES:
                path = run_dir / source
                if not path.is_file():
                    continue
                if source.endswith(".md"):
                    rendered = Path(tmp) / f"{path.stem}-github.html"
                    base = None if comment else run_dir
                    rendered.write_text(github_page(path.read_text(), base, f"{run_dir.name}/{source}", comment))
                    path = rendered
                page.goto(path.resolve().as_uri(), wait_until="load")
                page.wait_for_function("[...document.images].every(i => i.complete)", timeout=15000)
                drawn = []
                if comment and mermaid is not None:
                    page.add_script_tag(path=str(mermaid))
                    drawn = page.evaluate(DRAW_MERMAID)
                shot = out / shot_name
                page.screenshot(path=str(shot))
                check = judge(name, shot, page.evaluate(MEASURE), VIEWPORT["height"], comment)
                check.charts = [d["kind"] for d in drawn if d["ok"]]
                for k, d in enumerate(drawn):
                    if not d["ok"]:
                        check.problems.append(f"{name}: Mermaid cannot draw chart {k + 1}: {d['error']}")
                    elif d["cut"]:
                        check.problems.append(f"{name}: chart {k + 1} cuts off its text: {d['cut']}")
                checks.append(check)
        finally:
            page.close()
    return checks


def main(argv: list[str] | None = None) -> int:
    """Check run folders' reports in the browser; exit 1 naming every problem."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m repro_audit.browser RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        return 2
    bad = 0
    try:
        with chromium() as browser:  # one browser for every folder
            for run_dir in args:
                for c in check_run(run_dir, browser=browser):
                    charts = f", {len(c.charts)} Mermaid charts drawn" if c.charts else ""
                    print(
                        f"{run_dir}: {c.name}: {c.images} images, tables with {c.table_rows} rows{charts}; "
                        f"screenshot {c.screenshot}"
                    )
                    for p in c.problems:
                        print(f"  PROBLEM {p}")
                        bad += 1
    except BrowserUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

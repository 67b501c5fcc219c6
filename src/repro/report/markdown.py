"""``report.md``: the report as Markdown that pastes into a PR comment (at most 64 KB), figures linked as
the run folder's ``plots/<name>.png``.

Tables are compact GitHub Markdown (no padding, one line per cell); bulky ones sit in ``<details>``,
which GitHub renders folded.
"""

from __future__ import annotations

from collections.abc import Sequence

from repro.report.model import Analysis, Drawn
from repro.report.template import Page, Rendered, Target, render_page

#: GitHub's limit for a PR comment is 65,536 characters.
MARKDOWN_LIMIT_BYTES = 64 * 1024


def fit(text: str, limit: int = MARKDOWN_LIMIT_BYTES) -> str:
    """``text`` cut to ``limit`` bytes, saying so, when longer."""
    if len(text.encode()) > limit:
        cut = text.encode()[: limit - 200].decode(errors="ignore")
        text = cut + "\n\n... (truncated to fit a PR comment; the full tables are in results/)\n"
    return text


def render_report(analysis: Analysis, figures: Sequence[Drawn]) -> Rendered:
    """The report as Markdown, with the tables and figures it shows."""
    page = Page(Target.MARKDOWN, captions={f.name: f.caption for f in figures})
    rendered = render_page(analysis, page)
    return Rendered(fit(rendered.text), rendered.tables, rendered.images)


def render_markdown(analysis: Analysis, figures: Sequence[Drawn]) -> str:
    return render_report(analysis, figures).text

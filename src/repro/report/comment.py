"""``pr-comment.md``: the run as a GitHub comment body, posted with ``gh pr comment --body-file``.

It follows vLLM's pull-request template (*Purpose*, *Test Plan*, *Test Result*), holds no image (a comment
cannot show the run folder's PNGs: charts are Mermaid ``xychart-beta`` blocks, which GitHub draws, or
compact tables), folds long tables in ``<details>``, and stays within :data:`COMMENT_LIMIT_BYTES`; a section
that would not fit is left out with a line saying so, never cut in half.
"""

from __future__ import annotations

from repro.report.model import Analysis
from repro.report.template import Page, Target, render_section

#: The comment's size limit (GitHub takes 65,536 characters; a reviewer reads far less).
COMMENT_LIMIT_BYTES = 16 * 1024
FOOTER = (
    "<sub>Posted from the run folder `{name}` of the DeepSeek-V4 KV-cache reproduction; its `report.md` holds the "
    "figures and every table.</sub>"
)


def render_comment(analysis: Analysis, link_base: str | None = None, page: Page | None = None) -> str:
    """The sections that have a comment template, in order, as long as they fit the limit. A link to the run
    folder's files is absolute under ``link_base`` (:func:`repro.report.links.run_base`), plain text without it:
    a posted comment has no folder for a relative link to resolve in. ``page``, when given, is the page rendered
    into: its tables are then the comment's, a left-out section's dropped."""
    page = page or Page(Target.COMMENT, link_base=link_base)
    footer = FOOTER.format(name=analysis.run.name)
    parts: list[str] = []
    size = len(footer.encode()) + 2
    for section, data in analysis:
        if not section.comment:
            continue
        before = len(page.tables)
        text = render_section(section, section.comment, data, analysis, page).strip()
        if not text:
            continue
        if size + len(text.encode()) + 2 > COMMENT_LIMIT_BYTES:
            del page.tables[before:]
            note = (
                f"<sub>Left out to stay within {COMMENT_LIMIT_BYTES // 1024} KB: {section.name}; see report.md.</sub>"
            )
            parts.append(note)
            size += len(note.encode()) + 2
            continue
        parts.append(text)
        size += len(text.encode()) + 2
    return "\n\n".join([*parts, footer]) + "\n"

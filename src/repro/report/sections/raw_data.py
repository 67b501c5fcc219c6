"""Where the raw data lies in the run folder."""

from __future__ import annotations

from repro.report.model import Common, Section, TemplateFile


def derive(c: Common) -> list[str]:
    return list(c.run.files)


MARKDOWN = TemplateFile("repro.report", "raw-data.md.j2")

SECTION = Section("raw data", derive, MARKDOWN)

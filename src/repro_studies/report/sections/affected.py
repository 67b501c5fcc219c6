"""Who is affected, on the report's first screen: one row per outcome (the gather a release launches, whether that
kernel has the bug, whether stock vLLM's runners reach it) naming the models, GPU families and releases it holds
for; each row links the first of the rows behind it in notebook 05's table, which links the evidence."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report.model import Common, Section, TemplateFile
from repro_studies.report import affected


@dataclass(frozen=True)
class Affected:
    table: pd.DataFrame  # display text, and Link cells to the rows behind them


def derive(c: Common) -> Affected | None:
    table = affected.report_table(c.run)
    return None if table is None else Affected(table)


MARKDOWN = TemplateFile("repro_studies.report", "affected.md.j2")

COMMENT = TemplateFile("repro_studies.report", "affected-comment.md.j2")

#: The note names the files it refers to as text, so it reads the same where the cells cannot link (a comment
#: without a repository to point at).
SECTION = Section("affected", derive, MARKDOWN, COMMENT, helpers={"note": affected.REPORT_NOTE})

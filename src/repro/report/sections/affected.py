"""Who is affected, on the report's first screen: release range x path (GPU family, model, record) -> the gather
kernel each release launches, whether that kernel has the bug, and whether stock vLLM's runners reach it; each cell
links the row behind it (notebook 05's tables and the release matrix)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report import affected
from repro.report.model import Common, Section


@dataclass(frozen=True)
class Affected:
    table: pd.DataFrame  # display text, and Link cells to the rows behind them


def derive(c: Common) -> Affected | None:
    table = affected.report_table(c.run)
    return None if table is None else Affected(table)


MARKDOWN = """
## Who is affected

{{ table(d.table) }}

{{ note }}
"""

COMMENT = """
{% call fold("Who is affected: which gather each release launches, per GPU family, model and record (%d rows)"
             % (d.table | length)) %}
{{ table(d.table) }}

{{ note if links else note_unlinked }}
{% endcall %}
"""

SECTION = Section(
    "affected", derive, MARKDOWN, COMMENT, helpers={"note": affected.NOTE, "note_unlinked": affected.NOTE_UNLINKED}
)

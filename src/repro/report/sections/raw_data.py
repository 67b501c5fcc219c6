"""Where the raw data lies in the run folder."""

from __future__ import annotations

from repro.report.model import Common, Section


def derive(c: Common) -> list[str]:
    return list(c.run.files)


MARKDOWN = """
## Raw data

In the run folder: {% for p in d %}`{{ p }}`, {% endfor %}`manifest.json`; executed notebooks in `notebooks/`; figures
in `plots/`.
"""

SECTION = Section("raw data", derive, MARKDOWN)

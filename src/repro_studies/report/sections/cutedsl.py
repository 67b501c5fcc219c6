"""Notebook 03: vLLM's CuTe-DSL gather beside gather_fast, or why not."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report.model import Common, Section, TemplateFile
from repro_studies.tables import Facts, Table


@dataclass(frozen=True)
class CuteDsl:
    facts: dict  # results/03-cutedsl.json: per release, its figures or why it was not timed
    table: pd.DataFrame | None
    digits: dict[str, int]


def derive(c: Common) -> CuteDsl | None:
    facts = c.run.facts.get(Facts.CUTEDSL)
    if not facts:
        return None
    table = c.run.table(Table.CUTEDSL_VS_FAST)
    shown, digits = None, {}
    if table is not None and len(table):
        graph = table[table["launch"] == "graph"].drop(columns=["launch", "notebook", "contig_us"], errors="ignore")
        if graph["code"].nunique() == 1:  # the release is named in the sentence above
            graph = graph.drop(columns="code")
        shown = graph.rename(
            columns=lambda col: col.replace("_ratio", "").replace("_fraction", "").replace("_us", " us")
        )
        digits = {col: 2 for col in shown.columns if col.endswith(" us")} | {
            col: 3 for col in shown.columns if col.startswith(("narrowed", "vs fast", "of stream"))
        }
    return CuteDsl(facts, shown, digits)


MARKDOWN = TemplateFile("repro_studies.report", "cutedsl.md.j2")

SECTION = Section("cutedsl", derive, MARKDOWN)

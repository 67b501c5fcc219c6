"""Notebook 03: vLLM's CuTe-DSL gather beside gather_fast, or why not."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.core.analysis.verdict import BUG_GATHER
from repro.report.model import Common, Section
from repro_studies.tables import Facts, Table


@dataclass(frozen=True)
class CuteDsl:
    headline: str
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
        if graph["code"].nunique() == 1:  # the release is named in the headline
            graph = graph.drop(columns="code")
        shown = graph.rename(
            columns=lambda col: col.replace("_ratio", "").replace("_fraction", "").replace("_us", " us")
        )
        digits = {col: 2 for col in shown.columns if col.endswith(" us")} | {
            col: 3 for col in shown.columns if col.startswith(("narrowed", "vs fast", "of stream"))
        }
    return CuteDsl(str(facts.get("headline", "")), shown, digits)


MARKDOWN = """
## vLLM's CuTe-DSL gather beside gather_fast

vLLM's code, called through each release's own dispatcher (`dequant_gather_k_cutedsl.py`; which releases, GPUs,
models and records dispatch to it: *Who is affected*); it takes no row pitch, so BUG_GATHER does not change it.
{{ d.headline }}
{% if d.table is not none %}
{% call fold("CuTe-DSL gather, CUDA-graph replays: medians, narrowed/contiguous, time over gather_fast's, fraction of "
             "the streaming ceiling (%d shapes)" % (d.table | length)) %}
{{ table(d.table, d.digits) }}
{% endcall %}
{% endif %}
""".replace("BUG_GATHER", BUG_GATHER)

SECTION = Section("cutedsl", derive, MARKDOWN)

"""Notebook 03: what PR #55109's fix costs on this repository's kernel, against a contiguous table and
against the rejected ``.contiguous()``, CUDA-graph replays and eager launches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from repro import registry
from repro.report import mermaid
from repro.report.model import Common, Drawn, Section, TemplateFile
from repro_studies.analysis import performance
from repro_studies.report import timing_plots
from repro_studies.tables import Facts, Plot, Table

GRAPH, BANDWIDTH, EAGER = Plot.TIME_GRAPH, Plot.BANDWIDTH, Plot.TIME_EAGER
CAPTIONS = {
    GRAPH: "median time per gather, CUDA-graph replays",
    BANDWIDTH: "share of the copy ceiling, CUDA-graph replays",
    EAGER: "median time per gather, eager launches",
}
#: Decimals of the ratio columns; times get two.
RATIO_DIGITS = {"narrowed / contig": 3, "copy overhead": 3, "of ceiling": 3}


@dataclass(frozen=True)
class FixCost:
    skipped: performance.NotTimed | None  # why nothing was timed (None when timed)
    medians: pd.DataFrame | None = None
    facts: dict | None = None  # performance.timing_facts (phrases.md.j2 words them)
    graph: pd.DataFrame | None = None
    eager: pd.DataFrame | None = None
    chart: str = ""


def _chart(ratios: pd.DataFrame) -> str:
    longest = ratios["seq_len"].max()
    g = ratios[(ratios["launch"] == "graph") & (ratios["seq_len"] == longest)].sort_values("num_reqs")
    fix, copy = g["fixed narrowed/contiguous_ratio"], g["contiguous-copy overhead_ratio"]
    top = math.ceil(max(1.1, float(copy.max()), float(fix.max())) * 10) / 10
    bottom = math.floor(min(0.9, float(fix.min()), float(copy.min())) * 10) / 10
    return mermaid.xychart(
        f"Time / contiguous table's, {longest} tokens (bars: .contiguous(), line: fix)",
        "requests",
        [str(int(n)) for n in g["num_reqs"]],
        "time ratio",
        (bottom, top),
        [("bar", [round(float(v), 3) for v in copy]), ("line", [round(float(v), 3) for v in fix])],
        [registry.CONTIGUOUS_COPY.style["color"], registry.FIXED.style["color"]],
    )


def derive(c: Common) -> FixCost | None:
    med, rat = c.run.table(Table.PERF_MEDIANS), c.run.table(Table.PERF_RATIOS)
    if med is None or rat is None or not len(rat):
        skipped = performance.not_timed(c.run.facts.get(Facts.PERFORMANCE))
        return FixCost(skipped) if skipped else None
    digits = {c: 2 for c in med.columns} | RATIO_DIGITS
    tables = {}
    for launch in ("graph", "eager"):
        table = performance.fix_cost_table(med, rat, launch)
        tables[launch] = (table, {col: digits.get(col, 2) for col in table.columns})
    return FixCost(
        None,
        med,
        performance.timing_facts(med, rat),
        tables["graph"],
        tables["eager"],
        _chart(rat),
    )


def figures(d: FixCost, c: Common) -> list[Drawn]:
    if d.skipped:
        return []
    tbps = d.facts["copy_ceiling_tbps"]
    return [
        Drawn(n, CAPTIONS[n], f)
        for n, f in timing_plots.performance_figures(d.medians, tbps, performance.outside_columns(c.run))
    ]


MARKDOWN = TemplateFile("repro_studies.report", "fix-cost.md.j2")

COMMENT = TemplateFile("repro_studies.report", "fix-cost-comment.md.j2")

SECTION = Section("fix cost", derive, MARKDOWN, COMMENT, figures=figures, helpers={"GRAPH": GRAPH, "EAGER": EAGER})

"""Notebook 03 (GPU): every gather against the streaming ceiling, and what the remaining gap is made of."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.registry import Origin
from repro.report.model import Common, Drawn, Section, TemplateFile
from repro_studies import registry
from repro_studies.analysis import ceiling as ceiling_rules
from repro_studies.analysis import performance
from repro_studies.report import timing_plots
from repro_studies.tables import Plot, Table

FIGURE = Plot.CEILING


@dataclass(frozen=True)
class Ceiling:
    vs: pd.DataFrame
    facts: dict  # ceiling_rules.ceiling_facts of the run's tables (phrases.md.j2 words them)
    fractions: pd.DataFrame | None  # per shape, one column per gather
    gap: pd.DataFrame | None


def derive(c: Common) -> Ceiling | None:
    vs = c.run.table(Table.VS_CEILING)
    if vs is None or not len(vs):
        return None
    graph = vs[(vs["launch"] == "graph") & (vs["requests"] == "equal")]
    fractions = None
    if len(graph):
        piv = graph.pivot_table(index=["seq_len", "num_reqs"], columns="arm", values="of_stream_fraction")
        arms = ceiling_rules.gather_arms(graph)
        ours = [label for a in registry.ARMS for label, b in arms.items() if b == a]
        piv = piv[ours + [label for label, a in arms.items() if a.origin == Origin.USER]]
        fractions = piv.rename(
            columns=timing_plots.arm_names({k: arms[k] for k in piv.columns}, performance.outside_columns(c.run))
        ).reset_index()
    gap = c.run.table(Table.GAP)
    # the figures from the run's tables (a stored sentence of an older run is not read back)
    facts = ceiling_rules.ceiling_facts(vs, gap)
    if gap is not None and len(gap):
        cols = [col for col in ("num_reqs", "seq_len", "step", "ratio", "added_us", "share_of_gap") if col in gap]
        gap = gap[cols].rename(columns={"added_us": "added us", "share_of_gap": "share of gap"})
    else:
        gap = None
    return Ceiling(vs, facts, fractions, gap)


def figures(d: Ceiling, c: Common) -> list[Drawn]:
    caption = "each gather's fraction of the streaming ceiling, CUDA-graph replays"
    return [
        Drawn(name, caption, fig)
        for name, fig in timing_plots.ceiling_figures(d.vs, performance.outside_columns(c.run))
    ]


MARKDOWN = TemplateFile("repro_studies.report", "ceiling.md.j2")

SECTION = Section("streaming ceiling", derive, MARKDOWN, figures=figures, helpers={"figure": FIGURE})

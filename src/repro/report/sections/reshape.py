"""Evidence of vLLM PR #43988: the reshape overrun per cache group, PyTorch's error and the figure."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.core.analysis import reshape
from repro.registry import ReshapeVariant
from repro.report import plots
from repro.report.model import Common, Drawn, Section, TemplateFile
from repro.tables import Facts, Plot, Table

FIGURE = Plot.RESHAPE


@dataclass(frozen=True)
class Reshape:
    error: str
    groups: pd.DataFrame | None  # the per-variant rows (for the figure)
    summary: pd.DataFrame | None  # one row per cache group


@dataclass(frozen=True)
class ReportedGroup:
    """The cache group PR #43988's error identifies (the most over-asked one when it names none or several):
    its buggy and fixed rows of the per-group table, and every group's fixed row."""

    name: str
    buggy: pd.Series
    fixed: pd.Series
    all_fixed: pd.DataFrame


def reported_group(c: Common) -> ReportedGroup | None:
    groups = c.run.table(Table.RESHAPE_GROUPS)
    if groups is None or not len(groups):
        return None
    named = c.run.facts.get(Facts.RESHAPE, {}).get("identified_groups") or []
    buggy = groups[groups["variant"] == ReshapeVariant.BUGGY]
    fixed = groups[groups["variant"] == ReshapeVariant.FIXED]
    name = named[0] if len(named) == 1 else str(buggy.loc[pd.to_numeric(buggy["overrun"]).idxmax(), "cache group"])
    row = buggy[buggy["cache group"] == name].iloc[0]
    return ReportedGroup(name, row, fixed[fixed["cache group"] == name].iloc[0], fixed)


def derive(c: Common) -> Reshape | None:
    if c.run.table(Table.RESHAPE_CHECKS) is None:
        return None
    groups = c.run.table(Table.RESHAPE_GROUPS)
    summary = None
    if groups is not None and len(groups):
        summary = reshape.group_summary(groups)
        for col in ("buggy: required / pool", "fixed: required / pool"):
            summary[col] = summary[col].map(lambda v: f"{v:.3f}x")
    return Reshape(str(c.run.facts.get(Facts.RESHAPE, {}).get("error_text") or ""), groups, summary)


def figures(d: Reshape, c: Common) -> list[Drawn]:
    if d.groups is None or not len(d.groups):
        return []
    caption = "required / available bytes per cache group, buggy and fixed view"
    return [Drawn(FIGURE, caption, plots.reshape_overrun(d.groups))]


#: Both show PyTorch's error and the per-group table (``reshape-evidence.md.j2``, which each includes).
MARKDOWN = TemplateFile("repro.report", "reshape.md.j2")
COMMENT = TemplateFile("repro.report", "reshape-comment.md.j2")

SECTION = Section("reshape", derive, MARKDOWN, COMMENT, figures=figures, helpers={"figure": FIGURE})

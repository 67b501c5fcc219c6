"""gather_fast, this repository's own kernel, in neither pull request: kept apart from the fix."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro import registry
from repro.core.analysis import gather
from repro.core.analysis.checks import truthy
from repro.registry import Role
from repro.report.model import Common, Section, TemplateFile
from repro.report.phrases import behaviour as behaviour_phrase
from repro.tables import Table
from repro_studies.analysis import performance
from repro_studies.report.sections.fix_cost import BANDWIDTH
from repro_studies.tables import Table as StudyTable


@dataclass(frozen=True)
class Fast:
    name: str
    target: str
    behaviour: str  # what it did in notebook 02's sweep ("" when not in it)
    contiguous: tuple[int, int] | None  # (bitwise equal, cases) on vLLM's own contiguous cases
    memcheck: str
    facts: dict | None  # notebook 03's headline figures (timed runs): performance.timing_facts
    names: dict[str, str]  # the outside arms' names in a sentence
    table: pd.DataFrame | None
    digits: dict[str, int]


def derive(c: Common) -> Fast | None:
    own = [e for e in registry.implementations() if e.role == Role.OWN]
    if not own:
        return None
    label = own[0].label
    med, rat = c.run.table(StudyTable.PERF_MEDIANS), c.run.table(StudyTable.PERF_RATIOS)
    timed = med is not None and rat is not None and len(rat) and "fast of ceiling_fraction" in rat
    behaviour = c.behaviours.get(label)
    if behaviour is None and not timed:
        return None
    contiguous = memcheck = None
    if behaviour is not None:
        cases = c.run.table(Table.CONTIGUOUS_CHECKS)
        if cases is not None:
            mine = cases[cases["variant"] == label]
            contiguous = (int(mine["ok"].map(truthy).sum()), len(mine))
        san = c.run.table(Table.SANITIZER)
        memcheck = gather.memcheck_by_variant(san).get(label) if san is not None and len(san) else None
    table, digits = None, {}
    if timed:
        table = performance.fast_table(med, rat, "graph", performance.outside_columns(c.run))
        digits = {col: 2 for col in table.columns} | {"narrowed / contig": 3, "of ceiling": 3}
    return Fast(
        own[0].display,
        own[0].target,
        behaviour_phrase(behaviour) if behaviour is not None else "",
        contiguous,
        memcheck or "",
        performance.timing_facts(med, rat) if timed else None,
        performance.outside_names(c.run),
        table,
        digits,
    )


MARKDOWN = TemplateFile("repro_studies.report", "gather-fast.md.j2")


SECTION = Section("gather_fast", derive, MARKDOWN, helpers={"bandwidth": BANDWIDTH})

"""The analysis pass: a loaded run in, every section's tables out, each computed once (:class:`Analysis`);
then the figures, drawn once from those tables."""

from __future__ import annotations

from collections.abc import Sequence

from repro import registry
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import behaviour, implementation_names
from repro.report import sections as report_sections
from repro.report.model import Analysis, Common, Drawn, Section
from repro.report.verdict import run_verdict
from repro.tables import Table
from repro_studies.analysis import performance, reshape


def outside_names(run: RunData) -> dict[str, str]:
    """Short names of outside timed arms (legends, table columns), from the provenance the run recorded."""
    med = run.table(Table.PERF_MEDIANS)
    if med is None or not len(med):
        return {}
    info = (run.manifest.get("implementations") or {}).get("reference_gather") or {
        "target": (run.manifest.get("parameters") or {}).get("reference_gather", "")
    }
    return {label: registry.provenance_short(info) for label in performance.outside_arms(med.arm.unique())}


def common(run: RunData) -> Common:
    """What several sections read: the verdict, the loaded implementations' names, the sweep's behaviours."""
    names = implementation_names(run)
    columns = outside_names(run)
    prose = {label: names.get("reference_gather", label) for label in columns}
    sweep, memory = run.table(Table.SWEEP), run.table(Table.MEMORY_SAFETY)
    behaviours = {}
    if sweep is not None and len(sweep):
        behaviours = {str(v): behaviour(sweep, str(v), memory) for v in dict.fromkeys(sweep["variant"].astype(str))}
    return Common(run, run_verdict(run, reshape.SPLIT_CHECK), names, columns, prose, behaviours)


def analyse(run: RunData, sections: Sequence[Section] | None = None) -> Analysis:
    """Every section's derived value, in report order; sections with nothing for this run are left out."""
    shared = common(run)
    parts = []
    for section in report_sections.SECTIONS if sections is None else sections:
        data = section.derive(shared)
        if data is not None:
            parts.append((section, data))
    return Analysis(shared, parts)


def draw(analysis: Analysis) -> list[Drawn]:
    """Every figure of the report, drawn from the sections' derived tables, in report order."""
    return [fig for section, data in analysis if section.figures for fig in section.figures(data, analysis.common)]

"""The analysis pass: a loaded run in, every section's tables out, each computed once (:class:`Analysis`);
then the figures, drawn once from those tables."""

from __future__ import annotations

from collections.abc import Sequence

from repro.core.analysis import reshape
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import judge
from repro.report import sections as report_sections
from repro.report.model import Analysis, Common, Drawn, Section
from repro.report.verdict import registered_findings, verdict


def common(run: RunData) -> Common:
    """What several sections read, from the run judged once: the verdict, the loaded implementations' names, the
    sweep's behaviours."""
    judged = judge(run, reshape.SPLIT_CHECK, registered_findings())
    return Common(run, verdict(run, judged), judged.names, judged.behaviours)


def analyse(run: RunData, sections: Sequence[Section] | None = None) -> Analysis:
    """Every section's derived value, in report order (sections with nothing for this run are left out), and every
    registered part of a section (:class:`repro.report.model.Insert`) with what it derived."""
    shared = common(run)
    parts = []
    for section in report_sections.sections() if sections is None else sections:
        data = section.derive(shared)
        if data is not None:
            parts.append((section, data))
    inserts = [(i, i.derive(shared)) for r in report_sections.report_registered() for i in r.inserts]
    return Analysis(shared, parts, [(i, data) for i, data in inserts if data is not None])


def draw(analysis: Analysis) -> list[Drawn]:
    """Every figure of the report, drawn from the sections' derived tables, in report order."""
    return [fig for section, data in analysis if section.figures for fig in section.figures(data, analysis.common)]

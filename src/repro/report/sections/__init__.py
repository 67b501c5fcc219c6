"""The report's sections, in order; each is one module defining a :class:`repro.report.model.Section`.

A new section is a module here and one line in :data:`SECTIONS`. The order follows vLLM's pull-request
template: *Purpose* (the first screen), *Test Plan*, *Test Result*, then the evidence per bug, the environment
and the raw data. A package built on this one places its sections after these by registration
(:class:`repro.report.model.Registered`): the studies' evidence follows each bug's.
"""

from __future__ import annotations

from repro.plugins import Point, registered
from repro.report.model import Registered, Section
from repro.report.sections import (
    checks,
    environment,
    gather,
    plan,
    raw_data,
    reshape,
    results,
    summary,
)

SECTIONS: list[Section] = [
    summary.SECTION,
    plan.SECTION,
    results.SECTION,
    checks.SECTION,
    reshape.SECTION,
    gather.SECTION,
    environment.SECTION,
    raw_data.SECTION,
]


def report_registered() -> tuple[Registered, ...]:
    """What installed packages add to the report."""
    return registered(Point.REPORT, Registered)


def sections() -> list[Section]:
    """Every section in report order: :data:`SECTIONS`, each followed by the sections registered after it."""
    placed = [p for r in report_registered() for p in r.sections]
    unknown = [p.section.name for p in placed if not any(p.after is own for own in SECTIONS)]
    if unknown:
        raise ValueError(f"sections {unknown} are placed after a section the report does not have")
    return [s for own in SECTIONS for s in (own, *(p.section for p in placed if p.after is own))]

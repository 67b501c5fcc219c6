"""The report's sections, in order; each is one module defining a :class:`repro.report.model.Section`.

A new section is a module here and one line in :data:`SECTIONS`. The order follows vLLM's pull-request
template: *Purpose* (the first screen), *Test Plan*, *Test Result*, then the evidence per bug and study,
the environment and the raw data.
"""

from __future__ import annotations

from repro.report.model import Section
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
from repro_studies.report.sections import (
    affected,
    affected_releases,
    ceiling,
    cutedsl,
    fix_cost,
    gather_fast,
    jit,
    reshape_releases,
    vllm_kernel,
    vllm_suite,
)

SECTIONS: list[Section] = [
    summary.SECTION,
    affected.SECTION,
    plan.SECTION,
    results.SECTION,
    checks.SECTION,
    reshape.SECTION,
    reshape_releases.SECTION,
    gather.SECTION,
    affected_releases.SECTION,
    vllm_suite.SECTION,
    fix_cost.SECTION,
    gather_fast.SECTION,
    ceiling.SECTION,
    cutedsl.SECTION,
    jit.SECTION,
    vllm_kernel.SECTION,
    environment.SECTION,
    raw_data.SECTION,
]

"""The studies in the report (:class:`repro.report.model.Registered`, entry point ``report`` of
:mod:`repro.plugins`): each study's section placed after the bug it is about, and the studies' parts of the first
table, of the test plan and of the test result."""

from __future__ import annotations

from repro.report.model import Placed, Registered
from repro.report.sections import gather, reshape, summary
from repro_studies.report import summary_rows
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

REPORT = Registered(
    sections=(
        Placed(summary.SECTION, affected.SECTION),
        Placed(reshape.SECTION, reshape_releases.SECTION),
        *(
            Placed(gather.SECTION, s.SECTION)
            for s in (affected_releases, vllm_suite, fix_cost, gather_fast, ceiling, cutedsl, jit, vllm_kernel)
        ),
    ),
    inserts=(
        summary_rows.BUG1_RELEASES,
        summary_rows.GATHER_RELEASES,
        summary_rows.COSTS,
        vllm_suite.TEST_PLAN,
        jit.LOGGED_COMPILATION,
        jit.LOGGED_COMPILATION_CODE,
    ),
)

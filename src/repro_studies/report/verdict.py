"""The release studies' findings in the run's verdict (:class:`repro.report.verdict.Findings`, entry point
``verdict`` of :mod:`repro.plugins`): PR #55109's gather in vLLM's releases (notebook 04) and bug 1 in vLLM's
releases (notebook 06), after the two bugs' own findings; and what the studies' other tables measure."""

from __future__ import annotations

from repro.bugs import Bug
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import Finding
from repro.report.verdict import Findings
from repro_studies.analysis import reshape_chain
from repro_studies.analysis.releases import releases_finding
from repro_studies.report import phrases
from repro_studies.tables import Table


def gather_in_releases(run: RunData) -> Finding | None:
    """Notebook 04's release matrix: what each release's own gathers do, as released and patched."""
    matrix = run.table(Table.RELEASE_MATRIX)
    if matrix is None or not len(matrix):
        return None
    found = releases_finding(matrix)
    return Finding(Bug.GATHER, list(found.outcomes), [phrases.not_fixed(p) for p in found.not_fixed])


def reshape_in_releases(run: RunData) -> Finding | None:
    """Notebook 06's answers: whether a configuration a release accepts reaches bug 1 there."""
    runners = run.table(Table.BUG1_RUNNERS)
    if runners is None or not len(runners):
        return None
    answers = reshape_chain.answers(runners, run.table(Table.BUG1_RUNS), run.table(Table.BUG1_CELLS))
    found = reshape_chain.releases_finding(answers)
    return Finding(Bug.RESHAPE, list(found.outcomes), [phrases.unexplained(u) for u in found.unexplained])


FINDINGS = Findings(
    findings=(gather_in_releases, reshape_in_releases),
    measured=(
        (Table.PERF_MEDIANS, "the cost of the fix"),
        (Table.VLLM_RATIOS, "the fix's cost on vLLM's own kernel"),
        (Table.JIT_SUMMARY, "JIT compilations per block-table width"),
        (Table.GATHER_DISPATCH, "which gather each release launches per GPU, model and record"),
        (
            Table.RUNNER_ANSWERS,
            f"whether each release's runner hands the gather of {Bug.GATHER} a narrowed table",
        ),
    ),
)

"""What a vLLM reviewer can take away: each release's patch (the run folder's ``patches/vllm-<version>.diff``) and
the outcome of the regression test written for vLLM's suite (``upstream-tests/``), run against the release as
released and patched (notebook 04); and, in the test plan, the releases a run ran the regression test on
(:data:`TEST_PLAN`, registered at :attr:`repro.report.model.Slot.TEST_PLAN_SUITE`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report.model import Common, Insert, Section, Slot, TemplateFile
from repro_studies.analysis import vllm_suite as suite
from repro_studies.registry import Form
from repro_studies.tables import Table

ODD_COLUMNS = ("release", "form", "test", "outcome", "expected", "message")


@dataclass(frozen=True)
class VllmSuite:
    outcomes: pd.DataFrame  # one row per release: the patch and the test's outcome as released and patched
    diffs: list[str]  # patches/<file> of every diff written
    odd: pd.DataFrame  # tests that did not do what they had to


def derive(c: Common) -> VllmSuite | None:
    summary, patches = c.run.table(suite.SUMMARY_TABLE), c.run.table(suite.PATCH_TABLE)
    if (summary is None or not len(summary)) and (patches is None or not len(patches)):
        return None
    diffs = [p for p in patches["diff"].dropna().astype(str) if p] if patches is not None and len(patches) else []
    tests = c.run.table(suite.TEST_TABLE)
    odd = pd.DataFrame()
    if tests is not None and len(tests):
        checked = suite.with_expectations(tests)
        odd = checked[~checked["ok"]]
        odd = odd[[col for col in ODD_COLUMNS if col in odd]]
    return VllmSuite(suite.release_outcomes(summary, patches), diffs, odd)


MARKDOWN = TemplateFile("repro_studies.report", "vllm-suite.md.j2")

SECTION = Section("vllm-suite", derive, MARKDOWN)


@dataclass(frozen=True)
class SuiteRun:
    """The regression test's outcome on one release, as released and patched (notebook 04's summary)."""

    release: str
    released: str
    patched: str


def suite_runs(c: Common) -> tuple[SuiteRun, ...] | None:
    """One entry per release of notebook 04's regression-test summary, in the table's (release) order."""
    summary = c.run.table(Table.UPSTREAM_TEST_SUMMARY)
    if summary is None or not len(summary):
        return None
    outcome = {(str(r["release"]), str(r["form"])): str(r["outcome"]) for r in summary.to_dict("records")}
    releases = dict.fromkeys(str(r) for r in summary["release"])
    return tuple(
        SuiteRun(v, outcome.get((v, Form.RELEASED), "not run"), outcome.get((v, Form.PATCHED), "not run"))
        for v in releases
    )


TEST_PLAN = Insert(
    Slot.TEST_PLAN_SUITE,
    suite_runs,
    TemplateFile("repro_studies.report", "vllm-suite-test-plan.md.j2"),
)

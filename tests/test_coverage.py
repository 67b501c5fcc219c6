"""Coverage is part of the verdict: a run claims PR #55109 reproduced or fixed only when it ran a case where the
bug shows (at least two requests on a narrowed table), the headline names exactly the cases that ran (never a range
it did not run), and the default sweep covers request counts that are not powers of two, several backing widths,
an offset and gather lengths on narrowed tables, and block ids past what 16 bits hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest
from clitools import run

from repro.bugs import Bug
from repro.cli.main import verdict_code
from repro.cli.runner import declared_parameters, notebooks
from repro.core.analysis import gather
from repro.core.analysis.rundata import RunData, load_run
from repro.core.analysis.verdict import Conclusion, Undecided
from repro.registry import BUGGY, FIXED, UNDER_TEST_LABEL, expectation
from repro.report import phrases
from repro.report.verdict import run_verdict

GATHER = "02-strided-block-table-gather"


def sweep(counts, wrong_from=2, under_test: str | None = None, under_test_right: bool = False) -> pd.DataFrame:
    rows = []
    variants = {"buggy": BUGGY.target, "fixed": FIXED.target}
    if under_test:
        variants[UNDER_TEST_LABEL] = under_test
    for variant, target in variants.items():
        for mode in ("in-range", "poison"):
            for n in counts:
                bad = variant != "fixed" and n >= wrong_from and not (under_test_right and variant == UNDER_TEST_LABEL)
                obs = {
                    "status": "ok",
                    "mismatched_tokens": 5 if bad else 0,
                    "total_tokens": 10,
                    "stray_writes": 0,
                    "implementation": target,
                    "error": "",
                }
                rows.append(gather.sweep_row(variant, expectation(variant), mode, n, obs))
    return pd.DataFrame(rows).assign(notebook=GATHER)


def verdict_of(table: pd.DataFrame):
    manifest = {"status": "complete", "notebooks": {GATHER: {"status": "ok"}}}
    return run_verdict(RunData(Path("synthetic"), manifest, {"02-gather-sweep": table}, {}))


def test_one_request_decides_nothing_and_fails():
    """The buggy pitch under test at one request equals the fixed one: neither reproduced nor verified."""
    v = verdict_of(sweep([1], under_test=BUGGY.target))
    [finding] = v.findings
    assert finding.outcomes == (Conclusion.UNDECIDED,) and not finding.decides and finding.coverage.deciding == 0, (
        v.title
    )
    assert v.undecided and v.claim == "Undecided: " + phrases.undecided(finding.coverage)
    assert "Reproduced" not in v.title and "fix verified" not in v.title.lower()
    assert v.failed >= 1 and verdict_code(v) == 1


def test_the_headline_names_exactly_the_counts_that_ran():
    v = verdict_of(sweep([1, 2, 64, 256]))
    covered = v.findings[0].coverage
    assert (covered.cases, covered.counts, covered.deciding) == (8, (1, 2, 64, 256), 6)
    assert v.title.endswith(f" (in {phrases.coverage(covered)})")
    assert ".." not in v.title and "1, 2, 64 and 256 requests" in phrases.coverage(covered)


def test_the_claim_and_the_cases_it_rests_on_are_the_title_in_two_parts():
    """The comment's first screen leads with the claim and names the cases right after its verdict table."""
    v = verdict_of(sweep([1, 2, 64, 256]))
    assert v.findings[0].coverage.counts == (1, 2, 64, 256) and v.findings[0].coverage.cases == 8
    assert v.scope == "in " + phrases.coverage(v.findings[0].coverage), v.scope
    assert v.claim == f"Reproduced and fix verified: {Bug.GATHER}"
    assert v.title == f"{v.claim} ({v.scope})"
    undecided = verdict_of(sweep([1], under_test=BUGGY.target))
    assert undecided.scope == "" and undecided.claim == undecided.title
    outside = "outside.gathers:gather"  # an implementation from outside the repository: the title is about it
    wrong = verdict_of(sweep([1, 2, 3], under_test=outside))
    u = wrong.findings[0].under_test
    assert (u.target, u.own, u.behaviour.bug_signature, u.behaviour.wrong_from) == (outside, False, True, 2)
    assert wrong.claim == "R" + phrases.under_test(u)[1:], wrong.title
    assert wrong.scope == phrases.coverage(wrong.findings[0].coverage)
    assert (wrong.findings[0].coverage.cases, wrong.findings[0].coverage.counts) == (6, (1, 2, 3))
    assert wrong.title == f"{wrong.claim} ({wrong.scope})"
    right = verdict_of(sweep([1, 2, 3], under_test=outside, under_test_right=True))
    u = right.findings[0].under_test
    assert (u.target, u.own, u.behaviour.correct) == (outside, False, True)
    assert right.claim == "F" + phrases.under_test(u)[1:], right.title
    assert right.scope == phrases.coverage(right.findings[0].coverage)
    assert (right.findings[0].coverage.cases, right.findings[0].coverage.counts) == (6, (1, 2, 3))
    assert right.title == f"{right.claim} in {right.scope}"


def test_the_default_sweep_covers_what_a_wrong_gather_can_hide_in():
    from repro.core.evidence.scenarios import ScenarioSpec
    from repro.core.evidence.sweep import sweep_cases
    from repro.coverage import Geometry
    from repro.profiles import PROFILES

    declared = declared_parameters(notebooks())
    default = {k: ast.literal_eval(v[GATHER]) for k, v in declared.items() if GATHER in v}
    counts = default["request_counts"]
    assert any(n > 8 and n % 8 for n in counts) and any(n & (n - 1) for n in counts)
    assert min(counts) == 1 and max(counts) == 256
    profile = PROFILES["cpu"]
    base = ScenarioSpec(
        num_reqs=1, block_size=default["cache_block_size"], seq_len_max=profile.gather_seq_len_max, max_reqs=max(counts)
    )
    cases = sweep_cases(counts, default["sentinel_modes"], base, profile.high_block_id, default["geometries"])
    columns = pd.DataFrame([{**c.columns(), "num_reqs": c.num_reqs, "mode": c.mode} for c in cases])
    narrowed = columns[(columns["backing_width"] > columns["table_width"]) & (columns["num_reqs"] >= 2)]
    assert len(narrowed) and (columns["backing_width"] > columns["table_width"]).all()
    assert len(set(columns["backing_width"] - columns["table_width"])) >= 3  # several backing widths
    assert (narrowed["offset"] > 0).any() and (narrowed["window"] > 0).any()
    assert (narrowed["first_block"] >= 2**15).any()
    assert set(columns["geometry"]) == set(Geometry)
    assert set(columns["mode"]) == {"in-range", "poison"}


@pytest.mark.notebook
def test_the_buggy_pitch_at_one_request_through_the_command_line_fails_undecided(tmp_path):
    out = tmp_path / "run"
    proc = run(
        ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", "-p", "request_counts=[1]"]
        + ["-p", "sentinel_modes=[in-range]"]
        + ["-p", "seq_len_max=48", "-p", "cache_block_size=16", "-p", f"implementation={BUGGY.target}"]
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [finding] = (v := run_verdict(load_run(out))).findings
    assert (
        finding.outcomes == (Conclusion.UNDECIDED,)
        and finding.coverage.counts == (1,)
        and finding.coverage.deciding == 0
    )
    undecided = phrases.undecided(finding.coverage)
    assert (out / "report.md").read_text().startswith(f"# {v.title}") and v.title == f"Undecided: {undecided}"
    assert f"FAILED check {phrases.undecided_run(Undecided(GATHER, finding.coverage))}\n" in proc.stdout

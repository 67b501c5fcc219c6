"""What the report leads with is derived from the tables and the registry's expectations: a bug reproduced
by the implementation expected to reproduce it is a reproduction, an unfinished run is incomplete."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro import registry
from repro.bugs import Bug
from repro.core.analysis import gather
from repro.core.analysis.reshape import SPLIT_CHECK
from repro.core.analysis.rundata import RunData, load_run
from repro.core.analysis.verdict import (
    Conclusion,
    behaviour,
    implementation_names,
    is_own_implementation,
    judge,
    not_finished,
)
from repro.registry import FIXED, UNDER_TEST_LABEL, Expectation, expectation
from repro.report import phrases
from repro.report.verdict import run_verdict

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
COUNTS = (1, 2, 4)
MODES = ("in-range", "poison")


def sweep(outcomes: dict[str, dict[tuple[str, int], object]], targets: dict[str, str] | None = None) -> pd.DataFrame:
    """Sweep rows: per variant, ``{(mode, n): mismatched tokens, or a status such as "crashed"}`` (missing: 0
    differ); ``("changed", name)``: the output right, the input ``name`` changed."""
    rows = []
    for variant, cases in outcomes.items():
        for mode in ("in-range", "poison"):
            for n in COUNTS:
                got = cases.get((mode, n), 0)
                changed = got[1] if isinstance(got, tuple) else ""
                status = got if isinstance(got, str) else "ok"
                obs = {
                    "status": status,
                    "mismatched_tokens": None if status != "ok" else (0 if changed else got),
                    "total_tokens": 100,
                    "stray_writes": 0,
                    "implementation": (targets or {}).get(variant, f"pkg.mod:{variant}"),
                    "error": f"{status} (synthetic)" if status != "ok" else "",
                    "changed_inputs": changed,
                }
                rows.append(gather.sweep_row(variant, expectation(variant), mode, n, obs))
    return pd.DataFrame(rows).assign(notebook="02-strided-block-table-gather")


BUG = {("in-range", 2): 50, ("in-range", 4): 90, ("poison", 2): "crashed", ("poison", 4): "crashed"}
CLEAN = {"fixed": {}, "contiguous-copy": {}, "fast": {}}


def run_of(table: pd.DataFrame, **manifest) -> RunData:
    m = {"status": "complete", "notebooks": {"02-strided-block-table-gather": {"status": "ok"}}, **manifest}
    return RunData(Path("synthetic"), m, {"02-gather-sweep": table}, {})


def test_the_buggy_kernel_reproducing_and_the_fixed_matching_is_reproduced_and_fix_verified():
    v = run_verdict(run_of(sweep({"buggy": BUG, **CLEAN})))
    [finding] = v.findings
    assert finding.outcomes == (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED) and finding.bug is Bug.GATHER
    assert (finding.coverage.cases, finding.coverage.counts, finding.coverage.modes) == (6, COUNTS, MODES)
    # the bug's control, then those expected to match (fast only where the studies register it), each as expected
    controls = [(c.variant, c.bug) for c in finding.controls]
    assert controls[:3] == [("buggy", True), ("fixed", False), ("contiguous-copy", False)] and len(controls) <= 4
    assert all(c.as_expected for c in finding.controls)
    assert finding.under_test is None
    # the title is the outcomes, the bug, then the cases: the claim before them, the cases in parentheses
    assert (v.claim, v.scope) == (
        f"Reproduced and fix verified: {Bug.GATHER}",
        "in " + phrases.coverage(finding.coverage),
    )
    assert v.title == f"{v.claim} ({v.scope})"
    bug = v.findings[0].bug_control.behaviour  # wrong from 2 requests in in-range mode, faults on poison ids
    assert (bug.wrong_from, bug.wrong_spread.onward_from, bug.wrong_spread.modes) == (2, 2, ("in-range",))
    assert (bug.fault_from, bug.faults_on_poison_only, bug.faults_observed) == (2, True, True)
    assert v.failed == 0


def test_an_outside_implementation_with_the_bugs_signature_is_a_reproduction_in_it():
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: BUG}, {UNDER_TEST_LABEL: "vllm.x:gather"})
    info = {"target": "vllm.x:gather", "package": "vllm", "version": "0.22.0", "module_sha256": "ab" * 32}
    v = run_verdict(run_of(table, implementations={"implementation": info}))
    [finding] = v.findings
    u = finding.under_test
    assert finding.outcomes == (
        Conclusion.REPRODUCED,
        Conclusion.FIX_VERIFIED,
    )  # what the implementation under test showed comes first
    assert (u.name, u.target, u.own, u.behaviour.bug_signature) == (
        "vllm 0.22.0's gather",
        "vllm.x:gather",
        False,
        True,
    )
    assert (u.behaviour.wrong_from, u.behaviour.wrong_spread.modes, u.behaviour.fault_modes) == (
        2,
        ("in-range",),
        ("poison",),
    )
    assert v.claim == phrases.under_test(u)[0].upper() + phrases.under_test(u)[1:]  # the title is about it
    assert v.scope == v.rests_on == phrases.coverage(finding.coverage) and v.title == f"{v.claim} ({v.scope})"
    assert v.findings[0].under_test.like == "buggy"  # the same mismatch counts as the buggy gather in every case
    assert v.failed == v.failed_explained == 4  # its 4 cases from 2 requests fail as the bug predicts


def test_an_outside_implementation_that_matches_verifies_the_fix_in_it():
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: {}}, {UNDER_TEST_LABEL: "vllm.x:gather"})
    v = run_verdict(run_of(table, parameters={"implementation": "vllm.x:gather"}))
    u = v.findings[0].under_test
    assert v.findings[0].outcomes[0] == Conclusion.FIX_VERIFIED and u.behaviour.correct and not u.own
    assert u.name == "vllm's gather (from vllm.x)"
    assert v.claim == "F" + phrases.under_test(u)[1:] and v.title == f"{v.claim} in {v.scope}"


def test_a_target_the_sweep_also_ran_as_a_control_is_this_repositorys_own():
    """A run names a function by the module path it had then: the implementation under test is this repository's
    when the registry names it today or another variant of the same sweep ran it."""
    old = "repro.kernels.gather:gather_fixed"  # the fixed kernel's path before the core/studies split
    table = sweep({"buggy": BUG, **CLEAN, "under-test": {}}, targets={"fixed": old, "under-test": old})
    assert is_own_implementation(table, old)
    assert is_own_implementation(table, FIXED.target)
    assert not is_own_implementation(table, "vllm.x:gather")
    v = run_verdict(run_of(table, parameters={"implementation": old}))
    [finding] = v.findings
    assert finding.under_test.own and finding.outcomes == (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED), v.title
    assert v.claim == f"Reproduced and fix verified: {Bug.GATHER}", v.title  # not a title about the target


def test_wrong_at_one_request_is_not_the_bugs_signature():
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: {("in-range", 1): 3}}, {UNDER_TEST_LABEL: "x.y:z"})
    v = run_verdict(run_of(table))
    u = v.findings[0].under_test.behaviour
    assert (u.wrong_from, u.bug_signature, u.correct) == (1, False, False)
    assert v.title.startswith("Unexpected results:") and phrases.under_test(v.findings[0].under_test) in v.title


def test_a_control_that_misbehaves_is_named_in_the_title():
    v = run_verdict(run_of(sweep({"buggy": {}, **CLEAN})))
    buggy = v.findings[0].bug_control
    assert (buggy.variant, buggy.as_expected, buggy.behaviour.wrong_from) == ("buggy", False, None)
    assert v.findings[0].outcomes[0] == Conclusion.NOT_REPRODUCED
    assert v.claim == "Unexpected results: " + phrases.control(registry.prose("buggy"), buggy)
    broken = run_verdict(run_of(sweep({"buggy": BUG, **CLEAN, "fixed": {("poison", 4): 1}})))
    assert "fix not verified" in broken.findings[0].outcomes


@pytest.mark.parametrize("status", ["running", "interrupted"])
def test_a_run_that_did_not_finish_is_incomplete_never_passed(status):
    v = run_verdict(run_of(sweep({"buggy": BUG, **CLEAN}), status=status))
    assert (
        not v.complete
        and v.not_finished == []
        and v.findings[0].outcomes == (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED)
    )
    assert v.title == f"Incomplete: the run is '{status}', not finished; nothing here is a verdict on what did not run"


def test_a_broken_notebook_makes_the_run_incomplete_but_failed_checks_do_not():
    notebooks = {
        "01-reshape-overrun": {"status": "failed", "error": "DeadKernelError: Kernel died"},
        "02-strided-block-table-gather": {"status": "failed", "error": "ChecksFailed: 2 failed check(s):\n..."},
    }
    assert not_finished({"notebooks": notebooks}) == ["01-reshape-overrun: DeadKernelError: Kernel died"]
    v = run_verdict(run_of(sweep({"buggy": BUG, **CLEAN}), status="failed", notebooks=notebooks))
    assert not v.complete and v.not_finished == ["01-reshape-overrun: DeadKernelError: Kernel died"]
    assert v.title == "Incomplete: 1 notebook(s) did not finish; nothing here is a verdict on what did not run"


def test_flagged_lanes_in_the_interpreter_read_as_reads_outside_every_allocation():
    table = sweep({"buggy": {("in-range", 2): 5, ("in-range", 4): 9, ("poison", 2): 7, ("poison", 4): 8}})
    memory = pd.DataFrame(
        [
            {"variant": "buggy", "mode": m, "num_reqs": n, "out_of_view_lanes": 1, "out_of_bounds_lanes": int(n > 1)}
            for m in ("in-range", "poison")
            for n in COUNTS
        ]
    )
    memory.loc[memory["mode"] == "in-range", "out_of_bounds_lanes"] = 0
    b = behaviour(table, "buggy", memory)
    assert b.bug_signature and not b.faults_observed
    assert (b.wrong_from, b.wrong_spread.every, b.wrong_spread.onward_from, b.wrong_spread.modes) == (2, False, 2, ())
    assert (b.fault_from, b.faults_on_poison_only) == (2, True)


@pytest.mark.audit
def test_the_committed_runs_lead_with_what_they_showed():
    gpu = run_verdict(load_run(H200 / "gpu-profile"), SPLIT_CHECK)
    reshape, strided = gpu.findings
    assert (reshape.bug, reshape.outcomes, strided.bug, strided.outcomes) == (
        Bug.RESHAPE,
        (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED),
        Bug.GATHER,
        (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED),
    )
    assert (strided.coverage.cases, strided.coverage.counts) == (18, (1, 2, 4, 8, 16, 32, 64, 128, 256))
    assert strided.coverage.modes == MODES and strided.under_test.own  # the fixed kernel, this repository's
    assert gpu.claim == f"Reproduced and fix verified: {Bug.RESHAPE} and {Bug.GATHER}"
    assert (gpu.checks, gpu.checks_ok) == (339, 339)
    vllm_run = load_run(H200 / "vllm-0.22.0-under-test")
    v = run_verdict(vllm_run, SPLIT_CHECK)
    name = implementation_names(vllm_run)["implementation"]
    u = v.findings[-1].under_test
    assert (u.name, u.own, u.behaviour.bug_signature, u.like) == (name, False, True, "buggy")
    assert (u.behaviour.wrong_from, u.behaviour.wrong_spread.modes, u.behaviour.fault_modes) == (
        2,
        ("in-range",),
        ("poison",),
    )
    assert v.findings[-1].outcomes[0] == Conclusion.REPRODUCED and v.claim == "R" + phrases.under_test(u)[1:]
    assert (v.checks, v.failed, v.failed_explained) == (164, 24, 24)


def test_expectations_come_from_the_registry():
    assert expectation("buggy") == Expectation.BUG
    assert expectation(UNDER_TEST_LABEL) != Expectation.BUG


def test_an_implementation_that_raises_is_neither_a_verified_fix_nor_the_bug():
    """Raising at 4 requests fails those checks; the headline says so, from the same rule."""
    raising = {("in-range", 4): "error", ("poison", 4): "error"}
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: raising}, {UNDER_TEST_LABEL: "x.y:gather"})
    v = run_verdict(run_of(table))
    assert v.failed == 2 and v.failed_explained == 0
    u = v.findings[0].under_test.behaviour
    assert (u.no_result_from, u.no_result_status, u.correct, u.bug_signature) == (4, "error", False, False)
    assert v.title.startswith("Unexpected results:") and phrases.under_test(v.findings[0].under_test) in v.title
    assert Conclusion.FIX_VERIFIED not in v.findings[0].outcomes[:1]


@pytest.mark.parametrize("status", ["timeout", "killed", "exited", "out of memory", "did not start", "error"])
def test_only_a_named_fault_is_the_bugs_signature(status):
    """Wrong from 2 requests in range, and any ending but a named fault on poison ids: not a reproduction."""
    ends = {("in-range", 2): 50, ("in-range", 4): 90, ("poison", 2): status, ("poison", 4): status}
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: ends}, {UNDER_TEST_LABEL: "x.y:gather"})
    v = run_verdict(run_of(table))
    assert not v.title.startswith("Reproduced") and "not the bug's signature" in v.title
    assert v.failed_explained < v.failed


def test_a_changed_input_is_never_a_verified_fix():
    changed = {("in-range", 1): ("changed", "k_cache")}
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: changed}, {UNDER_TEST_LABEL: "x.y:gather"})
    v = run_verdict(run_of(table))
    u = v.findings[0].under_test.behaviour
    assert (u.changed_inputs, u.every_case_ok, u.correct) == (("k_cache",), False, False) and v.failed == 1
    assert v.title.startswith("Unexpected results:") and phrases.under_test(v.findings[0].under_test) in v.title


def test_failures_outside_the_sweep_keep_the_headline_from_claiming_the_fix():
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: {}}, {UNDER_TEST_LABEL: "x.y:gather"})
    contiguous = pd.DataFrame(
        [
            gather.contiguous_case_row("buggy", "a", 3, 0, 0, True, 39),
            gather.contiguous_case_row(UNDER_TEST_LABEL, "a", 3, -1, -1, False, 39, "RuntimeError: no"),
        ]
    ).assign(notebook="02-strided-block-table-gather")
    run = run_of(table)
    run.tables["02-contiguous-checks"] = contiguous
    v = run_verdict(run)
    u = v.findings[0].under_test
    assert u.behaviour.correct and len(u.elsewhere) == 1 and "[under-test, n=3]" in u.elsewhere[0]
    assert Conclusion.FIX_VERIFIED not in v.findings[0].outcomes[:1]
    assert v.title.startswith("Unexpected results:") and phrases.under_test(u) in v.title


def test_an_ok_column_that_is_not_the_rules_is_a_failed_check():
    """A process whose rule was patched by the code it ran (or an edited table) writes ok where the rule says
    not: the verdict recomputes every sweep row and counts the disagreement as a failure."""
    table = sweep({"buggy": BUG, **CLEAN, UNDER_TEST_LABEL: {("in-range", 2): 7}}, {UNDER_TEST_LABEL: "x.y:gather"})
    table["ok"] = True
    run = run_of(table)
    v = run_verdict(run)
    assert len(v.disagreements) == 1 and v.failed == 1
    [d] = judge(run).disagreements
    assert (d.variant, d.mode, d.num_reqs, d.recorded, d.rule) == (UNDER_TEST_LABEL, "in-range", "2", "True", False)
    assert v.title.startswith("Unexpected results")

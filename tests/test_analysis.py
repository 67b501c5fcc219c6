"""The analysis layer's rules on small hand-made tables: what each check expects and when it passes.

No kernel runs here; every observation is written out by hand, so each rule is tested on the
cases that matter (the buggy kernel at one request, a fix that breaks, a bug that stops reproducing).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from repro import seeds
from repro.core.analysis import gather, reshape
from repro.core.analysis.compare import compare_runs
from repro.core.analysis.rundata import load_run
from repro.registry import Expectation
from repro_studies import registry
from repro_studies.analysis import performance


def obs(status="ok", mismatched=0, total=10, stray=0, error="", **extra):
    return {
        "implementation": "pkg.mod:fn",
        "status": status,
        "mismatched_tokens": mismatched,
        "total_tokens": total,
        "stray_writes": stray,
        "error": error,
        **extra,
    }


@pytest.mark.parametrize(
    "expect,n,observation,ok",
    [
        (Expectation.BUG, 1, obs(), True),  # request 0 is always right
        (Expectation.BUG, 1, obs(mismatched=1), False),
        (Expectation.BUG, 2, obs(mismatched=3), True),  # the bug reproduces
        (Expectation.BUG, 2, obs(), False),  # the bug stopped reproducing: a failed check
        (Expectation.BUG, 2, obs(status="crashed", mismatched=None, stray=None, error="illegal memory access"), True),
        (Expectation.BUG, 2, obs(status="error", mismatched=None, stray=None, error="TypeError"), False),
        (Expectation.CORRECT, 4, obs(), True),
        (Expectation.CORRECT, 4, obs(mismatched=1), False),
        (Expectation.CORRECT, 4, obs(stray=1), False),  # a row written that nobody asked for
        (Expectation.CORRECT, 4, obs(status="crashed", mismatched=None, stray=None), False),
        (Expectation.CORRECT, 1, obs(status="timeout", mismatched=None, stray=None), False),
    ],
)
def test_sweep_policy(expect, n, observation, ok):
    row = gather.sweep_row("v", expect, "poison", n, observation)
    assert row["ok"] is ok
    assert row["expected"] == (
        "differs from reference or faults" if expect == Expectation.BUG and n > 1 else "matches reference"
    )


def test_sweep_row_says_what_was_observed():
    assert gather.sweep_row("v", Expectation.CORRECT, "in-range", 2, obs(mismatched=3, stray=2))["observed"] == (
        "3/10 tokens differ, 2 stray rows written"
    )
    crashed = gather.sweep_row("v", Expectation.BUG, "poison", 2, obs(status="crashed", error="CUDA error: x"))
    assert crashed["observed"] == "crashed: CUDA error: x"


@pytest.mark.parametrize(
    "expect,mode,n,outside_view,outside_all,ok",
    [
        (Expectation.BUG, "in-range", 2, 5, 0, True),
        (Expectation.BUG, "in-range", 2, 0, 0, False),  # the misread must be flagged
        (Expectation.BUG, "poison", 2, 5, 7, True),
        (Expectation.BUG, "poison", 2, 5, 0, False),  # poison must leave every argument
        (Expectation.BUG, "poison", 1, 0, 0, True),
        (Expectation.CORRECT, "poison", 4, 0, 1, False),  # no false positive allowed for a correct kernel
        (Expectation.CORRECT, "in-range", 4, 0, 0, True),
    ],
)
def test_checked_interpreter_policy(expect, mode, n, outside_view, outside_all, ok):
    row = gather.memory_row("v", expect, mode, n, obs(out_of_view_lanes=outside_view, out_of_bounds_lanes=outside_all))
    assert row["ok"] is ok


def test_no_memory_row_without_the_checked_interpreter():
    assert gather.memory_row("v", Expectation.BUG, "poison", 2, obs(out_of_view_lanes=None)) is None


@pytest.mark.parametrize(
    "expect,mode,n,errors,ok",
    [
        (Expectation.BUG, "poison", 2, 100, True),
        (Expectation.BUG, "poison", 2, 0, False),
        (Expectation.BUG, "in-range", 2, 0, True),  # memcheck's blind spot, expected and stated
        (Expectation.BUG, "in-range", 2, 3, False),
        (Expectation.CORRECT, "poison", 8, 0, True),
        (Expectation.CORRECT, "poison", 8, 1, False),
    ],
)
def test_memcheck_policy(expect, mode, n, errors, ok):
    res = {
        "status": "errors" if errors else "clean",
        "error_count": errors,
        "first_access": None,
        "error": "",
        "stderr_tail": "",
        "implementation": "x",
        "errors_not_printed": 0,
        "case_status": "ok",
        "mismatched_tokens": 0,
    }
    assert gather.memcheck_row("v", expect, mode, n, res, "log")["ok"] is ok


def test_a_sanitizer_that_did_not_check_is_never_a_pass():
    res = {
        "status": "sanitizer-failed",
        "error_count": None,
        "first_access": None,
        "error": "tool died",
        "stderr_tail": "",
        "implementation": "x",
        "errors_not_printed": None,
        "case_status": None,
        "mismatched_tokens": None,
    }
    assert gather.memcheck_row("v", Expectation.CORRECT, "poison", 1, res, "log")["ok"] is False


def test_buggy_reads_walk_the_backing_table_with_the_views_width():
    # view backing[:3, :2] of a 4 x 5 table: request b's block j is read at flat b*2 + j
    reads = gather.buggy_reads(width=2, row_pitch=5, num_rows=3, seq_lens=[32, 32, 16], block_size=16)
    assert list(reads.buggy_entry) == ["[0, 0]", "[0, 1]", "[0, 2]", "[0, 3]", "[0, 4]"]
    assert list(reads.correct) == [True, True, False, False, False]
    assert list(reads.inside_view) == [True, True, False, False, False]
    contiguous = gather.buggy_reads(width=2, row_pitch=2, num_rows=3, seq_lens=[32, 32, 16], block_size=16)
    assert contiguous.correct.all()


def test_mismatch_pivot_shows_faults_and_fractions():
    frame = pd.DataFrame(
        [
            {
                "mode": "poison",
                "num_reqs": 1,
                "variant": "buggy",
                "status": "ok",
                "mismatched_tokens": 0,
                "total_tokens": 6,
            },
            {
                "mode": "poison",
                "num_reqs": 2,
                "variant": "buggy",
                "status": "crashed",
                "mismatched_tokens": None,
                "total_tokens": 0,
            },
        ]
    )
    pivot = gather.mismatch_pivot(frame)
    assert pivot.loc[("poison", 1), "buggy"] == "0/6" and pivot.loc[("poison", 2), "buggy"] == "crashed"


def medians_frame(fixed_view=10.0, fixed_contig=10.0, copy=11.0, fast_view=5.0, fast_contig=5.0, outside=None):
    rows = []
    for n in (1, 4):
        for launch, scale in (("graph", 1.0), ("eager", 3.0)):
            times = {
                registry.FIXED_VIEW: fixed_view,
                registry.FIXED_CONTIG: fixed_contig,
                registry.COPY_VIEW: copy,
                registry.FAST_VIEW: fast_view,
                registry.FAST_CONTIG: fast_contig,
            }
            if outside:
                times[registry.OUTSIDE_ARM] = outside
            for arm, us in times.items():
                rows.append(
                    {
                        "arm": arm.label,
                        **arm.fields(),
                        "launch": launch,
                        "num_reqs": n,
                        "seq_len": 256,
                        "median_us": us * scale * n,
                        "bandwidth_tbps": 1.0,
                    }
                )
    return pd.DataFrame(rows)


def test_timing_facts_judge_the_fix_on_graph_replays_and_count_host_bound_points():
    med = medians_frame(fixed_view=10.05, fixed_contig=10.0, outside=40.0)
    ratios = performance.ratio_rows(med, ceiling_tbps=4.0).assign(copy_ceiling_tbps=4.0)
    facts = performance.timing_facts(med, ratios)
    assert facts["fixed_ratio_graph"] == {"min": 1.005, "max": 1.005, "outside_band": 0, "points": 2}
    assert facts["contiguous_copy_overhead_graph"] == pytest.approx(11.0 / 10.05, abs=1e-4)
    assert facts["host_bound_eager_points"] == 12  # every eager point is 3x its graph replay
    assert facts["fast_speedup_over_outside_at_max"] == pytest.approx(8.0)
    assert facts["outside_arm"] == "outside / contiguous table" and facts["host_bound_factor"] == 1.5
    assert not {"fix_cost", "fast", "headline"} & set(facts)  # numbers only: the report words them


def test_timing_facts_count_a_stride_that_costs():
    med = medians_frame(fixed_view=12.0, fixed_contig=10.0)
    ratios = performance.ratio_rows(med, ceiling_tbps=4.0).assign(copy_ceiling_tbps=4.0)
    facts = performance.timing_facts(med, ratios)
    assert facts["fixed_ratio_graph"]["outside_band"] == 2 and facts["fixed_ratio_graph"]["points"] == 2


def test_the_timing_phrases_render_the_figures_they_are_given():
    from repro_studies.report import phrases

    med = medians_frame(fixed_view=12.0, fixed_contig=10.0, outside=40.0)
    facts = performance.timing_facts(med, performance.ratio_rows(med, ceiling_tbps=4.0).assign(copy_ceiling_tbps=4.0))
    fix, fast = facts["fixed_ratio_graph"], facts["fast_ratio_graph"]
    text = phrases.timing(facts, {facts["outside_arm"]: "vllm 0.22.0: gather"})
    for figure in (
        f"{fix['min']:.3f}-{fix['max']:.3f}",
        f"({fix['outside_band']} of {fix['points']} points",
        "outside 0.99-1.01",
        f"at {fix['outside_band']} points",  # the fix leaves the band there
        f"{100 * (facts['contiguous_copy_overhead_graph'] - 1):.1f}% graphed",
        f"{facts['fixed_fraction_at_max']:.0%} of",
        "4.00 TB/s",
        f"{facts['host_bound_eager_points']} of {facts['eager_points']}",
        f"{fast['min']:.3f}-{fast['max']:.3f}",
        f"{facts['fast_speedup_over_outside_at_max']:.2f}x",
        "vllm 0.22.0: gather",
    ):
        assert figure in text, figure
    without_fast = {k: v for k, v in facts.items() if not k.startswith("fast")}
    assert "gather_fast" not in phrases.timing(without_fast) and phrases.timing(without_fast).startswith("Graph")


def test_reshape_expectations_are_the_prs_at_its_geometry_and_arithmetic_elsewhere():
    seed = seeds.load(43988)
    rep = seed["reported"]
    assert (
        reshape.expected_figures(
            seed, 256, rep["available_bytes"], compress_ratio=128, page_bytes=1728, storage_rows=2, row_elems=584
        )
        is seed
    )
    other = reshape.expected_figures(
        seed, 256, 10 * 1728, compress_ratio=128, page_bytes=1728, storage_rows=2, row_elems=584
    )["reported"]
    assert other["sizes"] == [1280, 2, 584] and other["strides"] == [1728, 584, 1]
    assert other["required_bytes"] == 1279 * 1728 + 2 * 584 and other["fixed_required_bytes"] == 9 * 1728 + 2 * 584
    # the same arithmetic reproduces the PR's figures at its own geometry
    at_pr = reshape.expected_figures(
        {**seed, "configuration": {"block_size": 0}},
        256,
        rep["available_bytes"],
        compress_ratio=128,
        page_bytes=1728,
        storage_rows=2,
        row_elems=584,
    )["reported"]
    assert {k: at_pr[k] for k in ("sizes", "strides", "required_bytes", "fixed_required_bytes")} == {
        k: rep[k] for k in ("sizes", "strides", "required_bytes", "fixed_required_bytes")
    }


def test_reported_error_checks_fail_when_the_reshape_does_not_raise():
    rows = reshape.reported_error_checks(None, seeds.load(43988))
    assert len(rows) == 4 and not any(r["ok"] for r in rows)


def _run(path, rows):
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"status": "complete"}))
    (path / "results").mkdir()
    pd.DataFrame(rows).to_csv(path / "results" / "02-t.csv", index=False)
    return load_run(path)


def test_compare_runs_counts_changed_verdicts_case_by_case(tmp_path):
    base = {"notebook": "02", "check": "c", "variant": "under-test", "mode": "poison", "expected": "x"}
    a = _run(tmp_path / "a", [{**base, "num_reqs": n, "observed": "ok", "ok": True} for n in (1, 2)])
    b = _run(
        tmp_path / "b",
        [
            {**base, "num_reqs": 1, "observed": "ok", "ok": True},
            {**base, "num_reqs": 2, "observed": "3 differ", "ok": False},
            {**base, "num_reqs": 4, "observed": "ok", "ok": True},
        ],
    )
    cmp = compare_runs(a, b)
    assert int((cmp["in"] == "both").sum()) == 2 and int(cmp.changed.sum()) == 1
    assert list(cmp[cmp["in"] == "B only"].num_reqs) == [4]  # request counts stay numbers (sorted as such)


def test_a_run_that_timed_nothing_records_why_as_a_value_and_an_older_run_reads_the_same():
    from repro_studies.analysis.performance import NotTimed, not_timed
    from repro_studies.report import phrases

    assert not_timed({"not_timed": "cpu-interpreter"}) is NotTimed.CPU_INTERPRETER
    # written before the reason was a value: only the sentence, which only the CPU profile's skip wrote
    assert not_timed({"headline": "timing skipped: the CPU profile runs kernels in the interpreter"}) is (
        NotTimed.CPU_INTERPRETER
    )
    assert not_timed({"headline": "Graph replays: ...", "band": [0.99, 1.01]}) is None and not_timed(None) is None
    assert (
        phrases.not_timed(NotTimed.CPU_INTERPRETER) == "timing skipped: the CPU profile runs kernels in the interpreter"
    )


def test_the_performance_setup_phrase_renders_the_profile_and_bytes_it_is_given():
    from repro.report.template import phrase
    from repro_studies.report import phrases

    text = phrase(phrases.PHRASES, "performance_setup", "gpu", 12, 34)
    assert "gpu;" in text and "12 read" in text and "34 written" in text
    assert "584 read" in phrases.performance_setup("cpu")  # the layout's byte counts

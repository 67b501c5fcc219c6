"""The committed H200 runs (data/h200/) are consistent with what they claim, and their reports are
exactly what this checkout's report code renders from them."""

import json
from pathlib import Path

import pandas as pd
import pytest

from repro.evidence.perf import headline, ratio_rows
from repro.report.render import render_markdown

ROOT = Path(__file__).resolve().parents[1] / "data" / "h200"
MAIN = ROOT / "gpu-profile"
VLLM = ROOT / "vllm-0.22.0-under-test"
COUNTS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def table(run: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(run / "results" / f"{name}.csv")


@pytest.mark.parametrize("run", [MAIN, VLLM], ids=lambda p: p.name)
def test_runs_are_real_h200_gpu_runs(run):
    manifest = json.loads((run / "manifest.json").read_text())
    env = manifest["environment"]
    assert manifest["profile"] == "gpu" and env["device"] == "NVIDIA H200" and env["cuda_available"]
    assert env["compute_sanitizer"] != "unavailable" and env["triton"].startswith("3.6")
    assert len(env["git_sha"]) == 40


def test_main_run_passed_every_check_and_covers_every_notebook():
    manifest = json.loads((MAIN / "manifest.json").read_text())
    assert manifest["status"] == "complete" and not manifest["failed_checks"]
    assert set(manifest["notebooks"]) == {"01-reshape-overrun", "02-strided-block-table-gather", "03-performance"}
    for csv in (MAIN / "results").glob("*.csv"):
        t = pd.read_csv(csv)
        if "ok" in t:
            assert t["ok"].all(), csv.name
    seconds = sum(s["seconds"] for s in manifest["notebooks"].values())
    assert seconds < 300  # the whole GPU profile under 5 minutes


def test_gather_sweep_fixed_everywhere_buggy_from_two():
    sweep = table(MAIN, "02-gather-sweep")
    assert sorted(set(sweep.num_reqs)) == COUNTS and set(sweep["mode"]) == {"in-range", "poison"}
    good = sweep[sweep.variant.isin(["fixed", "contiguous-copy", "fast", "under-test"])]
    assert len(good) == 4 * 2 * len(COUNTS)
    assert (good.status == "ok").all() and (good.mismatched_tokens == 0).all() and (good.stray_writes == 0).all()
    buggy = sweep[sweep.variant == "buggy"]
    one, many = buggy[buggy.num_reqs == 1], buggy[buggy.num_reqs > 1]
    assert (one.status == "ok").all() and (one.mismatched_tokens == 0).all()
    assert (many[many["mode"] == "poison"].status == "crashed").all()
    assert (many[many["mode"] == "in-range"].mismatched_tokens > 0).all()


def test_sanitizer_sees_poison_faults_only():
    san = table(MAIN, "02-sanitizer")
    clean = san[san.variant.isin(["fixed", "contiguous-copy", "fast", "under-test"]) | (san.num_reqs == 1)]
    assert set(san.variant) == {"buggy", "fixed", "contiguous-copy", "fast", "under-test"}
    assert (clean.error_count == 0).all()
    buggy = san[(san.variant == "buggy") & (san.num_reqs > 1)]
    assert (buggy[buggy["mode"] == "poison"].error_count > 0).all()
    blind = buggy[buggy["mode"] == "in-range"]
    assert (blind.error_count == 0).all() and (blind.mismatched_tokens > 0).all()


def test_performance_tables_agree_and_meet_the_targets():
    med = table(MAIN, "03-performance-medians")
    rat = table(MAIN, "03-performance-ratios")
    ceiling = float(rat.copy_ceiling_tbps.iloc[0])
    again = ratio_rows(med, ceiling)
    for col in again.columns:
        if col.endswith(("_ratio", "_fraction")):
            pd.testing.assert_series_equal(again[col].reset_index(drop=True), rat[col].reset_index(drop=True),
                                           check_names=False, atol=1e-3, rtol=0)
    facts = headline(med, rat)
    assert facts["fixed_ratio_graph"]["outside_band"] == 0  # the fix costs nothing (graph replays)
    assert facts["fast_ratio_graph"]["outside_band"] == 0
    assert facts["fast_fraction_at_max"] >= 0.80
    assert facts["single_request_graph_us"]["fast / narrowed view"] <= 15.0
    assert facts["fast_speedup_over_vllm_at_max"] >= 4.0
    assert table(MAIN, "03-performance-checks")["ok"].all()


def test_vllm_kernel_under_test_reproduces_the_bug():
    sweep = table(VLLM, "02-gather-sweep")
    under = sweep[sweep.variant == "under-test"]
    assert under.implementation.iloc[0].endswith("cache_utils:dequantize_and_gather_k_cache_triton")
    assert under[under.num_reqs == 1]["ok"].all()
    assert not under[under.num_reqs > 1]["ok"].any()
    # vLLM's own kernel misreads exactly like the buggy variant here.
    ours = sweep[(sweep.variant == "buggy") & (sweep["mode"] == "in-range")].set_index("num_reqs").mismatched_tokens
    theirs = under[under["mode"] == "in-range"].set_index("num_reqs").mismatched_tokens
    pd.testing.assert_series_equal(ours, theirs, check_names=False)
    contiguous = table(VLLM, "02-contiguous-checks")
    assert contiguous[contiguous.variant == "under-test"]["ok"].all()


@pytest.mark.parametrize("run", [MAIN, VLLM], ids=lambda p: p.name)
def test_committed_report_is_what_this_code_renders(run):
    assert (run / "report.md").read_text() == render_markdown(run), \
        "re-render with scripts/render-evidence-reports.sh"
    html = (run / "report.html").read_text()
    assert "data:image/png;base64" in html and "display_blocks" not in html

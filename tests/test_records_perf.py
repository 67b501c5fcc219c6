"""The V4.1 timing pieces on the CPU: device-filled scenarios, the bitwise rows and their check rows, the
copy-equivalent table and headline (pandas only), notebook 03's V4.1 section without releases, the tuning CLI's
argument errors. No timing is asserted."""

import pandas as pd
import pytest
import torch

from repro_studies.analysis import records as rules
from repro_studies.evidence import records_perf as rp
from repro_studies.evidence import v41_tuning
from repro_studies.kernels.records_reference import pages_as_bytes
from repro_studies.upstream.cases import reference_for


@pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved", "page-split"])
@pytest.mark.parametrize("kind", rp.KINDS)
def test_timing_scenarios_are_narrowed_valid_and_gathered_bitwise_by_ours(kind, interleaved):
    sc = rp.timing_scenario(kind, interleaved, 3, 40, 16, seed=1, device="cpu")
    assert sc.block_table.stride(0) == 2 * sc.block_table.shape[-1]
    layout = sc.spec.layout
    pages = pages_as_bytes(sc.k_cache, layout, 16)
    at = torch.arange(layout.page_bytes(16))
    is_scale = (at % layout.token_bytes >= layout.data_bytes) if interleaved else (at >= 16 * layout.data_bytes)
    scales, data = pages[:, is_scale], pages[:, ~is_scale]
    if kind == "mxfp8":
        assert int(scales.min()) >= 112 and int(scales.max()) <= 142 and not ((data & 0x7F) == 0x7F).any()
    else:
        assert int(scales.min()) >= 0x08 and int(scales.max()) <= 0x7E
    ours = rp.ours(kind, interleaved, "default", {})
    rows = rp.bitwise_rows(sc, [ours], None, reference_for(sc), "t")
    assert [(r["against"], r["mismatched"], r["stray"]) for r in rows] == [("reference decoder", 0, 0)]


def test_a_candidate_that_raises_is_a_failed_check_row_not_a_crash():
    sc = rp.timing_scenario("nvfp4", True, 2, 16, 8, seed=0, device="cpu")

    def broken(*args):
        raise RuntimeError("does not compile")

    bad = rp.Candidate("nvfp4", True, "broken", "this repository", broken, {})
    rows = rp.bitwise_rows(sc, [bad], None, reference_for(sc), "t")
    checks = rules.check_rows(rows, "shape")
    assert len(checks) == 1 and not checks[0]["ok"] and "does not compile" in checks[0]["observed"]
    assert checks[0]["check"] == rules.CHECK_RUNS


def test_check_rows_pass_only_on_zero_differences():
    base = {"arm": "a", "code": "c", "kind": "mxfp8", "layout": "interleaved", "tokens": 10}
    raw = [
        {**base, "against": "reference decoder", "mismatched": 0, "stray": 0},
        {**base, "against": "vLLM patched", "mismatched": 1, "stray": 0},
        {**base, "against": "reference decoder", "mismatched": 0, "stray": 2},
    ]
    assert [r["ok"] for r in rules.check_rows(raw, "s")] == [True, False, False]
    assert rules.check_rows(raw, "s")[1]["check"] == rules.CHECK_RELEASE


def _medians():
    rows = []
    for n, (ours, theirs) in {16: (20.0, 40.0), 256: (200.0, 300.0)}.items():
        for arm, us, upstream in (("fast-v41", ours, False), ("vLLM 0.33.0 patched", theirs, True)):
            rows.append(
                dict(kind="nvfp4", layout="interleaved", num_reqs=n, seq_len=2048, arm=arm, code="x", median_us=us)
                | {"upstream": upstream, "bytes_moved": n * 2048 * 1312}
            )
    return pd.DataFrame(rows)


def test_vs_copy_gives_the_copy_equivalent_time_the_share_of_the_copy_rate_and_the_speedup():
    table = rules.vs_copy(_medians(), copy_tbps=4.3)
    top = table[(table["num_reqs"] == 256) & (table["arm"] == "fast-v41")].iloc[0]
    copy_us = 256 * 2048 * 1312 / 4.3e12 * 1e6
    assert top["copy_equiv_us"] == pytest.approx(copy_us, abs=0.05)
    assert top["of_copy"] == pytest.approx(copy_us / 200.0, abs=1e-3)
    assert top["speedup_vs_release"] == pytest.approx(1.5)
    assert table[table["arm"] != "fast-v41"]["speedup_vs_release"].isna().all()
    facts = rules.largest_facts(table)
    assert facts["shape"] == [256, 2048] and [g["kind"] for g in facts["groups"]] == ["nvfp4"]
    arms = facts["groups"][0]["arms"]
    assert [a["arm"] for a in arms] == ["fast-v41", "vLLM 0.33.0 patched"]  # fastest first
    assert arms[0]["median_us"] == 200.0 and arms[0]["of_copy"] == pytest.approx(copy_us / 200.0, abs=1e-3)
    assert rules.largest_facts(None) == {"groups": []}


def test_the_v41_phrase_renders_the_figures_it_is_given():
    from repro_studies.report import phrases

    arms = [
        {"arm": "ours", "median_us": 199.6, "of_copy": 0.914},
        {"arm": "theirs", "median_us": 300.0, "of_copy": None},
    ]
    group = {"kind": "nvfp4", "layout": "interleaved", "copy_equiv_us": 182.4, "arms": arms}
    text = phrases.v41({"shape": [256, 2048], "groups": [group, {**group, "layout": "split", "copy_equiv_us": None}]})
    for figure in (
        "256 x 2,048",
        "nvfp4 interleaved",
        "(copy-equivalent 182 us)",
        "ours 200 us",
        "91 %",
        "theirs 300 us",
    ):
        assert figure in text, figure
    assert text.count(" | ") == 1 and "split: ours" in text
    assert "not timed" in phrases.v41({"groups": []})


def test_notebook_section_without_releases_checks_both_layouts_of_ours():
    from repro_studies.walkthrough.performance import PerformanceWalkthrough
    from repro_studies.walkthrough.records import RecordGathers

    nb = PerformanceWalkthrough.start("cpu", "", vllm_releases=[], download=False)
    v41 = RecordGathers(nb.session)
    assert v41.load().empty
    checks = v41.check()
    assert len(checks) == 4 and checks["ok"].all()
    assert set(checks["variant"]) == {"fast-v41", "fast-v41-page-split"}


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--request-counts", "a,b"], "--request-counts"),
        (["--seq-len", "0"], "must be positive"),
        (["--variants", "t99"], "--variants"),
        (["--device", "cuda"], "no CUDA device"),
    ],
)
def test_tuning_cli_names_the_bad_argument_and_exits_2(argv, word, capsys):
    with pytest.raises(SystemExit) as exc:
        v41_tuning.parse_args([*argv, "--device", "cpu"] if "--device" not in argv else argv)
    assert exc.value.code == 2 and word in capsys.readouterr().err


@pytest.mark.parametrize("target_layout, wrong_from", [(True, None), (False, 1)])
def test_notebook_04_runs_a_record_gather_over_the_sweep_and_a_wrong_layout_is_wrong(target_layout, wrong_from):
    from repro_studies.analysis.release_verdict import Verdict
    from repro_studies.analysis.releases import verdicts
    from repro_studies.registry import RECORD_GATHERS, VerdictClass
    from repro_studies.upstream import matrix as mx

    cfg = mx.MatrixConfig([1, 2], ["in-range", "poison"], block_size=8, seq_len_max=24, interpreted=True)
    entry = RECORD_GATHERS[target_layout]
    rows = mx.run_record_gather("0.99.0", entry.label, entry.target, "mxfp8", True, cfg)
    assert len(rows) == 4 and {r["variant"] for r in rows} == {mx.UNDER_TEST}
    assert all(r["status"] == "ok" and r["out_of_bounds_lanes"] == 0 for r in rows)
    expected = Verdict(VerdictClass.WRONG if wrong_from else VerdictClass.CORRECT, first_wrong=wrong_from)
    assert [Verdict.of(r) for r in verdicts(pd.DataFrame(rows)).to_dict("records")] == [expected]

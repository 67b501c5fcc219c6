"""The cost of PR #55109 on vLLM's own kernel and the release JIT story, from hand-made tables (pandas only)."""

import pandas as pd
import pytest

from repro_studies.analysis import jit, upstream_cost
from repro_studies.registry import upstream_bench_arms

#: Times (us) of a release's four arms: shipped contiguous, patched view, patched contiguous, copy + shipped.
TIMES = {
    "0.22.0": (100.0, 100.5, 100.2, 112.0),
    "0.33.0": (50.0, 52.0, 50.0, 60.0),
}


def medians(times=TIMES, shapes=((256, 1), (256, 4), (2048, 1)), eager_factor=3.0) -> pd.DataFrame:
    rows = []
    for release, ts in times.items():
        for arm, t in zip(upstream_bench_arms(release), ts):
            for L, n in shapes:
                for mode, f in (("graph", 1.0), ("eager", eager_factor)):
                    rows.append(
                        {"arm": arm.label, **arm.fields(), "launch": mode, "seq_len": L, "num_reqs": n}
                        | {"median_us": t * f}
                    )
    return pd.DataFrame(rows)


def test_ratios_per_release_shape_and_mode():
    r = upstream_cost.ratio_rows(medians())
    assert upstream_cost.origins(medians()) == ["vLLM 0.22.0", "vLLM 0.33.0"]
    assert len(r) == 2 * 3 * 2
    new = r[(r.code == "vLLM 0.33.0") & (r.launch == "graph")].iloc[0]
    assert new["patched/released (contig)_ratio"] == 1.0
    assert new["patched narrowed/contig_ratio"] == pytest.approx(52 / 50)
    assert new["copy over patched (view)_ratio"] == pytest.approx(60 / 52, abs=1e-4)
    assert new["copy over released (contig)_ratio"] == pytest.approx(60 / 50)
    assert new["released_us"] == 50.0


def test_a_missing_arm_leaves_its_ratios_empty():
    m = medians()
    m = m[~((m["release"] == "0.33.0") & m["copy"])]  # the copy + shipped arm of 0.33.0 not timed
    r = upstream_cost.ratio_rows(m)
    new = r[r.code == "vLLM 0.33.0"]
    assert new["copy over patched (view)_ratio"].isna().all()
    assert new["patched/released (contig)_ratio"].notna().all()


def test_cost_facts_hold_each_ratio_against_the_band_and_no_sentence():
    facts = upstream_cost.cost_facts(upstream_cost.ratio_rows(medians()))
    assert list(facts["releases"]) == ["vLLM 0.22.0", "vLLM 0.33.0"] and facts["band"] == [0.99, 1.01]
    old, new = facts["releases"]["vLLM 0.22.0"]["graph"], facts["releases"]["vLLM 0.33.0"]["graph"]
    assert old["patched/released (contig)"]["outside_band"] == 0 and old["patched/released (contig)"]["points"] == 3
    assert new["patched narrowed/contig"]["outside_band"] == 3  # 1.04 is outside 0.99-1.01
    assert new["copy over released (contig)"]["median"] == pytest.approx(1.2)
    assert "headline" not in facts and all("headline" not in per for per in facts["releases"].values())


def test_the_vllm_cost_phrase_renders_the_figures_it_is_given():
    from repro_studies.report import phrases

    spread = {"min": 0.995, "max": 1.004, "median": 1.25, "outside_band": 2, "points": 7}
    per = {name: spread for name in (*upstream_cost.BAND_RATIOS, *upstream_cost.COPY_RATIOS)}
    text = phrases.vllm_cost({"band": [0.99, 1.01], "releases": {"vLLM 1.2.3": {"graph": per, "eager": per}}})
    for figure in ("vLLM 1.2.3", " 7 shapes", "0.995-1.004x", "(2 outside 0.99-1.01)", "+25.0%", "(2 of 7 outside)"):
        assert figure in text, figure
    assert phrases.vllm_cost({"band": [0.99, 1.01], "releases": {"vLLM 1.2.3": {}}}) == ""  # nothing graphed


def test_cost_table_has_short_names():
    t = upstream_cost.cost_table(upstream_cost.ratio_rows(medians()), "vLLM 0.22.0")
    assert list(t.columns)[:3] == ["tokens", "requests", "shipped us"] and len(t) == 3


def jit_rows() -> pd.DataFrame:
    """Fingerprint rows of one release (two forms) and one repository subject, as the evidence writes them."""
    rows = []

    def add(variant, code, pitch, table, phase, width, compiles, call_us=None, kernel="k"):
        rows.append(
            dict(
                variant=variant,
                table=table,
                kernel_name=kernel,
                call=len(rows),
                phase=phase,
                width=width,
                predicted_compiles=compiles,
                observed_compiles=compiles if call_us is not None else None,
                compile_us=300_000 * compiles if call_us is not None else None,
                call_us=call_us,
                pitch=pitch,
                code=code,
                warm_up="the release's class",
            )
        )

    for table in ("narrowed", "contiguous"):
        add("vLLM 0.22.0 released", "vLLM 0.22.0", jit.Pitch.CONSTEXPR_WIDTH, table, "warm-up", 64, 1, 5e5)
        for w in (1, 2, 3):
            add("vLLM 0.22.0 released", "vLLM 0.22.0", jit.Pitch.CONSTEXPR_WIDTH, table, "inference", w, 1, 4e5)
        add("vLLM 0.22.0 released", "vLLM 0.22.0", jit.Pitch.CONSTEXPR_WIDTH, table, "inference", 3, 0, 40.0)
        add("vLLM 0.22.0 patched", "vLLM 0.22.0", jit.Pitch.RUNTIME_STRIDE, table, "warm-up", 64, 1, 5e5)
        for w in (1, 2, 3):
            extra = 1 if (table == "contiguous" and w in (1, 3)) else 0
            add("vLLM 0.22.0 patched", "vLLM 0.22.0", jit.Pitch.RUNTIME_STRIDE, table, "inference", w, extra, 40.0)
        add("repro fixed", "repro", jit.Pitch.RUNTIME_STRIDE_UNSPECIALIZED, table, "inference", 1, 0, 40.0, kernel="r")
    return pd.DataFrame(rows)


#: The releases the run loaded, as its 03-vllm facts record them (code -> release read from the wheel).
LOADED = {"vLLM 0.22.0": "0.22.0"}


def test_split_by_code_separates_the_loaded_releases_from_the_repository():
    ours, theirs = jit.split_by_code(jit_rows(), LOADED)
    assert set(ours["code"]) == {"repro"} and set(theirs["code"]) == {"vLLM 0.22.0"}
    assert jit.release_variants(jit_rows(), LOADED) == {"vLLM 0.22.0 released", "vLLM 0.22.0 patched"}
    assert not len(jit.split_by_code(jit_rows(), {})[1])  # a code is a release's only if the run loaded it
    old = jit_rows().drop(columns=["code"])
    assert len(jit.split_by_code(old, LOADED)[0]) == len(old) and not len(jit.split_by_code(old, LOADED)[1])
    facts = {"releases": {"vLLM 0.22.0": {"release": "0.22.0", "wheel": "vllm-0.22.0-x.whl"}}}
    assert jit.loaded_releases(facts) == LOADED and jit.loaded_releases(None) == {}


def test_release_story_counts_compilations_and_first_call_latency():
    story = jit.release_story(jit_rows(), LOADED, seed_kernel="k")["vLLM 0.22.0"]
    shipped, patched = story["forms"][jit.Pitch.CONSTEXPR_WIDTH], story["forms"][jit.Pitch.RUNTIME_STRIDE]
    assert (shipped["narrowed_compiles"], shipped["contiguous_compiles"], shipped["narrowed_widths"]) == (3, 3, 3)
    assert (patched["narrowed_compiles"], patched["contiguous_compiles"]) == (0, 2)
    assert shipped["first_call_ms"] == 400.0 and shipped["cached_call_us"] == 40.0 and shipped["compile_ms"] == 900.0
    assert story["names_the_logged_kernel"] and story["mode"] == "observed" and story["warm_up_compiles"] == 1
    assert not jit.release_story(jit_rows(), LOADED, seed_kernel="other")["vLLM 0.22.0"]["names_the_logged_kernel"]


def test_the_root_cause_phrase_renders_the_measured_story_it_is_given():
    from repro_studies.report import phrases

    story = jit.release_story(jit_rows(), LOADED, seed_kernel="k")
    text = phrases.root_cause({"releases": story, "logged_kernel": "k"}, 64)
    shipped, patched = story["vLLM 0.22.0"]["forms"]["constexpr width"], story["vLLM 0.22.0"]["forms"]["runtime stride"]
    for figure in (
        "inference: k",
        "one 64-wide table",
        f"compile {shipped['narrowed_compiles']} times",
        f", {patched['narrowed_compiles']} with vllm-project/vllm#55109's",
        "compile hooks",  # the story's mode: observed
        f"{shipped['first_call_ms']} ms",
        f"{shipped['cached_call_us']} us",
        "kernel `k`, the name",  # the story says Triton's name is the logged one
    ):
        assert figure in text, figure
    assert text.count("\n\n") == 2  # the log, one release, the conclusion
    assert phrases.root_cause({"releases": {}, "logged_kernel": "k"}) == ""


def test_report_tells_the_cost_the_rewrite_whose_code_and_the_jit_story(tmp_path):
    from repro.core.analysis.rundata import RunData
    from repro.report.build import render_run

    med = medians()
    diff = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-        max_blocks_per_seq=block_table.shape[-1],\n+        x\n"
    loads = pd.DataFrame(
        [
            {"notebook": "03-performance", "check": "loads", "variant": f, "num_reqs": None, "expected": "loaded"}
            | {"observed": "loaded", "ok": True, "release": "0.22.0", "kernel": "v4:k"}
            for f in ("released", "patched")
        ]
    )
    tables = {
        "03-vllm-loads": loads,
        "03-vllm-medians": med,
        "03-vllm-ratios": upstream_cost.ratio_rows(med),
        "03-jit-fingerprint": jit_rows(),
        "03-jit-summary": jit.compile_summary(jit_rows(), phase="inference"),
    }
    facts = {
        "03-vllm": {
            "releases": {
                "vLLM 0.22.0": {
                    "release": "0.22.0",
                    "wheel": "vllm-0.22.0-x.whl",
                    "wheel_sha256": "ab" * 32,
                    "kernel": "v4:k",
                    "module": "m.py",
                    "forms": {"patched": {"diff": diff, "edits": ["e1"]}, "patched-constexpr": {"edits": ["e2"]}},
                }
            }
        },
        "03-jit": {"mode": "observed"},
    }
    run = RunData(tmp_path, {"profile": "gpu", "status": "complete"}, tables, facts)
    report = render_run(run)
    report.close()
    assert {"03-vllm-ratios", "03-vllm-time-graph-256", "03-jit-fingerprint-vllm"} <= {f.name for f in report.figures}
    md = report.markdown.text
    from repro.report.verdict import run_verdict
    from repro_studies.report.verdict import FINDINGS

    v = run_verdict(run)
    measured = [what for table, what in FINDINGS.measured if table in tables]  # the fix's cost, its JIT compilations
    assert v.findings == [] and v.complete and md.startswith(f"# {v.title}\n")
    assert v.title == "Measurements, no reproduction in this run: " + ", ".join(measured) and len(measured) == 2
    assert "#### The JIT compilation in vllm-project/vllm#55109's log" in md
    assert "compile 3 times" in md  # the root cause, worded from the fingerprint rows
    first_screen = md[: md.index("## Test Plan")]
    assert (
        "| cost of the fix (vllm-project/vllm#55109) on vLLM 0.22.0's own kernel | CUDA-graph replays" in first_screen
    )
    assert "```diff\n" + diff.rstrip() + "\n```" in md and "only the launch edit: e2" in md
    import re

    assert re.search(r"\| vLLM 0\.22\.0 +\| v4:k +\| abababab\w* +\| vLLM 0\.22\.0 released / contiguous table; ", md)
    assert md.count("(plots/03-jit-fingerprint-vllm.png)") == 1 and md.count("(plots/03-vllm-ratios.png)") == 1
    repo_jit = md[md.index("## JIT compilations per block-table width") : md.index("## vLLM's own kernel")]
    assert "vLLM 0.22.0" not in repo_jit  # vLLM's kernels have their own JIT table
    assert "vLLM 0.22.0 patched" in md[md.index("### 03 JIT fingerprint of vLLM's own kernel") :]


def test_the_story_keeps_the_warm_up_numbers_and_the_phrase_renders_them():
    from repro_studies.report import phrases
    from repro_studies.upstream.warm_up import WarmUp, WarmUpKind

    own = WarmUp(WarmUpKind.RELEASE_CLASS, "C", 4096, 64, 64, (4, 128))
    rows = jit_rows().drop(columns="warm_up").assign(**own.columns())
    warm = jit.release_story(rows, LOADED, seed_kernel="k")["vLLM 0.22.0"]["warm_up"]
    assert warm == {"kind": "release class", "class": "C", "max_model_len": 4096, "block_size": 64, "width": 64} | {
        "compress_ratios": "4, 128"
    }
    from repro.report.template import phrase

    text = phrase(phrases.PHRASES, "warm_up", warm)
    for figure in ("C:", "max_model_len 4096", "block_size 64", "(table width 64)", "4, 128"):
        assert figure in text, figure
    default = jit.release_story(rows.assign(**WarmUp().columns()), LOADED)["vLLM 0.22.0"]["warm_up"]
    assert default["kind"] == "full-width launch" and "full-width" in phrase(phrases.PHRASES, "warm_up", default)
    # rows recorded before the warm-up was a value: the label as recorded
    assert jit.release_story(jit_rows(), LOADED)["vLLM 0.22.0"]["warm_up"] == {"recorded": "the release's class"}
    assert phrase(phrases.PHRASES, "warm_up", None) == "none"

"""Notebook 03's vLLM arms on synthetic releases (tests/fixtures/upstream, never vLLM's code): the registry's
upstream arms, a release's kernel in each form and its first-call check, the release's own JIT warm-up, and the
JIT subjects' compilation counts against the pitch rule."""

import json
from pathlib import Path

import pandas as pd
import pytest
from upstream_fakes import V4_MEMBER, cached_release, fixture_source

from repro import registry
from repro.evidence.interp_compat import loaded_scalar_loop_bounds
from repro.evidence.scenarios import ScenarioSpec, build_scenario
from repro.upstream import release_kernel as R

CLASS_SOURCE = (Path(__file__).parent / "fixtures" / "upstream" / "jit_class_module.py").read_text()
SOURCES = {"module-level kernel": None, "JIT-warmup class": CLASS_SOURCE}


# -- the registry's upstream arms ------------------------------------------------------------------


def test_upstream_arms_say_whose_code_and_round_trip_through_their_label():
    arms = registry.upstream_bench_arms("vLLM 0.99.0")
    assert [a.label for a in arms] == [
        "vLLM 0.99.0 released / contiguous table",
        "vLLM 0.99.0 patched / narrowed view",
        "vLLM 0.99.0 patched / contiguous table",
        "vLLM 0.99.0 released + .contiguous() / narrowed view",
    ]
    for a in arms:
        assert (a.origin, a.release, a.implementation) == ("vLLM 0.99.0", "0.99.0", registry.UPSTREAM_IMPLEMENTATION)
        assert registry.arm(a.label) == a and registry.upstream_arm_of(a.label) == a
        assert registry.style(a.label) == a.style and registry.display(a.label) == a.display
    # the shipped kernel on the narrowed view is wrong by design: never a timed arm
    assert not any(a.form == "released" and a.table == registry.TABLE_NARROWED and not a.copy for a in arms)
    assert arms[3].copy and arms[3].table == registry.TABLE_NARROWED
    assert registry.upstream_arm_of("fixed / narrowed view") is None
    assert registry.arm("fixed / narrowed view").origin == registry.ORIGIN_REPO


def test_upstream_pairs_name_the_four_ratios():
    pairs = registry.upstream_pairs("vLLM 0.99.0")
    assert pairs["patched/released (contig)"] == (
        "vLLM 0.99.0 patched / contiguous table",
        "vLLM 0.99.0 released / contiguous table",
    )
    assert pairs["copy over patched (view)"][1] == "vLLM 0.99.0 patched / narrowed view"


@pytest.mark.parametrize(
    "args,word",
    [
        (("0.99.0", "patched", registry.TABLE_NARROWED), "origin"),
        (("vLLM x", "patched", registry.TABLE_NARROWED), "origin"),
        (("vLLM 0.99.0", "fixed", registry.TABLE_NARROWED), "form"),
        (("vLLM 0.99.0", "patched", "wide"), "table"),
    ],
)
def test_upstream_arm_names_the_bad_argument(args, word):
    with pytest.raises(ValueError, match=f"^{word}: "):
        registry.upstream_arm(*args)


def test_an_unknown_arm_label_is_a_key_error_listing_the_forms():
    with pytest.raises(KeyError, match="vLLM <release> <form>"):
        registry.arm("vLLM 0.99.0 fixed / narrowed view")


# -- a release's kernel in each form ------------------------------------------------------------


def load(tmp_path, monkeypatch, form, source=None, version="0.99.0"):
    root, _ = cached_release(tmp_path, monkeypatch, version=version, source=source)
    return R.load_release_kernel(version, form, cache_root=root, download=False)


def test_origin_is_read_from_the_wheel_that_was_loaded(tmp_path, monkeypatch):
    _, entry = cached_release(tmp_path, monkeypatch)
    assert R.origin_of(entry) == "vLLM 0.99.0"
    entry.provenance["wheel"] = "vllm-0.98.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with pytest.raises(R.ReleaseUnavailable, match=r"come from vllm-0\.98\.0"):
        R.origin_of(entry)


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
@pytest.mark.parametrize("form", R.FORMS)
def test_each_form_loads_with_exactly_its_rewrite(tmp_path, monkeypatch, form, source):
    rk = load(tmp_path, monkeypatch, form, source)
    assert (rk.origin, rk.form, rk.info.record) == ("vLLM 0.99.0", form, "v4")
    prov = rk.provenance()
    assert prov["origin"] == "vLLM 0.99.0" and len(prov["wheel_sha256"]) == 64
    if form == "released":
        assert rk.rewrite is None and prov["edits"] == []
        return
    added = [ln[1:].strip() for ln in rk.rewrite.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert "max_blocks_per_seq=block_table.stride(0)," in added
    assert ("max_blocks_per_seq," in added) == (form == "patched")


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_the_timed_callables_are_bitwise_right_and_the_shipped_kernel_on_the_view_is_not(tmp_path, monkeypatch, source):
    from repro.evidence.cases import compare_bitwise, reference_output

    shipped = load(tmp_path, monkeypatch, "released", source)
    patched = R.load_release_kernel("0.99.0", "patched", cache_root=tmp_path / "cache", download=False)
    sc = build_scenario(ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=40, max_reqs=3))
    contiguous, ref = sc.block_table.contiguous(), reference_output(sc)
    arms = registry.upstream_bench_arms(shipped.origin)
    fns = [shipped.gather(), patched.gather(), patched.gather(), shipped.gather(copy_table=True)]
    with loaded_scalar_loop_bounds():
        for arm, fn in zip(arms, fns):
            for _ in range(2):  # the first call is the checked one, the second the plain one
                out = sc.fresh_out()
                fn(*sc.args(out, sc.block_table if arm.table == registry.TABLE_NARROWED else contiguous))
                assert compare_bitwise(out, ref, sc) == (0, 0), arm.label
        out = sc.fresh_out()
        shipped.gather()(*sc.args(out))
    assert compare_bitwise(out, ref, sc)[0] > 0  # the bug, from the second request on


def test_the_first_call_checks_the_kernel_under_test_launched(tmp_path, monkeypatch):
    rk = load(tmp_path, monkeypatch, "released")
    rk.wrapper = lambda *args: None
    sc = build_scenario(ScenarioSpec(num_reqs=1, block_size=16, seq_len_max=16, max_reqs=1))
    with pytest.raises(R.WrongKernel, match="did not launch _dequantize_and_gather_k_kernel"):
        rk.gather()(*sc.args(sc.fresh_out()))


def test_a_wrapper_that_imports_vllm_at_call_time_is_refused(tmp_path, monkeypatch):
    signature = (
        "def dequantize_and_gather_k_cache_triton(out, k_cache, seq_lens, gather_lens, block_table, block_size, "
        "offset):\n"
    )
    lazy = fixture_source(**{signature: signature + "    from vllm.platforms import current_platform  # noqa: F401\n"})
    rk = load(tmp_path, monkeypatch, "released", lazy)
    sc = build_scenario(ScenarioSpec(num_reqs=1, block_size=16, seq_len_max=16, max_reqs=1))
    with pytest.raises(ImportError, match="wrapper imported vllm at call time"):
        rk.gather()(*sc.args(sc.fresh_out()))


def test_a_release_the_cache_cannot_provide_says_why(tmp_path, monkeypatch):
    root, _ = cached_release(tmp_path, monkeypatch)
    with pytest.raises(R.ReleaseUnavailable, match=r"vLLM 9\.9\.9: unknown release"):
        R.load_release_kernel("9.9.9", "released", cache_root=root, download=True)
    with pytest.raises(R.ReleaseUnavailable, match="downloads are off"):
        R.load_release_kernel("9.9.9", "released", cache_root=root, download=False)
    with pytest.raises(ValueError, match=r"^form: 'fixed' is not one of"):
        R.load_release_kernel("0.99.0", "fixed", cache_root=root)


# -- the release's own warm-up and the JIT subjects -------------------------------------------------

WIDTHS, BACKING, BLOCK = [1, 2, 3, 5, 16], 32, 16


def fingerprint(rk, warm, widths=WIDTHS, tables=("narrowed", "contiguous"), backing=BACKING):
    from repro.evidence.jit import JitSubject, fingerprint_subjects

    pitch = {"released": "constexpr width", "patched": "runtime stride", "patched-constexpr": "constexpr stride"}
    subject = JitSubject(f"{rk.origin} {rk.form}", rk.gather(), rk.kernel, pitch[rk.form], rk.origin, *warm)
    rows = fingerprint_subjects(
        [subject],
        widths,
        backing,
        num_reqs=2,
        block_size=BLOCK,
        execute=False,
        tables=tables,
        tokens_per_request=lambda w: BLOCK,
        window=BLOCK,
    )
    return pd.DataFrame(rows)


def test_the_class_warm_up_is_the_releases_own_and_covers_the_full_width(tmp_path, monkeypatch):
    rk = load(tmp_path, monkeypatch, "released", CLASS_SOURCE)
    run, how = rk.warm_up(BACKING, BLOCK, (4, 128))
    assert "get_warmup_keys(vllm_config) then compile_many(keys)" in how and f"table width {BACKING}" in how
    rows = fingerprint(rk, (run, how), widths=[BACKING, 3], tables=("contiguous",), backing=BACKING + 1)
    # the warm-up compiled the full-width key and the two compressed-cache keys; the full-width launch after
    # it finds its binary, a narrower width compiles
    assert list(rows["predicted_compiles"]) == [3, 0, 1] and rows["warm_up"].iloc[0] == how
    assert set(rows["kernel_name"]) == {"DequantizeAndGatherKCacheKernel.kernel"}


def test_a_module_level_kernel_has_no_warm_up_of_its_own(tmp_path, monkeypatch):
    assert load(tmp_path, monkeypatch, "released").warm_up(BACKING, BLOCK, (4, 128)) is None


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_compilations_per_form_follow_the_pitch_rule(tmp_path, monkeypatch, source):
    from repro.analysis.jit import fingerprint_checks, inference_compiles

    cached_release(tmp_path, monkeypatch, source=source)
    got = {}
    for form in R.FORMS:
        rk = R.load_release_kernel("0.99.0", form, cache_root=tmp_path / "cache", download=False)
        rows = fingerprint(rk, rk.warm_up(BACKING, BLOCK, (4,)) or (None, ""))
        checks = fingerprint_checks(rows, WIDTHS, BACKING)
        assert checks and all(c["ok"] for c in checks), checks
        got[form] = dict(inference_compiles(rows)[["table", "inference_compiles"]].values)
    # shipped: one per width on any table; PR #55109: nothing on views of one table, the int classes
    # (== 1, divisible by 16, other) on contiguous tables less the warmed one (32: divisible); the
    # constexpr stride: nothing on views, one per width on contiguous tables
    assert got == {
        "released": {"narrowed": 5, "contiguous": 5},
        "patched": {"narrowed": 0, "contiguous": 2},
        "patched-constexpr": {"narrowed": 0, "contiguous": 5},
    }


def test_notebook_steps_load_record_the_rewrite_and_tell_the_jit_story(tmp_path, monkeypatch):
    from repro.profiles import PROFILES
    from repro.walkthrough.performance import VLLM_FACTS, VLLM_JIT, PerformanceWalkthrough
    from repro.walkthrough.session import Session

    root, _ = cached_release(tmp_path, monkeypatch, source=CLASS_SOURCE)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    run_dir = tmp_path / "run"
    params = dict(
        vllm_releases=["9.9.9", "0.99.0"],
        download=False,
        cache_block_size=BLOCK,
        jit_widths=WIDTHS,
        jit_backing_width=BACKING,
    )
    nb = PerformanceWalkthrough(Session("03-performance", PROFILES["cpu"], str(run_dir), params))
    loads = nb.load_vllm()
    assert list(loads["ok"]) == [False] * 3 + [True] * 3  # a release that cannot load is a failed row, first or not
    assert loads["observed"].iloc[0].startswith("vLLM 9.9.9: download failed")
    facts = json.loads((run_dir / "results" / f"{VLLM_FACTS}.json").read_text())["releases"]["vLLM 0.99.0"]
    diff = (run_dir / "rewrites" / "0.99.0" / "patched" / (V4_MEMBER.replace("/", "__") + ".diff")).read_text()
    assert facts["forms"]["patched"]["diff"] == diff
    assert "+            max_blocks_per_seq=block_table.stride(0)," in diff
    assert list(nb.rewrites()["form"]) == ["patched", "patched-constexpr"]
    rows = nb.jit_fingerprint(subjects=nb.vllm_jit_subjects(), execute=False)
    assert set(rows["code"]) == {"vLLM 0.99.0"} and set(rows["warm_up"]).pop().startswith("DequantizeAndGather")
    text = nb.jit_story()
    story = json.loads((run_dir / "results" / f"{VLLM_JIT}.json").read_text())
    assert story["text"] == text and "vLLM 0.99.0" in text
    assert story["releases"]["vLLM 0.99.0"]["forms"]["constexpr width"]["narrowed_compiles"] == len(WIDTHS)

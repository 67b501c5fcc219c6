"""Notebook 03's vLLM arms on synthetic releases (tests/fixtures/upstream, never vLLM's code): the registry's
upstream arms, a release's kernel in each form and its first-call check, the release's own JIT warm-up, and the
JIT subjects' compilation counts against the pitch rule."""

import json
from pathlib import Path

import pandas as pd
import pytest
from upstream_fakes import V4_MEMBER, cached_release, fixture_source

from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.registry import Origin
from repro_studies import registry
from repro_studies.notebooks import PerformanceParameters
from repro_studies.report import phrases
from repro_studies.upstream import release_kernel as R
from repro_studies.upstream.interp_compat import loaded_scalar_loop_bounds

CLASS_SOURCE = (Path(__file__).parent / "fixtures" / "upstream" / "jit_class_module.py").read_text()
SOURCES = {"module-level kernel": None, "JIT-warmup class": CLASS_SOURCE}


# -- the registry's upstream arms ------------------------------------------------------------------


def test_upstream_arms_say_whose_code_and_round_trip_through_their_fields():
    arms = registry.upstream_bench_arms("0.99.0")
    F, T = registry.Form, registry.BlockTable
    assert [(a.form, a.table, a.copy) for a in arms] == [
        (F.RELEASED, T.CONTIGUOUS, False),
        (F.PATCHED, T.NARROWED, False),
        (F.PATCHED, T.CONTIGUOUS, False),
        (F.RELEASED, T.NARROWED, True),
    ]
    for a in arms:
        assert (a.origin, a.release, a.implementation) == ("vLLM 0.99.0", "0.99.0", registry.UPSTREAM_IMPLEMENTATION)
        assert a.upstream and a.fields()["release"] == "0.99.0"
        assert registry.arm_of_row(a.fields()) == a and registry.arm_of_row(a.fields()).style == a.style
    # the shipped kernel on the narrowed view is wrong by design: never a timed arm
    assert not any(a.form == F.RELEASED and a.table == T.NARROWED and not a.copy for a in arms)
    # rows read back from a CSV: empty cells are NaN, ``copy`` a bool or its text
    row = {"implementation": "upstream", "table": "narrowed", "release": "0.99.0", "form": "released", "copy": "True"}
    assert registry.arm_of_row(row) == arms[3]
    fixed = registry.arm_of_row(
        {"implementation": "fixed", "table": "narrowed", "release": float("nan"), "copy": False}
    )
    assert fixed == registry.FIXED_VIEW and fixed.origin == Origin.REPO and not fixed.upstream


def test_every_arm_rebuilds_from_the_fields_its_rows_record():
    known = (*registry.ARMS, registry.OUTSIDE_ARM, *registry.upstream_bench_arms("0.99.0"))
    known += registry.cutedsl_bench_arms("0.99.0")
    assert len(set(known)) == len(known) == 12
    for a in known:
        assert registry.arm_of(**{k: v for k, v in a.fields().items() if k != "form"}, form=a.form or None) == a
    # an outside kernel an older run named: a user's code, styled as the base registry styles that label
    legacy = registry.arm_of("vllm", "contiguous")
    assert (legacy.origin, legacy.implementation, legacy.table) == (Origin.USER, "vllm", "contiguous")


def test_upstream_pairs_name_the_four_ratios():
    pairs = registry.upstream_pairs("0.99.0")
    shipped, patched_view, patched_contig, copied = registry.upstream_bench_arms("0.99.0")
    assert pairs == {
        "patched/released (contig)": (patched_contig, shipped),
        "patched narrowed/contig": (patched_view, patched_contig),
        "copy over patched (view)": (copied, patched_view),
        "copy over released (contig)": (copied, shipped),
    }


@pytest.mark.parametrize(
    "args,exc",
    [
        (("", "patched", "narrowed"), ValueError),
        (("0.99.0", "fixed", "narrowed"), ValueError),
        (("0.99.0", "CuTe-DSL", "narrowed"), ValueError),  # a CuTe-DSL arm is cutedsl_arm's
        (("0.99.0", "patched", "wide"), ValueError),
    ],
)
def test_upstream_arm_refuses_a_bad_argument(args, exc):
    with pytest.raises(exc):
        registry.upstream_arm(*args)


@pytest.mark.parametrize(
    "row",
    [
        {"implementation": "fixed", "table": "narrowed", "release": "0.99.0"},  # a release names an upstream arm
        {"implementation": "upstream", "table": "narrowed", "release": "0.99.0"},  # no form
        {"implementation": "fixed", "table": "narrowed", "form": "patched"},  # a form names an upstream arm
        {"implementation": "fixed", "table": "wide"},
    ],
)
def test_a_row_with_an_impossible_arm_is_refused(row):
    with pytest.raises(ValueError):
        registry.arm_of_row(row)


def test_a_row_that_records_no_arm_is_a_key_error_naming_the_columns():
    with pytest.raises(KeyError, match="implementation"):
        registry.arm_of_row({"arm": "fixed / narrowed view", "table": "narrowed"})


# -- a release's kernel in each form ------------------------------------------------------------


def load(tmp_path, monkeypatch, form, source=None, version="0.99.0"):
    root, _ = cached_release(tmp_path, monkeypatch, version=version, source=source)
    return R.load_release_kernel(version, form, cache_root=root, download=False)


def test_release_and_origin_are_read_from_the_wheel_that_was_loaded(tmp_path, monkeypatch):
    _, entry = cached_release(tmp_path, monkeypatch)
    assert (R.release_of(entry), R.origin_of(entry)) == ("0.99.0", "vLLM 0.99.0")
    entry.provenance["wheel"] = "vllm-0.98.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with pytest.raises(R.ReleaseUnavailable, match=r"come from vllm-0\.98\.0"):
        R.release_of(entry)


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
@pytest.mark.parametrize("form", registry.TRITON_FORMS)
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
    from repro.core.evidence.cases import compare_bitwise, reference_output

    shipped = load(tmp_path, monkeypatch, "released", source)
    patched = R.load_release_kernel("0.99.0", "patched", cache_root=tmp_path / "cache", download=False)
    sc = build_scenario(ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=40, max_reqs=3))
    contiguous, ref = sc.block_table.contiguous(), reference_output(sc)
    arms = registry.upstream_bench_arms(shipped.release)
    fns = [shipped.gather(), patched.gather(), patched.gather(), shipped.gather(copy_table=True)]
    with loaded_scalar_loop_bounds():
        for arm, fn in zip(arms, fns):
            for _ in range(2):  # the first call is the checked one, the second the plain one
                out = sc.fresh_out()
                fn(*sc.args(out, sc.block_table if arm.table == registry.BlockTable.NARROWED else contiguous))
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
    from repro_studies.evidence.jit import JitSubject, fingerprint_subjects

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
    from repro_studies.upstream.warm_up import WarmUp, WarmUpKind

    run, how = rk.warm_up(BACKING, BLOCK, (4, 128))
    cls = "DequantizeAndGatherKCacheKernel"
    assert how == WarmUp(WarmUpKind.RELEASE_CLASS, cls, BACKING * BLOCK, BLOCK, BACKING, (4, 128))
    rows = fingerprint(rk, (run, how), widths=[BACKING, 3], tables=("contiguous",), backing=BACKING + 1)
    # the warm-up compiled the full-width key and the two compressed-cache keys; the full-width launch after
    # it finds its binary, a narrower width compiles
    assert list(rows["predicted_compiles"]) == [3, 0, 1]
    assert rows.iloc[0][list(how.columns())].to_dict() == how.columns()  # the warm-up's numbers, every row
    assert set(rows["kernel_name"]) == {"DequantizeAndGatherKCacheKernel.kernel"}


def test_a_module_level_kernel_has_no_warm_up_of_its_own(tmp_path, monkeypatch):
    assert load(tmp_path, monkeypatch, "released").warm_up(BACKING, BLOCK, (4, 128)) is None


@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_compilations_per_form_follow_the_pitch_rule(tmp_path, monkeypatch, source):
    from repro_studies.analysis.jit import fingerprint_checks, inference_compiles

    cached_release(tmp_path, monkeypatch, source=source)
    got = {}
    for form in registry.TRITON_FORMS:
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
    from repro.walkthrough.session import Session
    from repro_studies.walkthrough.performance import VLLM_FACTS, VLLM_JIT, PerformanceWalkthrough

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
    nb = PerformanceWalkthrough(
        Session("03-performance", PROFILES["cpu"], str(run_dir), PerformanceParameters(**params))
    )
    loads = nb.load_vllm()
    assert list(loads["ok"]) == [False] * 3 + [True] * 3  # a release that cannot load is a failed row, first or not
    assert loads["observed"].iloc[0].startswith("vLLM 9.9.9: download failed")
    facts = json.loads((run_dir / "results" / f"{VLLM_FACTS}.json").read_text())["releases"]["vLLM 0.99.0"]
    diff = (run_dir / "rewrites" / "0.99.0" / "patched" / (V4_MEMBER.replace("/", "__") + ".diff")).read_text()
    assert facts["forms"]["patched"]["diff"] == diff
    assert "+            max_blocks_per_seq=block_table.stride(0)," in diff
    assert list(nb.rewrites()["form"]) == ["patched", "patched-constexpr"]
    rows = nb.jit_fingerprint(subjects=nb.vllm_jit_subjects(), execute=False)
    assert set(rows["code"]) == {"vLLM 0.99.0"} and set(rows["warm_up_class"]) == {"DequantizeAndGatherKCacheKernel"}
    facts = nb.jit_story()
    story = json.loads((run_dir / "results" / f"{VLLM_JIT}.json").read_text())
    assert set(story) == {"logged_kernel", "releases"} and list(facts["releases"]) == ["vLLM 0.99.0"]
    warm = story["releases"]["vLLM 0.99.0"]["warm_up"]  # numbers and classes, no sentence
    assert (warm["kind"], warm["class"], warm["compress_ratios"]) == (
        "release class",
        "DequantizeAndGatherKCacheKernel",
        "4, 128",
    )
    assert story["releases"]["vLLM 0.99.0"]["forms"]["constexpr width"]["narrowed_compiles"] == len(WIDTHS)


# -- vLLM's CuTe-DSL gather in notebook 03 ---------------------------------------------------------

CUTEDSL_MEMBER = "vllm/models/deepseek_v4/nvidia/ops/dequant_gather_k_cutedsl.py"
CUTEDSL_FIXTURE = Path(__file__).parent / "fixtures" / "upstream" / "cutedsl_module.py"
DISPATCH = '        raise RuntimeError("no CuTe-DSL here")\n'


def _release_with_cutedsl(tmp_path, monkeypatch, cute_source: str | None = None):
    """A fake release 0.99.0 whose dispatcher reaches the synthetic CuTe-DSL module when ``has_cutedsl()``."""
    from upstream_fakes import fake_pip, make_wheel

    from repro_studies.upstream import wheelcache

    dispatcher = fixture_source(
        **{
            DISPATCH: "        from vllm.models.deepseek_v4.nvidia.ops.dequant_gather_k_cutedsl import "
            "dequant_gather_k_cutedsl\n\n"
            "        dequant_gather_k_cutedsl(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)\n"
            "        return\n"
        }
    )
    files = {V4_MEMBER: dispatcher, CUTEDSL_MEMBER: cute_source or CUTEDSL_FIXTURE.read_text()}
    (tmp_path / "wheels").mkdir()
    fake_pip(monkeypatch, {"0.99.0": make_wheel(tmp_path / "wheels", "0.99.0", files)})
    root = tmp_path / "cache"
    assert isinstance(wheelcache.ensure_release("0.99.0", root), wheelcache.CacheEntry)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))


def _walkthrough(tmp_path, releases):
    from repro.profiles import PROFILES
    from repro.walkthrough.session import Session
    from repro_studies.walkthrough.performance import PerformanceWalkthrough

    params = dict(
        vllm_releases=releases,
        download=False,
        cache_block_size=16,
        request_counts=[1, 2],
        vllm_request_counts=[],
        seq_lens=[32],
    )
    return PerformanceWalkthrough(
        Session("03-performance", PROFILES["cpu"], str(tmp_path / "run"), PerformanceParameters(**params))
    )


def test_without_a_gpu_each_releases_cutedsl_gather_is_a_not_run_row_saying_why(tmp_path, monkeypatch):
    from repro_studies.walkthrough.performance import CUTEDSL

    _release_with_cutedsl(tmp_path, monkeypatch)
    nb = _walkthrough(tmp_path, ["9.9.9", "0.99.0"])
    status = nb.measure_cutedsl()
    assert list(status["status"]) == ["not run", "not run"]
    assert status["reason"].iloc[0].startswith("download failed") or "9.9.9" in status["code"].iloc[0]
    assert status["reason"].iloc[1] == "the CuTe-DSL gather compiles for a CUDA GPU; this run has none"
    facts = json.loads((tmp_path / "run" / "results" / f"{CUTEDSL}.json").read_text())
    assert "headline" not in facts and [r["status"] for r in facts["releases"].values()] == ["not run", "not run"]
    text = phrases.cutedsl(facts)  # the report's words for them
    assert text.count("CuTe-DSL gather: not run:") == 2
    assert "vLLM 0.99.0's CuTe-DSL gather: not run: the CuTe-DSL gather compiles for a CUDA GPU" in text


class _FakeTimer:
    """``run_perf``'s contract without a GPU: each arm called once per shape on a CPU scenario and checked
    bitwise against the reference (for real); the medians are made up (``us`` per arm) and say so."""

    def __init__(self, us: dict):
        self.us = us  # by arm, else by the arm's table

    def __call__(self, counts, seq_lens, block_size, arms, on_check, on_median, **_):
        from repro.core.evidence.cases import compare_bitwise, reference_output
        from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
        from repro_studies.evidence.perf import ArmCheck, _table

        for L in seq_lens:
            for n in counts:
                spec = ScenarioSpec(num_reqs=n, block_size=block_size, seq_len_max=L, seq_lens=(L,) * n, max_reqs=2)
                sc = build_scenario(spec)
                ref = reference_output(sc)
                for timed in arms:
                    out = sc.fresh_out()
                    timed.fn(*sc.args(out, _table(sc, sc.block_table.contiguous(), timed.arm.table)))
                    mismatched, stray = compare_bitwise(out, ref, sc)
                    on_check(ArmCheck(timed.arm, n, L, mismatched, stray, n * L))
                    for mode in ("eager", "graph"):
                        on_median(
                            {"arm": timed.arm.label, "code": timed.arm.origin, **timed.arm.fields()}
                            | {
                                "launch": mode,
                                "num_reqs": n,
                                "seq_len": L,
                                "tokens": n * L,
                                "median_us": self.us.get(timed.arm, self.us.get(timed.arm.table)),
                            }
                        )


def test_a_releases_four_arms_are_timed_recorded_with_their_fields_and_give_the_four_ratios(tmp_path, monkeypatch):
    """measure_vllm on a synthetic release in the interpreter, the timer replaced: every arm checked bitwise, each
    median row recording the arm it times, and the ratios computed from the arms those rows rebuild."""
    from repro_studies.evidence import perf
    from repro_studies.walkthrough import performance as P

    root, _ = cached_release(tmp_path, monkeypatch)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    shipped, patched_view, patched_contig, copied = registry.upstream_bench_arms("0.99.0")
    us = {shipped: 10.0, patched_view: 11.0, patched_contig: 10.0, copied: 12.1}
    monkeypatch.setattr(perf, "run_perf", _FakeTimer(us))
    nb = _walkthrough(tmp_path, ["0.99.0"])
    nb.load_vllm()
    assert {f: rk.release for f, rk in nb.kernels["vLLM 0.99.0"].items()} == dict.fromkeys(
        registry.TRITON_FORMS, "0.99.0"
    )
    with loaded_scalar_loop_bounds():
        ratios = nb.measure_vllm()
    checks = nb.session.table(P.VLLM_CHECKS).frame()
    assert len(checks) == 8 and checks["ok"].all(), checks  # four arms at 1 and 2 requests, bitwise equal
    medians = nb.session.table(P.VLLM_MEDIANS).frame()
    assert set(registry.arms_by_label(medians).values()) == set(us)
    assert {(r["form"], r["table"], r["copy"]) for r in medians.to_dict("records")} == {
        (a.form, a.table, a.copy) for a in us
    }
    assert list(ratios["code"].unique()) == ["vLLM 0.99.0"] and len(ratios) == 4  # 2 shapes x 2 launch modes
    assert (ratios["patched/released (contig)_ratio"] == 1.0).all()
    assert (ratios["patched narrowed/contig_ratio"] == 1.1).all()
    assert (ratios["copy over patched (view)_ratio"] == 1.1).all() and (ratios["released_us"] == 10.0).all()


def test_on_a_gpu_the_cutedsl_gather_is_checked_through_the_dispatcher_and_timed_beside_gather_fast(
    tmp_path, monkeypatch
):
    from repro_studies.evidence import perf
    from repro_studies.upstream import matrix
    from repro_studies.walkthrough import performance as P

    _release_with_cutedsl(tmp_path, monkeypatch)
    monkeypatch.setattr(matrix, "cutedsl_status", lambda device: "")  # as on a GPU with the packages
    monkeypatch.setattr(P.PerformanceWalkthrough, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(perf, "run_perf", _FakeTimer({"narrowed": 12.0, "contiguous": 10.0}))
    nb = _walkthrough(tmp_path, ["0.99.0"])
    for n in (1, 2):  # gather_fast's medians and the streaming ceiling of the same run
        for arm, us in ((registry.FAST_VIEW, 8.0), (registry.FAST_CONTIG, 8.0)):
            nb.session.table(P.MEDIANS).append(
                {
                    "arm": arm.label,
                    **arm.fields(),
                    "launch": "graph",
                    "num_reqs": n,
                    "seq_len": 32,
                    "tokens": 32 * n,
                    "median_us": us,
                }
            )
        nb.session.table(P.CEILING).append(
            {"arm": "stream / 584-B records", "kernel": "stream", "launch": "graph", "num_reqs": n, "seq_len": 32}
            | {"tokens": 32 * n, "median_us": 6.0, "table": "none", "requests": "none"}
        )
    table = nb.measure_cutedsl()
    checks = nb.session.table(P.CUTEDSL_CHECKS).frame()
    assert len(checks) == 4 and checks["ok"].all(), checks  # both tables at 1 and 2 requests, bitwise equal
    assert set(checks["variant"]) == {a.label for a in registry.cutedsl_bench_arms("0.99.0")}
    graph = table[table["launch"] == "graph"].set_index("num_reqs")
    assert list(graph["narrowed/contig_ratio"]) == [1.2, 1.2]
    assert list(graph["vs fast (view)_ratio"]) == [1.5, 1.5]
    assert list(graph["of stream (view)_fraction"]) == [0.5, 0.5]
    assert list(nb.session.table(P.CUTEDSL).frame()["status"]) == ["timed"]
    facts = nb.cutedsl_facts  # numbers and classes only: the report's phrases.md.j2 words them
    assert set(facts) == {"band", "releases"} and facts["band"] == [0.99, 1.01]
    release = facts["releases"]["vLLM 0.99.0"]
    assert release["status"] == "timed"
    assert release["narrowed/contig"] == {"min": 1.2, "max": 1.2, "outside_band": 2, "points": 2}
    assert (release["vs_fast"], release["of_stream"]) == (1.5, 0.5)


def test_a_cutedsl_gather_that_fails_while_timed_is_a_failed_row_not_a_crash(tmp_path, monkeypatch):
    from repro_studies.evidence import perf
    from repro_studies.upstream import matrix

    broken = CUTEDSL_FIXTURE.read_text().replace(
        "    gather_fixed(out,", '    raise RuntimeError("cute.compile failed")\n    gather_fixed(out,'
    )
    _release_with_cutedsl(tmp_path, monkeypatch, broken)
    monkeypatch.setattr(matrix, "cutedsl_status", lambda device: "")
    monkeypatch.setattr(perf, "run_perf", _FakeTimer({"narrowed": 1.0, "contiguous": 1.0}))
    nb = _walkthrough(tmp_path, ["0.99.0"])
    status = nb.measure_cutedsl()
    assert list(status["status"]) == ["failed"] and status["reason"].iloc[0] == "RuntimeError: cute.compile failed"
    failed = {"status": "failed", "reason": "RuntimeError: cute.compile failed"}
    assert nb.cutedsl_facts["releases"] == {"vLLM 0.99.0": failed}


def test_cutedsl_arms_round_trip_through_their_fields_and_say_whose_code():
    view, contig = registry.cutedsl_bench_arms("0.33.0")
    assert registry.arm_of_row(view.fields()) == view and registry.arm_of_row(contig.fields()) == contig
    assert (view.origin, view.release, view.form, view.table) == ("vLLM 0.33.0", "0.33.0", "CuTe-DSL", "narrowed")
    assert (contig.table, contig.copy, view.style["color"]) == ("contiguous", False, contig.style["color"])
    with pytest.raises(ValueError):
        registry.cutedsl_arm("", "narrowed")


def test_cutedsl_table_without_a_streaming_ceiling_still_compares_with_gather_fast():
    from repro_studies.analysis import cutedsl

    view, contig = registry.cutedsl_bench_arms("0.33.0")
    rows = [(view, 9.0), (contig, 9.0), (registry.FAST_VIEW, 10.0), (registry.FAST_CONTIG, 9.0)]
    medians = pd.DataFrame(
        [
            {
                "arm": a.label,
                **a.fields(),
                "code": "vLLM 0.33.0",
                "launch": "graph",
                "num_reqs": 4,
                "seq_len": 64,
                "tokens": 256,
                "median_us": us,
            }
            for a, us in rows
        ]
    )
    cute, fast = medians.iloc[:2], medians.iloc[2:].drop(columns="code")
    table = cutedsl.beside_fast(cute, fast, None)
    row = table.iloc[0]
    assert (row["narrowed/contig_ratio"], row["vs fast (view)_ratio"], row["vs fast (contig)_ratio"]) == (1.0, 0.9, 1.0)
    assert row["of stream (view)_fraction"] is None or pd.isna(row["of stream (view)_fraction"])
    status = pd.DataFrame([cutedsl.status_row("vLLM 0.33.0", cutedsl.CuteDslStatus.TIMED)])
    facts = cutedsl.release_facts(status, table)
    assert facts["releases"]["vLLM 0.33.0"]["vs_fast"] == 0.9 and pd.isna(facts["releases"]["vLLM 0.33.0"]["of_stream"])
    text = phrases.cutedsl(facts)  # no ceiling timed: the sentence leaves its fraction out
    assert text.endswith("0.90x gather_fast's time.") and "streaming ceiling" not in text
    with pytest.raises(ValueError, match="status"):
        cutedsl.status_row("vLLM 0.33.0", "maybe")


def test_a_release_whose_model_code_is_not_read_is_a_row_of_that_class_with_the_caches_reason(tmp_path, monkeypatch):
    from repro_studies.upstream.callsites import Runs

    monkeypatch.setenv("REPRO_VLLM_CACHE", str(tmp_path / "empty-cache"))
    nb = _walkthrough(tmp_path, ["9.9.9"])  # no cache entry, no download
    row = nb.production_path().iloc[0]
    assert (row["release"], row["runs"], row["status"]) == ("vLLM 9.9.9", Runs.NOT_READ, "download failed")
    assert row["reason"]  # the cache's own words for the miss
    assert nb.production_summary.empty and phrases.production_path(nb.production_summary) == ""

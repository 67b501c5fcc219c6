"""The JIT fingerprint on small synthetic kernels (tests/fixtures/jit_kernels.py), in the interpreter.

The interpreter compiles nothing, so these tests check the *predicted* count: every launch's cache key
computed by Triton's own binder and key function for the H200 target. Expected counts follow from
Triton's specialisation rules (a constexpr's value is in the key; a plain int contributes only its
class: == 1, divisible by 16, other), stated next to each case.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import pytest
import torch
from fixtures import jit_kernels as J

from repro_studies.evidence import jit

WIDTHS = [3, 5, 8, 13, 16, 21, 32, 1]  # 8 distinct widths: 2 divisible by 16, one equal to 1
BACKING_WIDTH = 64


def backing(rows: int = 6) -> torch.Tensor:
    return torch.arange(rows * BACKING_WIDTH, dtype=torch.int32).reshape(rows, BACKING_WIDTH)


def run(variant: str, tables, **kw) -> list[dict]:
    kernel, launcher = J.VARIANTS[variant]
    inp = J.Inputs(tables[0][1].shape[0])
    return jit.fingerprint(kernel, jit.width_launches(lambda t: launcher(inp, t), tables), variant=variant, **kw)


def compiles(rows) -> list[int]:
    return [r["predicted_compiles"] for r in rows]


@pytest.mark.parametrize(
    "variant,narrowed,contiguous",
    [
        # the width is the constexpr: one binary per distinct width, whatever the table
        ("constexpr width (as shipped)", 8, 8),
        # views of one backing table share stride(0) = 64 -> one key; contiguous tables have
        # stride(0) = width: classes "other" (3, 5, 13, 21), "divisible by 16" (16, 32) and "== 1"
        ("runtime stride (PR #55109)", 1, 3),
        ("runtime stride, do_not_specialize", 1, 1),
        # the stride's value is the constexpr: constant on views, one per width on contiguous tables
        ("constexpr stride", 1, 8),
    ],
)
def test_compilations_per_variant_and_table(variant, narrowed, contiguous):
    b = backing()
    views = run(variant, jit.narrowed_tables(b, WIDTHS))
    copies = run(variant, jit.contiguous_tables(b, WIDTHS))
    assert views[-1]["predicted_total"] == narrowed == sum(compiles(views))
    assert copies[-1]["predicted_total"] == contiguous == sum(compiles(copies))
    assert compiles(views)[0] == 1 and all(r["mode"] == "predicted" for r in views + copies)


def test_runtime_stride_compiles_exactly_at_new_classes():
    rows = run("runtime stride (PR #55109)", jit.contiguous_tables(backing(), WIDTHS))
    assert compiles(rows) == [1, 0, 0, 0, 1, 0, 0, 1]  # at widths 3, 16 and 1
    assert "row_pitch=i32:D" in rows[4]["specialization"] and "row_pitch=constexpr 1" in rows[7]["specialization"]


def test_repeated_widths_do_not_recompile():
    rows = run("constexpr width (as shipped)", jit.narrowed_tables(backing(), [4, 7, 4, 7, 9]))
    assert compiles(rows) == [1, 1, 0, 0, 1]
    assert [r["distinct_widths"] for r in rows] == [1, 2, 2, 2, 3]
    assert [r["first_call_of_width"] for r in rows] == [True, True, False, False, True]


def test_warm_up_at_full_width_then_narrowed_inference():
    """vLLM 0.33.0 warms the kernel up for the full-width table; narrowed tables then compile on the
    inference path with the width as constexpr, and never with a runtime stride."""
    b = backing()
    for variant, inference_compiles in (("constexpr width (as shipped)", 3), ("runtime stride (PR #55109)", 0)):
        kernel, launcher = J.VARIANTS[variant]
        inp = J.Inputs(b.shape[0])

        def launch(t, launcher=launcher, inp=inp):
            launcher(inp, t)

        warm = jit.width_launches(launch, [(BACKING_WIDTH, b)], phase="warm-up")
        infer = jit.width_launches(launch, jit.narrowed_tables(b, [5, 9, 17]))
        rows = jit.fingerprint(kernel, warm + infer)
        assert rows[0]["phase"] == "warm-up" and rows[0]["predicted_compiles"] == 1
        assert sum(r["predicted_compiles"] for r in rows[1:]) == inference_compiles


def test_misaligned_table_pointer_is_a_new_key():
    """Pointers are specialised on 16-byte alignment: a view starting 4 bytes in compiles again."""
    b = backing()
    tables = [(8, b[:, :8]), (8, b[:, 1:9])]
    assert compiles(run("runtime stride, do_not_specialize", tables)) == [1, 1]


def test_launch_options_are_part_of_the_key():
    kernel = J._copy_rows_runtime_stride
    inp = J.Inputs(2)
    t = backing(2)
    calls = [
        jit.Launch(f"warps{w}", 8, lambda w=w: kernel[(2,)](inp.out, t, inp.lens, 64, BLOCK=64, num_warps=w))
        for w in (4, 4, 8)
    ]
    assert compiles(jit.fingerprint(kernel, calls)) == [1, 0, 1]


def test_the_launches_really_run_and_show_the_bug():
    """The interpreted launches execute: the constexpr-width kernel misreads a narrowed view from
    request 1 on (it advances rows by the width), the stride kernels do not."""
    b = backing(3)
    view = b[:, :5]
    for variant, (_, launcher) in J.VARIANTS.items():
        inp = J.Inputs(3)
        launcher(inp, view)
        got = inp.out[:, :5]
        assert torch.equal(got[0], view[0]), variant
        assert torch.equal(got, view) == (variant != "constexpr width (as shipped)"), variant


def test_kernel_run_is_restored_after_the_fingerprint():
    kernel, _ = J.VARIANTS["constexpr stride"]
    assert "run" not in vars(kernel)
    run("constexpr stride", jit.narrowed_tables(backing(), [2]))
    assert "run" not in vars(kernel)


def test_rows_go_to_the_sink_as_they_finish():
    seen = []
    rows = run("constexpr width (as shipped)", jit.narrowed_tables(backing(), [2, 3]), sink=seen.append, table="view")
    assert seen == rows and rows[0]["table"] == "view" and rows[0]["target"] == "cuda:sm_90"


def test_observing_needs_a_compiled_kernel():
    kernel, _ = J.VARIANTS["constexpr stride"]
    with pytest.raises(ValueError, match="observe=True needs a compiled kernel"):
        jit.fingerprint(kernel, [], observe=True)
    assert not jit.is_compiled_kernel(kernel)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match=r"widths must lie in 1\.\.64"):
        jit.narrowed_tables(backing(), [0])
    with pytest.raises(TypeError, match=r"kernel must be a triton\.jit function"):
        jit.fingerprint(lambda: None, [])


def test_prediction_without_executing_the_launch():
    kernel, launcher = J.VARIANTS["constexpr width (as shipped)"]
    inp = J.Inputs(6)
    launches = jit.width_launches(lambda t: launcher(inp, t), jit.narrowed_tables(backing(), [2, 3]))
    rows = jit.fingerprint(kernel, launches, execute=False)
    assert compiles(rows) == [1, 1]
    assert (inp.out == -7).all()  # nothing ran


@pytest.mark.parametrize("table", ["narrowed", "contiguous"])
def test_the_repositorys_gathers_compile_once_per_tile(table):
    """gather_fixed passes stride(0) and gather_buggy shape[-1] as runtime ints in do_not_specialize:
    one binary for every width (unlike vLLM, whose width is a constexpr). The interpreter's launch
    sizes its token tile from the longest request, so the token count is held at one block here."""
    from repro.core.kernels import gather as G

    for fn in (G.gather_fixed, G.gather_buggy):
        launches = jit.gather_launches(
            fn, [1, 2, 3, 5], table=table, num_reqs=2, block_size=8, backing_width=9, tokens_per_request=lambda w: 8
        )
        rows = jit.fingerprint(G._dequantize_and_gather_k_kernel, launches)
        assert rows[-1]["predicted_total"] == 1, fn.__name__
        assert [r["width"] for r in rows] == [1, 2, 3, 5]
        assert "block_table_row_pitch=i32," in rows[0]["specialization"]


def test_interpreter_launch_constexprs_count_too():
    """The key is computed from what the launcher passes: in the interpreter the repository's gather
    picks its token tile from the longest request, so growing requests compile again (the GPU launch
    uses a fixed tile). The prediction reports the launcher it is given, nothing else."""
    from repro.core.kernels import gather as G

    launches = jit.gather_launches(G.gather_fixed, [1, 2, 3, 5], num_reqs=2, block_size=8, backing_width=9)
    rows = jit.fingerprint(G._dequantize_and_gather_k_kernel, launches)
    assert compiles(rows) == [1, 1, 0, 1]  # TOKENS_PER_ITER 16, 32, 32, 64
    assert "TOKENS_PER_ITER=constexpr 16" in rows[0]["specialization"]


FORMS = {
    "constexpr width (as shipped)": "constexpr width",
    "runtime stride (PR #55109)": "runtime stride",
    "runtime stride, do_not_specialize": "runtime stride (do_not_specialize)",
    "constexpr stride": "constexpr stride",
}


@pytest.mark.parametrize("warm_up", [False, True])
@pytest.mark.parametrize("table", ["narrowed", "contiguous"])
@pytest.mark.parametrize("variant", list(FORMS))
def test_the_pitch_rule_agrees_with_tritons_keys(variant, table, warm_up):
    """analysis.jit.expected_compiles (the rule, from the pitch values alone) against the count from
    Triton's own binder and key function, for every form, table kind and warm-up choice."""
    from repro_studies.analysis.jit import expected_compiles

    b = backing()
    kernel, launcher = J.VARIANTS[variant]
    inp = J.Inputs(b.shape[0])
    tables = jit.narrowed_tables(b, WIDTHS) if table == "narrowed" else jit.contiguous_tables(b, WIDTHS)
    launches = jit.width_launches(lambda t: launcher(inp, t), tables)
    if warm_up:
        launches = jit.width_launches(lambda t: launcher(inp, t), [(BACKING_WIDTH, b)], phase="warm-up") + launches
    rows = jit.fingerprint(kernel, launches)
    inference = sum(r["predicted_compiles"] for r in rows if r["phase"] != "warm-up")
    assert inference == expected_compiles(FORMS[variant], table, WIDTHS, BACKING_WIDTH, warm_up)


def test_subjects_sequence_and_checks():
    import pandas as pd

    from repro.core.kernels import gather as G
    from repro_studies.analysis.jit import Pitch, fingerprint_checks

    subject = jit.JitSubject(
        "fixed", G.gather_fixed, G._dequantize_and_gather_k_kernel, Pitch.RUNTIME_STRIDE_UNSPECIALIZED, "repro"
    )
    seen = []
    rows = jit.fingerprint_subjects(
        [subject],
        [1, 2, 3],
        backing_width=6,
        num_reqs=2,
        block_size=8,
        sink=seen.append,
        tokens_per_request=lambda w: 8,
    )
    frame = pd.DataFrame(rows)
    assert seen == rows and set(frame["table"]) == {"narrowed", "contiguous"}
    assert (frame.groupby("table")["phase"].first() == "warm-up").all()
    assert set(frame["pitch"]) == {Pitch.RUNTIME_STRIDE_UNSPECIALIZED} and set(frame["code"]) == {"repro"}
    checks = fingerprint_checks(frame, [1, 2, 3], 6)
    assert len(checks) == 2 and all(c["ok"] for c in checks)  # CPU: no observed rows, no hook check
    wrong = fingerprint_checks(frame.assign(pitch="constexpr width"), [1, 2, 3], 6)
    assert not any(c["ok"] for c in wrong)


def test_int_class_is_tritons_own():
    """The rule's int classes against Triton's binder for the H200 target."""
    from repro_studies.analysis.jit import int_class

    kernel = J._copy_rows_runtime_stride
    predictor = jit.KeyPredictor(kernel)
    t = backing(1)
    for v in (1, 0, 16, 3, -1, -16, 48, 2**31, 2**31 + 1):
        _, summary = predictor.key((t, t, t, v), {"BLOCK": 64})
        triton_class = summary.split(",")[0].split("=")[1]
        assert triton_class == {"1": "constexpr 1"}.get(int_class(v), int_class(v)), v


@pytest.mark.parametrize("table", ["narrowed", "contiguous"])
def test_launch_tables_have_the_width_asked_whatever_the_requests_hold(table):
    """One-block requests on a w-column table: the table's width, not the requests, is what varies."""
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    seen = []
    launches = jit.gather_launches(
        lambda *args: seen.append((args[4].shape[-1], args[4].stride(0), args[3])),
        [1, 3, 8],
        table=table,
        num_reqs=2,
        block_size=8,
        backing_width=9,
        tokens_per_request=lambda w: 8,
        window=8,
    )
    for launch in launches:
        launch.call()
    assert [(w, s) for w, s, _ in seen] == [(1, 9), (3, 9), (8, 9)] if table == "narrowed" else [(1, 1), (3, 3), (8, 8)]
    assert all(g is not None and g.tolist() == [8, 8] for _, _, g in seen)  # gather_lens from the window
    with pytest.raises(ValueError, match="table_width must hold the longest request's 2 blocks, got 1"):
        build_scenario(ScenarioSpec(num_reqs=1, block_size=8, seq_len_max=16, seq_lens=(16,), table_width=1))


def test_the_compile_hooks_record_this_kernel_and_pass_every_call_on_to_hooks_set_before():
    """What Triton's hooks do on a GPU, driven by hand: a compilation of the watched kernel is recorded
    (start, end, Triton's time, disk-cache hit), another kernel's is not, and hooks set earlier still get
    every call with every argument; all three are put back afterwards."""
    from types import SimpleNamespace

    from triton import knobs

    kernel, _ = J.VARIANTS["constexpr stride"]
    other, _ = J.VARIANTS["runtime stride (PR #55109)"]
    seen = []
    earlier = (
        lambda **kw: seen.append(("pre", kw)) or "pre-result",
        lambda **kw: seen.append(("post", kw)) or "post-result",
        lambda **kw: seen.append(("listener", kw)),
    )
    saved = (knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook, knobs.compilation.listener)
    knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook, knobs.compilation.listener = earlier
    try:
        recorder = jit._Recorder(SimpleNamespace(kernel=kernel), observe=True)
        with jit._intercept(recorder):
            for watched in (kernel, other):
                hook = dict(key=f"k-{id(watched)}", repr="r", fn=SimpleNamespace(jit_function=watched), compile={})
                hook |= dict(is_manual_warmup=False, already_compiled=False)
                assert knobs.runtime.jit_cache_hook(**hook) == "pre-result"
                event = dict(src=SimpleNamespace(fn=watched), metadata={}, metadata_group={})
                knobs.compilation.listener(**event, times=SimpleNamespace(total=1234), cache_hit=True)
                assert knobs.runtime.jit_post_compile_hook(**hook) == "post-result"
        assert (knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook) == earlier[:2]
        assert knobs.compilation.listener is earlier[2]
    finally:
        knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook, knobs.compilation.listener = saved
    [event] = recorder.compiles
    assert event.key == f"k-{id(kernel)}" and event.triton_us == 1234 and event.disk_cache_hit is True
    assert event.hook_end is not None and event.hook_end >= event.hook_start
    assert [name for name, _ in seen] == ["pre", "listener", "post"] * 2
    assert set(seen[0][1]) == {"key", "repr", "fn", "compile", "is_manual_warmup", "already_compiled"}

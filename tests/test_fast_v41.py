"""The V4.1 gathers (repro_studies.kernels.fast_v41) in Triton's interpreter: bitwise against the reference decoders on
column-narrowed tables, for both records and both layouts, in every launch variant; the dispatcher's contract."""

import pytest
import torch

from repro.core.evidence.cases import compare_bitwise
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.geometry.records import layout_for
from repro_studies.kernels import fast_v41, launch_plan
from repro_studies.kernels.records_reference import gather_reference, pages_as_bytes

LAYOUTS = [True, False]
GATHERS = {True: fast_v41.dequantize_and_gather_k_cache, False: fast_v41.dequantize_and_gather_k_cache_page_split}


def _scenario(record, interleaved, **kw):
    spec = dict(num_reqs=3, block_size=16, seq_len_max=70, max_reqs=4, record=record, interleaved=interleaved)
    return build_scenario(ScenarioSpec(**{**spec, **kw}))


def _reference(sc):
    ref = sc.fresh_out()
    gather_reference(sc.spec.layout, ref, *sc.args(ref)[1:])
    return ref


def _assert_bitwise(sc, fn, **kw):
    out = sc.fresh_out()
    fn(*sc.args(out), **kw)
    assert compare_bitwise(out, _reference(sc), sc) == (0, 0)


@pytest.mark.parametrize("interleaved", LAYOUTS, ids=["interleaved", "page-split"])
@pytest.mark.parametrize("record", ["mxfp8", "nvfp4"])
def test_dispatcher_is_bitwise_the_reference_on_a_narrowed_table(record, interleaved):
    sc = _scenario(record, interleaved, window=40, offset=2)
    assert sc.block_table.stride(0) > sc.block_table.shape[-1]  # the narrowed view PR #55109 is about
    _assert_bitwise(sc, GATHERS[interleaved])


@pytest.mark.parametrize(
    "settings",
    [
        {"decode": "bits", "store": "packed"},
        {"decode": "arith", "store": "interleave"},
        {"decode": "half", "store": "packed", "evict_first": False},
        {"decode": "half", "store": "interleave", "store_cache": ".cs", "scale_3d": True},
    ],
    ids=lambda s: "-".join(map(str, s.values())),
)
def test_every_nvfp4_decode_and_store_in_the_gpu_launch_shape(settings):
    sc = _scenario("nvfp4", True, seq_len_max=40)
    _assert_bitwise(sc, fast_v41.gather_v41_with, interleaved=True, plan="grid", block_t=8, num_warps=2, **settings)


@pytest.mark.parametrize("interleaved", LAYOUTS, ids=["interleaved", "page-split"])
def test_mxfp8_in_the_gpu_launch_shape_with_partial_tiles(interleaved):
    sc = _scenario("mxfp8", interleaved, seq_len_max=37, window=21, offset=1)
    _assert_bitwise(
        sc,
        fast_v41.gather_v41_with,
        interleaved=interleaved,
        plan="grid",
        block_t=8,
        num_warps=4,
        store_cache=".cs",
        scale_3d=interleaved,
    )


@pytest.mark.parametrize(
    "record,interleaved,block_t,tiles",
    [
        *((record, interleaved, 8, 1) for record in ("mxfp8", "nvfp4") for interleaved in LAYOUTS),
        ("mxfp8", True, 4, 2),
        ("nvfp4", False, 4, 2),
        ("nvfp4", True, 4, 8),
        ("mxfp8", False, 4, 8),
    ],
)
def test_the_early_table_load_in_the_gpu_launch_shape(record, interleaved, block_t, tiles):
    """Each program's table entry loaded before the request's length (for each of its tiles), on a narrowed table
    with ragged requests, an offset and poison ids past each request; with gather_lens (one tile per program; the
    interpreter's loop over a request's tiles is the other tests' case), or a program spanning two blocks (4 x 8
    tokens, blocks of 16), the launch keeps the per-token load, exact too."""
    for window in (0, 25) if tiles == 1 else (0,):
        sc = _scenario(record, interleaved, seq_len_max=70, window=window, offset=3, mode="poison")
        settings = {"block_t": block_t, "num_warps": 2, "early_table": True, "tiles_per_program": tiles}
        launch = fast_v41.gather_v41_with(*sc.args(sc.fresh_out()), interleaved=interleaved, plan="grid", **settings)
        assert launch.tiles_per_program == tiles
        cfg = {**fast_v41.DEFAULT_CONFIG[record], **settings}
        early = window == 0 and block_t * tiles <= 16
        assert fast_v41.early_table(cfg, sc.gather_lens is not None, 16, launch) == early
        _assert_bitwise(sc, fast_v41.gather_v41_with, interleaved=interleaved, plan="grid", **settings)


def _overwrite(sc, data_bytes, scale_bytes):
    """Every token's record: ``data_bytes`` / ``scale_bytes`` cycled over tokens (rows of the given tensors)."""
    layout, B = sc.spec.layout, sc.spec.block_size
    pages = pages_as_bytes(sc.k_cache, layout, B)
    slot = torch.arange(B)
    for block in range(pages.shape[0]):
        tok = (block * B + slot) % data_bytes.shape[0]
        d0 = slot * (layout.token_bytes if layout.interleaved else layout.data_bytes)
        s0 = d0 + layout.data_bytes if layout.interleaved else B * layout.data_bytes + slot * layout.scale_bytes
        pages[block, d0[:, None] + torch.arange(layout.data_bytes)] = data_bytes[tok]
        pages[block, s0[:, None] + torch.arange(layout.scale_bytes)] = scale_bytes[tok]


@pytest.mark.parametrize(
    "interleaved, decode", [(True, d) for d in fast_v41.NVFP4_DECODES] + [(False, "half")], ids=str
)
def test_nvfp4_every_code_and_every_finite_scale_including_negative_and_subnormal(interleaved, decode):
    sc = _scenario("nvfp4", interleaved, num_reqs=2, seq_len_max=48)
    gen = torch.Generator().manual_seed(3)
    codes = torch.arange(256, dtype=torch.uint8)
    data = torch.stack([codes.roll(k)[:256] for k in range(16)])  # every byte (both nibbles) in every row
    finite = torch.tensor([b for b in range(256) if b & 0x7F != 0x7F], dtype=torch.uint8)  # no NaN codes
    scales = finite[torch.randint(0, finite.numel(), (16, 32), generator=gen)]
    scales[0, :8] = torch.tensor([0x00, 0x80, 0x01, 0x81, 0x7E, 0xFE, 0x08, 0x88], dtype=torch.uint8)
    _overwrite(sc, data, scales)
    _assert_bitwise(sc, fast_v41.gather_v41_with, interleaved=interleaved, decode=decode)
    out = sc.fresh_out()
    fast_v41.gather_v41_with(*sc.args(out), interleaved=interleaved, decode=decode)
    assert (out.view(torch.int16) == -32768).any()  # -0 from +0 x a negative scale reaches the output


@pytest.mark.parametrize("interleaved", LAYOUTS, ids=["interleaved", "page-split"])
def test_mxfp8_every_finite_fp8_code_with_scales_whose_products_are_exact(interleaved):
    sc = _scenario("mxfp8", interleaved, num_reqs=2, seq_len_max=40)
    gen = torch.Generator().manual_seed(5)
    finite = torch.tensor([b for b in range(256) if b & 0x7F != 0x7F], dtype=torch.uint8)
    data = torch.stack([finite.roll(k)[:254].repeat(3)[:512] for k in range(8)])
    # 2**(s - 127) with s in [10, 246] keeps every fp8 product a normal bf16 (exact; the interpreter truncates)
    scales = torch.randint(10, 247, (8, 16), generator=gen, dtype=torch.int32).to(torch.uint8)
    _overwrite(sc, data, scales)
    _assert_bitwise(sc, GATHERS[interleaved])


def test_use_fnuz_is_refused_for_every_record():
    for record in ("mxfp8", "v4"):
        sc = build_scenario(ScenarioSpec(num_reqs=2, block_size=16, seq_len_max=20, max_reqs=3, record=record))
        with pytest.raises(ValueError, match="use_fnuz"):
            fast_v41.dequantize_and_gather_k_cache(*sc.args(sc.fresh_out()), use_fnuz=True)


def test_the_v4_record_goes_to_gather_fast():
    sc = build_scenario(ScenarioSpec(num_reqs=2, block_size=16, seq_len_max=30, max_reqs=3))
    out = sc.fresh_out()
    fast_v41.dequantize_and_gather_k_cache(*sc.args(out))
    assert compare_bitwise(out, _reference(sc), sc) == (0, 0)


def test_max_gather_len_is_accepted_and_changes_nothing():
    sc = _scenario("nvfp4", True, seq_len_max=30)
    _assert_bitwise(sc, fast_v41.dequantize_and_gather_k_cache, max_gather_len=1)


@pytest.mark.parametrize(
    "change, word",
    [
        (lambda a: {**a, "k_cache": a["k_cache"][:, :, :500]}, "k_cache.shape"),
        (lambda a: {**a, "seq_lens": a["seq_lens"].long()}, "seq_lens"),
        (lambda a: {**a, "block_table": a["block_table"].long()}, "block_table"),
        (lambda a: {**a, "out": a["out"].float()}, "out"),
        (lambda a: {**a, "offset": -1}, "offset"),
    ],
)
def test_bad_input_is_one_error_naming_the_argument(change, word):
    sc = _scenario("mxfp8", True, num_reqs=2, seq_len_max=20)
    args = dict(
        zip(
            ("out", "k_cache", "seq_lens", "gather_lens", "block_table", "block_size", "offset"),
            sc.args(sc.fresh_out()),
        )
    )
    with pytest.raises(ValueError, match=word):
        fast_v41.dequantize_and_gather_k_cache(**change(args))


def test_bad_settings_name_the_setting():
    sc = _scenario("nvfp4", True, num_reqs=2, seq_len_max=20)
    bad_settings = [
        ({"block_t": 3}, "block_t"),
        ({"decode": "lut"}, "decode"),
        ({"vector": 4}, "unknown"),
        ({"store_cache": ".wt"}, "store_cache"),
        ({"evict_first": "yes"}, "evict_first"),
    ]
    for bad, word in bad_settings:
        with pytest.raises(ValueError, match=word):
            fast_v41.gather_v41_with(*sc.args(sc.fresh_out()), interleaved=True, **bad)
    with pytest.raises(ValueError, match="use_fnuz"):
        fast_v41.dequantize_and_gather_k_cache(*sc.args(sc.fresh_out()), use_fnuz=True)


def test_grid_plan_halves_the_tile_only_on_a_gpu_and_names_a_bad_plan():
    cfg = fast_v41.DEFAULT_CONFIG["mxfp8"]
    launch = fast_v41.plan_launch(3, 100, torch.device("cpu"), cfg, "grid")
    assert launch.block_t == cfg["block_t"] and launch.grid == (-(-100 // cfg["block_t"]), 3)
    assert fast_v41.plan_launch(3, 100, torch.device("cpu"), cfg, "per-request").grid == (1, 3)
    with pytest.raises(ValueError, match="plan"):
        fast_v41.plan_launch(3, 100, torch.device("cpu"), cfg, "persistent")
    assert layout_for("nvfp4", True).token_bytes in fast_v41.KIND_BY_TOKEN_BYTES


def test_gpu_plan_gives_up_tiles_per_program_before_the_tile(monkeypatch):
    """Grid sizes on a 132-SM H200 (SM count faked, nothing launched): 4 tiles of 4 tokens per program at
    256 x 2,048; for one request of 1,024 tokens first 1 tile per program, then 2-token tiles (256 programs of 4
    tokens are fewer than 2 waves)."""
    monkeypatch.setattr(launch_plan, "sm_count", lambda index: 132)
    cuda = torch.device("cuda", 0)
    cfg = {**fast_v41.DEFAULT_CONFIG["mxfp8"], "tiles_per_program": 4}
    many = fast_v41.plan_launch(256, 2048, cuda, cfg, "grid")
    assert (many.grid, many.block_t, many.tiles_per_program) == ((128, 256), 4, 4)
    few = fast_v41.plan_launch(1, 1024, cuda, cfg, "grid")
    assert (few.grid, few.block_t, few.tiles_per_program) == ((512, 1), 2, 1)
    with pytest.raises(ValueError, match="tiles_per_program must be a power of two"):
        fast_v41.check_config("mxfp8", {**cfg, "tiles_per_program": 3})
    with pytest.raises(ValueError, match="maxnreg must be None or an int from 16 to 255"):
        fast_v41.check_config("nvfp4", {**fast_v41.DEFAULT_CONFIG["nvfp4"], "maxnreg": 8})


@pytest.mark.integration
@pytest.mark.parametrize("release, interleaved", [("0.33.0", True), ("0.31.0", False)])
@pytest.mark.parametrize("record", ["mxfp8", "nvfp4"])
def test_bitwise_equal_to_the_releases_patched_kernel(release, interleaved, record):
    """vLLM's own V4.1 kernel (its wheel, through the module cache; downloaded if missing), PR #55109's row pitch
    applied by the repository's patcher, called through the release's wrapper in the interpreter."""
    from repro_studies.evidence.records_perf import check_scenario, load_release_gather, run_out

    theirs, why = load_release_gather(release, record, "cpu", download=True, interleaved=interleaved)
    assert theirs is not None, why
    sc = check_scenario(record, interleaved, "cpu", tiny=True)
    assert sc.block_table.stride(0) > sc.block_table.shape[-1]
    expected = run_out(theirs, sc)
    assert compare_bitwise(expected, _reference(sc), sc) == (0, 0)
    out = sc.fresh_out()
    GATHERS[interleaved](*sc.args(out))
    assert compare_bitwise(out, expected, sc) == (0, 0)

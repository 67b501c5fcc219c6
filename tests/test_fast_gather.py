"""Tests for repro_studies.kernels.fast.gather_fast in Triton's CPU interpreter.

Every output is compared bitwise (bf16 viewed as int16) over the WHOLE poisoned output buffer
with both the PyTorch reference and ``gather_fixed``: rows the gather must write have to match,
and rows it must not write have to keep the poison.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import dataclasses
import inspect

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repro.core.evidence.cases import compare_bitwise
from repro.core.evidence.scenarios import OUT_POISON_BITS, ScenarioSpec, build_scenario
from repro.core.kernels.gather import gather_contiguous_copy, gather_fixed
from repro.core.kernels.launch import is_interpreted
from repro.core.kernels.reference import dequantize_and_gather_reference
from repro.registry import load_implementation
from repro_studies.kernels import fast, launch_plan
from repro_studies.kernels.fast import gather_fast, gather_fast_with, plan_launch
from repro_studies.kernels.settings import DEFAULT_SETTINGS, TILES, FastSettings, TileSettings, with_settings


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


def run(fn, scenario, table=None, **kw) -> torch.Tensor:
    out = scenario.fresh_out()
    fn(*scenario.args(out, table), **kw)
    return out


def assert_matches(scenario, fn=gather_fast, table=None, **kw) -> torch.Tensor:
    """``fn`` equals the reference and gather_fixed bit for bit over the whole output buffer."""
    ref = run(dequantize_and_gather_reference, scenario)
    fixed = run(gather_fixed, scenario)
    got = run(fn, scenario, table, **kw)
    assert torch.equal(bits(fixed), bits(ref)), "oracles disagree: gather_fixed != reference"
    mismatched, stray = compare_bitwise(got, ref, scenario)
    assert (mismatched, stray) == (0, 0), f"{mismatched} mismatched tokens, {stray} stray rows"
    assert torch.equal(bits(got), bits(ref))
    assert torch.equal(bits(got), bits(fixed))
    return got


def test_kernel_is_interpreted():
    assert is_interpreted(fast._gather_fast_kernel)


def test_signature_is_vllms():
    assert list(inspect.signature(gather_fast).parameters) == [
        "out",
        "k_cache",
        "seq_lens",
        "gather_lens",
        "block_table",
        "block_size",
        "offset",
    ]
    assert load_implementation("repro_studies.kernels.fast:gather_fast") is gather_fast


# vLLM's own test cases: contiguous tables, block size 64, poisoned unused entries.
VLLM_CASES = [((9, 23, 7), None, 0), ((19, 8, 257), (6, 8, 129), 5)]


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("seq_lens,gather_lens,offset", VLLM_CASES)
def test_vllm_cases(seq_lens, gather_lens, offset, padded):
    spec = ScenarioSpec(
        num_reqs=len(seq_lens),
        contiguous=True,
        seq_lens=seq_lens,
        gather_lens=gather_lens,
        offset=offset,
        padded=padded,
        max_reqs=len(seq_lens),
        mode="poison",
    )
    assert_matches(build_scenario(spec))


@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("num_reqs,block_size,seq_len_max", [(1, 64, 200), (2, 16, 120), (33, 64, 70), (5, 2, 24)])
@pytest.mark.parametrize("mode", ["in-range", "poison"])
def test_narrowed_views(mode, num_reqs, block_size, seq_len_max, padded):
    spec = ScenarioSpec(
        num_reqs=num_reqs,
        block_size=block_size,
        seq_len_max=seq_len_max,
        mode=mode,
        padded=padded,
        max_reqs=max(40, num_reqs),
        seed=3,
    )
    scenario = build_scenario(spec)
    assert scenario.block_table.stride(0) > scenario.block_table.shape[-1]  # really a narrowed view
    assert_matches(scenario)


@pytest.mark.parametrize("window,offset", [(1, 0), (17, 3), (64, 0), (500, 2)])
@pytest.mark.parametrize("block_size", [16, 64])
def test_gather_lens_windows_and_offset(window, offset, block_size):
    spec = ScenarioSpec(
        num_reqs=4,
        block_size=block_size,
        seq_len_max=150,
        window=window,
        offset=offset,
        mode="poison",
        max_reqs=8,
        seed=window,
    )
    scenario = build_scenario(spec)
    assert scenario.gather_lens is not None
    assert_matches(scenario)


def test_narrowed_and_contiguous_copy_agree():
    scenario = build_scenario(
        ScenarioSpec(num_reqs=6, block_size=16, seq_len_max=90, mode="poison", max_reqs=16, window=40, offset=1, seed=5)
    )
    narrowed = assert_matches(scenario)
    copied = assert_matches(scenario, table=scenario.block_table.contiguous())
    other = run(gather_contiguous_copy, scenario)
    assert torch.equal(bits(narrowed), bits(copied))
    assert torch.equal(bits(narrowed), bits(other))


@pytest.mark.parametrize("seq_lens,gather_lens,offset", [((600,), None, 0), ((2048,), (300,), 4), ((1,), None, 0)])
def test_single_request(seq_lens, gather_lens, offset):
    # 600 tokens: more than one 256-token tile per program in the interpreter's launch.
    spec = ScenarioSpec(
        num_reqs=1, seq_lens=seq_lens, gather_lens=gather_lens, offset=offset, mode="poison", max_reqs=2
    )
    assert_matches(build_scenario(spec))


@pytest.mark.parametrize("block_t", [1, 2, 8, 32])
def test_gpu_launch_shape_in_interpreter(block_t):
    """The GPU plan (one tile per program, early exit past gather_len) gives the same bits."""
    spec = ScenarioSpec(
        num_reqs=3,
        contiguous=True,
        seq_lens=(19, 8, 70),
        gather_lens=(6, 8, 45),
        offset=5,
        max_reqs=3,
        mode="poison",
        block_size=16,
    )
    scenario = build_scenario(spec)
    out = scenario.fresh_out()
    one_tile = with_settings(block_t=block_t, tiles_per_program=1, num_stages=1)
    launch = gather_fast_with(*scenario.args(out), one_tile, plan="grid")
    assert launch.tiles_per_program == 1 and launch.block_t == block_t
    assert launch.grid == (-(-(out.shape[1] - spec.offset) // block_t), 3)
    assert_matches(scenario, fn=gather_fast_with, settings=one_tile, plan="grid")
    looped = with_settings(block_t=block_t, tiles_per_program=4, num_stages=3, tile=TileSettings())  # pipelined
    launch = gather_fast_with(*scenario.args(scenario.fresh_out()), looped, plan="grid")
    assert launch.grid == (-(-(out.shape[1] - spec.offset) // (4 * block_t)), 3)
    assert_matches(scenario, fn=gather_fast_with, settings=looped, plan="grid")


def test_settings_are_explicit_and_checked():
    scenario = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=30, block_size=16, max_reqs=4))
    out = scenario.fresh_out()
    launch = gather_fast_with(*scenario.args(out), with_settings(block_t=4, num_warps=1), plan="grid")
    assert (launch.block_t, launch.num_warps) == (4, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):  # nothing mutable at module level
        DEFAULT_SETTINGS.block_t = 16
    with pytest.raises(ValueError, match="block_t"):
        FastSettings(block_t=24)
    with pytest.raises(ValueError, match="num_warps"):
        FastSettings(num_warps=64)
    with pytest.raises(ValueError, match="tile must be one of"):
        TileSettings(tile="diagonal")
    with pytest.raises(ValueError, match="store_cache"):
        TileSettings(store_cache=".xx")
    with pytest.raises(ValueError, match="settings must be a FastSettings"):
        gather_fast_with(*scenario.args(out), {"block_t": 8})
    for bad in (8, 300, 40.0, True):
        with pytest.raises(ValueError, match="maxnreg must be None or an int from 16 to 255"):
            FastSettings(maxnreg=bad)
    limited = with_settings(block_t=4, num_warps=1, maxnreg=40)
    assert limited.launch_options() == {"maxnreg": 40} and "maxnreg 40" in limited.label()
    assert FastSettings().launch_options() == {}
    launch = gather_fast_with(*scenario.args(out), limited, plan="grid")  # the interpreter compiles nothing
    assert launch.registers is None
    assert_matches(scenario, fn=gather_fast_with, settings=limited, plan="grid")


def test_the_tile_index_is_the_lanes_familys_chunk_in_8_byte_units():
    """dequant_tokens takes the lanes family's chunk as LANES_CHUNK * TILE: reordering TILES would change it."""
    from repro_studies.kernels.tiles import LANES_CHUNK

    assert TILES.index("grouped") == 0
    assert [LANES_CHUNK.value * TILES.index(t) for t in ("lanes", "wide")] == [8, 16]


@pytest.mark.parametrize("tile,overread", [(t, i % 2 == 0) for i, t in enumerate(TILES)] + [("wide", False)])
def test_every_tile_layout_is_bitwise_the_reference(tile, overread):
    spec = ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=45, max_reqs=5, mode="poison", offset=2, window=30)
    chosen = with_settings(tile=TileSettings(tile=tile, overread=overread, store_cache=".cs"))
    assert_matches(build_scenario(spec), fn=gather_fast_with, settings=chosen, plan="grid")


@pytest.mark.parametrize("plan", ["grid", "per-request"])
def test_tile_loops_are_bitwise_the_reference(plan):
    """Tiles per program: Triton's pipelined loop, and the register prefetch of the "lanes" tile."""
    spec = ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=45, max_reqs=5, mode="poison", offset=1, window=40)
    staged = with_settings(block_t=4, tiles_per_program=4, num_stages=3)
    prefetch = with_settings(block_t=4, tiles_per_program=4, prefetch=True, tile=TileSettings(tile="lanes"))
    sc = build_scenario(spec)
    launch = gather_fast_with(*sc.args(sc.fresh_out()), prefetch, plan="grid")
    assert launch.tiles_per_program == 4
    for chosen in (staged, prefetch):
        assert_matches(sc, fn=gather_fast_with, settings=chosen, plan=plan)
    with pytest.raises(ValueError, match="prefetch needs a 'lanes' tile"):
        with_settings(tiles_per_program=2, prefetch=True, tile=TileSettings())


@pytest.mark.parametrize(
    "block_t,tiles,prefetch,block_size",
    [
        (4, 1, False, 16),
        (8, 1, False, 64),
        (16, 1, False, 16),
        (8, 1, False, 12),
        (4, 2, False, 16),
        (4, 4, True, 16),
        (4, 4, False, 8),
    ],
)
def test_the_early_table_load_is_bitwise_the_reference(block_t, tiles, prefetch, block_size):
    """The program's one table entry loaded before seq_len (for each of its tiles, looped or prefetched), on a
    narrowed table with ragged requests, an offset and poison ids past each request; with ``gather_lens``, or a
    program span that does not divide the block size, the launch keeps the per-token table load, and is exact
    too."""
    early = with_settings(
        block_t=block_t,
        min_block_t=block_t,
        tiles_per_program=tiles,
        prefetch=prefetch,
        early_table=True,
        tile=TileSettings(tile="lanes"),
    )
    whole = ScenarioSpec(num_reqs=4, block_size=block_size, seq_len_max=70, max_reqs=6, mode="poison", offset=3)
    windowed = dataclasses.replace(whole, window=25)
    # With gather_lens a looped program is test_tile_loops_are_bitwise_the_reference's case.
    for spec in (whole, windowed) if tiles == 1 else (whole,):
        sc = build_scenario(spec)
        launch = gather_fast_with(*sc.args(sc.fresh_out()), early, plan="grid")
        assert launch.tiles_per_program == tiles
        loads_early = fast.early_table(early, sc.gather_lens is not None, block_size, launch)
        assert loads_early == (sc.gather_lens is None and block_size % (block_t * tiles) == 0)
        assert_matches(sc, fn=gather_fast_with, settings=early, plan="grid")


def test_gpu_plan_heuristic(monkeypatch):
    """Grid sizes of the two benchmark shapes on a 132-SM H200 (SM count faked, nothing launched)."""
    monkeypatch.setattr(launch_plan, "sm_count", lambda index: 132)
    cuda = torch.device("cuda", 0)
    one = plan_launch(1, 2048, cuda, DEFAULT_SETTINGS, "grid")  # 512 programs of 4 tokens fill 2 waves
    assert (one.grid, one.block_t, one.tiles_per_program, one.num_warps) == ((512, 1), 4, 1, 2)
    many = plan_launch(256, 2048, cuda, DEFAULT_SETTINGS, "grid")
    assert (many.grid, many.block_t, many.tiles_per_program, many.num_warps) == ((512, 256), 4, 1, 2)
    eight = with_settings(block_t=8, num_warps=4)  # 256 programs of 8 are too few for one request: 512 of 4
    assert plan_launch(1, 2048, cuda, eight, "grid").block_t == 4
    assert plan_launch(256, 2048, cuda, eight, "grid").block_t == 8
    # The grid-filling heuristic halves a larger tile for a single request, keeps it for many.
    wide = with_settings(block_t=32, num_warps=8, min_block_t=8)
    small = plan_launch(1, 2048, cuda, wide, "grid")
    assert (small.block_t, small.num_warps) == (8, 2)  # warps shrink with the tile
    assert plan_launch(256, 2048, cuda, wide, "grid").block_t == 32
    # Tiles per program give way first, then the tile.
    looped = with_settings(block_t=8, tiles_per_program=4, prefetch=True, tile=TileSettings(tile="lanes"))
    assert plan_launch(256, 2048, cuda, looped, "grid").tiles_per_program == 4
    few = plan_launch(2, 2048, cuda, looped, "grid")
    assert (few.tiles_per_program, few.block_t, few.grid) == (1, 8, (256, 2))
    interp = plan_launch(33, 600, torch.device("cpu"), DEFAULT_SETTINGS, "per-request")
    assert (interp.grid, interp.block_t, interp.tiles_per_program) == ((1, 33), 256, 3)


def test_no_stray_accesses_under_checked_interpreter():
    from repro.core.evidence.checked_interp import checked_interpreter

    scenario = build_scenario(
        ScenarioSpec(num_reqs=5, block_size=16, seq_len_max=60, mode="poison", max_reqs=8, window=25, offset=2, seed=1)
    )
    out = scenario.fresh_out()
    with checked_interpreter() as report:
        gather_fast(*scenario.args(out))
    assert report.out_of_view_lanes == 0 and report.out_of_bounds_lanes == 0
    assert compare_bitwise(out, run(dequantize_and_gather_reference, scenario), scenario) == (0, 0)


def test_unaligned_cache_view():
    """A cache view at an odd byte offset (no alignment assumptions beyond the layout)."""
    scenario = build_scenario(ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=50, max_reqs=4, padded=False))
    src = scenario.k_cache_storage
    storage = torch.zeros(src.numel() + 1, dtype=torch.uint8)
    storage[1:] = src
    k_cache = torch.as_strided(storage, scenario.k_cache.shape, scenario.k_cache.stride(), 1)
    ref = run(dequantize_and_gather_reference, scenario)
    out = scenario.fresh_out()
    gather_fast(
        out, k_cache, scenario.seq_lens, scenario.gather_lens, scenario.block_table, scenario.spec.block_size, 0
    )
    assert torch.equal(bits(out), bits(ref))


def test_block_offsets_beyond_2gib():
    """Blocks more than 2**31 bytes into the cache: the block offset must be computed in int64.

    The 2.2 GB cache is allocated but never touched except for the 3 blocks used, so only those
    pages become resident.
    """
    sc = build_scenario(
        ScenarioSpec(
            num_reqs=1, seq_lens=(40,), block_size=16, contiguous=True, max_reqs=1, padded=False, mode="poison"
        )
    )
    block_size, stride, first = 16, 1 << 24, 128  # block 128 starts at byte 2**31
    storage = torch.empty((first + 3) * stride, dtype=torch.uint8)
    k_cache = torch.as_strided(storage, (first + 3, block_size, 584), (stride, 584, 1))
    table = sc.block_table.clone()
    for j in range(table.shape[1]):
        k_cache[first + j] = sc.k_cache[int(sc.block_table[0, j])]
        table[0, j] = first + j
    ref = sc.fresh_out()
    dequantize_and_gather_reference(ref, k_cache, sc.seq_lens, None, table, block_size, 0)
    assert torch.equal(bits(ref), bits(run(dequantize_and_gather_reference, sc)))  # same data, moved
    for launch in ({}, {"plan": "grid", "settings": with_settings(block_t=16)}):
        out = sc.fresh_out()
        gather_fast_with(out, k_cache, sc.seq_lens, None, table, block_size, 0, **launch)
        assert torch.equal(bits(out), bits(ref))


def test_nothing_to_gather_leaves_output_untouched():
    scenario = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4))
    out = scenario.fresh_out()
    args = list(scenario.args(out))
    args[-1] = out.shape[1]  # offset at the end: no rows to write
    assert gather_fast_with(*args) is None
    assert bool((bits(out) == OUT_POISON_BITS).all())
    empty = torch.empty(0, 4, 512, dtype=torch.bfloat16)
    gather_fast(empty, scenario.k_cache, scenario.seq_lens[:0], None, scenario.block_table[:0], 64, 0)


def test_rejects_bad_arguments():
    scenario = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4))
    out = scenario.fresh_out()
    with pytest.raises(ValueError, match="out must be bf16"):
        gather_fast(out.float(), *scenario.args(out)[1:])
    with pytest.raises(ValueError, match="block_table must be int32"):
        gather_fast(out, scenario.k_cache, scenario.seq_lens, None, scenario.block_table.long(), 64, 0)
    with pytest.raises(ValueError, match="stride"):
        gather_fast(out, scenario.k_cache, scenario.seq_lens, None, scenario.block_table, 128, 0)
    with pytest.raises(ValueError, match="plan"):
        gather_fast_with(*scenario.args(out), plan="persistent")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_reqs=st.integers(1, 4),
    block_size=st.sampled_from([1, 2, 3, 16, 64]),
    seq_len_max=st.integers(1, 150),
    window=st.one_of(st.just(0), st.integers(1, 150)),
    offset=st.integers(0, 4),
    padded=st.booleans(),
    mode=st.sampled_from(["in-range", "poison"]),
    contiguous=st.booleans(),
    seed=st.integers(0, 2**16),
    launch=st.sampled_from(
        [
            {},
            {"plan": "grid", "settings": with_settings(block_t=16)},
            {"plan": "grid", "settings": with_settings(block_t=64)},
        ]
    ),
)
def test_property_random_scenarios(
    num_reqs, block_size, seq_len_max, window, offset, padded, mode, contiguous, seed, launch
):
    spec = ScenarioSpec(
        num_reqs=num_reqs,
        block_size=block_size,
        seq_len_max=seq_len_max,
        window=window,
        offset=offset,
        padded=padded,
        mode=mode,
        contiguous=contiguous,
        seed=seed,
        max_reqs=num_reqs if contiguous else 6,
    )
    assert_matches(build_scenario(spec), fn=gather_fast_with, **launch)

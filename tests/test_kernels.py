"""Writer and gather kernels (Triton interpreter) against the PyTorch references, bitwise."""

import pytest
import torch

from repro.core.evidence.cases import compare_bitwise, reference_output
from repro.core.evidence.scenarios import CACHE_FILL_BYTE, ScenarioSpec, build_scenario
from repro.core.evidence.vllm_cases import case_specs, writer_differences
from repro.core.geometry.layout import DSV4
from repro.core.kernels.reference import quantize_and_insert_reference
from repro.registry import implementation, load_implementation


@pytest.mark.parametrize("label,spec", case_specs("cpu"), ids=[c[0] for c in case_specs("cpu")])
def test_vllm_cases_writer_and_every_gather_variant(label, spec):
    differ, total = writer_differences(spec)
    assert differ == 0 and total > 0
    scenario = build_scenario(spec)
    assert scenario.block_table.is_contiguous()
    ref = reference_output(scenario)
    for variant in ("buggy", "fixed", "contiguous-copy"):
        out = scenario.fresh_out()
        load_implementation(implementation(variant).target)(*scenario.args(out))
        assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), variant


def _write_both(k, block_size=16, num_blocks=4):
    from repro.core.kernels.writer import quantize_and_insert_k_cache

    slots = torch.arange(k.shape[0], dtype=torch.int64)
    caches = []
    for write in (quantize_and_insert_k_cache, quantize_and_insert_reference):
        cache = torch.full((num_blocks, block_size * DSV4.token_bytes), CACHE_FILL_BYTE, dtype=torch.uint8)
        write(k, cache, slots, block_size)
        caches.append(cache)
    return caches


def test_writer_rounding_edges_are_exact():
    """amax exactly 448 * 2**e (the ceil boundary), fp8 ties, fp8 subnormals, signed zeros."""
    rows = []
    for e in (-9, -3, 0, 2):
        r = torch.randn(DSV4.head_dim) * 0.1
        r[::64] = 448.0 * 2.0**e  # each quant block's amax sits exactly on the boundary
        rows.append(r)
    tiny = torch.zeros(DSV4.head_dim)
    tiny[::64] = 448.0
    tiny[1:448:64] = 2.0**-9 * 1.5  # an e4m3 subnormal tie after scaling (scale 1)
    tiny[2:448:64] = -(2.0**-7)
    tiny[3:448:64] = -0.0
    tiny[4:448:64] = 1.0625  # halfway between two e4m3 values: ties to even
    rows.append(tiny)
    k = torch.stack(rows).to(torch.bfloat16)
    kernel, ref = _write_both(k)
    assert torch.equal(kernel, ref)


def test_writer_skips_slot_minus_one_and_keeps_padding():
    from repro.core.kernels.writer import quantize_and_insert_k_cache

    k = torch.randn(5, DSV4.head_dim).to(torch.bfloat16)
    slots = torch.tensor([3, -1, 0, -1, 17], dtype=torch.int64)
    for write in (quantize_and_insert_k_cache, quantize_and_insert_reference):
        storage = torch.full((2 * 16 * DSV4.token_bytes + 2 * 64,), CACHE_FILL_BYTE, dtype=torch.uint8)
        cache = torch.as_strided(storage, (2, 16 * DSV4.token_bytes), (16 * DSV4.token_bytes + 64, 1))
        write(k, cache, slots, 16)
        written = storage.clone()
        if write is quantize_and_insert_k_cache:
            kernel_bytes = written
        else:
            assert torch.equal(kernel_bytes, written)
    pad = kernel_bytes.view(2, -1)[:, 16 * DSV4.token_bytes :]
    assert bool((pad == CACHE_FILL_BYTE).all())


def test_scale_from_bits_equals_exp2():
    s = torch.arange(1, 255, dtype=torch.int32)
    from_bits = (s << 23).view(torch.float32)
    assert torch.equal(from_bits, torch.exp2(s.float() - 127))


@pytest.mark.parametrize("mode", ["in-range", "poison"])
def test_narrowed_view_buggy_differs_fixed_matches(mode):
    spec = ScenarioSpec(num_reqs=5, block_size=16, seq_len_max=64, mode=mode, max_reqs=8, window=20, offset=3)
    scenario = build_scenario(spec)
    ref = reference_output(scenario)
    from repro.core.evidence.cases import run_case

    fixed = run_case(spec, implementation("fixed").target, checked=True, scenario=scenario, reference=ref)
    copy = run_case(spec, implementation("contiguous-copy").target, checked=True, scenario=scenario, reference=ref)
    buggy = run_case(spec, implementation("buggy").target, checked=True, scenario=scenario, reference=ref)
    assert (fixed.mismatched_tokens, fixed.stray_writes, fixed.out_of_view_lanes, fixed.out_of_bounds_lanes) == (
        0,
        0,
        0,
        0,
    )
    assert (copy.mismatched_tokens, copy.stray_writes) == (0, 0)
    assert buggy.status == "ok" and buggy.mismatched_tokens > 0 and buggy.out_of_view_lanes > 0
    assert (buggy.out_of_bounds_lanes > 0) == (mode == "poison")


def test_gather_rejects_bad_arguments():
    from repro.core.kernels.gather import gather_fixed

    scenario = build_scenario(ScenarioSpec(num_reqs=2, block_size=16, seq_len_max=32))
    out = scenario.fresh_out()
    with pytest.raises(ValueError, match="block_table must be int32"):
        gather_fixed(out, scenario.k_cache, scenario.seq_lens, None, scenario.block_table.long(), 16, 0)
    with pytest.raises(ValueError, match="out must be bf16"):
        gather_fixed(out.float(), scenario.k_cache, scenario.seq_lens, None, scenario.block_table, 16, 0)
    with pytest.raises(ValueError, match="seq_lens must be int32"):
        gather_fixed(out, scenario.k_cache, scenario.seq_lens[:1], None, scenario.block_table, 16, 0)


def test_compare_bitwise_counts_stray_rows_and_nan_patterns():
    scenario = build_scenario(ScenarioSpec(num_reqs=2, block_size=16, seq_len_max=20))
    ref = reference_output(scenario)
    out = ref.clone()
    assert compare_bitwise(out, ref, scenario) == (0, 0)
    out[0, -1, 0] = 1.0  # a spare row nobody may write
    out[1, 0, 5] = float("nan")  # a gathered row changed
    assert compare_bitwise(out, ref, scenario) == (1, 1)

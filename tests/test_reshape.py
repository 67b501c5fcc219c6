"""Bug 1: the buggy and fixed reshape, against PyTorch's own bounds check and the PR's numbers."""

import math

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import seeds
from repro.core.geometry.specs import KVCacheSpec, dsv4_catalogue, group_kernel_block_size
from repro.core.reshape.plan import (
    as_strided_required_elems,
    check_aliasing,
    contiguous_strides,
    identify_groups,
    kernel_blocks_per_logical_block,
    parse_storage_error,
    plan_reshape,
    reshape_kv_cache,
)

SEED = seeds.load(43988)["reported"]
SPECS = {s.name: s for s in dsv4_catalogue(256)}
C128A = SPECS["C128A KV"]


def test_the_one_expression():
    assert kernel_blocks_per_logical_block(C128A, 2, "buggy") == 128
    assert kernel_blocks_per_logical_block(C128A, 2, "fixed") == 1
    with pytest.raises(ValueError, match="variant must be one of"):
        kernel_blocks_per_logical_block(C128A, 2, "other")


def test_plans_reproduce_the_reported_numbers():
    buggy = plan_reshape(C128A, SEED["available_bytes"], 256, "buggy")
    fixed = plan_reshape(C128A, SEED["available_bytes"], 256, "fixed")
    assert list(buggy.shape) == SEED["sizes"] and list(buggy.strides) == SEED["strides"]
    assert buggy.required_bytes == SEED["required_bytes"] and not buggy.fits
    assert fixed.required_bytes == SEED["fixed_required_bytes"] and fixed.fits
    assert fixed.unused_tail_bytes == C128A.page_size_bytes - C128A.real_page_size_bytes == 560


def test_torch_raises_the_reported_error_on_a_real_pool():
    pool = torch.empty(SEED["available_bytes"], dtype=torch.uint8)
    with pytest.raises(RuntimeError) as info:
        reshape_kv_cache(pool, C128A, 256, "buggy")
    err = parse_storage_error(str(info.value))
    assert (list(err.sizes), list(err.strides), err.required_bytes, err.available_bytes) == (
        SEED["sizes"],
        SEED["strides"],
        SEED["required_bytes"],
        SEED["available_bytes"],
    )
    view = reshape_kv_cache(pool, C128A, 256, "fixed")
    assert tuple(view.shape) == (30819, 2, 584) and view.stride() == (1728, 584, 1)


def test_the_pr_quote_parses_and_identifies_the_c128a_cache():
    err = parse_storage_error(seeds.load(43988)["reported_error"])
    kbs = {n: group_kernel_block_size(s) for n, s in SPECS.items()}
    assert identify_groups(err, list(SPECS.values()), kbs) == ["C128A KV"]
    with pytest.raises(ValueError, match="not a setStorage"):
        parse_storage_error("some other error")


def test_aliasing_check_passes_for_the_fixed_view_and_catches_a_wrong_one():
    spec = KVCacheSpec("t", "MLAAttentionSpec", 256, 584, compress_ratio=128, alignment=576)
    pool = torch.empty(10 * spec.page_size_bytes, dtype=torch.uint8)
    good = reshape_kv_cache(pool, spec, 256, "fixed")
    assert check_aliasing(pool, good, spec).ok
    # A view with the unpadded pitch walks into the padding: the check must see it.
    wrong = torch.as_strided(pool, (10, 2, 584), (1168, 584, 1))
    report = check_aliasing(pool, wrong, spec)
    assert not report.ok and report.payload_mismatches > 0


def test_unpadded_compressed_spec_fails_in_view_instead():
    spec = KVCacheSpec("u", "MLAAttentionSpec", 256, 576, compress_ratio=4)  # 64*576 needs no padding
    pool = torch.empty(3 * spec.page_size_bytes, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="is invalid for input of size"):
        reshape_kv_cache(pool, spec, 256, "buggy")
    assert reshape_kv_cache(pool, spec, 256, "fixed").shape == (3, 64, 576)


def test_pool_must_hold_whole_pages():
    with pytest.raises(ValueError, match="whole number"):
        plan_reshape(C128A, 1000, 256, "fixed")


def test_required_elems_formula():
    assert as_strided_required_elems((3, 2, 5), (20, 5, 1)) == 2 * 20 + 5 + 4 + 1
    assert as_strided_required_elems((0, 2), (2, 1)) == 0
    assert contiguous_strides((3, 4, 5)) == (20, 5, 1)


# ---- properties over random specs ---------------------------------------------------------

pow2 = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256])


@st.composite
def specs_and_pools(draw):
    block = draw(pow2)
    ratio = draw(st.sampled_from([r for r in (1, 2, 4, 8, 16, 32, 64, 128, 256) if block % r == 0]))
    dtype = draw(st.sampled_from(["uint8", "float16", "float32"]))
    item = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    row = item * draw(st.integers(1, 300))
    alignment = draw(st.sampled_from([None, 64, 128, 576, 1000]))
    spec = KVCacheSpec("p", "MLAAttentionSpec", block, row, dtype=dtype, compress_ratio=ratio, alignment=alignment)
    storage = spec.storage_block_size
    group_kbs = draw(st.sampled_from([k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256) if block % k == 0]))
    pages = draw(st.integers(1, 40))
    return spec, group_kbs, pages * spec.page_size_bytes, storage


@settings(max_examples=150, deadline=None)
@given(specs_and_pools())
def test_fixed_reshape_never_overruns_except_the_split_padded_case(case):
    spec, group_kbs, pool_bytes, _ = case
    plan = plan_reshape(spec, pool_bytes, group_kbs, "fixed")
    pool = torch.empty(pool_bytes, dtype=torch.uint8)
    split = plan.blocks_per_logical_block
    if plan.padded and split > 1:
        # vLLM issue #54877: the fixed code still strides one page per kernel block.
        assert not plan.fits
        with pytest.raises(RuntimeError, match="out of bounds"):
            reshape_kv_cache(pool, spec, group_kbs, "fixed")
        return
    assert plan.fits
    view = reshape_kv_cache(pool, spec, group_kbs, "fixed")
    # Covers exactly the pool's pages: one (or `split`) kernel blocks per page, all its rows.
    assert view.shape[0] == plan.num_blocks * split
    assert math.prod(view.shape) * spec.itemsize == plan.num_blocks * spec.real_page_size_bytes
    if plan.padded:
        assert check_aliasing(pool, view, spec).ok


@settings(max_examples=150, deadline=None)
@given(specs_and_pools())
def test_buggy_equals_fixed_iff_uncompressed(case):
    spec, group_kbs, pool_bytes, _ = case
    buggy = plan_reshape(spec, pool_bytes, group_kbs, "buggy")
    fixed = plan_reshape(spec, pool_bytes, group_kbs, "fixed")
    pool = torch.empty(pool_bytes, dtype=torch.uint8)
    if spec.compress_ratio == 1:
        assert (buggy.shape, buggy.strides) == (fixed.shape, fixed.strides)
    else:
        assert buggy.shape[0] == spec.compress_ratio * fixed.shape[0]
        assert not buggy.fits
        with pytest.raises(RuntimeError):
            reshape_kv_cache(pool, spec, group_kbs, "buggy")


def test_the_split_overruns_come_from_the_split_table_and_older_runs_read_their_checks():
    from repro.core.analysis.reshape import (
        split_overruns,
        split_overruns_recorded_before_the_table,
        split_ratio_checks,
    )
    from repro.core.geometry.specs import dsv4_catalogue
    from repro.core.reshape.evidence import split_ratio_rows

    swa = next(s for s in dsv4_catalogue(256) if s.name == "SWA KV")
    split = split_ratio_rows(swa, [swa.block_size // r for r in (1, 2, 4)], 1000)
    checks = pd.DataFrame(split_ratio_checks(split))
    assert list(checks["ok"]) == [True, True, True]
    overruns = split_overruns(split)
    assert [round(o) for o in overruns] == [2, 4] and overruns == tuple(round(o, 4) for o in split["overrun"][1:])
    assert split_overruns_recorded_before_the_table(checks) == overruns
    as_written = split.astype(str)  # a CSV read back: the numbers as text
    assert split_overruns(as_written) == overruns
    fits_again = split.assign(fits=True)  # a split that does not over-ask shows nothing
    assert split_overruns(fits_again) == ()

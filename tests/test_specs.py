"""The DeepSeek-V4 catalogue, computed from formulas, against the figures vLLM's sources give
(as vLLM 0.22.0 computes them). The expected numbers appear only here."""

import pytest

from repro.core.geometry.layout import DSV4, FLASHMLA_ALIGNMENT, INDEXER_TOKEN_BYTES, round_up
from repro.core.geometry.specs import (
    KVCacheSpec,
    MultipleOf,
    dsv4_catalogue,
    group_kernel_block_size,
    select_common_block_size,
)

EXPECTED = {  # name: (block, ratio, storage, row bytes, real page, padded page, kernel block)
    "SWA KV": (64, 1, 64, 584, 37376, 37440, 64),
    "C4A KV": (256, 4, 64, 584, 37376, 37440, 256),
    "C128A KV": (256, 128, 2, 584, 1168, 1728, 256),
    "C4 indexer K": (256, 4, 64, 132, 8448, 8640, 256),
    "C4 main compressor state": (4, 1, 4, 8192, 32768, 32832, 4),
    "C128 main compressor state": (8, 1, 8, 4096, 32768, 32832, 8),
    "C4 indexer compressor state": (4, 1, 4, 2048, 8192, 8640, 4),
}


def test_token_layout_sizes():
    assert (DSV4.fp8_bytes, DSV4.rope_bytes, DSV4.scale_bytes, DSV4.n_scales) == (448, 128, 8, 7)
    assert (DSV4.data_bytes, DSV4.token_bytes, FLASHMLA_ALIGNMENT, INDEXER_TOKEN_BYTES) == (576, 584, 576, 132)
    assert DSV4.block_stride(64) == 37376 and DSV4.block_stride(64, 576) == 37440
    assert DSV4.block_stride(2, 576) == 1728


@pytest.mark.parametrize("name", list(EXPECTED))
def test_catalogue_matches_vllm_figures(name):
    spec = {s.name: s for s in dsv4_catalogue(256)}[name]
    got = (
        spec.block_size,
        spec.compress_ratio,
        spec.storage_block_size,
        spec.row_bytes,
        spec.real_page_size_bytes,
        spec.page_size_bytes,
        group_kernel_block_size(spec),
    )
    assert got == EXPECTED[name]


def test_catalogue_has_the_seven_groups_and_three_are_compressed():
    specs = dsv4_catalogue(256)
    assert [s.name for s in specs] == list(EXPECTED)
    assert [s.name for s in specs if s.compressed] == ["C4A KV", "C128A KV", "C4 indexer K"]


def test_page_is_unpadded_when_alignment_divides_it():
    spec = KVCacheSpec("x", "MLAAttentionSpec", 64, 576, alignment=576)
    assert spec.page_size_padded is None and spec.page_size_bytes == 64 * 576
    assert round_up(1168, 576) == 1728


def test_select_common_block_size_cases():
    assert select_common_block_size(256, (256,)) == 256
    assert select_common_block_size(256, (MultipleOf(64),)) == 256
    assert select_common_block_size(256, (64, 32)) == 64  # case 2: largest exact size dividing it
    with pytest.raises(ValueError, match="no kernel block size"):
        select_common_block_size(256, (48,))


def test_bad_specs_are_rejected():
    with pytest.raises(ValueError, match="compress_ratio 3 must divide"):
        KVCacheSpec("x", "MLAAttentionSpec", 256, 584, compress_ratio=3)
    with pytest.raises(ValueError, match="whole number"):
        KVCacheSpec("x", "MLAAttentionSpec", 4, 10, dtype="float32")

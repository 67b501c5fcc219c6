"""KV-cache specs (vLLM's ``kv_cache_interface`` formulas) and the DeepSeek-V4 cache-group catalogue.

Only the fields and formulas that decide the byte layout are modelled: tokens per logical block,
the compress ratio that turns it into stored rows, the bytes of one stored row, and the page
alignment that makes vLLM pad a page (``page_size_padded``). Every figure of the catalogue is
computed from the model geometry in :mod:`repro.core.geometry.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from repro.core.geometry.layout import (
    DSV4,
    FLASHMLA_ALIGNMENT,
    FP32_BYTES,
    HEAD_DIM,
    INDEXER_HEAD_DIM,
    INDEXER_TOKEN_BYTES,
    round_up,
)

if TYPE_CHECKING:  # annotations only: the layout itself needs no torch
    import torch

#: Bytes per element of the dtypes a cache pool is viewed as, by torch's names (vLLM's DeepSeek-V4 specs use uint8
#: and float32).
ITEMSIZE = {"uint8": 1, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class MultipleOf:
    """A backend accepts any kernel block size that is a multiple of ``base``."""

    base: int

    def accepts(self, size: int) -> bool:
        return size % self.base == 0


@dataclass(frozen=True)
class KVCacheSpec:
    """One cache group's spec: what vLLM's ``MLAAttentionSpec``/``SlidingWindowMLASpec`` compute.

    ``row_bytes`` is the size of one stored row (a token's cache entry, or a state row);
    ``dtype`` is what the attention backend views the byte pool as, by torch's name (:data:`ITEMSIZE`): the layout
    needs only its size, so the run's pre-flight checks lay out a cache without importing torch.
    """

    name: str
    spec_class: str
    block_size: int
    row_bytes: int
    dtype: str = "uint8"
    compress_ratio: int = 1
    alignment: int | None = None
    #: kernel block sizes the group's attention backend declares (ints or ``MultipleOf``)
    backend_block_sizes: tuple = field(default=(), compare=False)
    #: tokens a sliding-window spec keeps (None for the full-attention specs); no effect on the layout
    sliding_window: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.dtype not in ITEMSIZE:
            raise ValueError(f"{self.name}: dtype {self.dtype!r} is not one of {', '.join(ITEMSIZE)}")
        if self.block_size <= 0 or self.compress_ratio <= 0:
            raise ValueError(f"{self.name}: block_size and compress_ratio must be positive")
        if self.block_size % self.compress_ratio:
            raise ValueError(
                f"{self.name}: compress_ratio {self.compress_ratio} must divide block_size {self.block_size}"
            )
        if self.row_bytes % self.itemsize:
            raise ValueError(f"{self.name}: row_bytes {self.row_bytes} is not a whole number of {self.dtype} elements")

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def torch_dtype(self) -> torch.dtype:
        """``dtype`` as torch's, to view a real pool as."""
        import torch  # lazy: the layout itself needs no torch

        return getattr(torch, self.dtype)

    @property
    def compressed(self) -> bool:
        return self.storage_block_size != self.block_size

    @property
    def storage_block_size(self) -> int:
        """Stored rows per logical block: ``block_size // compress_ratio``."""
        return self.block_size // self.compress_ratio

    @property
    def row_elems(self) -> int:
        return self.row_bytes // self.itemsize

    @property
    def real_page_size_bytes(self) -> int:
        return self.storage_block_size * self.row_bytes

    @property
    def page_size_padded(self) -> int | None:
        """vLLM's construction hook: pad to ``alignment`` when that changes the size."""
        if self.alignment is None:
            return None
        padded = round_up(self.real_page_size_bytes, self.alignment)
        return padded if padded != self.real_page_size_bytes else None

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.real_page_size_bytes

    def kv_cache_shape(self, num_blocks: int, kernel_block_size: int) -> tuple[int, int, int]:
        """The DeepSeek-V4 backends' ``get_kv_cache_shape``: 3-D, block-first, identity stride order."""
        return (num_blocks, kernel_block_size, self.row_elems)


def select_common_block_size(manager_block_size: int, accepted: tuple) -> int:
    """vLLM's ``select_common_block_size`` for one backend's declared sizes.

    Case 1: the manager block size itself is accepted. Case 2: the largest exact size that divides it.
    """

    def ok(size: int) -> bool:
        return any(a.accepts(size) if isinstance(a, MultipleOf) else a == size for a in accepted)

    if ok(manager_block_size):
        return manager_block_size
    for size in sorted((a for a in accepted if isinstance(a, int)), reverse=True):
        if manager_block_size % size == 0:
            return size
    raise ValueError(f"no kernel block size in {accepted} divides block size {manager_block_size}")


def group_kernel_block_size(spec: KVCacheSpec) -> int:
    """The group's entry of ``kernel_block_sizes`` (``prepare_kernel_block_sizes``)."""
    accepted = spec.backend_block_sizes or (MultipleOf(1),)
    return select_common_block_size(spec.block_size, accepted)


# --------------------------------------------------------------------------------------------
# The DeepSeek-V4 catalogue at --block-size 256, --kv-cache-dtype fp8 (fp8_ds_mla).

#: Compress ratios of the two compressed attention layer kinds.
C4_RATIO = 4
C128_RATIO = 128
#: Compressor state pages are sized to 32 KiB (source comment): block = 32 KiB // state row.
STATE_PAGE_BYTES = 32 * 1024
#: The sliding window of DeepSeek-V4's SWA layers (model config ``sliding_window``).
SWA_WINDOW = 128


def compressor_overlap(compress_ratio: int) -> int:
    """Windows a compressor state keeps per compressed row: 2 for ratio 4 (overlapping), else 1."""
    return 2 if compress_ratio == C4_RATIO else 1


def compressor_state_row_bytes(compress_ratio: int, head_dim: int) -> int:
    """kv state + score state, ``coff`` windows each: ``2 * coff * head_dim`` fp32 values."""
    return 2 * compressor_overlap(compress_ratio) * head_dim * FP32_BYTES


def dsv4_catalogue(block_size: int = 256) -> list[KVCacheSpec]:
    """The seven DeepSeek-V4 cache groups, as vLLM 0.22.0's ``kv_cache_interface.py`` and backends
    define them, every size derived."""
    token = DSV4.token_bytes
    align = FLASHMLA_ALIGNMENT
    c4_storage = block_size // C4_RATIO
    main_c4_state = compressor_state_row_bytes(C4_RATIO, HEAD_DIM)
    main_c128_state = compressor_state_row_bytes(C128_RATIO, HEAD_DIM)
    indexer_state = compressor_state_row_bytes(C4_RATIO, INDEXER_HEAD_DIM)
    c4_state_block = STATE_PAGE_BYTES // main_c4_state
    return [
        # SWA block size equals the C4A stored rows per block so both share one page size.
        KVCacheSpec(
            "SWA KV",
            "SlidingWindowMLASpec",
            c4_storage,
            token,
            alignment=align,
            backend_block_sizes=(MultipleOf(64),),
            sliding_window=SWA_WINDOW,
        ),
        KVCacheSpec(
            "C4A KV",
            "MLAAttentionSpec",
            block_size,
            token,
            compress_ratio=C4_RATIO,
            alignment=align,
            backend_block_sizes=(256,),
        ),
        KVCacheSpec(
            "C128A KV",
            "MLAAttentionSpec",
            block_size,
            token,
            compress_ratio=C128_RATIO,
            alignment=align,
            backend_block_sizes=(256,),
        ),
        KVCacheSpec(
            "C4 indexer K",
            "MLAAttentionSpec",
            block_size,
            INDEXER_TOKEN_BYTES,
            compress_ratio=C4_RATIO,
            alignment=align,
            backend_block_sizes=(256,),
        ),
        KVCacheSpec(
            "C4 main compressor state",
            "SlidingWindowMLASpec",
            c4_state_block,
            main_c4_state,
            dtype="float32",
            alignment=align,
            backend_block_sizes=(MultipleOf(1),),
            sliding_window=compressor_overlap(C4_RATIO) * C4_RATIO,
        ),
        KVCacheSpec(
            "C128 main compressor state",
            "SlidingWindowMLASpec",
            STATE_PAGE_BYTES // main_c128_state,
            main_c128_state,
            dtype="float32",
            alignment=align,
            backend_block_sizes=(MultipleOf(1),),
            sliding_window=compressor_overlap(C128_RATIO) * C128_RATIO,
        ),
        # The indexer's state shares the C4 main state's block size; its page pads to pack
        # with the indexer K pages.
        KVCacheSpec(
            "C4 indexer compressor state",
            "SlidingWindowMLASpec",
            c4_state_block,
            indexer_state,
            dtype="float32",
            alignment=align,
            backend_block_sizes=(MultipleOf(1),),
            sliding_window=compressor_overlap(C4_RATIO) * C4_RATIO,
        ),
    ]


def catalogue_table(specs: list[KVCacheSpec]) -> pd.DataFrame:
    """One row per cache group with the layout figures, as a DataFrame."""
    rows = []
    for s in specs:
        rows.append(
            {
                "cache group": s.name,
                "spec class": s.spec_class,
                "dtype": s.dtype,
                "block_size": s.block_size,
                "compress_ratio": s.compress_ratio,
                "storage_block_size": s.storage_block_size,
                "row_bytes": s.row_bytes,
                "real_page_bytes": s.real_page_size_bytes,
                "padded_page_bytes": s.page_size_padded,
                "kernel_block_size": group_kernel_block_size(s),
            }
        )
    return pd.DataFrame(rows)

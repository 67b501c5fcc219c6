"""Byte layouts of the K-cache records a DeepSeek gather reads, as vLLM's wheels define them.

This package's record is DeepSeek-V4's (read from ``vllm/models/deepseek_v41/common/ops/cache_utils.py``, the
kernels' own addressing): ``v4`` (584 B), 448 fp8 e4m3 NoPE values and 64 bf16 RoPE values (576 B of data), then
7 UE8M0 scales of 64 dims and a zero pad byte; a page holds every token's data, then every token's scales. A
package built on this one registers other records (:class:`Records`: DeepSeek V4.1's MXFP8 and NVFP4, whose scales
sit after each token's data from vLLM 0.33.0 on, ``interleaved``), and how a scenario fills pages with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repro.plugins import Point, registered


@dataclass(frozen=True)
class RecordLayout:
    """Where one token's data and scale bytes sit inside a page of ``block_size`` tokens."""

    kind: str
    data_bytes: int  # per-token data (values) bytes
    scale_bytes: int  # per-token scale bytes (the V4 record's include one pad byte)
    n_scales: int  # scales actually used
    quant_block: int  # dims per scale
    interleaved: bool = False

    @property
    def token_bytes(self) -> int:
        """``k_cache.shape[-1]``, which vLLM's wrapper reads to pick the kernel."""
        return self.data_bytes + self.scale_bytes

    def data_offset(self, block_size: int, p: int) -> int:
        return p * self.token_bytes if self.interleaved else p * self.data_bytes

    def scale_offset(self, block_size: int, p: int) -> int:
        if self.interleaved:
            return p * self.token_bytes + self.data_bytes
        return block_size * self.data_bytes + p * self.scale_bytes

    def page_bytes(self, block_size: int) -> int:
        return block_size * self.token_bytes


V4 = RecordLayout("v4", data_bytes=576, scale_bytes=8, n_scales=7, quant_block=64)


@dataclass(frozen=True)
class Records:
    """Records a package built on this one adds (entry point ``records`` of :mod:`repro.plugins`): their kinds, the
    layout of a kind by scale placement (``layout(kind, interleaved)``), and ``fill(layout, k_cache, slots,
    block_size, generator)``, which writes valid random records of a kind at a scenario's slots."""

    kinds: tuple[str, ...]
    layout: Callable[[str, bool], RecordLayout]
    fill: Callable[..., Any]


def _registered() -> tuple[Records, ...]:
    return registered(Point.RECORDS, Records)


def record_kinds() -> tuple[str, ...]:
    """``v4`` and the kinds installed packages register."""
    return (V4.kind, *(kind for r in _registered() for kind in r.kinds))


def _owner(kind: str) -> Records:
    found = next((r for r in _registered() if kind in r.kinds), None)
    if found is None:
        raise ValueError(f"record: {kind!r} is not one of {', '.join(record_kinds())}")
    return found


def layout_for(kind: str, interleaved: bool = False) -> RecordLayout:
    """The layout of ``kind``; ``interleaved`` applies to the registered records (the V4 record never is)."""
    return V4 if kind == V4.kind else _owner(kind).layout(kind, interleaved)


def filler(kind: str) -> Callable[..., Any]:
    """How a scenario fills pages with valid random records of a registered ``kind``."""
    return _owner(kind).fill

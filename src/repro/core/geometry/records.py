"""Byte layouts of the three K-cache records vLLM's DeepSeek gathers read, as the 0.30-0.33 wheels define them.

Read from ``vllm/models/deepseek_v41/common/ops/cache_utils.py`` (the kernels' own addressing):

* ``v4`` (584 B): 448 fp8 e4m3 NoPE values and 64 bf16 RoPE values (576 B of data), then 7 UE8M0
  scales of 64 dims and a zero pad byte. A page holds every token's data, then every token's scales.
* ``mxfp8`` (528 B, DeepSeek V4.1): all 512 dims as fp8 e4m3, then 16 UE8M0 scales of 32 dims.
* ``nvfp4`` (288 B, DeepSeek V4.1): 512 e2m1 values packed two per byte (even element in the low
  nibble, odd in the high), then 32 e4m3 scales of 16 dims.

Where the scales sit changed between releases: in 0.30.0-0.32.0 the V4.1 kernels read a page as the
whole data region followed by the whole scale region (``interleaved=False``); from 0.33.0 each
token's scales follow its own data (``interleaved=True``). The V4 record is never interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass

#: e2m1 magnitudes by 3-bit code (sign is bit 3): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
RECORD_KINDS = ("v4", "mxfp8", "nvfp4")


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

    def describe(self) -> str:
        where = "each token's scales after its own data" if self.interleaved else "page: all data, then all scales"
        return f"{self.kind} ({self.token_bytes} B: {self.data_bytes} data + {self.scale_bytes} scale; {where})"


V4 = RecordLayout("v4", data_bytes=576, scale_bytes=8, n_scales=7, quant_block=64)
MXFP8_PAGE_SPLIT = RecordLayout("mxfp8", data_bytes=512, scale_bytes=16, n_scales=16, quant_block=32)
MXFP8 = RecordLayout("mxfp8", data_bytes=512, scale_bytes=16, n_scales=16, quant_block=32, interleaved=True)
NVFP4_PAGE_SPLIT = RecordLayout("nvfp4", data_bytes=256, scale_bytes=32, n_scales=32, quant_block=16)
NVFP4 = RecordLayout("nvfp4", data_bytes=256, scale_bytes=32, n_scales=32, quant_block=16, interleaved=True)


def layout_for(kind: str, interleaved: bool = False) -> RecordLayout:
    """The layout of ``kind`` ("v4", "mxfp8", "nvfp4"); ``interleaved`` applies to the V4.1 records."""
    if kind == "v4":
        return V4
    if kind == "mxfp8":
        return MXFP8 if interleaved else MXFP8_PAGE_SPLIT
    if kind == "nvfp4":
        return NVFP4 if interleaved else NVFP4_PAGE_SPLIT
    raise ValueError(f"record: {kind!r} is not one of {', '.join(RECORD_KINDS)}")

"""The fp8_ds_mla byte layout of one DeepSeek-V4 K-cache block.

Every size here is derived from the model's head geometry, so that the 584-byte token, the
576-byte alignment and the padded block strides used elsewhere are computed, never typed in.

Within a block of ``B`` stored tokens:

* ``[p*576, p*576 + 448)``: token p, 448 fp8 e4m3 bytes (NoPE dims 0..447)
* ``[p*576 + 448, p*576 + 576)``: token p, 64 bf16 RoPE values, stored unquantised
* ``[B*576 + p*8, B*576 + p*8 + 8)``: token p, 7 UE8M0 scale exponents and one zero pad byte
* ``[B*584, block_stride)``: padding up to the page alignment
"""

from __future__ import annotations

from dataclasses import dataclass

# DeepSeek-V4 attention head geometry (model config), in elements.
HEAD_DIM = 512
ROPE_DIM = 64
NOPE_DIM = HEAD_DIM - ROPE_DIM  # 448
QUANT_BLOCK = 64  # elements sharing one UE8M0 scale
FP8_BYTES = 1
BF16_BYTES = 2

# Indexer head geometry (C4A layers): 128 fp8 values and one fp32 scale per token.
INDEXER_HEAD_DIM = 128
FP32_BYTES = 4

#: fp32 -> fp8 e4m3fn saturation bound, ``torch.finfo(torch.float8_e4m3fn).max``.
FP8_E4M3_MAX = 448.0
#: UE8M0 exponent bias: a scale byte s means ``2 ** (s - 127)``.
UE8M0_BIAS = 127


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def is_pow2(v: object) -> bool:
    """A power of two from 1 up, as an int (a bool is not a size)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and (v & (v - 1)) == 0


def round_up(x: int, multiple: int) -> int:
    """vLLM's ``round_up``: the smallest multiple of ``multiple`` not below ``x``."""
    return ceil_div(x, multiple) * multiple


@dataclass(frozen=True)
class TokenLayout:
    """Byte sizes of one stored token; the defaults are DeepSeek-V4's."""

    nope_dim: int = NOPE_DIM
    rope_dim: int = ROPE_DIM
    quant_block: int = QUANT_BLOCK

    @property
    def n_scales(self) -> int:
        """Real UE8M0 exponents per token: one per 64-wide NoPE block (7)."""
        return ceil_div(self.nope_dim, self.quant_block)

    @property
    def scale_bytes(self) -> int:
        """Scale bytes per token, padded to a power of two (7 + 1 pad = 8)."""
        n = self.n_scales
        return 1 << (n - 1).bit_length()

    @property
    def fp8_bytes(self) -> int:
        return self.nope_dim * FP8_BYTES  # 448

    @property
    def rope_bytes(self) -> int:
        return self.rope_dim * BF16_BYTES  # 128

    @property
    def data_bytes(self) -> int:
        """Contiguous per-token data (fp8 NoPE + bf16 RoPE): 576, also FlashMLA's page alignment."""
        return self.fp8_bytes + self.rope_bytes

    @property
    def token_bytes(self) -> int:
        """All bytes one token occupies in the cache: 584."""
        return self.data_bytes + self.scale_bytes

    @property
    def head_dim(self) -> int:
        return self.nope_dim + self.rope_dim  # 512

    # Offsets inside a block of ``block_size`` tokens.
    def data_offset(self, block_size: int, p: int) -> int:
        return p * self.data_bytes

    def scale_offset(self, block_size: int, p: int) -> int:
        return block_size * self.data_bytes + p * self.scale_bytes

    def block_bytes(self, block_size: int) -> int:
        """Bytes the tokens of one block occupy, without padding (``B * 584``)."""
        return block_size * self.token_bytes

    def block_stride(self, block_size: int, alignment: int | None = None) -> int:
        """Distance between blocks: unpadded ``B * 584`` or padded up to ``alignment``."""
        raw = self.block_bytes(block_size)
        return raw if alignment is None else round_up(raw, alignment)


#: The DeepSeek-V4 fp8_ds_mla token.
DSV4 = TokenLayout()
#: FlashMLA's page alignment: the per-token data size.
FLASHMLA_ALIGNMENT = DSV4.data_bytes
#: Bytes per stored indexer token: 128 fp8 values + one fp32 scale.
INDEXER_TOKEN_BYTES = INDEXER_HEAD_DIM * FP8_BYTES + FP32_BYTES
#: Bytes a gathered token moves: its 584-byte record read, its 512 bf16 values (1,024 bytes) written.
GATHER_READ_BYTES_PER_TOKEN = DSV4.token_bytes
GATHER_WRITE_BYTES_PER_TOKEN = DSV4.head_dim * BF16_BYTES


def gather_bytes(tokens: int) -> int:
    """Bytes read plus bytes written by a gather of ``tokens`` tokens."""
    return tokens * (GATHER_READ_BYTES_PER_TOKEN + GATHER_WRITE_BYTES_PER_TOKEN)


def block_layout_rows(block_size: int, alignment: int | None = None, layout: TokenLayout = DSV4) -> list[dict]:
    """Byte ranges of one cache block, for a table: token data, then scales, then padding."""
    B = block_size
    stride = layout.block_stride(B, alignment)
    rows = [
        {
            "bytes": f"[p*{layout.data_bytes}, p*{layout.data_bytes} + {layout.fp8_bytes})",
            "size per token": layout.fp8_bytes,
            "content": f"token p: {layout.nope_dim} fp8 e4m3 NoPE values",
        },
        {
            "bytes": f"[p*{layout.data_bytes} + {layout.fp8_bytes}, (p+1)*{layout.data_bytes})",
            "size per token": layout.rope_bytes,
            "content": f"token p: {layout.rope_dim} bf16 RoPE values, unquantised",
        },
        {
            "bytes": f"[{B * layout.data_bytes} + p*{layout.scale_bytes}, ... + {layout.scale_bytes})",
            "size per token": layout.scale_bytes,
            "content": f"token p: {layout.n_scales} UE8M0 exponents (one per {layout.quant_block} NoPE values) + "
            f"{layout.scale_bytes - layout.n_scales} zero pad",
        },
    ]
    if stride > layout.block_bytes(B):
        rows.append(
            {
                "bytes": f"[{layout.block_bytes(B)}, {stride})",
                "size per token": None,
                "content": f"padding to a multiple of {alignment} ({stride - layout.block_bytes(B)} bytes per block)",
            }
        )
    return rows

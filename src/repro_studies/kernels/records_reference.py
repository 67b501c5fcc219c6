"""PyTorch references for the V4.1 records (and the V4 one through the same interface): decode, write, gather.

The decoders follow the arithmetic of vLLM's gathers bit for bit: values times ``2**(s - 127)``
(UE8M0) or times an e4m3 scale, in fp32, rounded to bf16. For NVFP4 the sign is applied as
``0 - magnitude`` by default, which is what Triton's unary minus computes, so the e2m1 code for -0 decodes
to +0 as vLLM's kernels up to 0.33 return it; the format itself says -0, and a gather that places the sign
bit (vLLM 0.34's) returns -0. :func:`decoded_negative_zero` reads which a gather does from one token it
decodes, and the reference follows it (``negative_zero``).
The MXFP8 writer follows ``_quantize_and_insert_k_mxfp8_kernel`` of vLLM 0.30-0.33; its fp8 cast is
torch's round-to-nearest-even unless a ``cast`` is given (the Triton interpreter's cast differs).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from repro.core.geometry.layout import FP8_E4M3_MAX, HEAD_DIM, UE8M0_BIAS
from repro.core.geometry.records import RecordLayout, layout_for
from repro.core.kernels.reference import gather_positions, quantize_and_insert_reference

_CHUNK_TOKENS = 1 << 15
#: e2m1 magnitudes by 3-bit code (sign is bit 3): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def pages_as_bytes(k_cache: torch.Tensor, layout: RecordLayout, block_size: int) -> torch.Tensor:
    """``[num_blocks, block_size * token_bytes]`` byte view of a cache whose pages are ``stride(0)`` apart."""
    return torch.as_strided(
        k_cache, (k_cache.shape[0], layout.page_bytes(block_size)), (k_cache.stride(0), 1), k_cache.storage_offset()
    )


def read_tokens(
    pages: torch.Tensor, layout: RecordLayout, block_size: int, physical: torch.Tensor, slot: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(data bytes ``[N, data_bytes]``, scale bytes ``[N, scale_bytes]``) of tokens at (page, slot)."""
    dev = pages.device
    rows = physical.long()[:, None]
    if layout.interleaved:
        data_at = slot.long() * layout.token_bytes
        scale_at = data_at + layout.data_bytes
    else:
        data_at = slot.long() * layout.data_bytes
        scale_at = block_size * layout.data_bytes + slot.long() * layout.scale_bytes
    data = pages[rows, data_at[:, None] + torch.arange(layout.data_bytes, device=dev)]
    scales = pages[rows, scale_at[:, None] + torch.arange(layout.scale_bytes, device=dev)]
    return data, scales


def write_tokens(
    pages: torch.Tensor,
    layout: RecordLayout,
    block_size: int,
    slots: torch.Tensor,
    data: torch.Tensor,
    scales: torch.Tensor,
) -> None:
    """Store records at ``slots`` (``block * block_size + position``)."""
    dev = pages.device
    block, slot = slots.long() // block_size, slots.long() % block_size
    rows = block[:, None]
    if layout.interleaved:
        data_at = slot * layout.token_bytes
        scale_at = data_at + layout.data_bytes
    else:
        data_at = slot * layout.data_bytes
        scale_at = block_size * layout.data_bytes + slot * layout.scale_bytes
    pages[rows, data_at[:, None] + torch.arange(layout.data_bytes, device=dev)] = data
    pages[rows, scale_at[:, None] + torch.arange(layout.scale_bytes, device=dev)] = scales


def ue8m0(scale_bytes: torch.Tensor) -> torch.Tensor:
    return torch.exp2(scale_bytes.float() - UE8M0_BIAS)


def decode_v4(data: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    nope = data[:, :448].contiguous().view(torch.float8_e4m3fn).float() * ue8m0(scales[:, :7]).repeat_interleave(64, 1)
    rope = data[:, 448:576].contiguous().view(torch.bfloat16)
    return torch.cat([nope.to(torch.bfloat16), rope], dim=1)


def decode_mxfp8(data: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    vals = data.contiguous().view(torch.float8_e4m3fn).float()
    return (vals * ue8m0(scales).repeat_interleave(32, 1)).to(torch.bfloat16)


def nvfp4_codes(data: torch.Tensor) -> torch.Tensor:
    """``[N, 512]`` 4-bit codes: element 2k is byte k's low nibble, element 2k+1 its high nibble."""
    lo, hi = (data & 0xF).long(), (data >> 4).long()
    return torch.stack([lo, hi], dim=-1).reshape(data.shape[0], -1)


def decode_nvfp4(data: torch.Tensor, scales: torch.Tensor, signed_zero: bool = False) -> torch.Tensor:
    """e2m1 x e4m3 scale. ``signed_zero=False``: code 8 gives +0 as vLLM's kernel does (``0 - 0``)."""
    codes = nvfp4_codes(data)
    mag = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float32, device=data.device)[codes & 7]
    vals = torch.where(codes >= 8, -mag if signed_zero else 0.0 - mag, mag)
    scale = scales.contiguous().view(torch.float8_e4m3fn).float().repeat_interleave(16, 1)
    return (vals * scale).to(torch.bfloat16)


DECODERS: dict[str, Callable] = {"v4": decode_v4, "mxfp8": decode_mxfp8, "nvfp4": decode_nvfp4}


def gather_reference(
    layout: RecordLayout,
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    negative_zero: bool = False,
) -> None:
    """vLLM's gather semantics for any record, with stride-aware PyTorch indexing of the block table.
    ``negative_zero``: NVFP4's code 8 decodes to -0 (else +0, :func:`decode_nvfp4`)."""
    req_all, i_all, pos_all = gather_positions(seq_lens, gather_lens)
    pages = pages_as_bytes(k_cache, layout, block_size)
    decode = DECODERS[layout.kind]
    if layout.kind == "nvfp4" and negative_zero:
        decode = partial(decode_nvfp4, signed_zero=True)
    for lo in range(0, req_all.shape[0], _CHUNK_TOKENS):
        req, i, pos = (t[lo : lo + _CHUNK_TOKENS] for t in (req_all, i_all, pos_all))
        physical = block_table[req, pos // block_size]
        data, scales = read_tokens(pages, layout, block_size, physical, pos % block_size)
        out[req, offset + i] = decode(data, scales)


def fp8_rtne(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float8_e4m3fn).view(torch.uint8)


def encode_mxfp8(
    k: torch.Tensor, cast: Callable[[torch.Tensor], torch.Tensor] = fp8_rtne
) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 ``[T, 512]`` -> (fp8 bytes ``[T, 512]``, UE8M0 bytes ``[T, 16]``), as vLLM's MXFP8 insert kernel.

    Per 32-dim tile: ``e = ceil(log2(max(amax, 1e-4) * fp32(1/448)))``, value ``clamp(x * 2**-e, ±448)``
    cast to fp8 e4m3, scale byte ``clamp(e + 127, 0, 255)``.
    """
    x = k.float().reshape(k.shape[0], HEAD_DIM // 32, 32)
    amax = x.abs().amax(dim=-1).clamp(min=1e-4)
    inv = torch.tensor(1.0 / FP8_E4M3_MAX, dtype=torch.float32, device=k.device)
    exponent = torch.ceil(torch.log2(amax * inv))
    scaled = (x * torch.exp2(-exponent)[..., None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    data = cast(scaled.reshape(k.shape[0], HEAD_DIM))
    scales = (exponent + UE8M0_BIAS).clamp(0, 255).to(torch.uint8)
    return data, scales


def random_nvfp4(num_tokens: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Valid random NVFP4 records: any 4-bit codes, positive finite normal e4m3 scales (no NaN code)."""
    data = torch.randint(0, 256, (num_tokens, HEAD_DIM // 2), generator=gen, dtype=torch.int64).to(torch.uint8)
    # e4m3 codes 0x08..0x7E: exponent field 1..15, sign 0, excluding 0x7F (NaN).
    scales = torch.randint(0x08, 0x7F, (num_tokens, HEAD_DIM // 16), generator=gen, dtype=torch.int64).to(torch.uint8)
    return data, scales


def fill_records(
    layout: RecordLayout, k_cache: torch.Tensor, slots: torch.Tensor, block_size: int, gen: torch.Generator
) -> None:
    """Write valid random records of ``layout.kind`` at ``slots`` (drawn on the CPU from ``gen``)."""
    pages = pages_as_bytes(k_cache, layout, block_size)
    n = slots.shape[0]
    if layout.kind == "nvfp4":
        data, scales = random_nvfp4(n, gen)
    else:
        k = torch.randn(n, HEAD_DIM, generator=gen).to(torch.bfloat16)
        if layout.kind == "mxfp8":
            data, scales = encode_mxfp8(k)
        else:
            quantize_and_insert_reference(k.to(k_cache.device), k_cache, slots.to(k_cache.device), block_size)
            return
    dev = k_cache.device
    write_tokens(pages, layout, block_size, slots.to(dev), data.to(dev), scales.to(dev))


#: The bf16 bit patterns of -0 and +0.
NEGATIVE_ZERO_BITS, ZERO_BITS = -0x8000, 0


def decoded_negative_zero(fn: Callable[..., None], interleaved: bool, device: str = "cpu") -> bool | None:
    """How gather ``fn`` (vLLM's signature) decodes NVFP4's e2m1 code 8 (-0): True for -0, False for +0, None
    for anything else. Read from one token of a one-block cache, every byte holding one code in both nibbles
    (codes 0-15, scales 1.0), gathered through a one-entry table."""
    layout = layout_for("nvfp4", interleaved)
    block_size = 16
    k_cache = torch.zeros((1, block_size, layout.token_bytes), dtype=torch.uint8, device=device)
    codes = torch.arange(16, dtype=torch.uint8).repeat(layout.data_bytes // 16)
    data = (codes | (codes << 4)).to(device)[None, :]
    scales = torch.full((1, layout.scale_bytes), 0x38, dtype=torch.uint8, device=device)  # e4m3 1.0
    pages = pages_as_bytes(k_cache, layout, block_size)
    write_tokens(pages, layout, block_size, torch.zeros(1, dtype=torch.long, device=device), data, scales)
    out = torch.full((1, 1, HEAD_DIM), 1.0, dtype=torch.bfloat16, device=device)
    ones = torch.ones(1, dtype=torch.int32, device=device)
    fn(out, k_cache, ones, ones, torch.zeros((1, 1), dtype=torch.int32, device=device), block_size, 0)
    bits = out.view(torch.int16)[0, 0, 2 * 8].item()  # byte 8 holds code 8 in its low nibble: element 16
    return {NEGATIVE_ZERO_BITS: True, ZERO_BITS: False}.get(bits)

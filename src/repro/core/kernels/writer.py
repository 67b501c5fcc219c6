"""The quantise-and-insert writer: bf16 K rows into the fp8_ds_mla cache, vLLM's semantics.

Per 64-wide NoPE block: ``e = ceil(log2(max(amax, 1e-4) / 448))``, value ``clamp(x / 2**e)`` as
fp8 e4m3, scale byte ``e + 127``; scale byte 7 is 0; RoPE copied. Signature as vLLM's
``quantize_and_insert_k_cache(k, k_cache, slot_mapping, block_size)``.

Two steps are done with integer arithmetic on float bits instead of ``log2`` and an fp8 cast:
the interpreter's fp32 -> fp8 cast is not round-to-nearest-even, and a GPU ``log2`` or division
is not guaranteed exact at powers of two. Integer arithmetic gives the mathematically exact
result on both, which the PyTorch reference (IEEE division, exact ``log2`` of powers of two,
RTNE cast) also computes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from repro.core.geometry.layout import DSV4, FP8_E4M3_MAX, UE8M0_BIAS
from repro.core.kernels.launch import interpreter_writer_tokens, is_interpreted


@triton.jit
def _ceil_log2_over_fp8_max(amax):
    """``ceil(log2(amax / 448))`` exactly, for positive normal fp32 ``amax``.

    448 = 1.75 * 2**8, so the quotient's exponent is amax's minus 8, plus one if amax's
    significand exceeds 1.75 (mantissa field 0x600000).
    """
    bits = amax.to(tl.int32, bitcast=True)
    exponent = ((bits >> 23) & 0xFF) - 127
    mantissa = bits & 0x7FFFFF
    return exponent - 8 + (mantissa > 0x600000).to(tl.int32)


@triton.jit
def _fp32_to_e4m3fn_bits(v):
    """Round-to-nearest-even fp32 -> fp8 e4m3fn byte, for ``|v| <= 448`` (no NaN, no overflow)."""
    bits = v.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    mag = bits & 0x7FFFFFFF
    exp_field = mag >> 23
    # Normal e4m3 (|v| >= 2**-6): keep 3 mantissa bits, round the dropped 20 to nearest even.
    rounded = mag + 0x7FFFF + ((mag >> 20) & 1)
    normal = (rounded >> 20) - (120 << 3)
    # Subnormal e4m3 (|v| < 2**-6): integer m = rne(|v| * 2**9), from the 24-bit significand.
    significand = (mag & 0x7FFFFF) | 0x800000
    shift = tl.minimum(141 - exp_field, 25)
    shift = tl.maximum(shift, 1)
    q = significand >> shift
    rem = significand - (q << shift)
    half = 1 << (shift - 1)
    round_up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    sub = q + round_up.to(tl.int32)
    sub = tl.where(exp_field == 0, 0, sub)
    code = tl.where(exp_field >= 121, normal, sub)
    return (code | sign).to(tl.uint8)


@triton.jit
def _quantize_and_insert_k_kernel(
    k_ptr,
    k_stride0,
    k_cache_ptr,
    slot_mapping_ptr,
    num_tokens,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,
    TOKENS_PER_PROGRAM: tl.constexpr,
    FP8_DIM: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    N_QUANT_BLOCKS: tl.constexpr,
    TOKEN_DATA_SIZE: tl.constexpr,
    SCALE_DIM: tl.constexpr,
    SCALE_BIAS: tl.constexpr,
    FP8_MAX: tl.constexpr,
):
    t = tl.program_id(0) * TOKENS_PER_PROGRAM + tl.arange(0, TOKENS_PER_PROGRAM)
    in_range = t < num_tokens
    slot = tl.load(slot_mapping_ptr + t, mask=in_range, other=-1)
    valid = in_range & (slot != -1)
    valid2 = valid[:, None]
    block = slot // CACHE_BLOCK_SIZE
    pos = slot % CACHE_BLOCK_SIZE
    block_base = k_cache_ptr + block.to(tl.int64) * BLOCK_STRIDE
    data = block_base + pos * TOKEN_DATA_SIZE
    scales = block_base + CACHE_BLOCK_SIZE * TOKEN_DATA_SIZE + pos * SCALE_DIM
    k_row = k_ptr + t.to(tl.int64) * k_stride0
    cols = tl.arange(0, QUANT_BLOCK)
    for q in tl.static_range(N_QUANT_BLOCKS):
        x = tl.load(k_row[:, None] + q * QUANT_BLOCK + cols[None, :], mask=valid2, other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-4)
        e = _ceil_log2_over_fp8_max(amax)
        inv_scale = ((127 - e) << 23).to(tl.float32, bitcast=True)  # 2**-e, exact
        v = tl.minimum(tl.maximum(x * inv_scale[:, None], -FP8_MAX), FP8_MAX)
        tl.store(data[:, None] + q * QUANT_BLOCK + cols[None, :], _fp32_to_e4m3fn_bits(v), mask=valid2)
        s = tl.minimum(tl.maximum(e + SCALE_BIAS, 0), 255)
        tl.store(scales + q, s.to(tl.uint8), mask=valid)
    tl.store(scales + N_QUANT_BLOCKS, tl.zeros_like(slot).to(tl.uint8), mask=valid)
    rope = tl.load(k_row[:, None] + FP8_DIM + cols[None, :], mask=valid2, other=0.0)
    rope_dst = (data + FP8_DIM).to(tl.pointer_type(tl.bfloat16))
    tl.store(rope_dst[:, None] + cols[None, :], rope, mask=valid2)


def quantize_and_insert_k_cache(
    k: torch.Tensor, k_cache: torch.Tensor, slot_mapping: torch.Tensor, block_size: int
) -> None:
    """vLLM's writer signature; ``k_cache`` is a ``[num_blocks, block_bytes]`` (or 3-D) uint8 view."""
    lay = DSV4
    if k.dtype != torch.bfloat16 or k.dim() != 2 or k.shape[1] != lay.head_dim or k.stride(1) != 1:
        raise ValueError(f"k must be bf16 [T, {lay.head_dim}] with unit column stride, got {k.dtype} {tuple(k.shape)}")
    if k_cache.dtype != torch.uint8:
        raise ValueError(f"k_cache must be uint8, got {k_cache.dtype}")
    if slot_mapping.dtype != torch.int64 or slot_mapping.dim() != 1 or slot_mapping.shape[0] > k.shape[0]:
        raise ValueError(
            f"slot_mapping must be int64 [T'] with T' <= {k.shape[0]}, got {slot_mapping.dtype} "
            f"{tuple(slot_mapping.shape)}"
        )
    num_tokens = slot_mapping.shape[0]
    if num_tokens == 0:
        return
    per_program = interpreter_writer_tokens(num_tokens) if is_interpreted(_quantize_and_insert_k_kernel) else 1
    _quantize_and_insert_k_kernel[(triton.cdiv(num_tokens, per_program),)](
        k,
        k.stride(0),
        k_cache,
        slot_mapping,
        num_tokens,
        CACHE_BLOCK_SIZE=block_size,
        BLOCK_STRIDE=k_cache.stride(0),
        TOKENS_PER_PROGRAM=per_program,
        FP8_DIM=lay.fp8_bytes,
        QUANT_BLOCK=lay.quant_block,
        N_QUANT_BLOCKS=lay.n_scales,
        TOKEN_DATA_SIZE=lay.data_bytes,
        SCALE_DIM=lay.scale_bytes,
        SCALE_BIAS=UE8M0_BIAS,
        FP8_MAX=FP8_E4M3_MAX,
    )

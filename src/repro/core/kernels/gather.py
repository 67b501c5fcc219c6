"""The DeepSeek-V4 K-cache dequantise-and-gather kernel and its three exported variants.

Kernel (``_dequantize_and_gather_k_kernel``), with vLLM's semantics: for request ``b`` and each
``i < gather_len`` (``gather_lens[b]``, or the whole sequence), ``pos = seq_len - gather_len + i``;
the physical block is ``block_table[b, pos // B]``; the token's 448 fp8 bytes become
``bf16(fp8 * 2**(scale - 127))`` per 64-wide quant block and its 64 bf16 RoPE values are copied;
the row lands at ``out[b, offset + i]``. Block offsets are computed in int64.

The variants share vLLM's signature ``fn(out, k_cache, seq_lens, gather_lens, block_table,
block_size, offset)`` and differ only in the block table's row pitch:

* :func:`gather_buggy`: ``block_table.shape[-1]`` (vLLM through 0.34.0),
* :func:`gather_fixed`: ``block_table.stride(0)`` (vLLM PR #55109),
* :func:`gather_contiguous_copy`: the rejected alternative, ``.contiguous()`` before the buggy launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from repro.core.geometry.layout import DSV4, UE8M0_BIAS
from repro.core.kernels.launch import gather_launch, is_interpreted


@triton.jit(do_not_specialize=["block_table_row_pitch", "offset"])
def _dequantize_and_gather_k_kernel(
    out_ptr,
    out_stride0,
    out_stride1,
    k_cache_ptr,
    seq_lens_ptr,
    gather_lens_ptr,
    block_table_ptr,
    block_table_row_pitch,  # elements between block-table rows: the expression PR #55109 changed
    offset,
    HAS_GATHER_LENS: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,  # bytes between cache blocks (k_cache.stride(0))
    NUM_WORKERS: tl.constexpr,
    TOKENS_PER_ITER: tl.constexpr,
    LOOP_TO_GATHER_LEN: tl.constexpr,
    MAX_ITERS: tl.constexpr,  # interpreter only: host-side bound, cdiv(out.shape[1] - offset, TOKENS_PER_ITER)
    FP8_DIM: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    TOKEN_DATA_SIZE: tl.constexpr,
    SCALE_DIM: tl.constexpr,
    SCALE_BIAS: tl.constexpr,
):
    b = tl.program_id(0)
    worker = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + b)
    if HAS_GATHER_LENS:
        gather_len = tl.load(gather_lens_ptr + b)
    else:
        gather_len = seq_len
    start = seq_len - gather_len
    toks = tl.arange(0, TOKENS_PER_ITER)
    # vLLM's loop: worker w handles tokens w, w + 128, ... below the loaded gather_len. The interpreter cannot
    # bound a loop by a loaded scalar (repro.core.kernels.launch): there one program per request walks a host-side
    # bound instead, and the mask below stops it at gather_len.
    tl.static_assert(LOOP_TO_GATHER_LEN or NUM_WORKERS == 1)
    for i0 in range(
        worker * TOKENS_PER_ITER if LOOP_TO_GATHER_LEN else 0,
        gather_len if LOOP_TO_GATHER_LEN else MAX_ITERS * TOKENS_PER_ITER,
        NUM_WORKERS * TOKENS_PER_ITER,
    ):
        # One [tokens, 512] tile per step: columns below 448 are fp8 x 2**(scale - 127), the rest are
        # the stored bf16 RoPE values.
        i = i0 + toks
        cols = tl.arange(0, HEAD_DIM)
        is_nope = cols < FP8_DIM
        valid = i < gather_len
        pos = start + i
        logical = pos // CACHE_BLOCK_SIZE
        slot = pos % CACHE_BLOCK_SIZE
        physical = tl.load(block_table_ptr + b * block_table_row_pitch + logical, mask=valid, other=0)
        block_base = k_cache_ptr + physical.to(tl.int64) * BLOCK_STRIDE
        data = block_base + slot * TOKEN_DATA_SIZE
        scales = block_base + CACHE_BLOCK_SIZE * TOKEN_DATA_SIZE + slot * SCALE_DIM
        nope_mask = valid[:, None] & is_nope[None, :]
        rope_mask = valid[:, None] & (cols >= FP8_DIM)[None, :]
        s = tl.load(scales[:, None] + (cols // QUANT_BLOCK)[None, :], mask=nope_mask, other=SCALE_BIAS).to(tl.int32)
        # 2**(s - 127) built from its bits: exact on the GPU and in the interpreter alike.
        scale = (s << 23).to(tl.float32, bitcast=True)
        x = tl.load(data[:, None] + cols[None, :], mask=nope_mask, other=0)
        nope = (x.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale).to(tl.bfloat16)
        rope_ptr = (data + FP8_DIM).to(tl.pointer_type(tl.bfloat16))
        rope = tl.load(rope_ptr[:, None] + (cols - FP8_DIM)[None, :], mask=rope_mask, other=0.0)
        out_row = out_ptr + b.to(tl.int64) * out_stride0 + (offset + i).to(tl.int64) * out_stride1
        tl.store(out_row[:, None] + cols[None, :], tl.where(is_nope[None, :], nope, rope), mask=valid[:, None])


def check_gather_args(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    token_bytes: int = DSV4.token_bytes,
) -> None:
    """Reject inputs the kernel would silently misread, naming the argument and what is accepted
    (``token_bytes``: the record's bytes per token, the V4 record's by default)."""
    head = DSV4.head_dim
    if out.dtype != torch.bfloat16 or out.dim() != 3 or out.shape[-1] != head or out.stride(-1) != 1:
        raise ValueError(
            f"out must be bf16 [num_reqs, max_tokens, {head}] with unit last stride, "
            f"got {out.dtype} {tuple(out.shape)} strides {out.stride()}"
        )
    if k_cache.dtype != torch.uint8:
        raise ValueError(f"k_cache must be uint8, got {k_cache.dtype}")
    if k_cache.stride(0) < block_size * token_bytes:
        raise ValueError(
            f"k_cache.stride(0) = {k_cache.stride(0)} is smaller than block_size * "
            f"{token_bytes} = {block_size * token_bytes} bytes"
        )
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.stride(-1) != 1:
        raise ValueError(
            f"block_table must be int32 [num_reqs, max_blocks] with unit column stride, "
            f"got {block_table.dtype} {tuple(block_table.shape)} strides {block_table.stride()}"
        )
    num_reqs = block_table.shape[0]
    if seq_lens.dtype != torch.int32 or tuple(seq_lens.shape) != (num_reqs,):
        raise ValueError(f"seq_lens must be int32 [{num_reqs}], got {seq_lens.dtype} {tuple(seq_lens.shape)}")
    if gather_lens is not None and (gather_lens.dtype != torch.int32 or tuple(gather_lens.shape) != (num_reqs,)):
        raise ValueError(
            f"gather_lens must be None or int32 [{num_reqs}], got {gather_lens.dtype} {tuple(gather_lens.shape)}"
        )
    if out.shape[0] != num_reqs:
        raise ValueError(f"out has {out.shape[0]} requests but block_table has {num_reqs}")
    if block_size <= 0 or offset < 0 or offset > out.shape[1]:
        raise ValueError(f"block_size must be positive and 0 <= offset <= out.shape[1]; got {block_size}, {offset}")


def _launch(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    row_pitch: int,
) -> None:
    check_gather_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    num_reqs = block_table.shape[0]
    if num_reqs == 0:
        return
    launch = gather_launch(is_interpreted(_dequantize_and_gather_k_kernel), out.shape[1] - offset)
    _dequantize_and_gather_k_kernel[(num_reqs, launch.num_workers)](
        out,
        out.stride(0),
        out.stride(1),
        k_cache,
        seq_lens,
        gather_lens if gather_lens is not None else seq_lens,
        block_table,
        row_pitch,
        offset,
        HAS_GATHER_LENS=gather_lens is not None,
        CACHE_BLOCK_SIZE=block_size,
        BLOCK_STRIDE=k_cache.stride(0),
        NUM_WORKERS=launch.num_workers,
        TOKENS_PER_ITER=launch.tokens_per_iter,
        LOOP_TO_GATHER_LEN=launch.loop_to_gather_len,
        MAX_ITERS=launch.max_iters,
        FP8_DIM=DSV4.fp8_bytes,
        HEAD_DIM=DSV4.head_dim,
        QUANT_BLOCK=DSV4.quant_block,
        TOKEN_DATA_SIZE=DSV4.data_bytes,
        SCALE_DIM=DSV4.scale_bytes,
        SCALE_BIAS=UE8M0_BIAS,
    )


def gather_buggy(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """vLLM <= 0.34.0: rows advance by ``block_table.shape[-1]`` (assumes contiguous rows)."""
    _launch(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, row_pitch=block_table.shape[-1])


def gather_fixed(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """vLLM PR #55109: rows advance by ``block_table.stride(0)``, the physical row pitch."""
    _launch(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, row_pitch=block_table.stride(0))


def gather_contiguous_copy(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """The rejected alternative: materialise the table, then the unchanged kernel (a copy per call)."""
    gather_buggy(out, k_cache, seq_lens, gather_lens, block_table.contiguous(), block_size, offset)

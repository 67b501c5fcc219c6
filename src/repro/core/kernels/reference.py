"""PyTorch references for the K-cache writer and the gather: the definition of "correct".

Both index the block table with PyTorch's own (stride-aware) indexing, so they are right for any
view. They follow vLLM's test reference: fp8 bytes viewed as ``float8_e4m3fn``, scales as
``exp2(s - 127)``, product rounded to bf16 (round to nearest even), RoPE bytes viewed as bf16.
"""

from __future__ import annotations

import torch

from repro.core.geometry.layout import DSV4, FP8_E4M3_MAX, UE8M0_BIAS

#: Tokens processed per chunk, to bound the temporary memory of the vectorised gather.
_CHUNK_TOKENS = 1 << 16


def token_records(k_cache: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[num_blocks, block_size, 576]`` views of each token's data (448 fp8 bytes, then 128 RoPE bytes) and
    ``[num_blocks, block_size, 8]`` of its scale bytes, over a cache whose blocks are ``stride(0)`` apart: a token is
    read or written as two rows (indexing by block and slot), not byte by byte."""
    lay, num_blocks, pitch, first = DSV4, k_cache.shape[0], k_cache.stride(0), k_cache.storage_offset()
    data = torch.as_strided(k_cache, (num_blocks, block_size, lay.data_bytes), (pitch, lay.data_bytes, 1), first)
    scales = torch.as_strided(
        k_cache,
        (num_blocks, block_size, lay.scale_bytes),
        (pitch, lay.scale_bytes, 1),
        first + block_size * lay.data_bytes,
    )
    return data, scales


def quantize_and_insert_reference(
    k: torch.Tensor, k_cache: torch.Tensor, slot_mapping: torch.Tensor, block_size: int
) -> None:
    """Write bf16 ``k [T, 512]`` into the fp8_ds_mla cache at ``slot_mapping`` (slot -1 = skip).

    Per 64-wide NoPE block: ``e = ceil(log2(max(amax, 1e-4) / 448))``, stored value
    ``clamp(x / 2**e, -448, 448)`` as fp8 e4m3 (round to nearest even), scale byte ``e + 127``.
    """
    lay = DSV4
    num_tokens = slot_mapping.shape[0]
    keep = slot_mapping >= 0
    x = k[:num_tokens][keep].float()
    slots = slot_mapping[keep].long()
    if x.shape[0] == 0:
        return
    nope = x[:, : lay.nope_dim].reshape(-1, lay.n_scales, lay.quant_block)
    amax = nope.abs().amax(dim=-1).clamp(min=1e-4)
    exponent = torch.ceil(torch.log2(amax / FP8_E4M3_MAX))
    scaled = (nope / torch.exp2(exponent)[..., None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    fp8 = scaled.to(torch.float8_e4m3fn).view(torch.uint8).reshape(-1, lay.nope_dim)
    scale_bytes = torch.zeros(x.shape[0], lay.scale_bytes, dtype=torch.uint8, device=x.device)
    scale_bytes[:, : lay.n_scales] = (exponent + UE8M0_BIAS).clamp(0, 255).to(torch.uint8)
    rope = k[:num_tokens][keep][:, lay.nope_dim :].contiguous().view(torch.uint8)

    data, scales = token_records(k_cache, block_size)
    block, slot = slots // block_size, slots % block_size
    data[block, slot] = torch.cat([fp8, rope], dim=1)
    scales[block, slot] = scale_bytes


def gather_positions(
    seq_lens: torch.Tensor, gather_lens: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every gathered token: its request, its gather index i and its position in the sequence."""
    seq = seq_lens.long()
    glen = gather_lens.long() if gather_lens is not None else seq
    req = torch.repeat_interleave(torch.arange(seq.shape[0], device=seq.device), glen)
    first = torch.cumsum(glen, 0) - glen
    i = torch.arange(req.shape[0], device=seq.device) - first[req]
    pos = seq[req] - glen[req] + i
    return req, i, pos


def dequantize_and_gather_reference(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """The gather with vLLM's signature, computed with stride-aware PyTorch indexing."""
    lay = DSV4
    req_all, i_all, pos_all = gather_positions(seq_lens, gather_lens)
    data, scale_rows = token_records(k_cache, block_size)
    for lo in range(0, req_all.shape[0], _CHUNK_TOKENS):
        req, i, pos = (t[lo : lo + _CHUNK_TOKENS] for t in (req_all, i_all, pos_all))
        physical = block_table[req, pos // block_size].long()
        slot = pos % block_size
        token = data[physical, slot]
        fp8, rope = token[:, : lay.fp8_bytes], token[:, lay.fp8_bytes :]
        scale_bytes = scale_rows[physical, slot][:, : lay.n_scales]
        scales = torch.exp2(scale_bytes.float() - UE8M0_BIAS).repeat_interleave(lay.quant_block, dim=1)
        nope = (fp8.view(torch.float8_e4m3fn).float() * scales).to(torch.bfloat16)
        out[req, offset + i, : lay.nope_dim] = nope
        out[req, offset + i, lay.nope_dim :] = rope.contiguous().view(torch.bfloat16)

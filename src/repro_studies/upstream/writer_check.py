"""The release's own MXFP8 insert kernel against the PyTorch reference writer, byte for byte.

vLLM 0.30+ ships ``_quantize_and_insert_k_mxfp8_kernel`` (through ``quantize_and_insert_k_cache(...,
bytes_per_token=528)``). Both writers fill a copy of the same sentinel-filled pool from the same bf16
rows; every byte is compared, data and scale regions counted apart. On a GPU the reference casts to
fp8 with round-to-nearest-even. Triton's CPU interpreter does not round that way (toolchain fact), so
there the reference is also run with the interpreter's own fp32 -> fp8 cast (one tiny kernel doing
just that cast): equal bytes then show the layout, the scales and the placement are the release's.
"""

from __future__ import annotations

import contextlib
import inspect
from enum import StrEnum

import torch
import triton
import triton.language as tl

from repro.core.evidence.scenarios import CACHE_FILL_BYTE
from repro.core.geometry.records import layout_for
from repro_studies.kernels.records_reference import encode_mxfp8, fp8_rtne, pages_as_bytes, write_tokens
from repro_studies.upstream.interp_compat import loaded_scalar_loop_bounds
from repro_studies.upstream.loader import LoadedRelease
from repro_studies.upstream.wheelcache import CacheEntry

V41_MODULE = "vllm/models/deepseek_v41/common/ops/cache_utils.py"


class WriterReference(StrEnum):
    """The fp8 cast a row's reference writer used (its ``reference`` cell)."""

    RTNE = "round-to-nearest-even fp8 cast"
    INTERPRETER = "the interpreter's own fp8 cast"  # compares bytes exactly under the interpreter


@triton.jit
def _cast_to_fp8(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(y_ptr + i, x.to(tl.float8e4nv).to(tl.uint8, bitcast=True), mask=i < n)


def triton_fp8_cast(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> fp8 e4m3 bytes through Triton's own cast (the interpreter's, on the CPU)."""
    flat = x.contiguous().reshape(-1)
    y = torch.empty(flat.shape, dtype=torch.uint8, device=x.device)
    _cast_to_fp8[(triton.cdiv(flat.numel(), 4096),)](flat, y, flat.numel(), BLOCK=4096)
    return y.reshape(x.shape)


def mxfp8_writer_rows(
    entry: CacheEntry,
    interleaved: bool,
    device: str,
    interpreted: bool,
    num_tokens: int = 40,
    block_size: int = 16,
    seed: int = 0,
) -> list[dict]:
    """Rows comparing the release's MXFP8 writer with the reference (and, interpreted, its cast)."""
    base = {"release": entry.version, "check": "MXFP8 insert kernel equals the reference writer"}
    if not entry.has(V41_MODULE):
        return [dict(base, reference="-", status="not present", reason=f"vLLM {entry.version} has no V4.1 module")]
    release = LoadedRelease(entry)
    try:
        module = release.import_module(V41_MODULE)
        writer = module.quantize_and_insert_k_cache
        if "bytes_per_token" not in inspect.signature(writer).parameters:
            return [
                dict(
                    base,
                    reference="-",
                    status="could not load",
                    reason="quantize_and_insert_k_cache takes no bytes_per_token",
                )
            ]
    except Exception as exc:
        return [dict(base, reference="-", status="could not load", reason=f"{type(exc).__name__}: {exc}"[:300])]
    layout = layout_for("mxfp8", interleaved)
    gen = torch.Generator().manual_seed(seed)
    num_blocks = -(-num_tokens // block_size) + 1
    k = (
        torch.randn(num_tokens, 512, generator=gen) * torch.exp2(torch.randint(-8, 8, (num_tokens, 1), generator=gen))
    ).to(torch.bfloat16)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    stride = layout.page_bytes(block_size) + 64  # a page stride wider than the records

    def pool():
        storage = torch.full((num_blocks * stride,), CACHE_FILL_BYTE, dtype=torch.uint8, device=device)
        return storage, torch.as_strided(
            storage, (num_blocks, block_size, layout.token_bytes), (stride, layout.token_bytes, 1)
        )

    got_storage, got_cache = pool()
    try:
        with release.active(), contextlib.ExitStack() as scope:
            if interpreted:
                scope.enter_context(loaded_scalar_loop_bounds())
            writer(
                k.to(device),
                got_cache.view(num_blocks, -1),
                slots.to(device),
                block_size,
                bytes_per_token=layout.token_bytes,
            )
    except Exception as exc:
        return [dict(base, reference="-", status="error", reason=f"{type(exc).__name__}: {exc}"[:300])]
    casts = [(WriterReference.RTNE, fp8_rtne)]
    if interpreted:
        casts.append((WriterReference.INTERPRETER, triton_fp8_cast))
    rows = []
    for name, cast in casts:
        storage, cache = pool()
        data, scales = encode_mxfp8(k.to(device), cast=cast)
        write_tokens(pages_as_bytes(cache, layout, block_size), layout, block_size, slots.to(device), data, scales)
        if storage.is_cuda:
            torch.cuda.synchronize()
        diff = got_storage != storage
        region = torch.zeros_like(diff)
        view = pages_as_bytes(torch.as_strided(region, got_cache.shape, got_cache.stride()), layout, block_size)
        for p in range(block_size):
            at = layout.scale_offset(block_size, p)
            view[:, at : at + layout.scale_bytes] = True
        rows.append(
            dict(
                base,
                reference=str(name),
                status="ok",
                layout="interleaved" if interleaved else "page-split",
                bytes=int(storage.numel()),
                differing_bytes=int(diff.sum()),
                differing_scale_bytes=int((diff & region).sum()),
                differing_value_bytes=int((diff & ~region).sum()),
                reason="",
            )
        )
    return rows

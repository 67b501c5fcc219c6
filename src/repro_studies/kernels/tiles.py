"""The per-token work of the 584-byte fp8_ds_mla record, shared by ``gather_fast`` and the streaming ceiling.

:func:`dequant_tokens` takes, for a tile of ``BLOCK_T`` tokens, where each token's 576 data bytes and 8
scale bytes are and where its 512-value bf16 output row goes, loads everything, then stores
``bf16(fp8 * 2**(s - 127))`` per 64-wide quant block followed by the 64 RoPE values copied. The
gather computes those addresses through the block table, the streaming kernels from the token index;
the memory accesses of a token are the same code in both, so their difference is the indirection.

How the tile is laid out is a compile-time choice (:class:`TileSettings`), measured rather than assumed:

* ``tile``: ``"grouped"``: fp8 bytes as ``[T, 8, 64]`` (group 7 masked off), scales as one ``[T, 8]``
  vector load, RoPE as ``[T, 64]``; two stores (896 + 128 bytes per token).
  ``"lanes"``: fp8 bytes as ``[64, T, 8]`` (8-byte chunk, token, byte): every thread loads 8 consecutive
  fp8 bytes and stores the 8 bf16 values they become (16 bytes), so the load and the store share one
  register layout (no exchange through shared memory, which a 16-byte fp8 load feeding 16-byte bf16 stores
  needs); chunk-major, so that a warp's lanes walk consecutive chunks of one token (token-major, a warp's
  8-byte pieces land 64 bytes apart and its stores half-fill sectors: measured 2x slower on the H200);
  RoPE as ``[8, T, 8]`` bf16; two stores.
  ``"wide"``: the lanes tile with 16-byte chunks, fp8 bytes as ``[32, T, 16]``: every thread loads 16 fp8 bytes
  (one 16-byte load, half the load instructions and scale loads of ``"lanes"``) and stores the 16 bf16 values as
  two 16-byte halves, split out of its own registers (a reshape, a permute and ``tl.split`` that move no value
  between threads), so again no exchange through shared memory; RoPE as in ``"lanes"``. Measured 30-75 % slower
  on the H200: each of a warp's two stores fills half of every 32-byte sector it touches (run 15 of
  ``data/h200/tuning-gather-fast.md``).
  (A flat ``[T, 512]`` tile, vLLM's Triton layout, and grouped loads reshaped for one ``[T, 512]`` store
  were measured too and lost: ``data/h200/tuning-gather-fast.md``.)
* ``overread``: load the 8th fp8 group (the first 64 RoPE bytes of the same token, in bounds) instead of
  masking it, so every data load is a full unmasked vector; the values are discarded.
* ``load_cache`` / ``store_cache``: PTX cache operators (``""``, ``".cg"``, ``".cs"``...);
  ``load_evict`` / ``store_evict``: eviction policies (``""``, ``"evict_first"``, ``"evict_last"``).

Arithmetic: fp8 e4m3 -> fp32, times ``2**(s - 127)`` built from its bits (``s << 23`` as fp32: exact),
rounded once to bf16; RoPE bytes copied as int16. Exact on the GPU and in the interpreter.
"""

from __future__ import annotations

import triton
import triton.language as tl

#: fp8 bytes per thread and chunk of the ``"lanes"`` tile (the prefetching loops' tile); the ``"wide"`` tile's are
#: twice as many (``LANES_CHUNK * TILE``: TILE is 1 for lanes, 2 for wide).
LANES_CHUNK = tl.constexpr(8)


@triton.jit
def dequant_tokens(
    data,  # [T] uint8 pointers: each token's 576 data bytes (448 fp8, then 64 bf16 RoPE values)
    scales,  # [T] uint8 pointers: each token's 8 scale bytes
    row,  # [T] bf16 pointers: each token's 512-value output row
    valid,  # [T] which tokens exist
    BLOCK_T: tl.constexpr,
    TILE: tl.constexpr,
    OVERREAD: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
    LOAD_EVICT: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    STORE_EVICT: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    """Load every byte of the tile's tokens, then store their 512 bf16 values (see the module docstring)."""
    if TILE != 0:
        # lanes (TILE 1): [64 chunks, T, 8 bytes], 8 bytes per thread in, 16 out;
        # wide (TILE 2): [32 chunks, T, 16 bytes], 16 bytes per thread in, 2 x 16 out
        x, s, rope = load_lanes(
            data,
            scales,
            valid,
            OVERREAD,
            LOAD_CACHE,
            LOAD_EVICT,
            N_GROUPS,
            N_SCALES,
            QUANT_BLOCK,
            FP8_DIM,
            LANES_CHUNK * TILE,
        )
        store_lanes(
            row,
            x,
            s,
            rope,
            valid,
            STORE_CACHE,
            STORE_EVICT,
            N_GROUPS,
            N_SCALES,
            QUANT_BLOCK,
            FP8_DIM,
            LANES_CHUNK * TILE,
        )
    else:  # grouped [T, 8, 64] fp8 + [T, 8] scales
        rope16 = (data + FP8_DIM).to(tl.pointer_type(tl.int16))
        g = tl.arange(0, N_GROUPS)
        c = tl.arange(0, QUANT_BLOCK)
        cols3 = g[:, None] * QUANT_BLOCK + c[None, :]  # [8, 64]: NoPE column g*64 + c
        is_nope_group = (g < N_SCALES)[None, :, None]
        s = tl.load(scales[:, None] + g[None, :], mask=valid[:, None], other=0)
        if OVERREAD:
            x_mask = valid[:, None, None]
        else:
            x_mask = valid[:, None, None] & is_nope_group
        x = tl.load(
            data[:, None, None] + cols3[None, :, :],
            mask=x_mask,
            other=0,
            cache_modifier=LOAD_CACHE,
            eviction_policy=LOAD_EVICT,
        )
        scale = (s.to(tl.int32) << 23).to(tl.float32, bitcast=True)
        nope = (x.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, :, None]).to(tl.bfloat16)
        rope = tl.load(
            rope16[:, None] + c[None, :],
            mask=valid[:, None],
            other=0,
            cache_modifier=LOAD_CACHE,
            eviction_policy=LOAD_EVICT,
        )
        tl.store(
            row[:, None, None] + cols3[None, :, :],
            nope,
            mask=valid[:, None, None] & is_nope_group,
            cache_modifier=STORE_CACHE,
            eviction_policy=STORE_EVICT,
        )
        tl.store(
            row[:, None] + FP8_DIM + c[None, :],
            rope.to(tl.bfloat16, bitcast=True),
            mask=valid[:, None],
            cache_modifier=STORE_CACHE,
            eviction_policy=STORE_EVICT,
        )


@triton.jit
def load_lanes(
    data,
    scales,
    valid,
    OVERREAD: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
    LOAD_EVICT: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
    CHUNK: tl.constexpr,  # fp8 bytes per thread and chunk: 8 ("lanes") or 16 ("wide")
):
    """The ``"lanes"`` and ``"wide"`` tiles' loads, chunk-major so that a warp's lanes walk one token's bytes: fp8
    bytes ``[512 / CHUNK chunks, T, CHUNK]``, each chunk's scale byte ``[512 / CHUNK, T]``, RoPE ``[8 chunks, T, 8]``
    bf16 (as int16)."""
    k = tl.arange(0, N_GROUPS * QUANT_BLOCK // CHUNK)  # chunk of the 512 NoPE-or-padding columns
    e = tl.arange(0, CHUNK)
    r = tl.arange(0, QUANT_BLOCK // 8)  # 8-value chunk of the 64 RoPE values
    f = tl.arange(0, 8)
    valid3 = valid[None, :, None]
    if OVERREAD:
        x_mask = valid3
    else:
        x_mask = valid3 & (k < N_SCALES * QUANT_BLOCK // CHUNK)[:, None, None]
    s = tl.load(scales[None, :] + (k // (QUANT_BLOCK // CHUNK))[:, None], mask=valid[None, :], other=0)
    x = tl.load(
        data[None, :, None] + (k * CHUNK)[:, None, None] + e[None, None, :],
        mask=x_mask,
        other=0,
        cache_modifier=LOAD_CACHE,
        eviction_policy=LOAD_EVICT,
    )
    rope16 = (data + FP8_DIM).to(tl.pointer_type(tl.int16))
    rope = tl.load(
        rope16[None, :, None] + (r * 8)[:, None, None] + f[None, None, :],
        mask=valid3,
        other=0,
        cache_modifier=LOAD_CACHE,
        eviction_policy=LOAD_EVICT,
    )
    return x, s, rope


@triton.jit
def store_lanes(
    row,
    x,
    s,
    rope,
    valid,
    STORE_CACHE: tl.constexpr,
    STORE_EVICT: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
    CHUNK: tl.constexpr,
):
    """The ``"lanes"`` and ``"wide"`` tiles' arithmetic and their stores (NoPE chunks, RoPE chunks); a 16-value
    chunk is stored as two 8-value halves, 16 bytes each, taken apart in each thread's own registers."""
    k = tl.arange(0, N_GROUPS * QUANT_BLOCK // CHUNK)
    e = tl.arange(0, 8)
    r = tl.arange(0, QUANT_BLOCK // 8)
    valid3 = valid[None, :, None]
    is_nope = (k < N_SCALES * QUANT_BLOCK // CHUNK)[:, None, None]
    cols = (k * CHUNK)[:, None, None] + e[None, None, :]  # the first 8 columns of each chunk
    scale = (s.to(tl.int32) << 23).to(tl.float32, bitcast=True)
    nope = (x.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, :, None]).to(tl.bfloat16)
    rope = rope.to(tl.bfloat16, bitcast=True)
    if CHUNK == LANES_CHUNK:
        tl.store(
            row[None, :, None] + cols,
            nope,
            mask=valid3 & is_nope,
            cache_modifier=STORE_CACHE,
            eviction_policy=STORE_EVICT,
        )
    else:
        # [chunks, T, 16] -> [chunks, T, 2, 8] -> [chunks, T, 8, 2] -> two [chunks, T, 8] halves
        first, second = tl.split(tl.permute(tl.reshape(nope, [k.shape[0], valid.shape[0], 2, 8]), [0, 1, 3, 2]))
        at = row[None, :, None] + cols
        tl.store(at, first, mask=valid3 & is_nope, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)
        tl.store(at + 8, second, mask=valid3 & is_nope, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)
    tl.store(
        row[None, :, None] + FP8_DIM + (r * 8)[:, None, None] + e[None, None, :],
        rope,
        mask=valid3,
        cache_modifier=STORE_CACHE,
        eviction_policy=STORE_EVICT,
    )

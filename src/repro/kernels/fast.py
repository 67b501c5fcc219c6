"""A bandwidth-oriented DeepSeek-V4 K-cache dequantise-and-gather: :func:`gather_fast`.

Same signature and results as :func:`repro.kernels.gather.gather_fixed` (stride-aware block
table, optional ``gather_lens``, ``offset``, any block stride ``>= B * 584``, int64 block
offsets); only the launch shape and the memory-access pattern differ.

Design (GPU)
------------
* **Grid** ``(cdiv(out.shape[1] - offset, BLOCK_T), num_reqs)``: axis 0 = a tile of ``BLOCK_T``
  consecutive gather indices, axis 1 = the request. The tile count comes from the host-known upper
  bound ``out.shape[1] - offset``, so nothing is read back to the host; a program whose tile starts
  past its request's ``gather_len`` skips its body (one branch), and a partial tile is masked.
  Tiles run along axis 0 so that neighbouring programs read neighbouring cache slots and write
  neighbouring output rows of one request. Every program does at most ``BLOCK_T`` tokens of work
  and the hardware scheduler balances ragged requests, which a persistent grid would have to do by
  hand; the extra programs of short requests cost one scheduled block each. ``BLOCK_T`` is halved
  (down to ``min_block_t``) while the grid has fewer than ``waves * SM count`` programs, so a
  single 2,048-token request still spreads over the whole GPU (latency), while 256 x 2,048 runs
  16,384 programs of 32 tokens (bandwidth).
* **Memory transactions per token**, all loads issued before any store (the compiler may not move
  a load of ``k_cache`` above a store to ``out``: they could alias):

  - data: one ``[BLOCK_T, 8, 64]`` uint8 tile = the 448 fp8 bytes as 7 groups of 64 (group 7
    masked off), 16-byte vectors, plus one ``[BLOCK_T, 64]`` bf16 tile = the 128 RoPE bytes. Both
    together are exactly the token's contiguous 576 bytes (18 full 32-byte sectors); tokens of a
    tile are 576 bytes apart inside a cache block, so a tile reads one contiguous run per block.
  - scales: one ``[BLOCK_T, 8]`` uint8 load = the token's 8-byte scale slot (7 exponents + pad,
    read whole so that it is one aligned 8-byte vector; the pad byte is never used).
  - block table: one int32 per token, a broadcast load (a tile spans 1-2 cache blocks).
  - out: the 448 NoPE values as a ``[BLOCK_T, 8, 64]`` bf16 store (896 contiguous bytes) and the
    RoPE values as a ``[BLOCK_T, 64]`` bf16 store (128 bytes), i.e. the token's 1,024-byte output
    row in full sectors, 16-byte vectors.

  The scale is applied per (token, group) as ``[BLOCK_T, 8, 1]``, not per element, so there are
  no per-element scale loads (the vLLM kernel loads the scale byte once per NoPE element).
* Arithmetic: fp8 e4m3 -> fp32 (native ``cvt`` on sm_90), times ``2**(s - 127)`` built from its
  bits (``s << 23`` reinterpreted as fp32: exact), rounded once to bf16. RoPE bytes are copied.
* Block offsets are ``int64(physical) * BLOCK_STRIDE``; ``BLOCK_STRIDE = k_cache.stride(0)`` is a
  constexpr (as in vLLM), which also tells the compiler the alignment of every cache address.

Tunables (:data:`DEFAULT_CONFIG`): ``block_t`` (8), ``min_block_t`` (8), ``waves`` (2),
``num_warps`` (4; ``None`` means ``block_t // 4`` clamped to [1, 8]). The defaults are the best of a
sweep on the H200 (``data/h200/tuning-gather-fast.md``).
Override them for a benchmark with :func:`gather_fast_with` (keyword-only) or temporarily for
:func:`gather_fast` itself with the :func:`configured` context manager; no autotuning.

Interpreter (``TRITON_INTERPRET=1``): one program per request handles every tile of its
request in a constexpr (unrolled) loop with ``BLOCK_T`` up to 256, so few program instances run;
each token is computed by the same code, so the results are the same. :func:`gather_fast_with`
can force the GPU launch shape in the interpreter (``plan="grid"``) to test it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from repro.geometry.layout import DSV4
from repro.kernels.gather import check_gather_args
from repro.kernels.launch import is_interpreted

#: Launch defaults for the GPU path (see the module docstring).
DEFAULT_CONFIG = {
    # Measured on the H200 at 256 x 2,048 tokens (data/h200/tuning-gather-fast.md): 8 tokens and
    # 4 warps per program reached 88.7 % of the copy ceiling, 32 tokens / default warps 84.6 %.
    "block_t": 8,  # tokens per program (a power of two)
    "min_block_t": 8,  # smallest tile the grid-filling heuristic may shrink to
    "waves": 2,  # shrink the tile while the grid has fewer than waves * SMs programs
    "num_warps": 4,  # None: block_t // 4 clamped to [1, 8] (64 output values per thread)
}
#: The configuration :func:`gather_fast` uses; change it with :func:`configured`.
CONFIG = dict(DEFAULT_CONFIG)

#: Largest token tile in the interpreter (one program per request loops over its tiles).
INTERPRETER_MAX_BLOCK_T = 256
#: CUDA's limit on grid axis 1 (the request axis here).
MAX_GRID_Y = 65535


@triton.jit(do_not_specialize=["block_table_row_pitch", "offset"])
def _gather_fast_kernel(
    out_ptr,
    out_stride0,
    out_stride1,
    k_cache_ptr,
    seq_lens_ptr,
    gather_lens_ptr,
    block_table_ptr,
    block_table_row_pitch,  # block_table.stride(0): the physical row pitch (PR #55109)
    offset,
    HAS_GATHER_LENS: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,  # bytes between cache blocks (k_cache.stride(0))
    BLOCK_T: tl.constexpr,  # tokens per tile
    TILES_PER_PROGRAM: tl.constexpr,  # 1 on the GPU; all tiles of a request in the interpreter
    N_GROUPS: tl.constexpr,  # 8 = 7 NoPE quant blocks rounded up to a power of two
    N_SCALES: tl.constexpr,  # 7
    QUANT_BLOCK: tl.constexpr,  # 64
    FP8_DIM: tl.constexpr,  # 448
    ROPE_DIM: tl.constexpr,  # 64
    TOKEN_DATA_SIZE: tl.constexpr,  # 576
    SCALE_DIM: tl.constexpr,  # 8
):
    tile_id = tl.program_id(0)
    b = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + b)
    if HAS_GATHER_LENS:
        gather_len = tl.load(gather_lens_ptr + b)
    else:
        gather_len = seq_len
    start = seq_len - gather_len
    table_row = block_table_ptr + b.to(tl.int64) * block_table_row_pitch
    out_req = out_ptr + b.to(tl.int64) * out_stride0

    t = tl.arange(0, BLOCK_T)
    g = tl.arange(0, N_GROUPS)
    c = tl.arange(0, QUANT_BLOCK)
    cols = g[:, None] * QUANT_BLOCK + c[None, :]  # [8, 64]: NoPE column g*64 + c
    is_nope_group = (g < N_SCALES)[None, :, None]  # group 7 does not exist in the fp8 part

    # Unrolled at compile time: no device loop (and nothing for the pipeliner) when it is 1.
    for k in tl.static_range(TILES_PER_PROGRAM):
        i0 = (tile_id * TILES_PER_PROGRAM + k) * BLOCK_T
        if i0 < gather_len:
            i = i0 + t
            valid = i < gather_len
            pos = start + i
            physical = tl.load(table_row + pos // CACHE_BLOCK_SIZE, mask=valid, other=0)
            slot = pos % CACHE_BLOCK_SIZE
            block = k_cache_ptr + physical.to(tl.int64) * BLOCK_STRIDE
            data = block + slot * TOKEN_DATA_SIZE
            scale_slot = block + CACHE_BLOCK_SIZE * TOKEN_DATA_SIZE + slot * SCALE_DIM

            # Loads first: 8 scale bytes, 448 fp8 bytes, 128 RoPE bytes per token.
            s = tl.load(scale_slot[:, None] + g[None, :], mask=valid[:, None], other=0)
            nope_mask = valid[:, None, None] & is_nope_group
            x = tl.load(data[:, None, None] + cols[None, :, :], mask=nope_mask, other=0, eviction_policy="evict_first")
            rope_ptr = (data + FP8_DIM).to(tl.pointer_type(tl.bfloat16))
            rope = tl.load(
                rope_ptr[:, None] + c[None, :], mask=valid[:, None], other=0.0, eviction_policy="evict_first"
            )

            # 2**(s - 127) from its bits, per (token, quant block); exact on GPU and interpreter.
            scale = (s.to(tl.int32) << 23).to(tl.float32, bitcast=True)
            nope = (x.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, :, None]).to(tl.bfloat16)

            row = out_req + (offset + i).to(tl.int64) * out_stride1
            tl.store(row[:, None, None] + cols[None, :, :], nope, mask=nope_mask)
            tl.store(row[:, None] + FP8_DIM + c[None, :], rope, mask=valid[:, None])


@dataclass(frozen=True)
class FastPlan:
    """One launch: grid, tile, tiles per program and warps."""

    grid: tuple
    block_t: int
    tiles_per_program: int
    num_warps: int


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _is_pow2(v) -> bool:
    return isinstance(v, int) and v >= 1 and (v & (v - 1)) == 0


def _check_config(cfg: dict) -> None:
    unknown = set(cfg) - set(DEFAULT_CONFIG)
    if unknown:
        raise ValueError(f"unknown gather_fast settings {sorted(unknown)}; accepted: {sorted(DEFAULT_CONFIG)}")
    for key in ("block_t", "min_block_t"):
        if not _is_pow2(cfg[key]):
            raise ValueError(f"{key} must be a power of two >= 1, got {cfg[key]!r}")
    if cfg["num_warps"] is not None and not (_is_pow2(cfg["num_warps"]) and cfg["num_warps"] <= 32):
        raise ValueError(f"num_warps must be None or a power of two <= 32, got {cfg['num_warps']!r}")
    if not isinstance(cfg["waves"], (int, float)) or cfg["waves"] < 0:
        raise ValueError(f"waves must be a non-negative number, got {cfg['waves']!r}")


def plan_launch(num_reqs: int, max_gather: int, device: torch.device, cfg: dict, plan: str) -> FastPlan:
    """The launch for ``num_reqs`` requests of at most ``max_gather`` tokens.

    ``plan``: ``"grid"`` (the GPU shape: one tile per program) or ``"per-request"`` (the
    interpreter shape: one program per request looping over up to 256-token tiles).
    """
    if plan == "per-request":
        block_t = min(INTERPRETER_MAX_BLOCK_T, triton.next_power_of_2(max_gather))
        tiles = triton.cdiv(max_gather, block_t)
        return FastPlan(grid=(1, num_reqs), block_t=block_t, tiles_per_program=tiles, num_warps=4)
    if plan != "grid":
        raise ValueError(f"plan must be 'grid' or 'per-request', got {plan!r}")
    block_t = cfg["block_t"]
    if device.type == "cuda":
        target = cfg["waves"] * _sm_count(device.index if device.index is not None else torch.cuda.current_device())
        while block_t > cfg["min_block_t"] and num_reqs * triton.cdiv(max_gather, block_t) < target:
            block_t //= 2
    num_warps = cfg["num_warps"] or max(1, min(8, block_t // 4))
    return FastPlan(
        grid=(triton.cdiv(max_gather, block_t), num_reqs), block_t=block_t, tiles_per_program=1, num_warps=num_warps
    )


def gather_fast_with(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    *,
    plan: str | None = None,
    **settings,
) -> FastPlan | None:
    """:func:`gather_fast` with explicit settings (keys of :data:`DEFAULT_CONFIG`), for benchmarks.

    ``plan=None`` picks ``"per-request"`` in the interpreter and ``"grid"`` on a GPU. Returns the
    :class:`FastPlan` launched (``None`` when there was nothing to do).
    """
    cfg = {**CONFIG, **settings}
    _check_config(cfg)
    check_gather_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    num_reqs = block_table.shape[0]
    max_gather = out.shape[1] - offset
    if num_reqs == 0 or max_gather == 0:
        return None
    if num_reqs > MAX_GRID_Y:
        raise ValueError(
            f"gather_fast launches one grid row per request; at most {MAX_GRID_Y} requests, got {num_reqs}"
        )
    if plan is None:
        plan = "per-request" if is_interpreted(_gather_fast_kernel) else "grid"
    launch = plan_launch(num_reqs, max_gather, out.device, cfg, plan)
    _gather_fast_kernel[launch.grid](
        out,
        out.stride(0),
        out.stride(1),
        k_cache,
        seq_lens,
        gather_lens if gather_lens is not None else seq_lens,
        block_table,
        block_table.stride(0),
        offset,
        HAS_GATHER_LENS=gather_lens is not None,
        CACHE_BLOCK_SIZE=block_size,
        BLOCK_STRIDE=k_cache.stride(0),
        BLOCK_T=launch.block_t,
        TILES_PER_PROGRAM=launch.tiles_per_program,
        N_GROUPS=triton.next_power_of_2(DSV4.n_scales),
        N_SCALES=DSV4.n_scales,
        QUANT_BLOCK=DSV4.quant_block,
        FP8_DIM=DSV4.fp8_bytes,
        ROPE_DIM=DSV4.rope_dim,
        TOKEN_DATA_SIZE=DSV4.data_bytes,
        SCALE_DIM=DSV4.scale_bytes,
        num_warps=launch.num_warps,
    )
    return launch


def gather_fast(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """Dequantise and gather the K cache (vLLM's signature), tiled for memory bandwidth.

    Semantics of :func:`repro.kernels.gather.gather_fixed`; the launch uses :data:`CONFIG`.
    """
    gather_fast_with(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)


@contextlib.contextmanager
def configured(**settings) -> Iterator[dict]:
    """Temporarily override :data:`CONFIG` (e.g. ``with configured(block_t=64, num_warps=8):``)."""
    new = {**CONFIG, **settings}
    _check_config(new)
    saved = dict(CONFIG)
    CONFIG.update(new)
    try:
        yield dict(CONFIG)
    finally:
        CONFIG.clear()
        CONFIG.update(saved)

"""The gather's ceiling: the same bytes and the same dtype work, with no block table.

A copy moves bytes 50/50 read/write, the gather reads 584 B and writes 1,024 B per token. These
kernels have exactly the gather's traffic without its indirection, so "what fraction of the
ceiling" compares like with like:

* :func:`stream_dequant`: token ``t``'s 584-byte fp8_ds_mla record (448 fp8 e4m3 NoPE bytes, 64 bf16
  RoPE values, 8 UE8M0 scale bytes) -> ``out[t]`` = 512 bf16 values, ``bf16(fp8 * 2**(s - 127))``
  per 64-wide quant block and the RoPE values copied; 584 B read + 1,024 B written per token.
* :func:`stream_read`: the same loads, summed into one int64 per program (8 B written per program).
* :func:`stream_write`: the same stores (a pattern derived from the token index), nothing read.

Records lie in one of two :data:`LAYOUTS`, both 584 bytes per token and both without a block table:

* ``"records"``: interleaved 584-byte records ``[fp8 | RoPE | scales]`` (rows only 8-byte aligned);
* ``"split"``: the cache's own in-block layout as one unbounded block, every token's 576 data
  bytes first, then every token's 8 scale bytes (data rows 64-byte aligned, as in the cache).

The tiles are :mod:`repro_studies.kernels.fast`'s (``[BLOCK_T, 8, 64]`` fp8, ``[BLOCK_T, 64]`` RoPE,
``[BLOCK_T, 8]`` scales; a ``[BLOCK_T, 8, 64]`` + ``[BLOCK_T, 64]`` bf16 store), with its default
tile size, so streaming against ``gather_fast`` isolates the block-table indirection; the tile
size is a setting, so the ceiling's own dependence on it is measured, not assumed.

Interpreter (``TRITON_INTERPRET=1``): one program walks every tile of up to 256 tokens in a
constexpr loop (few program instances; same per-token code), as in ``gather_fast``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from repro.core.geometry.layout import DSV4, UE8M0_BIAS, is_pow2
from repro.core.kernels.launch import is_interpreted
from repro.core.kernels.reference import quantize_and_insert_reference
from repro_studies.kernels.settings import DEFAULT_TILE, TileSettings
from repro_studies.kernels.tiles import LANES_CHUNK, dequant_tokens, load_lanes, store_lanes

#: Token layouts without a block table (see the module docstring).
LAYOUTS = ("records", "split")
#: GPU tile defaults: ``gather_fast``'s (8 tokens, 4 warps per program).
DEFAULT_BLOCK_T = 8
DEFAULT_NUM_WARPS = 4
#: Largest token tile in the interpreter.
INTERPRETER_MAX_BLOCK_T = 256
#: Tokens per chunk in the PyTorch references (bounds temporary memory).
_CHUNK_TOKENS = 1 << 16


@triton.jit
def _load_token_tile(
    data_ptr,
    scale_ptr,
    num_tokens,
    i0,
    DATA_PITCH: tl.constexpr,
    SCALE_PITCH: tl.constexpr,
    BLOCK_T: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
):
    """Tokens ``i0 .. i0 + BLOCK_T``: (valid, scale bytes [T, 8], fp8 bytes [T, 8, 64], RoPE as int16 [T, 64])."""
    t = tl.arange(0, BLOCK_T)
    g = tl.arange(0, N_GROUPS)
    c = tl.arange(0, QUANT_BLOCK)
    cols = g[:, None] * QUANT_BLOCK + c[None, :]
    is_nope_group = (g < N_SCALES)[None, :, None]
    i = i0 + t
    valid = i < num_tokens
    data = data_ptr + i.to(tl.int64) * DATA_PITCH
    scales = scale_ptr + i.to(tl.int64) * SCALE_PITCH
    s = tl.load(scales[:, None] + g[None, :], mask=valid[:, None], other=0)
    x = tl.load(
        data[:, None, None] + cols[None, :, :],
        mask=valid[:, None, None] & is_nope_group,
        other=0,
        eviction_policy="evict_first",
    )
    rope_ptr = (data + FP8_DIM).to(tl.pointer_type(tl.int16))
    rope = tl.load(rope_ptr[:, None] + c[None, :], mask=valid[:, None], other=0, eviction_policy="evict_first")
    return valid, s, x, rope


@triton.jit
def _stream_dequant_kernel(
    out_ptr,
    data_ptr,
    scale_ptr,
    num_tokens,
    DATA_PITCH: tl.constexpr,
    SCALE_PITCH: tl.constexpr,
    BLOCK_T: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
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
    pid = tl.program_id(0)
    t = tl.arange(0, BLOCK_T)
    if PREFETCH:  # two tiles in registers: tile k+1's loads in flight while tile k is stored
        i = pid * TILES_PER_PROGRAM * BLOCK_T + t
        x, s, rope = load_lanes(
            data_ptr + i.to(tl.int64) * DATA_PITCH,
            scale_ptr + i.to(tl.int64) * SCALE_PITCH,
            i < num_tokens,
            OVERREAD,
            LOAD_CACHE,
            LOAD_EVICT,
            N_GROUPS,
            N_SCALES,
            QUANT_BLOCK,
            FP8_DIM,
            LANES_CHUNK,
        )
        for _ in tl.static_range(1, TILES_PER_PROGRAM):
            j = i + BLOCK_T
            x_n, s_n, rope_n = load_lanes(
                data_ptr + j.to(tl.int64) * DATA_PITCH,
                scale_ptr + j.to(tl.int64) * SCALE_PITCH,
                j < num_tokens,
                OVERREAD,
                LOAD_CACHE,
                LOAD_EVICT,
                N_GROUPS,
                N_SCALES,
                QUANT_BLOCK,
                FP8_DIM,
                LANES_CHUNK,
            )
            store_lanes(
                out_ptr + i.to(tl.int64) * HEAD_DIM,
                x,
                s,
                rope,
                i < num_tokens,
                STORE_CACHE,
                STORE_EVICT,
                N_GROUPS,
                N_SCALES,
                QUANT_BLOCK,
                FP8_DIM,
                LANES_CHUNK,
            )
            x, s, rope, i = x_n, s_n, rope_n, j
        store_lanes(
            out_ptr + i.to(tl.int64) * HEAD_DIM,
            x,
            s,
            rope,
            i < num_tokens,
            STORE_CACHE,
            STORE_EVICT,
            N_GROUPS,
            N_SCALES,
            QUANT_BLOCK,
            FP8_DIM,
            LANES_CHUNK,
        )
    else:
        for k in tl.range(0, TILES_PER_PROGRAM, num_stages=NUM_STAGES):
            i = (pid * TILES_PER_PROGRAM + k) * BLOCK_T + t
            idx = i.to(tl.int64)
            dequant_tokens(
                data_ptr + idx * DATA_PITCH,
                scale_ptr + idx * SCALE_PITCH,
                out_ptr + idx * HEAD_DIM,
                i < num_tokens,
                BLOCK_T,
                TILE,
                OVERREAD,
                LOAD_CACHE,
                LOAD_EVICT,
                STORE_CACHE,
                STORE_EVICT,
                N_GROUPS,
                N_SCALES,
                QUANT_BLOCK,
                FP8_DIM,
                HEAD_DIM,
            )


@triton.jit
def _stream_read_kernel(
    sums_ptr,
    data_ptr,
    scale_ptr,
    num_tokens,
    DATA_PITCH: tl.constexpr,
    SCALE_PITCH: tl.constexpr,
    BLOCK_T: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK_T], dtype=tl.int64)
    for k in tl.static_range(TILES_PER_PROGRAM):
        i0 = (pid * TILES_PER_PROGRAM + k) * BLOCK_T
        _, s, x, rope = _load_token_tile(
            data_ptr,
            scale_ptr,
            num_tokens,
            i0,
            DATA_PITCH,
            SCALE_PITCH,
            BLOCK_T,
            N_GROUPS,
            N_SCALES,
            QUANT_BLOCK,
            FP8_DIM,
        )
        token_sum = (
            tl.sum(tl.sum(x.to(tl.int32), axis=2), axis=1)
            + tl.sum(s.to(tl.int32), axis=1)
            + tl.sum(rope.to(tl.int32), axis=1)
        )  # < 2**22 per token: exact in int32
        acc += token_sum.to(tl.int64)
    # Every loaded byte feeds the one value stored, so no load can be dropped.
    tl.store(sums_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _stream_write_kernel(
    out_ptr,
    num_tokens,
    BLOCK_T: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
    N_GROUPS: tl.constexpr,
    N_SCALES: tl.constexpr,
    QUANT_BLOCK: tl.constexpr,
    FP8_DIM: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    pid = tl.program_id(0)
    t = tl.arange(0, BLOCK_T)
    g = tl.arange(0, N_GROUPS)
    c = tl.arange(0, QUANT_BLOCK)
    cols = g[:, None] * QUANT_BLOCK + c[None, :]
    is_nope_group = (g < N_SCALES)[None, :, None]
    out16 = out_ptr.to(tl.pointer_type(tl.int16))
    for k in tl.static_range(TILES_PER_PROGRAM):
        i = (pid * TILES_PER_PROGRAM + k) * BLOCK_T + t
        valid = i < num_tokens
        value = (i & 0x7FFF).to(tl.int16)  # row i holds i mod 2**15 in every element
        row = out16 + i.to(tl.int64) * HEAD_DIM
        nope = tl.broadcast_to(value[:, None, None], [BLOCK_T, N_GROUPS, QUANT_BLOCK])
        tl.store(row[:, None, None] + cols[None, :, :], nope, mask=valid[:, None, None] & is_nope_group)
        rope = tl.broadcast_to(value[:, None], [BLOCK_T, QUANT_BLOCK])
        tl.store(row[:, None] + FP8_DIM + c[None, :], rope, mask=valid[:, None])


@triton.jit
def _stream_move_kernel(
    out_ptr,
    src_ptr,
    num_tokens,
    BLOCK_T: tl.constexpr,
    IN_WORDS: tl.constexpr,  # 4-byte words read per token (146: the 584-byte record)
    OUT_WORDS: tl.constexpr,  # 4-byte words written per token (256: the 1,024-byte row)
):
    """The gather's bytes as two flat streams: program p reads tokens' records as one contiguous run of
    ``BLOCK_T * 584`` bytes and writes one contiguous run of ``BLOCK_T * 1,024`` bytes (the words it read,
    then zeros), 16-byte vectors, no per-token structure."""
    pid = tl.program_id(0)
    w = tl.arange(0, BLOCK_T * OUT_WORDS)
    first = pid.to(tl.int64) * BLOCK_T
    src = src_ptr + first * IN_WORDS + w
    dst = out_ptr + first * OUT_WORDS + w
    if first + BLOCK_T <= num_tokens:  # a whole tile: masks the compiler can see are 16-byte aligned
        tl.store(dst, tl.load(src, mask=w < BLOCK_T * IN_WORDS, other=0))
    else:
        k = num_tokens - first
        tl.store(dst, tl.load(src, mask=w < k * IN_WORDS, other=0), mask=w < k * OUT_WORDS)


@dataclass
class StreamInput:
    """``num_tokens`` records in one byte buffer, addressed as in the kernels.

    Token ``t``'s 576 data bytes start at ``data[t * data_pitch]`` and its 8 scale bytes at
    ``scales[t * scale_pitch]``; ``data`` and ``scales`` are views of ``buffer``.
    """

    layout: str
    num_tokens: int
    buffer: torch.Tensor  # uint8 [num_tokens * 584]
    data: torch.Tensor
    scales: torch.Tensor
    data_pitch: int
    scale_pitch: int

    @property
    def bytes_read(self) -> int:
        return self.num_tokens * DSV4.token_bytes

    def rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(data ``[N, 576]``, scales ``[N, 8]``) as strided byte views."""
        n = self.num_tokens
        data = torch.as_strided(self.data, (n, DSV4.data_bytes), (self.data_pitch, 1))
        scales = torch.as_strided(self.scales, (n, DSV4.scale_bytes), (self.scale_pitch, 1))
        return data, scales

    def fresh_out(self) -> torch.Tensor:
        """A ``[N, 512]`` bf16 output with every element set to a NaN pattern (finds unwritten rows)."""
        return torch.full((self.num_tokens, DSV4.head_dim), 0x7FA5, dtype=torch.int16, device=self.buffer.device).view(
            torch.bfloat16
        )


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def layout_views(buffer: torch.Tensor, num_tokens: int, layout: str) -> StreamInput:
    """Address a ``num_tokens * 584``-byte buffer in ``layout``."""
    _check_layout(layout)
    lay = DSV4
    if buffer.dtype != torch.uint8 or buffer.dim() != 1 or buffer.numel() != num_tokens * lay.token_bytes:
        raise ValueError(
            f"buffer must be a 1-D uint8 tensor of num_tokens * {lay.token_bytes} = "
            f"{num_tokens * lay.token_bytes} bytes, got {buffer.dtype} {tuple(buffer.shape)}"
        )
    if layout == "records":
        return StreamInput(
            layout,
            num_tokens,
            buffer,
            buffer,
            buffer[lay.data_bytes :],
            data_pitch=lay.token_bytes,
            scale_pitch=lay.token_bytes,
        )
    return StreamInput(
        layout,
        num_tokens,
        buffer,
        buffer,
        buffer[num_tokens * lay.data_bytes :],
        data_pitch=lay.data_bytes,
        scale_pitch=lay.scale_bytes,
    )


def make_stream_input(
    num_tokens: int, layout: str = "records", seed: int = 0, device: str | torch.device = "cpu"
) -> StreamInput:
    """Random bf16 K rows quantised by the reference writer, stored without a block table.

    The writer runs on one ``num_tokens``-token cache block, whose layout is ``"split"``; the
    ``"records"`` layout interleaves the same bytes per token.
    """
    _check_layout(layout)
    if not isinstance(num_tokens, int) or num_tokens < 1:
        raise ValueError(f"num_tokens must be a positive int, got {num_tokens!r}")
    lay = DSV4
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    k = torch.randn(num_tokens, lay.head_dim, generator=gen, device=device).to(torch.bfloat16)
    block = torch.zeros(1, num_tokens, lay.token_bytes, dtype=torch.uint8, device=device)
    quantize_and_insert_reference(k, block, torch.arange(num_tokens, device=device), num_tokens)
    split = block.reshape(-1)
    if layout == "split":
        return layout_views(split, num_tokens, layout)
    records = torch.empty(num_tokens, lay.token_bytes, dtype=torch.uint8, device=device)
    records[:, : lay.data_bytes] = split[: num_tokens * lay.data_bytes].view(num_tokens, lay.data_bytes)
    records[:, lay.data_bytes :] = split[num_tokens * lay.data_bytes :].view(num_tokens, lay.scale_bytes)
    return layout_views(records.reshape(-1), num_tokens, layout)


@dataclass(frozen=True)
class StreamPlan:
    """One launch: programs, tokens per tile, tiles per program, warps; once launched through Triton, the registers
    per thread its compiled kernel uses (None before, and in the interpreter)."""

    grid: tuple
    block_t: int
    tiles_per_program: int
    num_warps: int
    registers: int | None = None

    @property
    def tokens_per_program(self) -> int:
        return self.block_t * self.tiles_per_program


def plan_stream(
    num_tokens: int,
    block_t: int = DEFAULT_BLOCK_T,
    num_warps: int = DEFAULT_NUM_WARPS,
    plan: str = "grid",
    tiles_per_program: int = 1,
) -> StreamPlan:
    """``"grid"``: ``tiles_per_program`` tiles of ``block_t`` tokens per program (the GPU shape);
    ``"per-program"``: one program walking ``min(256, next_pow2(N))``-token tiles (the interpreter shape)."""
    if not is_pow2(block_t):
        raise ValueError(f"block_t must be a power of two >= 1, got {block_t!r}")
    if not is_pow2(tiles_per_program):
        raise ValueError(f"tiles_per_program must be a power of two >= 1, got {tiles_per_program!r}")
    if not (is_pow2(num_warps) and num_warps <= 32):
        raise ValueError(f"num_warps must be a power of two <= 32, got {num_warps!r}")
    if plan == "per-program":
        bt = min(INTERPRETER_MAX_BLOCK_T, triton.next_power_of_2(num_tokens))
        return StreamPlan(grid=(1,), block_t=bt, tiles_per_program=triton.cdiv(num_tokens, bt), num_warps=num_warps)
    if plan != "grid":
        raise ValueError(f"plan must be 'grid' or 'per-program', got {plan!r}")
    return StreamPlan(
        grid=(triton.cdiv(num_tokens, block_t * tiles_per_program),),
        block_t=block_t,
        tiles_per_program=tiles_per_program,
        num_warps=num_warps,
    )


def _resolve_plan(
    kernel, num_tokens: int, block_t: int, num_warps: int, plan: str | None, tiles_per_program: int = 1
) -> StreamPlan:
    if plan is None:
        plan = "per-program" if is_interpreted(kernel) else "grid"
    return plan_stream(num_tokens, block_t, num_warps, plan, tiles_per_program)


def _common(launch: StreamPlan) -> dict:
    lay = DSV4
    return dict(
        BLOCK_T=launch.block_t,
        TILES_PER_PROGRAM=launch.tiles_per_program,
        N_GROUPS=triton.next_power_of_2(lay.n_scales),
        N_SCALES=lay.n_scales,
        QUANT_BLOCK=lay.quant_block,
        FP8_DIM=lay.fp8_bytes,
        num_warps=launch.num_warps,
    )


def _check_out(out: torch.Tensor, num_tokens: int, device) -> None:
    shape = (num_tokens, DSV4.head_dim)
    if out.dtype != torch.bfloat16 or tuple(out.shape) != shape or not out.is_contiguous() or out.device != device:
        raise ValueError(
            f"out must be a contiguous bf16 tensor of shape {shape} on {device}, "
            f"got {out.dtype} {tuple(out.shape)} on {out.device}"
        )


def stream_dequant(
    inp: StreamInput,
    out: torch.Tensor,
    *,
    block_t: int = DEFAULT_BLOCK_T,
    num_warps: int = DEFAULT_NUM_WARPS,
    plan: str | None = None,
    tile: TileSettings = DEFAULT_TILE,
    tiles_per_program: int = 1,
    num_stages: int = 1,
    prefetch: bool = False,
) -> StreamPlan:
    """Dequantise every record of ``inp`` into ``out`` ``[N, 512]`` bf16 (the gather's work, no table).

    ``tile`` is the shared tile code's layout and hints (:class:`repro_studies.kernels.settings.TileSettings`);
    ``tiles_per_program`` > 1 makes each program loop over that many tiles (``num_stages`` pipelined by
    Triton, or with ``prefetch`` and a ``"lanes"`` tile, tile k+1 loaded into registers before tile k is stored)."""
    if prefetch and tile.tile != "lanes":
        raise ValueError(f"prefetch needs a 'lanes' tile, got tile {tile.tile!r}")
    _check_out(out, inp.num_tokens, inp.buffer.device)
    launch = _resolve_plan(_stream_dequant_kernel, inp.num_tokens, block_t, num_warps, plan, tiles_per_program)
    common = _common(launch)
    del common["N_GROUPS"], common["N_SCALES"], common["QUANT_BLOCK"], common["FP8_DIM"]
    compiled = _stream_dequant_kernel[launch.grid](
        out,
        inp.data,
        inp.scales,
        inp.num_tokens,
        DATA_PITCH=inp.data_pitch,
        SCALE_PITCH=inp.scale_pitch,
        NUM_STAGES=num_stages,
        PREFETCH=prefetch and launch.tiles_per_program > 1,
        **common,
        **tile.constexprs(),
    )
    return replace(launch, registers=getattr(compiled, "n_regs", None))


def read_sums_buffer(inp: StreamInput, launch: StreamPlan) -> torch.Tensor:
    return torch.zeros(launch.grid[0], dtype=torch.int64, device=inp.buffer.device)


def stream_read(
    inp: StreamInput,
    sums: torch.Tensor | None = None,
    *,
    block_t: int = DEFAULT_BLOCK_T,
    num_warps: int = DEFAULT_NUM_WARPS,
    plan: str | None = None,
) -> tuple[StreamPlan, torch.Tensor]:
    """Read every record's 584 bytes; one int64 sum per program (the read half of the gather's traffic)."""
    launch = _resolve_plan(_stream_read_kernel, inp.num_tokens, block_t, num_warps, plan)
    if sums is None:
        sums = read_sums_buffer(inp, launch)
    if sums.dtype != torch.int64 or tuple(sums.shape) != (launch.grid[0],):
        raise ValueError(
            f"sums must be int64 [{launch.grid[0]}] (one per program), got {sums.dtype} {tuple(sums.shape)}"
        )
    _stream_read_kernel[launch.grid](
        sums,
        inp.data,
        inp.scales,
        inp.num_tokens,
        DATA_PITCH=inp.data_pitch,
        SCALE_PITCH=inp.scale_pitch,
        **_common(launch),
    )
    return launch, sums


def stream_write(
    out: torch.Tensor, *, block_t: int = DEFAULT_BLOCK_T, num_warps: int = DEFAULT_NUM_WARPS, plan: str | None = None
) -> StreamPlan:
    """Write 1,024 bytes per token, the gather's stores (the write half of its traffic); nothing is read."""
    num_tokens = out.shape[0] if out.dim() == 2 else -1
    _check_out(out, num_tokens, out.device)
    launch = _resolve_plan(_stream_write_kernel, num_tokens, block_t, num_warps, plan)
    _stream_write_kernel[launch.grid](out, num_tokens, HEAD_DIM=DSV4.head_dim, **_common(launch))
    return launch


# ---------------------------------------------------------------------------------------------
# PyTorch references (the definition of correct for the three kernels)


def stream_reference(inp: StreamInput) -> torch.Tensor:
    """``[N, 512]`` bf16: ``bf16(fp8 * 2**(s - 127))`` per 64-wide block, then the RoPE values."""
    lay = DSV4
    data, scales = inp.rows()
    out = torch.empty(inp.num_tokens, lay.head_dim, dtype=torch.bfloat16, device=inp.buffer.device)
    for lo in range(0, inp.num_tokens, _CHUNK_TOKENS):
        d, s = data[lo : lo + _CHUNK_TOKENS], scales[lo : lo + _CHUNK_TOKENS]
        fp8 = d[:, : lay.fp8_bytes].contiguous().view(torch.float8_e4m3fn).float()
        scale = torch.exp2(s[:, : lay.n_scales].float() - UE8M0_BIAS).repeat_interleave(lay.quant_block, dim=1)
        out[lo : lo + _CHUNK_TOKENS, : lay.nope_dim] = (fp8 * scale).to(torch.bfloat16)
        out[lo : lo + _CHUNK_TOKENS, lay.nope_dim :] = d[:, lay.fp8_bytes :].contiguous().view(torch.bfloat16)
    return out


def stream_move(
    inp: StreamInput, out: torch.Tensor, *, block_t: int = DEFAULT_BLOCK_T, num_warps: int = DEFAULT_NUM_WARPS
) -> StreamPlan:
    """Move the gather's bytes without its structure (``"records"`` layout): each program reads its tokens'
    ``block_t * 584`` bytes as one run and writes ``block_t * 1,024`` bytes as one run (:func:`move_reference`)."""
    if inp.layout != "records":
        raise ValueError(f"stream_move reads the 'records' layout, got {inp.layout!r}")
    _check_out(out, inp.num_tokens, inp.buffer.device)
    return move_words(inp.buffer, out, inp.num_tokens, DSV4.token_bytes, block_t=block_t, num_warps=num_warps)


def move_words(
    src: torch.Tensor,
    out: torch.Tensor,
    num_tokens: int,
    read_bytes: int,
    *,
    block_t: int = DEFAULT_BLOCK_T,
    num_warps: int = DEFAULT_NUM_WARPS,
) -> StreamPlan:
    """The byte mover for any bytes read per token (a multiple of 4, at most what is written): ``read_bytes`` of
    ``src`` in, ``out``'s row out per token. At 1,024 bytes read it is a copy, so its rate there and at the
    gather's 584 bytes tells what the gather's mix of reads and writes costs a kernel that moves bytes alike."""
    row_bytes = out.numel() * out.element_size() // num_tokens
    if read_bytes % 4 or not 0 < read_bytes <= row_bytes:
        raise ValueError(f"read_bytes must be a multiple of 4 in 4..{row_bytes}, got {read_bytes!r}")
    if src.numel() * src.element_size() < num_tokens * read_bytes:
        raise ValueError(f"src must hold num_tokens * read_bytes = {num_tokens * read_bytes} bytes")
    launch = plan_stream(num_tokens, block_t, num_warps, "grid")
    compiled = _stream_move_kernel[launch.grid](
        out.view(torch.int32),
        src.view(torch.int32),
        num_tokens,
        BLOCK_T=block_t,
        IN_WORDS=read_bytes // 4,
        OUT_WORDS=row_bytes // 4,
        num_warps=num_warps,
    )
    return replace(launch, registers=getattr(compiled, "n_regs", None))


def move_reference(inp: StreamInput, launch: StreamPlan) -> torch.Tensor:
    """What :func:`stream_move` writes: per program, its tokens' record words, then zeros, as ``[N, 512]`` bf16."""
    t = launch.block_t
    n = inp.num_tokens
    words = inp.buffer.view(torch.int32)
    out = torch.zeros(n * (DSV4.head_dim // 2), dtype=torch.int32, device=inp.buffer.device)
    per_in, per_out = DSV4.token_bytes // 4, DSV4.head_dim // 2
    whole = n // t
    out[: whole * t * per_out].view(whole, t * per_out)[:, : t * per_in] = words[: whole * t * per_in].view(
        whole, t * per_in
    )
    k = n - whole * t
    if k:
        out[whole * t * per_out : whole * t * per_out + k * per_in] = words[whole * t * per_in :]
    return out.view(torch.bfloat16).view(n, DSV4.head_dim)


def read_reference(inp: StreamInput, launch: StreamPlan) -> torch.Tensor:
    """Per program: the sum of its tokens' 448 fp8 bytes and 8 scale bytes (unsigned) and 64 RoPE
    values read as int16."""
    lay = DSV4
    data, scales = inp.rows()
    per_token = (
        data[:, : lay.fp8_bytes].long().sum(1)
        + scales.long().sum(1)
        + data[:, lay.fp8_bytes :].contiguous().view(torch.int16).long().sum(1)
    )
    programs = torch.arange(inp.num_tokens, device=per_token.device) // launch.tokens_per_program
    return torch.zeros(launch.grid[0], dtype=torch.int64, device=per_token.device).index_add_(0, programs, per_token)


def write_reference(num_tokens: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """``[N, 512]`` bf16 whose row ``i`` holds the bits ``i mod 2**15`` in every element."""
    rows = (torch.arange(num_tokens, device=device) & 0x7FFF).to(torch.int16)
    return rows[:, None].expand(num_tokens, DSV4.head_dim).contiguous().view(torch.bfloat16)

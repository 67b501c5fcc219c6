"""A bandwidth-oriented DeepSeek-V4 K-cache dequantise-and-gather: :func:`gather_fast`.

Same signature and results as :func:`repro.core.kernels.gather.gather_fixed` (stride-aware block
table, optional ``gather_lens``, ``offset``, any block stride ``>= B * 584``, int64 block
offsets); only the launch shape, the memory-access pattern and the host path differ.

Design (GPU)
------------
* **Grid** ``(cdiv(out.shape[1] - offset, BLOCK_T * TILES_PER_PROGRAM), num_reqs)``: axis 0 = a run of
  ``TILES_PER_PROGRAM`` tiles of ``BLOCK_T`` consecutive gather indices, axis 1 = the request. The
  count comes from the host-known upper bound ``out.shape[1] - offset``, so nothing is read back to
  the host; a tile that starts past its request's ``gather_len`` is skipped (one branch) and a partial
  tile is masked. Neighbouring programs read neighbouring cache slots and write neighbouring output
  rows of one request; the hardware scheduler balances ragged requests. While the grid has fewer than
  ``waves * SM count`` programs, tiles per program are halved, then ``BLOCK_T`` and the warps (down to
  ``min_block_t``), so one 2,048-token request still spreads over the whole GPU.
* **Per token** (:func:`repro_studies.kernels.tiles.dequant_tokens`, the streaming ceiling's code too): the
  block table gives the physical block (one int32 per token, a broadcast load), then the token's 576
  data bytes, its 8-byte scale slot and its 1,024-byte output row are addressed as in vLLM; all loads
  are issued before any store. The default tile is chunk-major "lanes": each thread loads 8 consecutive
  fp8 bytes and stores the 16 bytes of bf16 they become, a warp walks 256 contiguous bytes of one token,
  and no value passes through shared memory. The tile layout and cache hints are :class:`FastSettings`
  (:mod:`repro_studies.kernels.settings`).
* **Early table entry** (``early_table``, the default): without ``gather_lens`` each tile's one table entry is
  loaded beside the request's length rather than after it (:mod:`repro_studies.kernels.launch_plan`): 1-3 % at
  16-64 requests on the H200.
* **Registers** (``maxnreg``): the default tile of 4 tokens x 2 warps is compiled with 40 registers per thread;
  left to itself the compiler picks 32 (so that 2,048 threads fit on an SM) and the tile is 0.6-7 % slower on the
  H200 (``data/h200/tuning-gather-fast.md``, runs 12-13).
* Block offsets are ``int64(physical) * BLOCK_STRIDE``; ``BLOCK_STRIDE = k_cache.stride(0)`` is a
  constexpr (as in vLLM), which also tells the compiler the alignment of every cache address.

Settings are explicit values: :func:`gather_fast` uses ``DEFAULT_SETTINGS`` (the best of the H200 sweep in
``data/h200/tuning-gather-fast.md``); :func:`gather_fast_with` and :func:`make_gather` take any
:class:`FastSettings`.

Host path: after the first call with a given specialisation, :func:`gather_fast` launches the compiled
kernel directly (:mod:`repro_studies.kernels.direct`), so an eager call costs a few microseconds of host time,
not Triton's 30-60 us launcher; validation reads each tensor attribute once.

Interpreter (``TRITON_INTERPRET=1``): one program per request handles every tile of its request with
``BLOCK_T`` up to 256, so few program instances run; each token is computed by the same code, so the
results are the same. ``plan="grid"`` forces the GPU launch shape in the interpreter to test it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

from repro.core.geometry.layout import DSV4
from repro.core.kernels.gather import check_gather_args
from repro.core.kernels.launch import is_interpreted
from repro_studies.kernels.direct import DirectLauncher, int_spec, pointer_spec
from repro_studies.kernels.launch_plan import early_entry, loads_early, programs_target
from repro_studies.kernels.settings import DEFAULT_SETTINGS, FastSettings
from repro_studies.kernels.tiles import LANES_CHUNK, dequant_tokens, load_lanes, store_lanes

#: Largest token tile in the interpreter (one program per request loops over its tiles).
INTERPRETER_MAX_BLOCK_T = 256
#: CUDA's limit on grid axis 1 (the request axis here).
MAX_GRID_Y = 65535
#: Launch plans: the GPU shape, and the interpreter's few-programs shape.
PLANS = ("grid", "per-request")


@triton.jit
def _gather_addresses(
    i0,
    t,
    gather_len,
    start,
    table_row,
    out_req,
    out_stride1,
    k_cache_ptr,
    offset,
    early,
    EARLY: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,
    TOKEN_DATA_SIZE: tl.constexpr,
    SCALE_DIM: tl.constexpr,
):
    """(data, scales, row, valid) of gather indices ``i0 .. i0 + BLOCK_T`` of one request: one block-table entry
    per token, or the tile's one entry ``early`` when :func:`~repro_studies.kernels.launch_plan.early_entry`
    loaded it."""
    i = i0 + t
    valid = i < gather_len
    pos = start + i
    if EARLY:
        physical = early
    else:
        physical = tl.load(table_row + pos // CACHE_BLOCK_SIZE, mask=valid, other=0)
    slot = pos % CACHE_BLOCK_SIZE
    block = k_cache_ptr + physical.to(tl.int64) * BLOCK_STRIDE
    data = block + slot * TOKEN_DATA_SIZE
    scales = block + CACHE_BLOCK_SIZE * TOKEN_DATA_SIZE + slot * SCALE_DIM
    row = out_req + (offset + i).to(tl.int64) * out_stride1
    return data, scales, row, valid


@triton.jit
def _gather_tile(
    i0,
    t,
    gather_len,
    start,
    table_row,
    out_req,
    out_stride1,
    k_cache_ptr,
    offset,
    early,
    EARLY: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,
    TOKEN_DATA_SIZE: tl.constexpr,
    SCALE_DIM: tl.constexpr,
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
    """Gather indices ``i0 .. i0 + BLOCK_T`` of one request: block table, then the shared tile code."""
    data, scales, row, valid = _gather_addresses(
        i0,
        t,
        gather_len,
        start,
        table_row,
        out_req,
        out_stride1,
        k_cache_ptr,
        offset,
        early,
        EARLY,
        CACHE_BLOCK_SIZE,
        BLOCK_STRIDE,
        TOKEN_DATA_SIZE,
        SCALE_DIM,
    )
    dequant_tokens(
        data,
        scales,
        row,
        valid,
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


@triton.jit(do_not_specialize=["block_table_row_pitch", "block_table_width", "offset"])
def _gather_fast_kernel(
    out_ptr,
    out_stride0,
    out_stride1,
    k_cache_ptr,
    seq_lens_ptr,
    gather_lens_ptr,
    block_table_ptr,
    block_table_row_pitch,  # block_table.stride(0): the physical row pitch (PR #55109)
    block_table_width,  # block_table.shape[1]: the entries a row may be read at
    offset,
    HAS_GATHER_LENS: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,  # bytes between cache blocks (k_cache.stride(0))
    TOKEN_DATA_SIZE: tl.constexpr,  # 576
    SCALE_DIM: tl.constexpr,  # 8
    BLOCK_T: tl.constexpr,  # tokens per tile
    TILES_PER_PROGRAM: tl.constexpr,  # 1 on the GPU by default; all tiles of a request in the interpreter
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,  # load tile k+1 before storing tile k (lanes tiles)
    EARLY_TABLE: tl.constexpr,  # the tile's one table entry loaded beside seq_len (see FastSettings)
    TILE: tl.constexpr,
    OVERREAD: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
    LOAD_EVICT: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    STORE_EVICT: tl.constexpr,
    N_GROUPS: tl.constexpr,  # 8 = 7 NoPE quant blocks rounded up to a power of two
    N_SCALES: tl.constexpr,  # 7
    QUANT_BLOCK: tl.constexpr,  # 64
    FP8_DIM: tl.constexpr,  # 448
    HEAD_DIM: tl.constexpr,  # 512
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
    first = tile_id * TILES_PER_PROGRAM * BLOCK_T
    # The program's one table entry when all its tiles lie in one cache block (launch_plan.loads_early).
    early = early_entry(table_row, block_table_width, first, EARLY_TABLE, CACHE_BLOCK_SIZE)
    if first < gather_len:  # a program whose tiles all lie past its request's length writes nothing
        if PREFETCH:
            # Registers hold two tiles: tile k+1's loads are in flight while tile k is stored.
            data, scales, row, valid = _gather_addresses(
                first,
                t,
                gather_len,
                start,
                table_row,
                out_req,
                out_stride1,
                k_cache_ptr,
                offset,
                early,
                EARLY_TABLE,
                CACHE_BLOCK_SIZE,
                BLOCK_STRIDE,
                TOKEN_DATA_SIZE,
                SCALE_DIM,
            )
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
                LANES_CHUNK,
            )
            for k in tl.static_range(1, TILES_PER_PROGRAM):
                data_n, scales_n, row_n, valid_n = _gather_addresses(
                    first + k * BLOCK_T,
                    t,
                    gather_len,
                    start,
                    table_row,
                    out_req,
                    out_stride1,
                    k_cache_ptr,
                    offset,
                    early,
                    EARLY_TABLE,
                    CACHE_BLOCK_SIZE,
                    BLOCK_STRIDE,
                    TOKEN_DATA_SIZE,
                    SCALE_DIM,
                )
                x_n, s_n, rope_n = load_lanes(
                    data_n,
                    scales_n,
                    valid_n,
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
                    LANES_CHUNK,
                )
                x, s, rope, row, valid = x_n, s_n, rope_n, row_n, valid_n
            store_lanes(
                row, x, s, rope, valid, STORE_CACHE, STORE_EVICT, N_GROUPS, N_SCALES, QUANT_BLOCK, FP8_DIM, LANES_CHUNK
            )
        else:
            # The loop's bound is a constexpr (the interpreter cannot loop to a loaded value); tiles past
            # gather_len are fully masked.
            for k in tl.range(0, TILES_PER_PROGRAM, num_stages=NUM_STAGES):
                _gather_tile(
                    first + k * BLOCK_T,
                    t,
                    gather_len,
                    start,
                    table_row,
                    out_req,
                    out_stride1,
                    k_cache_ptr,
                    offset,
                    early,
                    EARLY_TABLE,
                    CACHE_BLOCK_SIZE,
                    BLOCK_STRIDE,
                    TOKEN_DATA_SIZE,
                    SCALE_DIM,
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


@dataclass(frozen=True)
class FastPlan:
    """One launch: grid, tile, tiles per program and warps; once launched through Triton, the registers per thread
    its compiled kernel uses (None before, and in the interpreter)."""

    grid: tuple
    block_t: int
    tiles_per_program: int
    num_warps: int
    registers: int | None = None


def plan_launch(
    num_reqs: int, max_gather: int, device: torch.device, settings: FastSettings = DEFAULT_SETTINGS, plan: str = "grid"
) -> FastPlan:
    """The launch for ``num_reqs`` requests of at most ``max_gather`` tokens.

    ``plan``: ``"grid"`` (the GPU shape) or ``"per-request"`` (the interpreter shape: one program per
    request looping over up to 256-token tiles).
    """
    if plan == "per-request":
        block_t = min(INTERPRETER_MAX_BLOCK_T, triton.next_power_of_2(max_gather))
        tiles = triton.cdiv(max_gather, block_t)
        return FastPlan(grid=(1, num_reqs), block_t=block_t, tiles_per_program=tiles, num_warps=4)
    if plan != "grid":
        raise ValueError(f"plan must be one of {PLANS}, got {plan!r}")
    block_t, per_program, warps = settings.block_t, settings.tiles_per_program, settings.num_warps
    if device.type == "cuda":
        # Too few programs to fill the GPU: fewer tiles per program first, then smaller tiles (and as many
        # fewer warps, so each thread keeps the same share of the tile).
        target = programs_target(device, settings.waves)
        while num_reqs * triton.cdiv(max_gather, block_t * per_program) < target:
            if per_program > 1:
                per_program //= 2
            elif block_t > settings.min_block_t:
                block_t //= 2
                warps = max(1, warps // 2)
            else:
                break
    return FastPlan(
        grid=(triton.cdiv(max_gather, block_t * per_program), num_reqs),
        block_t=block_t,
        tiles_per_program=per_program,
        num_warps=warps,
    )


def early_table(settings: FastSettings, has_gather_lens: bool, block_size: int, launch: FastPlan) -> bool:
    """Whether this launch loads each program's table entry early (:func:`launch_plan.loads_early`)."""
    return loads_early(settings.early_table, has_gather_lens, block_size, launch.block_t, launch.tiles_per_program)


def _constexprs(has_gather_lens: bool, block_size: int, block_stride: int, launch: FastPlan, settings: FastSettings):
    """The kernel's constexpr arguments, in signature order."""
    return {
        "HAS_GATHER_LENS": has_gather_lens,
        "CACHE_BLOCK_SIZE": block_size,
        "BLOCK_STRIDE": block_stride,
        "TOKEN_DATA_SIZE": DSV4.data_bytes,
        "SCALE_DIM": DSV4.scale_bytes,
        "BLOCK_T": launch.block_t,
        "TILES_PER_PROGRAM": launch.tiles_per_program,
        "NUM_STAGES": settings.num_stages,
        "PREFETCH": settings.prefetch and launch.tiles_per_program > 1,
        "EARLY_TABLE": early_table(settings, has_gather_lens, block_size, launch),
        **settings.tile.constexprs(),
    }


def gather_fast_with(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    settings: FastSettings = DEFAULT_SETTINGS,
    *,
    plan: str | None = None,
) -> FastPlan | None:
    """:func:`gather_fast` with explicit :class:`FastSettings`, through Triton's own launcher.

    ``plan=None`` picks ``"per-request"`` in the interpreter and ``"grid"`` on a GPU. Returns the
    :class:`FastPlan` launched, with the compiled kernel's registers per thread (``None`` when there was nothing
    to do).
    """
    if not isinstance(settings, FastSettings):
        raise ValueError(f"settings must be a FastSettings, got {settings!r}")
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
    launch = plan_launch(num_reqs, max_gather, out.device, settings, plan)
    compiled = _gather_fast_kernel[launch.grid](
        out,
        out.stride(0),
        out.stride(1),
        k_cache,
        seq_lens,
        gather_lens if gather_lens is not None else seq_lens,
        block_table,
        block_table.stride(0),
        block_table.shape[1],
        offset,
        **_constexprs(gather_lens is not None, block_size, k_cache.stride(0), launch, settings),
        num_warps=launch.num_warps,
        **settings.launch_options(),
    )
    return replace(launch, registers=getattr(compiled, "n_regs", None))


_BF16, _U8, _I32 = torch.bfloat16, torch.uint8, torch.int32
_I32_RANGE = 2**31


def make_gather(settings: FastSettings = DEFAULT_SETTINGS) -> Callable[..., None]:
    """A gather with vLLM's signature and fixed ``settings`` that, once its kernel is compiled for a
    specialisation, launches it directly (:class:`repro_studies.kernels.direct.DirectLauncher`).

    Per call it reads each tensor attribute once, checks what :func:`check_gather_args` checks (which reports
    any failure), then looks the launch up by one key: the shape, the device, the constexprs that vary between
    calls and, when a pointer or stride is not the common 16-byte-aligned, 32-bit case, Triton's whole
    specialisation of them. The first call with a key plans the grid and compiles through Triton; later calls
    are one dictionary lookup and one launch. In the interpreter, or on a Triton whose launcher was not checked,
    every call is :func:`gather_fast_with`.
    """
    launcher = DirectLauncher(_gather_fast_kernel)
    ready: dict[tuple, tuple] = {}  # call key -> (grid, compiled kernel entry)
    head, record = DSV4.head_dim, DSV4.token_bytes

    def gather(
        out: torch.Tensor,
        k_cache: torch.Tensor,
        seq_lens: torch.Tensor,
        gather_lens: torch.Tensor | None,
        block_table: torch.Tensor,
        block_size: int,
        offset: int,
    ) -> None:
        if not launcher.enabled:
            gather_fast_with(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, settings)
            return
        o_shape, o_stride = out.shape, out.stride()
        b_shape, b_stride = block_table.shape, block_table.stride()
        k_stride = k_cache.stride()
        k_stride0 = k_stride[0] if k_stride else 0
        num_reqs = b_shape[0] if len(b_shape) == 2 else -1
        has_lens = gather_lens is not None
        lens = gather_lens if has_lens else seq_lens
        if not (
            out.dtype is _BF16
            and len(o_stride) == 3
            and o_stride[2] == 1
            and o_shape[2] == head
            and o_shape[0] == num_reqs
            and k_cache.dtype is _U8
            and k_stride0 >= block_size * record
            and block_table.dtype is _I32
            and b_stride[1] == 1
            and seq_lens.dtype is _I32
            and seq_lens.shape == (num_reqs,)
            and (not has_lens or (lens.dtype is _I32 and lens.shape == (num_reqs,)))
            and block_size > 0
            and 0 <= offset <= o_shape[1]
        ):
            check_gather_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
            raise AssertionError("unreachable: the inline checks and check_gather_args disagree")  # pragma: no cover
        max_gather = o_shape[1] - offset
        if num_reqs == 0 or max_gather == 0:
            return
        if num_reqs > MAX_GRID_Y:
            raise ValueError(
                f"gather_fast launches one grid row per request; at most {MAX_GRID_Y} requests, got {num_reqs}"
            )
        if not (out.is_cuda and k_cache.is_cuda and seq_lens.is_cuda and lens.is_cuda and block_table.is_cuda):
            raise ValueError("gather_fast: out, k_cache, seq_lens, gather_lens and block_table must be CUDA tensors")
        o0, o1, pitch, width = o_stride[0], o_stride[1], b_stride[0], b_shape[1]
        o_ptr, k_ptr, s_ptr = out.data_ptr(), k_cache.data_ptr(), seq_lens.data_ptr()
        l_ptr, b_ptr = lens.data_ptr(), block_table.data_ptr()
        raw = (o_ptr, o0, o1, k_ptr, s_ptr, l_ptr, b_ptr, pitch, width, offset)
        device = launcher.current_device()
        key = (num_reqs, max_gather, device, has_lens, block_size, k_stride0)
        if (o_ptr | k_ptr | s_ptr | l_ptr | b_ptr | o0 | o1) & 15 or not (
            o0 < _I32_RANGE and o1 < _I32_RANGE and pitch < _I32_RANGE and width < _I32_RANGE and offset < _I32_RANGE
        ):
            key += _specialisation(raw)  # not the common case: Triton's whole specialisation decides
        hit = ready.get(key)
        if hit is not None:
            launcher.run(hit[1], hit[0], raw, device)
            return
        launch = plan_launch(num_reqs, max_gather, torch.device("cuda", device), settings, "grid")
        compiled_key = (launch.block_t, launch.tiles_per_program, launch.num_warps, *key[3:6], _specialisation(raw))
        entry = launcher.lookup(device, compiled_key)
        if entry is None:
            args = (out, o0, o1, k_cache, seq_lens, lens, block_table, pitch, width, offset)
            constexprs = _constexprs(has_lens, block_size, k_stride0, launch, settings)
            launcher.compile(compiled_key, launch.grid, args, constexprs, launch.num_warps, settings.launch_options())
            entry = launcher.lookup(launcher.current_device(), compiled_key)
        else:
            launcher.run(entry, launch.grid, raw, device)
        if entry is not None:
            ready[key] = (launch.grid, entry)

    gather.settings = settings
    gather.launcher = launcher
    gather.ready = ready
    return gather


def _specialisation(raw: tuple) -> tuple:
    """What Triton specialises the kernel on, of its runtime arguments ``raw`` (pointers as ints): the
    16-byte alignment of each of the five pointers; ``== 1``, divisibility by 16 and width of the two
    output strides; the integer width of the row pitch, the table width and the offset (``do_not_specialize``)."""
    o_ptr, o0, o1, k_ptr, s_ptr, l_ptr, b_ptr, pitch, width, offset = raw
    return (
        *(pointer_spec(p) for p in (o_ptr, k_ptr, s_ptr, l_ptr, b_ptr)),
        *int_spec(o0),
        *int_spec(o1),
        *int_spec(pitch, specialize=False),
        *int_spec(width, specialize=False),
        *int_spec(offset, specialize=False),
    )


gather_fast = make_gather(DEFAULT_SETTINGS)
gather_fast.__name__ = gather_fast.__qualname__ = "gather_fast"
gather_fast.__doc__ = """Dequantise and gather the K cache (vLLM's signature), tiled for memory bandwidth.

Semantics of :func:`repro.core.kernels.gather.gather_fixed`, with :data:`DEFAULT_SETTINGS`; after the first call
of a specialisation the compiled kernel is launched directly (:func:`make_gather`)."""

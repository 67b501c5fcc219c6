"""A bandwidth-oriented DeepSeek-V4 K-cache dequantise-and-gather: :func:`gather_fast`.

Same signature and results as :func:`repro.kernels.gather.gather_fixed` (stride-aware block
table, optional ``gather_lens``, ``offset``, any block stride ``>= B * 584``, int64 block
offsets); only the launch shape, the memory-access pattern and the host path differ.

Design (GPU)
------------
* **Grid** ``(cdiv(out.shape[1] - offset, BLOCK_T * TILES_PER_PROGRAM), num_reqs)``: axis 0 = a run of
  ``TILES_PER_PROGRAM`` tiles of ``BLOCK_T`` consecutive gather indices, axis 1 = the request. The
  count comes from the host-known upper bound ``out.shape[1] - offset``, so nothing is read back to
  the host; a tile that starts past its request's ``gather_len`` is skipped (one branch) and a partial
  tile is masked. Neighbouring programs read neighbouring cache slots and write neighbouring output
  rows of one request; the hardware scheduler balances ragged requests. ``BLOCK_T`` is halved (down
  to ``min_block_t``) while the grid has fewer than ``waves * SM count`` programs, so one 2,048-token
  request still spreads over the whole GPU.
* **Per token** (:func:`repro.kernels.tiles.dequant_tokens`, the streaming ceiling's code too): the
  block table gives the physical block (one int32 per token, a broadcast load), then the token's 576
  data bytes, its 8-byte scale slot and its 1,024-byte output row are addressed as in vLLM; all loads
  are issued before any store. The tile layout and cache hints are :class:`FastSettings`.
* Block offsets are ``int64(physical) * BLOCK_STRIDE``; ``BLOCK_STRIDE = k_cache.stride(0)`` is a
  constexpr (as in vLLM), which also tells the compiler the alignment of every cache address.

Settings are explicit: :func:`gather_fast` uses :data:`DEFAULT_SETTINGS` (the best of the H200 sweep
in ``data/h200/tuning-gather-fast.md``); :func:`gather_fast_with` takes any :class:`FastSettings`.

Host path: after the first call with a given specialisation, :func:`gather_fast` launches the compiled
kernel directly (:mod:`repro.kernels.direct`), so an eager call costs a few microseconds of host time,
not Triton's 30-60 us launcher; validation reads each tensor attribute once.

Interpreter (``TRITON_INTERPRET=1``): one program per request handles every tile of its request with
``BLOCK_T`` up to 256, so few program instances run; each token is computed by the same code, so the
results are the same. ``plan="grid"`` forces the GPU launch shape in the interpreter to test it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import torch
import triton
import triton.language as tl

from repro.geometry.layout import DSV4
from repro.kernels.direct import DirectLauncher, int_spec, pointer_spec
from repro.kernels.gather import check_gather_args
from repro.kernels.launch import is_interpreted
from repro.kernels.tiles import DEFAULT_TILE, TileSettings, dequant_tokens

#: Largest token tile in the interpreter (one program per request loops over its tiles).
INTERPRETER_MAX_BLOCK_T = 256
#: CUDA's limit on grid axis 1 (the request axis here).
MAX_GRID_Y = 65535
#: Launch plans: the GPU shape, and the interpreter's few-programs shape.
PLANS = ("grid", "per-request")


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and (v & (v - 1)) == 0


@dataclass(frozen=True)
class FastSettings:
    """How :func:`gather_fast` launches: tile size, warps, grid filling, tiles per program, tile layout."""

    block_t: int = 8  # tokens per tile (a power of two)
    num_warps: int = 4  # warps per program (a power of two <= 32)
    min_block_t: int = 8  # smallest tile the grid-filling heuristic may shrink to
    waves: float = 2  # shrink the tile while the grid has fewer than waves * SMs programs
    tiles_per_program: int = 1  # consecutive tiles one program handles (a loop when > 1)
    num_stages: int = 1  # software-pipelining stages of that loop (Triton's tl.range)
    tile: TileSettings = field(default_factory=TileSettings)

    def __post_init__(self) -> None:
        for name in ("block_t", "min_block_t", "num_warps", "tiles_per_program"):
            if not _is_pow2(getattr(self, name)):
                raise ValueError(f"{name} must be a power of two >= 1, got {getattr(self, name)!r}")
        if self.num_warps > 32:
            raise ValueError(f"num_warps must be a power of two <= 32, got {self.num_warps!r}")
        if isinstance(self.waves, bool) or not isinstance(self.waves, (int, float)) or self.waves < 0:
            raise ValueError(f"waves must be a non-negative number, got {self.waves!r}")
        if not isinstance(self.num_stages, int) or not 1 <= self.num_stages <= 8:
            raise ValueError(f"num_stages must be an int from 1 to 8, got {self.num_stages!r}")
        if not isinstance(self.tile, TileSettings):
            raise ValueError(f"tile must be a TileSettings, got {self.tile!r}")

    def label(self) -> str:
        text = f"{self.block_t} tok x {self.num_warps} warps"
        if self.tiles_per_program > 1:
            text += f", {self.tiles_per_program} tiles/program"
        if self.num_stages > 1:
            text += f", {self.num_stages} stages"
        return f"{text}, {self.tile.label()}"


#: The settings :func:`gather_fast` uses. Measured on the H200 at 256 x 2,048 tokens
#: (data/h200/tuning-gather-fast.md).
DEFAULT_SETTINGS = FastSettings(tile=DEFAULT_TILE)


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
    i = i0 + t
    valid = i < gather_len
    pos = start + i
    physical = tl.load(table_row + pos // CACHE_BLOCK_SIZE, mask=valid, other=0)
    slot = pos % CACHE_BLOCK_SIZE
    block = k_cache_ptr + physical.to(tl.int64) * BLOCK_STRIDE
    data = block + slot * TOKEN_DATA_SIZE
    scales = block + CACHE_BLOCK_SIZE * TOKEN_DATA_SIZE + slot * SCALE_DIM
    row = out_req + (offset + i).to(tl.int64) * out_stride1
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
    TOKEN_DATA_SIZE: tl.constexpr,  # 576
    SCALE_DIM: tl.constexpr,  # 8
    BLOCK_T: tl.constexpr,  # tokens per tile
    TILES_PER_PROGRAM: tl.constexpr,  # 1 on the GPU by default; all tiles of a request in the interpreter
    NUM_STAGES: tl.constexpr,
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
    if TILES_PER_PROGRAM == 1:
        if first < gather_len:
            _gather_tile(
                first,
                t,
                gather_len,
                start,
                table_row,
                out_req,
                out_stride1,
                k_cache_ptr,
                offset,
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
    """One launch: grid, tile, tiles per program and warps."""

    grid: tuple
    block_t: int
    tiles_per_program: int
    num_warps: int


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


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
    block_t = settings.block_t
    per_program = settings.tiles_per_program
    if device.type == "cuda":
        target = settings.waves * _sm_count(device.index if device.index is not None else torch.cuda.current_device())
        while block_t > settings.min_block_t and num_reqs * triton.cdiv(max_gather, block_t * per_program) < target:
            block_t //= 2
    return FastPlan(
        grid=(triton.cdiv(max_gather, block_t * per_program), num_reqs),
        block_t=block_t,
        tiles_per_program=per_program,
        num_warps=settings.num_warps,
    )


_LAUNCHER = DirectLauncher(_gather_fast_kernel)


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
    :class:`FastPlan` launched (``None`` when there was nothing to do).
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
        **_constexprs(gather_lens is not None, block_size, k_cache.stride(0), launch, settings),
        num_warps=launch.num_warps,
    )
    return launch


_BF16, _U8, _I32 = torch.bfloat16, torch.uint8, torch.int32


def _quick_reject(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset) -> bool:
    """True unless the arguments pass every check of :func:`check_gather_args` (read once each)."""
    ostride, kstride, bshape = out.stride(), k_cache.stride(), block_table.shape
    num_reqs = bshape[0] if len(bshape) == 2 else -1
    return not (
        out.dtype is _BF16
        and len(ostride) == 3
        and ostride[2] == 1
        and out.shape[2] == DSV4.head_dim
        and out.shape[0] == num_reqs
        and k_cache.dtype is _U8
        and kstride[0] >= block_size * DSV4.token_bytes
        and block_table.dtype is _I32
        and block_table.stride(1) == 1
        and seq_lens.dtype is _I32
        and seq_lens.shape == (num_reqs,)
        and (gather_lens is None or (gather_lens.dtype is _I32 and gather_lens.shape == (num_reqs,)))
        and block_size > 0
        and 0 <= offset <= out.shape[1]
    )


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

    Semantics of :func:`repro.kernels.gather.gather_fixed`; :data:`DEFAULT_SETTINGS`; launched
    directly once compiled (see the module docstring). Any argument a check rejects is reported by
    :func:`check_gather_args`' message.
    """
    if _quick_reject(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
        check_gather_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        raise AssertionError("unreachable: the quick check and check_gather_args disagree")  # pragma: no cover
    if not _LAUNCHER.enabled:
        gather_fast_with(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        return
    num_reqs = out.shape[0]
    max_gather = out.shape[1] - offset
    if num_reqs == 0 or max_gather == 0:
        return
    if num_reqs > MAX_GRID_Y:
        raise ValueError(
            f"gather_fast launches one grid row per request; at most {MAX_GRID_Y} requests, got {num_reqs}"
        )
    settings = DEFAULT_SETTINGS
    launch = _plan_cached(num_reqs, max_gather, out.device.index)
    ostride = out.stride()
    block_stride = k_cache.stride(0)
    pitch = block_table.stride(0)
    has_lens = gather_lens is not None
    lens = gather_lens if has_lens else seq_lens
    key = (
        launch.block_t,
        launch.tiles_per_program,
        has_lens,
        block_size,
        block_stride,
        pointer_spec(out.data_ptr()),
        pointer_spec(k_cache.data_ptr()),
        pointer_spec(seq_lens.data_ptr()),
        pointer_spec(lens.data_ptr()),
        pointer_spec(block_table.data_ptr()),
        int_spec(ostride[0]),
        int_spec(ostride[1]),
        int_spec(pitch, specialize=False),
        int_spec(offset, specialize=False),
    )
    args = (out, ostride[0], ostride[1], k_cache, seq_lens, lens, block_table, pitch, offset)
    _LAUNCHER.launch(
        key,
        launch.grid,
        args,
        lambda: _constexprs(has_lens, block_size, block_stride, launch, settings),
        launch.num_warps,
    )


@functools.lru_cache(maxsize=1024)
def _plan_cached(num_reqs: int, max_gather: int, device_index: int | None) -> FastPlan:
    return plan_launch(num_reqs, max_gather, torch.device("cuda", device_index), DEFAULT_SETTINGS, "grid")


def with_settings(**changes) -> FastSettings:
    """:data:`DEFAULT_SETTINGS` with some fields changed (``tile=`` takes a :class:`TileSettings`)."""
    return replace(DEFAULT_SETTINGS, **changes)

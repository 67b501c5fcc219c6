"""Bandwidth-tiled gathers of DeepSeek V4.1's K-cache records: 528-byte MXFP8 and 288-byte NVFP4.

:func:`dequantize_and_gather_k_cache` has the signature of vLLM's V4.1 dispatcher
(``vllm/models/deepseek_v41/common/ops/cache_utils.py``: ``out, k_cache, seq_lens, gather_lens,
block_table, block_size, offset, use_fnuz=False, max_gather_len=None``), picks the record from
``k_cache.shape[-1]`` as vLLM does, and reads the layout of vLLM 0.33.0 (each token's scales follow
its data); :func:`dequantize_and_gather_k_cache_page_split` reads the layout of 0.30.0-0.32.0 (a
page's data, then its scales). The 584-byte V4 record goes to :func:`repro.studies.kernels.fast.gather_fast`.
The block table's row pitch is ``block_table.stride(0)`` (PR #55109); every stride is passed.

Results are bitwise those of the release's kernels (with PR #55109's pitch), because each element is
computed by the same arithmetic:

* MXFP8: ``fp32(fp8) * exp2(fp32(s) - 127)`` rounded once to bf16, the scale computed per
  (token, 32-dim block) with vLLM's own expression.
* NVFP4: the e2m1 code's magnitude (0, 0.5, 1, 1.5, 2, 3, 4, 6), negated as ``0 - m`` for a set
  sign bit (so code 8 is +0, as vLLM's ``-mag`` gives), times the e4m3 scale in fp32, rounded to
  bf16. ``decode="arith"`` is vLLM's formula (``(1 + m/2) * exp2(e - 1)``); ``decode="bits"`` builds
  the same fp32 values from their bits; ``decode="half"`` reads the code as an fp16 of value ``v * 2**-14``
  and multiplies by ``scale * 2**14``. Every product is exact (at most 6 significant bits), so the three
  give the same fp32 product and the same bf16. On the H200 the NVFP4 gather is bound by this work, not
  by memory: at 256 x 2,048 tokens vLLM's formula costs 287-296 us, the fp32 bits 240-281, the fp16 route
  178-240 (data/h200/tuning-gather-v41.md); ``"half"`` is the default.

Design (GPU), as :mod:`repro.studies.kernels.fast`: grid ``(cdiv(out.shape[1] - offset, BLOCK_T *
TILES_PER_PROGRAM), num_reqs)``, ``tiles_per_program`` tiles (1 by default) of ``BLOCK_T`` consecutive gather
indices per program (tiles per program, then the tile, halved down to 1 and ``min_block_t`` while the grid has
fewer than ``waves * SMs`` programs), loads before stores, one
int32 block-table entry per token, the record's bytes as one ``[BLOCK_T, scales, bytes per scale]``
tile (16-byte vectors, one contiguous run per cache block in the interleaved layout) and its scales
as one ``[BLOCK_T, scales]`` tile; the scale is applied per (token, block), not loaded per element.
NVFP4 either interleaves the even/odd values into one bf16 tile (``store="interleave"``) or packs
each byte's two bf16 values into one int32 and stores those (``store="packed"``).

Tunables per record (:data:`DEFAULT_CONFIG`): ``block_t``, ``min_block_t``, ``waves``, ``num_warps``,
``store_cache`` (the output stores' cache modifier), ``evict_first`` (the record loads' eviction hint),
``scale_3d`` (the scales loaded in the values' layout), ``early_table`` (each program's table entry loaded
beside the request's length when there are no ``gather_lens``), ``tiles_per_program``, ``maxnreg`` (registers per
thread the compiler may use; ``None``: its own choice) and, for NVFP4, ``decode`` and ``store``;
:func:`gather_v41_with` overrides them for a benchmark.

Interpreter (``TRITON_INTERPRET=1``): one program per request loops over up to 256-token tiles
(``plan="per-request"``); ``plan="grid"`` forces the GPU launch shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from repro.core.geometry.layout import UE8M0_BIAS, is_pow2
from repro.core.geometry.records import V4, RecordLayout, layout_for
from repro.core.kernels.gather import check_gather_args
from repro.core.kernels.launch import is_interpreted
from repro.studies.kernels.fast import gather_fast
from repro.studies.kernels.launch_plan import early_entry, loads_early, programs_target
from repro.studies.kernels.settings import check_maxnreg, maxnreg_options

#: Record kinds this module gathers, by ``k_cache.shape[-1]`` (vLLM's dispatch key).
KIND_BY_TOKEN_BYTES = {layout_for("mxfp8").token_bytes: "mxfp8", layout_for("nvfp4").token_bytes: "nvfp4"}
#: NVFP4 decodes, in the kernel's ``DECODE`` order.
NVFP4_DECODES = ("arith", "bits", "half")
NVFP4_STORES = ("interleave", "packed")
#: Cache modifiers for the output stores: the default write-back, or ``.cs`` (streaming, evict first).
STORE_CACHES = ("", ".cs")

#: Launch defaults per record kind: the fastest bitwise-exact settings of the H200 sweeps at 256 x 2,048 tokens
#: (data/h200/tuning-gather-v41.md): 4 tokens and 2 warps per program, the scales loaded where the values are,
#: each tile's table entry loaded early (third run), and for NVFP4 the decode through fp16 with the interleaved
#: store.
DEFAULT_CONFIG = {
    "mxfp8": {
        "block_t": 4,
        "min_block_t": 2,
        "waves": 2,
        "num_warps": 2,
        "store_cache": "",
        "evict_first": True,
        "scale_3d": True,
        "early_table": True,
        "tiles_per_program": 1,
        "maxnreg": None,
    },
    "nvfp4": {
        "block_t": 4,
        "min_block_t": 2,
        "waves": 2,
        "num_warps": 2,
        "store_cache": "",
        "evict_first": True,
        "scale_3d": True,
        "early_table": True,
        "decode": "half",
        "store": "interleave",
        "tiles_per_program": 1,
        "maxnreg": None,
    },
}
#: Largest token tile in the interpreter (one program per request loops over its tiles).
INTERPRETER_MAX_BLOCK_T = 256
#: CUDA's limit on grid axis 1 (the request axis here).
MAX_GRID_Y = 65535


@triton.jit
def _request(b, seq_lens_ptr, gather_lens_ptr, HAS_GATHER_LENS: tl.constexpr):
    """(gather_len, first gathered position) of request ``b``: vLLM's ``seq_len - gather_len``."""
    seq_len = tl.load(seq_lens_ptr + b)
    if HAS_GATHER_LENS:
        gather_len = tl.load(gather_lens_ptr + b)
    else:
        gather_len = seq_len
    return gather_len, seq_len - gather_len


@triton.jit
def _records(
    i,
    gather_len,
    start,
    table_row,
    k_cache_ptr,
    early,
    EARLY: tl.constexpr,
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    DATA_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr,
):
    """(valid, data pointers, scale pointers) of the gather indices ``i``: one block-table entry per token (or
    the tile's one entry, ``early``, when :func:`repro.studies.kernels.launch_plan.early_entry` loaded it), int64 block
    offsets, the layout's placement of the scales."""
    valid = i < gather_len
    pos = start + i
    if EARLY:
        physical = early
    else:
        physical = tl.load(table_row + pos // CACHE_BLOCK_SIZE, mask=valid, other=0)
    slot = pos % CACHE_BLOCK_SIZE
    block = k_cache_ptr + physical.to(tl.int64) * BLOCK_STRIDE
    if INTERLEAVED:
        data = block + slot * (DATA_BYTES + SCALE_BYTES)
        scales_at = data + DATA_BYTES
    else:
        data = block + slot * DATA_BYTES
        scales_at = block + CACHE_BLOCK_SIZE * DATA_BYTES + slot * SCALE_BYTES
    return valid, data, scales_at


@triton.jit
def _load_scales(scales_at, g, valid, SCALE_3D: tl.constexpr):
    """The tile's scale bytes as ``[BLOCK_T, scales, 1]``: loaded in that shape (``SCALE_3D``), where the values
    are, or as ``[BLOCK_T, scales]`` and expanded."""
    if SCALE_3D:
        s = tl.load(scales_at[:, None, None] + g[None, :, None], mask=valid[:, None, None], other=0)
    else:
        s = tl.load(scales_at[:, None] + g[None, :], mask=valid[:, None], other=0)[:, :, None]
    return s


@triton.jit(do_not_specialize=["block_table_row_pitch", "block_table_width", "offset"])
def _gather_mxfp8_kernel(
    out_ptr,
    out_stride0,
    out_stride1,
    k_cache_ptr,
    seq_lens_ptr,
    gather_lens_ptr,
    block_table_ptr,
    block_table_row_pitch,  # block_table.stride(0) (PR #55109)
    block_table_width,  # block_table.shape[1]
    offset,
    HAS_GATHER_LENS: tl.constexpr,
    EARLY_TABLE: tl.constexpr,  # each tile's table entry loaded beside the request's length (see early_table)
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,  # bytes between cache blocks (k_cache.stride(0))
    INTERLEAVED: tl.constexpr,  # vLLM >= 0.33: scales after each token's data; else after the page's data
    STORE_CACHE: tl.constexpr,  # "" or ".cs"
    LOAD_EVICT: tl.constexpr,  # "evict_first" or "" (the records are read once)
    SCALE_3D: tl.constexpr,  # load the scales as [BLOCK_T, scales, 1] (True) or [BLOCK_T, scales]
    BLOCK_T: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
    HEAD_DIM: tl.constexpr,  # 512 fp8 bytes
    N_SCALES: tl.constexpr,  # 16 UE8M0 bytes
    QUANT_BLOCK: tl.constexpr,  # 32
    SCALE_BIAS: tl.constexpr,  # 127
):
    tile_id = tl.program_id(0)
    b = tl.program_id(1)
    gather_len, start = _request(b, seq_lens_ptr, gather_lens_ptr, HAS_GATHER_LENS)
    table_row = block_table_ptr + b.to(tl.int64) * block_table_row_pitch
    out_req = out_ptr + b.to(tl.int64) * out_stride0

    t = tl.arange(0, BLOCK_T)
    g = tl.arange(0, N_SCALES)
    c = tl.arange(0, QUANT_BLOCK)
    cols = g[:, None] * QUANT_BLOCK + c[None, :]  # [16, 32]: dim g*32 + c
    # The program's one table entry when all its tiles lie in one cache block (launch_plan.loads_early).
    early = early_entry(
        table_row, block_table_width, tile_id * TILES_PER_PROGRAM * BLOCK_T, EARLY_TABLE, CACHE_BLOCK_SIZE
    )
    for k in tl.static_range(TILES_PER_PROGRAM):
        i0 = (tile_id * TILES_PER_PROGRAM + k) * BLOCK_T
        if i0 < gather_len:
            i = i0 + t
            valid, data, scales_at = _records(
                i,
                gather_len,
                start,
                table_row,
                k_cache_ptr,
                early,
                EARLY_TABLE,
                CACHE_BLOCK_SIZE,
                BLOCK_STRIDE,
                INTERLEAVED,
                HEAD_DIM,
                N_SCALES,
            )
            s = _load_scales(scales_at, g, valid, SCALE_3D)
            x = tl.load(
                data[:, None, None] + cols[None, :, :],
                mask=valid[:, None, None],
                other=0,
                eviction_policy=LOAD_EVICT,
            )
            # vLLM's expressions: scale = exp2(s - 127) in fp32, value = fp32(fp8) * scale, one rounding.
            scale = tl.exp2(s.to(tl.float32) - SCALE_BIAS)
            vals = (x.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale).to(tl.bfloat16)

            row = out_req + (offset + i).to(tl.int64) * out_stride1
            tl.store(row[:, None, None] + cols[None, :, :], vals, mask=valid[:, None, None], cache_modifier=STORE_CACHE)


@triton.jit
def _e2m1_arith(codes):
    """vLLM's decode of 4-bit e2m1 codes (int32) to fp32: sign as ``0 - magnitude``."""
    mag_code = codes & 7
    e = (mag_code >> 1).to(tl.float32)
    m = (mag_code & 1).to(tl.float32)
    mag = tl.where(mag_code < 2, m * 0.5, (1.0 + m * 0.5) * tl.exp2(e - 1.0))
    return tl.where(codes >= 8, 0.0 - mag, mag)


@triton.jit
def _e2m1_bits(codes):
    """The same fp32 values from their bits: code 1 is 0.5 (0x3F000000), code c >= 2 has exponent field
    ``126 + (c >> 1)`` and mantissa bit ``c & 1``, i.e. bits ``(c + 252) << 22``; a set sign bit negates
    every non-zero magnitude (code 8 stays +0, as ``0 - 0``)."""
    mag_code = codes & 7
    mag = tl.where(mag_code >= 2, (mag_code + 252) << 22, tl.where(mag_code == 1, 0x3F000000, 0))
    signed = tl.where((codes >= 8) & (mag_code != 0), mag | (-2147483648), mag)
    return signed.to(tl.float32, bitcast=True)


@triton.jit
def _e2m1_half(codes):
    """The value divided by 2**14, read as an fp16 (``(code & 7) << 9`` puts e2m1's exponent and mantissa
    bits where fp16 has them; code 1 is the fp16 subnormal 2**-15), sign bit included, in fp32; ``+ 0.0``
    turns code 8's -0 into +0 as vLLM's ``0 - mag`` does. Exact: multiply by ``scale * 2**14``."""
    bits = ((codes & 7) << 9) | ((codes & 8) << 12)
    return bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32) + 0.0


@triton.jit(do_not_specialize=["block_table_row_pitch", "block_table_width", "offset"])
def _gather_nvfp4_kernel(
    out_ptr,
    out_stride0,
    out_stride1,
    k_cache_ptr,
    seq_lens_ptr,
    gather_lens_ptr,
    block_table_ptr,
    block_table_row_pitch,  # block_table.stride(0) (PR #55109)
    block_table_width,  # block_table.shape[1]
    offset,
    HAS_GATHER_LENS: tl.constexpr,
    EARLY_TABLE: tl.constexpr,  # each tile's table entry loaded beside the request's length (see early_table)
    CACHE_BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    DECODE: tl.constexpr,  # 0: vLLM's formula, 1: fp32 values from their bits, 2: through fp16
    STORE_PACKED: tl.constexpr,  # True: one int32 (two bf16) per packed byte; False: interleaved bf16 tile
    STORE_CACHE: tl.constexpr,
    LOAD_EVICT: tl.constexpr,
    SCALE_3D: tl.constexpr,
    BLOCK_T: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
    PACKED_BYTES: tl.constexpr,  # 256
    N_SCALES: tl.constexpr,  # 32 e4m3 bytes
    BYTES_PER_SCALE: tl.constexpr,  # 8 packed bytes = 16 values per scale
):
    tile_id = tl.program_id(0)
    b = tl.program_id(1)
    gather_len, start = _request(b, seq_lens_ptr, gather_lens_ptr, HAS_GATHER_LENS)
    table_row = block_table_ptr + b.to(tl.int64) * block_table_row_pitch
    out_req = out_ptr + b.to(tl.int64) * out_stride0

    t = tl.arange(0, BLOCK_T)
    g = tl.arange(0, N_SCALES)
    c = tl.arange(0, BYTES_PER_SCALE)
    cols = g[:, None] * BYTES_PER_SCALE + c[None, :]  # [32, 8]: packed byte g*8 + c (values 2*(g*8+c), +1)
    # The program's one table entry when all its tiles lie in one cache block (launch_plan.loads_early).
    early = early_entry(
        table_row, block_table_width, tile_id * TILES_PER_PROGRAM * BLOCK_T, EARLY_TABLE, CACHE_BLOCK_SIZE
    )
    for k in tl.static_range(TILES_PER_PROGRAM):
        i0 = (tile_id * TILES_PER_PROGRAM + k) * BLOCK_T
        if i0 < gather_len:
            i = i0 + t
            valid, data, scales_at = _records(
                i,
                gather_len,
                start,
                table_row,
                k_cache_ptr,
                early,
                EARLY_TABLE,
                CACHE_BLOCK_SIZE,
                BLOCK_STRIDE,
                INTERLEAVED,
                PACKED_BYTES,
                N_SCALES,
            )
            sf = _load_scales(scales_at, g, valid, SCALE_3D)
            packed = tl.load(
                data[:, None, None] + cols[None, :, :],
                mask=valid[:, None, None],
                other=0,
                eviction_policy=LOAD_EVICT,
            ).to(tl.int32)
            scale = sf.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            lo_code = packed & 0xF  # even element
            hi_code = (packed >> 4) & 0xF  # odd element
            if DECODE == 2:
                scale = scale * 16384.0  # exact: e4m3 times 2**14
                lo = _e2m1_half(lo_code) * scale
                hi = _e2m1_half(hi_code) * scale
            elif DECODE == 1:
                lo = _e2m1_bits(lo_code) * scale
                hi = _e2m1_bits(hi_code) * scale
            else:
                lo = _e2m1_arith(lo_code) * scale
                hi = _e2m1_arith(hi_code) * scale

            row = out_req + (offset + i).to(tl.int64) * out_stride1
            if STORE_PACKED:
                # Little-endian: the even value is the low half of the 32-bit word.
                lo16 = lo.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
                hi16 = hi.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32)
                words = lo16 | (hi16 << 16)
                row32 = row.to(tl.pointer_type(tl.int32))
                tl.store(
                    row32[:, None, None] + cols[None, :, :],
                    words,
                    mask=valid[:, None, None],
                    cache_modifier=STORE_CACHE,
                )
            else:
                vals = tl.interleave(lo, hi).to(tl.bfloat16)  # [BLOCK_T, 32, 16]
                d = tl.arange(0, 2 * BYTES_PER_SCALE)
                dims = g[:, None] * (2 * BYTES_PER_SCALE) + d[None, :]
                tl.store(
                    row[:, None, None] + dims[None, :, :], vals, mask=valid[:, None, None], cache_modifier=STORE_CACHE
                )


@dataclass(frozen=True)
class V41Plan:
    """One launch: grid, tile, tiles per program, warps."""

    grid: tuple
    block_t: int
    tiles_per_program: int
    num_warps: int


def check_config(kind: str, cfg: dict) -> None:
    """Reject unknown or impossible settings, naming the setting and what is accepted."""
    allowed = DEFAULT_CONFIG[kind]
    unknown = set(cfg) - set(allowed)
    if unknown:
        raise ValueError(f"unknown {kind} gather settings {sorted(unknown)}; accepted: {sorted(allowed)}")
    for key in ("block_t", "min_block_t", "num_warps", "tiles_per_program"):
        if not is_pow2(cfg[key]) or (key == "num_warps" and cfg[key] > 32):
            raise ValueError(f"{key} must be a power of two >= 1 (num_warps <= 32), got {cfg[key]!r}")
    if not isinstance(cfg["waves"], (int, float)) or cfg["waves"] < 0:
        raise ValueError(f"waves must be a non-negative number, got {cfg['waves']!r}")
    for key in ("evict_first", "scale_3d", "early_table"):
        if not isinstance(cfg[key], bool):
            raise ValueError(f"{key} must be true or false, got {cfg[key]!r}")
    check_maxnreg(cfg["maxnreg"])
    if cfg["store_cache"] not in STORE_CACHES:
        raise ValueError(f"store_cache must be one of {STORE_CACHES}, got {cfg['store_cache']!r}")
    if kind == "nvfp4":
        if cfg["decode"] not in NVFP4_DECODES:
            raise ValueError(f"decode must be one of {NVFP4_DECODES}, got {cfg['decode']!r}")
        if cfg["store"] not in NVFP4_STORES:
            raise ValueError(f"store must be one of {NVFP4_STORES}, got {cfg['store']!r}")


def plan_launch(num_reqs: int, max_gather: int, device: torch.device, cfg: dict, plan: str) -> V41Plan:
    """``"grid"`` (GPU: ``tiles_per_program`` tiles per program) or ``"per-request"`` (interpreter: one program per
    request). On a GPU with too few programs to fill it, tiles per program give way first, then the tile."""
    if plan == "per-request":
        block_t = min(INTERPRETER_MAX_BLOCK_T, triton.next_power_of_2(max_gather))
        return V41Plan((1, num_reqs), block_t, triton.cdiv(max_gather, block_t), 4)
    if plan != "grid":
        raise ValueError(f"plan must be 'grid' or 'per-request', got {plan!r}")
    block_t, per_program = cfg["block_t"], cfg["tiles_per_program"]
    if device.type == "cuda":
        target = programs_target(device, cfg["waves"])
        while num_reqs * triton.cdiv(max_gather, block_t * per_program) < target:
            if per_program > 1:
                per_program //= 2
            elif block_t > cfg["min_block_t"]:
                block_t //= 2
            else:
                break
    return V41Plan((triton.cdiv(max_gather, block_t * per_program), num_reqs), block_t, per_program, cfg["num_warps"])


def early_table(cfg: dict, has_gather_lens: bool, block_size: int, launch: V41Plan) -> bool:
    """Whether this launch loads each program's table entry early (:func:`launch_plan.loads_early`)."""
    return loads_early(cfg["early_table"], has_gather_lens, block_size, launch.block_t, launch.tiles_per_program)


def record_layout(k_cache: torch.Tensor, interleaved: bool) -> RecordLayout:
    """The V4.1 record ``k_cache`` holds, read from ``k_cache.shape[-1]`` as vLLM's dispatcher reads it."""
    kind = KIND_BY_TOKEN_BYTES.get(k_cache.shape[-1])
    if kind is None:
        accepted = ", ".join(f"{b} ({k})" for b, k in KIND_BY_TOKEN_BYTES.items())
        raise ValueError(f"k_cache.shape[-1] must be one of {accepted}, got {k_cache.shape[-1]}")
    return layout_for(kind, interleaved)


def check_v41_args(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    layout: RecordLayout,
) -> None:
    """Reject inputs the kernels would silently misread, naming the argument and what is accepted."""
    if k_cache.dim() != 3:
        raise ValueError(f"k_cache must be uint8 [num_blocks, block_size, token_bytes], got {tuple(k_cache.shape)}")
    check_gather_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, layout.token_bytes)
    if layout.kind == "nvfp4" and (out.stride(0) % 2 or out.stride(1) % 2 or out.data_ptr() % 4):
        raise ValueError(f"out must have even strides and a 4-byte aligned start for NVFP4, got {out.stride()}")


def gather_v41_with(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    *,
    interleaved: bool,
    use_fnuz: bool = False,
    plan: str | None = None,
    **settings,
) -> V41Plan | None:
    """The V4.1 gather with explicit settings (keys of :data:`DEFAULT_CONFIG` for the record), for benchmarks.

    ``plan=None`` picks ``"per-request"`` in the interpreter and ``"grid"`` on a GPU. Returns the
    :class:`V41Plan` launched (``None`` when there was nothing to do).
    """
    if use_fnuz:
        raise ValueError(
            "use_fnuz: only e4m3fn (OCP) caches are gathered here; vLLM passes True only for ROCm gfx942's SWA cache"
        )
    layout = record_layout(k_cache, interleaved)
    cfg = {**DEFAULT_CONFIG[layout.kind], **settings}
    check_config(layout.kind, cfg)
    check_v41_args(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, layout)
    num_reqs = block_table.shape[0]
    max_gather = out.shape[1] - offset
    if num_reqs == 0 or max_gather == 0:
        return None
    if num_reqs > MAX_GRID_Y:
        raise ValueError(f"one grid row per request: at most {MAX_GRID_Y} requests, got {num_reqs}")
    kernel = _gather_mxfp8_kernel if layout.kind == "mxfp8" else _gather_nvfp4_kernel
    if plan is None:
        plan = "per-request" if is_interpreted(kernel) else "grid"
    launch = plan_launch(num_reqs, max_gather, out.device, cfg, plan)
    common = (
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
    )
    shared = {
        "HAS_GATHER_LENS": gather_lens is not None,
        "EARLY_TABLE": early_table(cfg, gather_lens is not None, block_size, launch),
        "CACHE_BLOCK_SIZE": block_size,
        "BLOCK_STRIDE": k_cache.stride(0),
        "INTERLEAVED": layout.interleaved,
        "BLOCK_T": launch.block_t,
        "STORE_CACHE": cfg["store_cache"],
        "LOAD_EVICT": "evict_first" if cfg["evict_first"] else "",
        "SCALE_3D": cfg["scale_3d"],
        "TILES_PER_PROGRAM": launch.tiles_per_program,
        "num_warps": launch.num_warps,
        **maxnreg_options(cfg["maxnreg"]),
    }
    if layout.kind == "mxfp8":
        _gather_mxfp8_kernel[launch.grid](
            *common,
            **shared,
            HEAD_DIM=layout.data_bytes,
            N_SCALES=layout.n_scales,
            QUANT_BLOCK=layout.quant_block,
            SCALE_BIAS=UE8M0_BIAS,
        )
    else:
        _gather_nvfp4_kernel[launch.grid](
            *common,
            **shared,
            DECODE=NVFP4_DECODES.index(cfg["decode"]),
            STORE_PACKED=cfg["store"] == "packed",
            PACKED_BYTES=layout.data_bytes,
            N_SCALES=layout.n_scales,
            BYTES_PER_SCALE=layout.quant_block // 2,
        )
    return launch


def _dispatch(
    interleaved: bool, out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, use_fnuz, max_gather_len
) -> None:
    if k_cache.shape[-1] == V4.token_bytes and not use_fnuz:
        gather_fast(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        return
    # max_gather_len is a launch hint in vLLM (its worker count); the grid here is sized from out.shape[1].
    gather_v41_with(
        out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, interleaved=interleaved, use_fnuz=use_fnuz
    )


def dequantize_and_gather_k_cache(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    use_fnuz: bool = False,
    max_gather_len: int | None = None,
) -> None:
    """vLLM 0.33.0's V4.1 dispatcher's signature and records (scales after each token's data), tiled for
    bandwidth; row pitch ``block_table.stride(0)``."""
    _dispatch(True, out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, use_fnuz, max_gather_len)


def dequantize_and_gather_k_cache_page_split(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    gather_lens: torch.Tensor | None,
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
    use_fnuz: bool = False,
    max_gather_len: int | None = None,
) -> None:
    """The same for vLLM 0.30.0-0.32.0's V4.1 pages (every token's data, then every token's scales)."""
    _dispatch(False, out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, use_fnuz, max_gather_len)

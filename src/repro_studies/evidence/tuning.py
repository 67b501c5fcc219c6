"""The launch-setting sweep behind ``gather_fast`` and the streaming ceiling, in one GPU call.

``python -m repro_studies.evidence.tuning [--out DIR] [--budget-s S] [--smoke]`` measures, in this order and
within a time budget (a section that would overrun is recorded as skipped, never killed):

1. copy-equivalent rates: a device copy, a read-only and a write-only pass over 1 GiB, and the byte mover as a
   copy and at the gather's and other mixes of reads and writes (:data:`MOVE_READ_BYTES`);
2. streaming kernels (the gather's 584 B in / 1,024 B out per token, no block table) in many tile
   settings (:class:`repro_studies.kernels.settings.TileSettings`, tokens and warps per program, tiles per program)
   and both record layouts, at the largest shape;
3. ``gather_fast`` candidates (:class:`repro_studies.kernels.settings.FastSettings`) at the largest shape on the
   narrowed block table;
4. the best candidates, today's settings and vLLM's CuTe-DSL gather (through the release's own
   dispatcher, loaded by :mod:`repro_studies.upstream`) at every shape, CUDA-graph medians in alternating rounds;
5. host time per eager call (plain clock over many calls after warm-up) of every arm, and the direct
   launch path checked bitwise on aligned and misaligned tensors.

Every kernel is checked bitwise against its reference before it is timed; a failure (compile error,
mismatch) is a row. Rows go to ``DIR/tuning-sweep.csv`` (a ``table`` column names each row's table); a
compact table is printed last. ``--smoke`` runs every
code path on the CPU (Triton's interpreter, tiny sizes, wall-clock "timings" that mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from pathlib import Path

import pandas as pd
import torch

from repro.core.evidence.cases import compare_bitwise, reference_output
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.geometry.layout import DSV4
from repro.coverage import SentinelMode
from repro_studies.evidence.timing import copy_ceiling, graph_median_us, host_us, median_us, rotation_count
from repro_studies.kernels.settings import DEFAULT_TILE
from repro_studies.kernels.settings import FastSettings as F
from repro_studies.kernels.settings import TileSettings as T

#: The release whose CuTe-DSL gather is the production peer.
CUTEDSL_RELEASE = "0.33.0"
BLOCK_SIZE = 64
#: Request counts x sequence length of the GPU sweep; the first is the largest (where settings are chosen).
GPU_SHAPES = ((256, 2048), (128, 2048), (64, 2048), (32, 2048), (16, 2048), (1, 2048), (256, 256), (16, 256))
SMOKE_SHAPES = ((3, 40), (1, 24))
#: Fraction of the budget each section may use before the next one starts (cumulative).
SECTION_END = {"rates": 0.06, "stream": 0.30, "gather": 0.62, "shapes": 0.90, "host": 1.0}
TOP_CANDIDATES = 3
#: Bytes the byte mover reads per 1,024-byte row it writes in the rates section: the gather's 584 among other mixes,
#: and 1,024 (a copy, one of the copy's ways), so that the rows price the gather's mix of reads and writes against a
#: copy's, kernel for kernel.
MOVE_READ_BYTES = (256, 512, 584, 768, 1024)


def mix_kind(read_bytes: int) -> str:
    """The rates row's kind of the byte mover reading ``read_bytes`` per 1,024 written (1,024: ``"copy"``)."""
    return "copy" if read_bytes == 1024 else f"read {read_bytes:,} : write 1,024"


#: (tokens, warps) of the byte mover in the rates section: the fastest of the ceiling sweeps (runs 4-13).
RATE_MOVE_TILES = ((4, 4), (8, 16))
#: The host section's reference arm: PyTorch's own launch of a one-block kernel (``add_`` on 256 bf16 values).
TORCH_LAUNCH = "PyTorch's own launch: add_ on 256 values"
#: (tokens, warps) of the flat byte mover (stream_move).
MOVE_TILES = ((8, 8), (8, 4), (16, 8), (16, 16), (32, 16), (4, 4), (8, 16))


def stream_candidates() -> list[tuple[str, dict]]:
    """(layout, stream_dequant keywords) of the streaming sweep: the earlier runs' best (grouped tile, no load
    eviction hint), the chunk-major "lanes" tile (8 fp8 bytes in, 16 bf16 bytes out per thread, no register
    exchange), loops over tiles, and the "wide" tile (16 fp8 bytes in, 32 bf16 bytes out per thread)."""

    plain = T(load_evict="")
    lanes = T(tile="lanes", load_evict="")
    wide = T(tile="wide", load_evict="")
    split = [
        {"block_t": 8, "num_warps": 4, "tile": plain},
        {"block_t": 8, "num_warps": 4, "tile": plain, "tiles_per_program": 4, "num_stages": 3},
        {"block_t": 8, "num_warps": 4, "tile": lanes},
        {"block_t": 16, "num_warps": 8, "tile": lanes},
        {"block_t": 4, "num_warps": 2, "tile": lanes},
        {"block_t": 8, "num_warps": 4, "tile": lanes, "tiles_per_program": 4, "prefetch": True},
        {"block_t": 8, "num_warps": 4, "tile": lanes, "tiles_per_program": 4, "num_stages": 3},
        # 16 fp8 bytes per thread (one 16-byte load), stored as two 16-byte halves.
        {"block_t": 4, "num_warps": 1, "tile": wide},
        {"block_t": 4, "num_warps": 2, "tile": wide},
        {"block_t": 8, "num_warps": 2, "tile": wide},
        {"block_t": 8, "num_warps": 4, "tile": wide},
    ]
    return [("split", kw) for kw in split] + [("records", {"block_t": 8, "num_warps": 4, "tile": lanes})]


def stream_label(layout: str, kw: dict) -> str:

    tile = kw.get("tile", DEFAULT_TILE)
    loop = ""
    if kw.get("tiles_per_program", 1) > 1:
        loop = f" tpp{kw['tiles_per_program']}" + (
            " prefetch" if kw.get("prefetch") else f" st{kw.get('num_stages', 1)}"
        )
    return f"stream {layout} {kw['block_t']}x{kw['num_warps']}{loop} {tile.label()}"


def gather_candidates() -> list:
    """``FastSettings`` of the gather sweep: the first two defaults (grouped tile; 4 tiles per program pipelined
    in 3 stages), the grouped tile's hints and loop depths around them, the chunk-major "lanes" tile (the
    third run's best) in sizes and loops, and with the early table entry (the default since run 8), one per tile or
    one per program of several tiles, and with fewer registers per thread (``maxnreg``), and the "wide" tile (16 fp8
    bytes per thread and load)."""
    plain = T(load_evict="")
    lanes = T(tile="lanes", load_evict="")
    wide = T(tile="wide", load_evict="")
    return [
        F(),  # gather_fast's settings before the H200 sweep
        F(tiles_per_program=4, num_stages=3),  # the default after its second run
        F(tiles_per_program=4, num_stages=3, tile=plain),
        F(tiles_per_program=2, num_stages=2, tile=plain),
        F(min_block_t=4, tile=lanes),  # the default after its third run
        F(min_block_t=2, waves=4, tile=lanes),
        F(min_block_t=4, tile=T(tile="lanes", load_evict="", store_cache=".cs")),
        F(min_block_t=4, tile=T(tile="lanes", load_evict="", overread=True)),
        F(block_t=16, num_warps=8, min_block_t=4, tile=lanes),
        F(block_t=4, num_warps=2, min_block_t=4, tile=lanes),
        F(min_block_t=4, tiles_per_program=2, prefetch=True, tile=lanes),
        F(block_t=4, num_warps=2, min_block_t=4, tiles_per_program=4, prefetch=True, tile=lanes),
        F(block_t=8, num_warps=2, min_block_t=4, tile=lanes),
        F(block_t=16, num_warps=4, min_block_t=4, tile=lanes),
        F(block_t=32, num_warps=8, min_block_t=4, tile=lanes),
        F(min_block_t=4, tile=T(tile="lanes", load_evict="", load_cache=".cg")),
        F(min_block_t=4, tile=T(tile="lanes", load_evict="", store_cache=".cg")),
        F(min_block_t=4, early_table=True, tile=lanes),
        F(block_t=4, num_warps=2, min_block_t=4, early_table=True, tile=lanes),
        F(block_t=16, num_warps=8, min_block_t=4, early_table=True, tile=lanes),
        # A program of several tiles within one cache block loads its one table entry once.
        F(min_block_t=4, early_table=True, tiles_per_program=2, tile=lanes),
        F(min_block_t=4, early_table=True, tiles_per_program=4, tile=lanes),
        F(min_block_t=4, early_table=True, tiles_per_program=8, tile=lanes),
        F(block_t=4, num_warps=2, min_block_t=4, early_table=True, tiles_per_program=4, tile=lanes),
        F(block_t=4, num_warps=2, min_block_t=4, early_table=True, tiles_per_program=16, tile=lanes),
        F(min_block_t=4, early_table=True, tiles_per_program=2, prefetch=True, tile=lanes),
        # Fewer registers per thread, more programs resident per SM (more bytes in flight).
        *(F(min_block_t=4, early_table=True, maxnreg=r, tile=lanes) for r in (32, 40, 48)),
        *(F(block_t=4, num_warps=2, min_block_t=4, early_table=True, maxnreg=r, tile=lanes) for r in (32, 40)),
        # Half the load instructions: 16 fp8 bytes per thread and load, two 16-byte stores.
        *(
            F(block_t=4, num_warps=w, min_block_t=4, early_table=True, maxnreg=r, tile=wide)
            for w in (1, 2)
            for r in (None, 40)
        ),
        F(block_t=8, num_warps=2, min_block_t=4, early_table=True, tile=wide),
        F(block_t=8, num_warps=4, min_block_t=4, early_table=True, tile=wide),
    ]


def small_shape_variants(best: object) -> list:
    """The best settings with a smaller grid-filling floor (matters only below the largest shape)."""

    return [replace(best, min_block_t=2, waves=4), replace(best, min_block_t=1, waves=8)]


@dataclass
class Sweep:
    """Time keeping, rows per table, and the device-dependent timers."""

    device: str
    budget_s: float
    out_dir: Path | None
    started: float = field(default_factory=time.monotonic)
    tables: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"

    def left(self, section: str) -> float:
        """Seconds this section may still use."""
        return self.started + SECTION_END[section] * self.budget_s - time.monotonic()

    def add(self, table: str, row: dict) -> None:
        self.tables.setdefault(table, []).append(row)

    def sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize()

    def eager_us(self, fn: Callable[[], object]) -> float:
        """Device time of one call (``do_bench`` median, L2 cleared); wall clock of one call on the CPU."""
        if self.on_gpu:
            return median_us(fn, rep_ms=30)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6

    def graph_us(self, calls: list) -> float:
        """Per-call median of CUDA-graph replays of ``calls``; wall clock per call on the CPU."""
        if self.on_gpu:
            return graph_median_us(calls, rep_ms=30)
        t0 = time.perf_counter()
        for fn in calls:
            fn()
        return (time.perf_counter() - t0) * 1e6 / len(calls)

    def host_us(self, fn: Callable[[], object], calls: int) -> float:
        """Host time per call (:func:`repro_studies.evidence.timing.host_us`: median of rounds of ``calls`` calls)."""
        return host_us(fn, calls, sync=self.sync)

    def rotation(self, nbytes: int) -> int:
        if not self.on_gpu:
            return 1

        return rotation_count(nbytes)

    def write(self) -> None:
        if self.out_dir is None:
            return

        self.out_dir.mkdir(parents=True, exist_ok=True)
        # One file, a "table" column naming each row's table (few files travel back from a GPU host).
        frames = [pd.DataFrame(rows).assign(table=name) for name, rows in self.tables.items() if rows]
        if frames:
            pd.concat(frames, ignore_index=True).to_csv(self.out_dir / "tuning-sweep.csv", index=False)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]


def _tbps(nbytes: float, us: float) -> float:
    return round(nbytes / (us * 1e-6) / 1e12, 4) if us > 0 else float("nan")


# ---------------------------------------------------------------------------------------------
# 1. rates


def measure_rates(sw: Sweep) -> dict:
    """Copy, read-only, write-only and mixed (:data:`MOVE_READ_BYTES`) rates in TB/s (bytes moved per second), each
    the best of a few ways."""

    from repro_studies.kernels import stream as S  # lazy: kernels: after main() sets the profile

    nbytes = (1 << 30) if sw.on_gpu else (1 << 16)
    src = torch.empty(nbytes, dtype=torch.uint8, device=sw.device).random_(0, 256)
    dst = torch.empty_like(src)
    words = src.view(torch.int64)
    rates = {}
    ways = {
        "copy": [("torch copy_", lambda: dst.copy_(src), 2 * nbytes)],
        "write-only": [("torch zero_", lambda: dst.zero_(), nbytes), ("torch fill_", lambda: dst.fill_(7), nbytes)],
        "read-only": [("torch sum (int64 words)", lambda: words.sum(), nbytes)],
        **{mix_kind(r): [] for r in MOVE_READ_BYTES if r != 1024},
    }
    row_bytes = DSV4.head_dim * 2
    rows = nbytes // row_bytes
    moved_out = torch.empty(rows, DSV4.head_dim, dtype=torch.bfloat16, device=sw.device)
    for bt, w in RATE_MOVE_TILES if sw.on_gpu else RATE_MOVE_TILES[:1]:
        for read_bytes in MOVE_READ_BYTES:
            ways[mix_kind(read_bytes)].append(
                (
                    f"stream_move {read_bytes} B in, {row_bytes} out, {bt}x{w}",
                    partial(S.move_words, src, moved_out, rows, read_bytes, block_t=bt, num_warps=w),
                    rows * (read_bytes + row_bytes),
                    {"mover_read_bytes": read_bytes},
                )
            )
    tokens = nbytes // (2 * 1024) if sw.on_gpu else 64
    for layout, bt, w in (("split", 8, 4), ("split", 32, 8)):
        inp = S.make_stream_input(tokens, layout, device=sw.device)
        launch = S.plan_stream(tokens, bt, w, "grid" if sw.on_gpu else "per-program")
        sums = S.read_sums_buffer(inp, launch)
        ways["read-only"].append(
            (
                f"stream_read {layout} {bt}x{w}",
                partial(S.stream_read, inp, sums, block_t=bt, num_warps=w, plan="grid" if sw.on_gpu else None),
                inp.bytes_read,
            )
        )
        out = torch.empty(tokens, 512, dtype=torch.bfloat16, device=sw.device)
        ways["write-only"].append(
            (
                f"stream_write {bt}x{w}",
                partial(S.stream_write, out, block_t=bt, num_warps=w, plan="grid" if sw.on_gpu else None),
                tokens * 1024,
            )
        )
    for kind, entries in ways.items():
        best = 0.0
        for how, fn, moved, *columns in entries:  # (how, call, bytes moved[, the byte mover's columns])
            for launch, timer in (("eager", sw.eager_us), ("graph", lambda f: sw.graph_us([f]))):
                row = {"kind": kind, "how": how, "launch": launch, "bytes": moved, **(columns[0] if columns else {})}
                try:
                    us = timer(fn)
                    tb = _tbps(moved, us)
                    best = max(best, tb)
                    sw.add("rates", {**row, "median_us": round(us, 3), "tbps": tb})
                except Exception as exc:
                    sw.add("rates", {**row, "error": _error(exc)})
        rates[kind] = best
    if sw.on_gpu:
        ceiling = copy_ceiling()
        sw.add(
            "rates",
            {
                "kind": "copy",
                "how": "notebook 03's copy ceiling (2 GiB copy_, do_bench)",
                "launch": "eager",
                "bytes": 2 * ceiling.nbytes,
                "median_us": round(ceiling.median_us, 3),
                "tbps": round(ceiling.tbps, 4),
            },
        )
        rates["copy"] = max(rates["copy"], ceiling.tbps)
    return rates


# ---------------------------------------------------------------------------------------------
# 2. streaming ceiling candidates


def stream_sweep(sw: Sweep, tokens: int, rates: dict) -> list[dict]:

    from repro_studies.kernels import stream as S  # lazy: kernels: after main() sets the profile

    copies = sw.rotation(tokens * 1608)
    inputs = {
        layout: [S.make_stream_input(tokens, layout, seed=k, device=sw.device) for k in range(copies)]
        for layout in ("split", "records")
    }
    refs = {layout: S.stream_reference(inputs[layout][0]).view(torch.int16) for layout in inputs}
    outs = [torch.empty(tokens, 512, dtype=torch.bfloat16, device=sw.device) for _ in range(copies)]
    rows = []
    for layout, kw in stream_candidates():
        label = stream_label(layout, kw)
        if sw.left("stream") <= 0:
            sw.add("stream", {"arm": label, "status": "skipped: time budget"})
            continue
        kw = {**kw, "plan": "grid" if sw.on_gpu else None}
        row = {"arm": label, "layout": layout, "tokens": tokens}
        try:
            check = inputs[layout][0].fresh_out()
            row["registers"] = S.stream_dequant(inputs[layout][0], check, **kw).registers
            sw.sync()
            bad = int((check.view(torch.int16) != refs[layout]).any(1).sum())
            row["mismatched_tokens"] = bad
            if bad:
                row["status"] = "mismatch"
            else:
                calls = [partial(S.stream_dequant, inp, o, **kw) for inp, o in zip(inputs[layout], outs)]
                us = sw.graph_us(calls)
                row |= {"status": "ok", "graph_us": round(us, 3), "tbps": _tbps(tokens * 1608, us)}
                if rates.get("copy"):
                    row["copy_equiv_fraction"] = round(tokens * 1608 / (rates["copy"] * 1e12) / (us * 1e-6), 4)
        except Exception as exc:
            row |= {"status": "error", "error": _error(exc)}
        sw.add("stream", row)
        rows.append(row)
    for bt, w in MOVE_TILES:  # the gather's bytes as two flat streams, no dtype work (a pure byte mover)
        label = f"move records {bt}x{w} (584 B in, 1,024 B out per token, flat runs)"
        if sw.left("stream") <= 0:
            sw.add("stream", {"arm": label, "status": "skipped: time budget"})
            continue
        row = {"arm": label, "layout": "records", "tokens": tokens}
        try:
            check = inputs["records"][0].fresh_out()
            launch = S.stream_move(inputs["records"][0], check, block_t=bt, num_warps=w)
            row["registers"] = launch.registers
            sw.sync()
            ref = S.move_reference(inputs["records"][0], launch).view(torch.int16)
            row["mismatched_tokens"] = bad = int((check.view(torch.int16) != ref).any(1).sum())
            if bad:
                row["status"] = "mismatch"
            else:
                move = partial(S.stream_move, block_t=bt, num_warps=w)
                calls = [partial(move, inp, o) for inp, o in zip(inputs["records"], outs)]
                us = sw.graph_us(calls)
                row |= {"status": "ok", "graph_us": round(us, 3), "tbps": _tbps(tokens * 1608, us)}
                if rates.get("copy"):
                    row["copy_equiv_fraction"] = round(tokens * 1608 / (rates["copy"] * 1e12) / (us * 1e-6), 4)
        except Exception as exc:
            row |= {"status": "error", "error": _error(exc)}
        sw.add("stream", row)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# 3. gather candidates at the largest shape


def equal_requests(num_reqs: int, seq_len: int, max_reqs: int, device: str) -> ScenarioSpec:
    """The measured scenario: ``num_reqs`` requests of ``seq_len`` tokens each on a table narrowed from
    ``max_reqs`` rows, blocks of :data:`BLOCK_SIZE`, every id in range."""
    return ScenarioSpec(
        num_reqs=num_reqs,
        block_size=BLOCK_SIZE,
        seq_len_max=seq_len,
        seq_lens=(seq_len,) * num_reqs,
        max_reqs=max_reqs,
        device=device,
        mode=SentinelMode.IN_RANGE,
    )


def _scenarios(sw: Sweep, num_reqs: int, seq_len: int, max_reqs: int):
    """As many seeds of :func:`equal_requests` as exceed twice the L2 (:meth:`Sweep.rotation`)."""
    spec = equal_requests(num_reqs, seq_len, max_reqs, sw.device)
    copies = sw.rotation(num_reqs * seq_len * 1608)
    return [build_scenario(replace(spec, seed=k)) for k in range(copies)]


def _check(fn, scenario, ref) -> int:
    """Tokens ``fn`` got wrong on ``scenario`` (mismatched or stray), against ``ref``."""
    return _checked_call(fn, scenario, ref)[0]


def _checked_call(fn, scenario, ref) -> tuple[int, object]:
    """(:func:`_check`'s count, what ``fn`` returned)."""
    out = scenario.fresh_out()
    result = fn(*scenario.args(out))
    mismatched, stray = compare_bitwise(out, ref, scenario)
    return mismatched + stray, result


def gather_sweep(sw: Sweep, shapes: list[tuple], copy_rate: float) -> list[tuple[float, object]]:
    """Every candidate at each ``(scenarios, reference)`` shape, checked first; ranked by the first shape."""
    from repro_studies.kernels.fast import gather_fast_with  # lazy: kernels: after main() sets the profile

    plan = "grid" if sw.on_gpu else None
    ranked = []
    for settings in gather_candidates():
        label = settings.label()
        first_us = None
        for scenarios, ref in shapes:
            s0 = scenarios[0]
            tokens = s0.total_tokens
            row = {"arm": label, "num_reqs": s0.spec.num_reqs, "seq_len": s0.spec.seq_len_max, "tokens": tokens}
            if sw.left("gather") <= 0:
                sw.add("gather", {**row, "status": "skipped: time budget"})
                continue
            fn = partial(gather_fast_with, settings=settings, plan=plan)
            try:
                bad, launch = _checked_call(fn, s0, ref)
                row["mismatched_tokens"] = bad
                row["registers"] = launch.registers  # per thread, as compiled (None in the interpreter)
                if bad:
                    row["status"] = "mismatch"
                else:
                    outs = [s.fresh_out() for s in scenarios]
                    us = sw.graph_us([partial(fn, *s.args(o)) for s, o in zip(scenarios, outs)])
                    row |= {"status": "ok", "graph_us": round(us, 3), "tbps": _tbps(tokens * 1608, us)}
                    if copy_rate:
                        row["copy_equiv_fraction"] = round(tokens * 1608 / (copy_rate * 1e12) / (us * 1e-6), 4)
                    if first_us is None:
                        first_us = us
            except Exception as exc:
                row |= {"status": "error", "error": _error(exc)}
            sw.add("gather", row)
            if first_us is None:
                break  # failed at the largest shape: not a candidate
        if first_us is not None:
            ranked.append((first_us, settings))
    ranked.sort(key=lambda x: x[0])
    return ranked


# ---------------------------------------------------------------------------------------------
# 4. every shape: best candidates, today's settings, the best streaming kernel, vLLM's CuTe-DSL gather


def load_cutedsl(sw: Sweep) -> tuple[Callable | None, str]:
    """(callable, why not) for the CuTe-DSL gather of :data:`CUTEDSL_RELEASE`."""
    if not sw.on_gpu:
        return None, "the CuTe-DSL gather compiles for a CUDA GPU; this run has none"
    try:
        from repro_studies.upstream.cutedsl import cutedsl_callable  # lazy: vLLM's CuTe-DSL stack, on a GPU run only

        _, fn, why = cutedsl_callable(CUTEDSL_RELEASE, "cuda", download=False)
        return fn, why
    except Exception as exc:
        return None, _error(exc)


def shape_sweep(
    sw: Sweep, shapes: tuple, arms: list[tuple[str, Callable, Callable | None]], stream_kw: dict | None
) -> None:
    """Graph medians of every arm at every shape (three alternating rounds), each checked first."""

    from repro_studies.kernels import stream as S  # lazy: kernels: after main() sets the profile

    max_reqs = max(n for n, _ in shapes)
    for n, L in shapes:
        if sw.left("shapes") <= 0:
            sw.add("shapes", {"num_reqs": n, "seq_len": L, "status": "skipped: time budget"})
            continue
        scenarios = _scenarios(sw, n, L, max_reqs)
        ref = reference_output(scenarios[0])
        outs = [s.fresh_out() for s in scenarios]
        timed = {}
        for name, fn, scope in arms:
            with scope() if scope else contextlib.nullcontext():
                try:
                    bad = _check(fn, scenarios[0], ref)
                except Exception as exc:
                    sw.add(
                        "shapes", {"arm": name, "num_reqs": n, "seq_len": L, "status": "error", "error": _error(exc)}
                    )
                    continue
            if bad:
                sw.add("shapes", {"arm": name, "num_reqs": n, "seq_len": L, "status": "mismatch", "mismatched": bad})
                continue
            timed[name] = ([partial(fn, *s.args(o)) for s, o in zip(scenarios, outs)], scope)
        if stream_kw is not None:
            tokens = n * L
            inputs = [S.make_stream_input(tokens, "split", seed=k, device=sw.device) for k in range(len(scenarios))]
            souts = [torch.empty(tokens, 512, dtype=torch.bfloat16, device=sw.device) for _ in inputs]
            timed["stream"] = ([partial(S.stream_dequant, i, o, **stream_kw) for i, o in zip(inputs, souts)], None)
        medians = {name: [] for name in timed}
        for _ in range(3):
            for name, (calls, scope) in timed.items():
                with scope() if scope else contextlib.nullcontext():
                    try:
                        medians[name].append(sw.graph_us(calls))
                    except Exception as exc:
                        sw.add(
                            "shapes",
                            {"arm": name, "num_reqs": n, "seq_len": L, "status": "error", "error": _error(exc)},
                        )
        for name, values in medians.items():
            if values:
                us = statistics.median(values)
                sw.add(
                    "shapes",
                    {
                        "arm": name,
                        "num_reqs": n,
                        "seq_len": L,
                        "status": "ok",
                        "graph_us": round(us, 3),
                        "rounds_us": " ".join(f"{v:.2f}" for v in values),
                        "tbps": _tbps(n * L * 1608, us),
                    },
                )
        del scenarios, outs, ref, timed
        if sw.on_gpu:
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------
# 5. host time per eager call, and the direct launch path on aligned and misaligned tensors


class HostStage(StrEnum):
    """When in the sweep's process a host time was measured: the process's state changes what a call costs."""

    FIRST = "first: before vLLM's CuTe-DSL stack is loaded"
    LAST = "last: after the sweep, with the CuTe-DSL stack when it loaded"


def host_section(
    sw: Sweep,
    shapes: tuple,
    arms: list[tuple[str, Callable, Callable | None]],
    gathers: dict[str, Callable],
    stage: HostStage,
) -> None:
    from repro.core.kernels.gather import check_gather_args  # lazy: kernels: after main() sets the profile

    calls = 300 if sw.on_gpu else 3
    for n, L in shapes:
        scenarios = _scenarios(sw, n, L, n)[:1]
        s0 = scenarios[0]
        ref = reference_output(s0)
        out = s0.fresh_out()
        args = s0.args(out)
        # What no gather launch can go below on this host: PyTorch's own launch of its smallest kernel.
        small = torch.zeros(256, dtype=torch.bfloat16, device=sw.device)
        references = [
            ("check_gather_args alone", partial(check_gather_args, *args)),
            (TORCH_LAUNCH, partial(small.add_, 1)),
        ]
        entries = [(name, partial(fn, *args), scope, fn) for name, fn, scope in arms]
        entries += [(name, call, None, None) for name, call in references]
        for name, call, scope, gather in entries:
            row = {"stage": stage, "arm": name, "num_reqs": n, "seq_len": L}
            if sw.left("host") <= 0:
                sw.add("host", row | {"status": "skipped: time budget"})
                continue
            try:
                with scope() if scope else contextlib.nullcontext():
                    row["host_us"] = round(sw.host_us(call, calls), 2)
                    if gather is not None:
                        row["eager_device_us"] = round(sw.eager_us(call), 3)
                        row["mismatched"] = _check(gather, s0, ref)
                row["status"] = "ok"
            except Exception as exc:
                row |= {"status": "error", "error": _error(exc)}
            sw.add("host", row)
        if sw.on_gpu and "gather_fast" in gathers and sw.left("host") > 0:
            host_split(sw, gathers["gather_fast"], args, n, L, calls)
    direct_path_checks(sw, gathers)


def host_split(sw: Sweep, gather: Callable, args: tuple, n: int, seq_len: int, calls: int) -> None:
    """Where a direct-launch call's host time goes: everything but the launch (the launch replaced by nothing),
    and the launch of the cached kernel alone (Triton's C launch function with the call's raw arguments)."""
    launcher = gather.launcher
    gather.ready.clear()
    gather(*args)
    gather(*args)
    if len(gather.ready) != 1 or not launcher.enabled:
        row = {"stage": HostStage.LAST, "arm": "gather_fast split", "num_reqs": n, "seq_len": seq_len}
        sw.add("host", row | {"status": "not direct"})
        return
    run = launcher.run
    launched = []  # what the direct call hands to the launch: (entry, grid, raw arguments, device)
    launcher.run = lambda *launch: launched.append(launch)
    try:
        gather(*args)
    finally:
        launcher.run = run
    parts = [
        ("gather_fast: its C launch alone", partial(run, *launched[0]), run),
        ("gather_fast: all but the launch", partial(gather, *args), lambda *launch: None),
    ]
    for name, fn, launch in parts:
        launcher.run = launch
        try:
            sw.add(
                "host",
                {"stage": HostStage.LAST, "arm": name, "num_reqs": n, "seq_len": seq_len, "status": "ok"}
                | {"host_us": round(sw.host_us(fn, calls), 2)},
            )
        finally:
            launcher.run = run
        sw.sync()


def direct_path_checks(sw: Sweep, gathers: dict[str, Callable]) -> None:
    """Each gather of ``gathers`` (made by :func:`repro_studies.kernels.fast.make_gather`), called twice per case (the
    first call compiles through Triton, the second goes direct), bitwise against the reference: aligned
    tensors, then an output view 2 bytes off 16-byte alignment and a cache view 2 bytes off (each its own
    specialisation; 2 bytes, because the bf16 RoPE values need 2-byte alignment in any kernel). A failure
    is a row; after a CUDA error nothing more runs on this device."""

    sc = build_scenario(
        ScenarioSpec(num_reqs=5, block_size=16, seq_len_max=300, max_reqs=8, window=100, offset=3, device=sw.device)
    )
    ref = reference_output(sc)
    out = sc.fresh_out()
    big = torch.empty(out.numel() + 8, dtype=torch.bfloat16, device=sw.device)
    shifted = big[1 : 1 + out.numel()].view(out.shape)
    storage = torch.zeros(sc.k_cache_storage.numel() + 2, dtype=torch.uint8, device=sw.device)
    storage[2:] = sc.k_cache_storage
    off = torch.as_strided(storage, sc.k_cache.shape, sc.k_cache.stride(), 2)
    cases = {
        "aligned": (out, sc.k_cache, sc.block_table),
        "aligned, contiguous table": (out, sc.k_cache, sc.block_table.contiguous()),
        "output 2 bytes off alignment": (shifted, sc.k_cache, sc.block_table),
        "cache 2 bytes off alignment": (out, off, sc.block_table),
    }
    for who, gather in gathers.items():
        for name, (o, k, table) in cases.items():
            for attempt in ("first call", "second call"):
                row = {"gather": who, "case": name, "call": attempt}
                try:
                    o.copy_(sc.fresh_out())
                    before = gather.launcher.direct_calls
                    gather(o, k, sc.seq_lens, sc.gather_lens, table, sc.spec.block_size, sc.spec.offset)
                    sw.sync()
                    mismatched, stray = compare_bitwise(o, ref, sc)
                    went = gather.launcher.direct_calls > before
                    row |= {"direct": went, "mismatched": mismatched, "stray": stray, "status": "ok"}
                except Exception as exc:
                    sw.add("direct", {**row, "status": "error", "error": _error(exc)})
                    return
                sw.add("direct", row)


# ---------------------------------------------------------------------------------------------


def run(sw: Sweep) -> None:
    from repro_studies.kernels.fast import (  # lazy: kernels: after main() sets the profile
        DEFAULT_SETTINGS,
        gather_fast,
        gather_fast_with,
        make_gather,
    )

    shapes = GPU_SHAPES if sw.on_gpu else SMOKE_SHAPES
    n0, L0 = shapes[0]
    import triton  # lazy: Triton reads TRITON_INTERPRET when imported; main() sets the profile first

    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if sw.on_gpu else "cpu"}

    env["triton"] = triton.__version__
    sw.add("environment", env)
    print(
        f"tuning sweep on {env['device']} (torch {env['torch']}, triton {env['triton']}), budget {sw.budget_s:.0f} s",
        flush=True,
    )

    rates = measure_rates(sw)
    print(f"[{time.monotonic() - sw.started:.0f} s] rates {rates}", flush=True)

    host_shapes = ((1, 256), (256, 2048)) if sw.on_gpu else ((1, 24),)
    host_section(sw, host_shapes, [("gather_fast, direct launch", gather_fast, None)], {}, HostStage.FIRST)
    print(f"[{time.monotonic() - sw.started:.0f} s] first host section done", flush=True)

    cute, cute_why = load_cutedsl(sw)
    sw.add("cutedsl", {"release": CUTEDSL_RELEASE, "loaded": cute is not None, "why_not": cute_why})
    print(
        f"[{time.monotonic() - sw.started:.0f} s] CuTe-DSL {CUTEDSL_RELEASE}: {'loaded' if cute else cute_why}",
        flush=True,
    )

    stream_rows = stream_sweep(sw, n0 * L0, rates)
    ok_streams = sorted((r for r in stream_rows if r.get("status") == "ok"), key=lambda r: r["graph_us"])
    print(f"[{time.monotonic() - sw.started:.0f} s] stream sweep: {len(ok_streams)} timed", flush=True)

    sweep_shapes = [(n0, L0)] + ([(16, 2048)] if sw.on_gpu else [shapes[1]])
    sets = []
    for n, L in sweep_shapes:
        scenarios = _scenarios(sw, n, L, n)
        sets.append((scenarios, reference_output(scenarios[0])))
    ranked = gather_sweep(sw, sets, rates.get("copy", 0.0))
    del sets
    if sw.on_gpu:
        torch.cuda.empty_cache()
    print(f"[{time.monotonic() - sw.started:.0f} s] gather sweep: {len(ranked)} timed", flush=True)

    plan = "grid" if sw.on_gpu else None
    best = [s for _, s in ranked[:TOP_CANDIDATES]]
    arms = [("today", gather_fast, None)]
    sw.add("legend", {"arm": "today", "what": f"gather_fast as committed: {DEFAULT_SETTINGS.label()}"})
    made = {}
    for k, settings in enumerate(best + (small_shape_variants(best[0]) if best else [])):
        made[f"c{k}"] = make_gather(settings)
        arms.append((f"c{k}", made[f"c{k}"], None))
        sw.add(
            "legend",
            {"arm": f"c{k}", "what": f"{settings.label()}, min_block_t {settings.min_block_t}, waves {settings.waves}"},
        )
    if cute is not None:
        arms.append(("cute", cute, cute.scope))
        sw.add("legend", {"arm": "cute", "what": f"vLLM {CUTEDSL_RELEASE}'s CuTe-DSL gather, narrowed table"})
    stream_kw = None
    split = [r for r in ok_streams if r.get("layout") == "split"]
    if split:
        stream_kw = {"plan": plan, **_stream_kwargs(split[0]["arm"])}
        sw.add(
            "legend", {"arm": "stream", "what": f"fastest split-layout streaming kernel, no table: {split[0]['arm']}"}
        )
    shape_sweep(sw, shapes, arms, stream_kw)
    print(f"[{time.monotonic() - sw.started:.0f} s] shapes done", flush=True)

    host_arms = [
        ("gather_fast, direct launch", gather_fast, None),
        (
            "gather_fast through Triton's launcher (the old path)",
            partial(gather_fast_with, settings=DEFAULT_SETTINGS, plan=plan),
            None,
        ),
    ]
    if "c0" in made:
        host_arms.append(("c0, direct launch", made["c0"], None))
    if cute is not None:
        host_arms.append((f"vLLM {CUTEDSL_RELEASE} CuTe-DSL, scope entered once", cute, cute.scope))
        host_arms.append(
            (f"vLLM {CUTEDSL_RELEASE} CuTe-DSL, scope per call (old harness)", _per_call_scope(cute), None)
        )
    gathers = {"gather_fast": gather_fast} | ({"c0": made["c0"]} if "c0" in made else {})
    host_section(sw, host_shapes, host_arms, gathers, HostStage.LAST)
    print(f"[{time.monotonic() - sw.started:.0f} s] host section done", flush=True)


def _per_call_scope(fn):
    def call(*args):
        with fn.scope():
            fn(*args)

    return call


def _stream_kwargs(label: str) -> dict:
    """Rebuild the stream_dequant keywords of a candidate from the sweep's list (by label)."""
    for layout, kw in stream_candidates():
        if stream_label(layout, kw) == label and layout == "split":
            return dict(kw)
    raise ValueError(f"no split-layout streaming candidate is labelled {label!r}")


#: What the summary shows of each table: its columns and sort keys.
SUMMARY = (
    ("rates", ["kind", "how", "launch", "median_us", "tbps"], None),
    ("stream", ["arm", "status", "graph_us", "tbps", "copy_equiv_fraction", "registers"], ["graph_us"]),
    (
        "gather",
        ["num_reqs", "arm", "status", "graph_us", "tbps", "copy_equiv_fraction", "registers"],
        ["num_reqs", "graph_us"],
    ),
    ("host", ["stage", "num_reqs", "seq_len", "arm", "status", "host_us", "eager_device_us", "mismatched"], None),
    ("direct", ["gather", "case", "call", "direct", "mismatched", "stray", "status"], None),
    ("cutedsl", ["release", "loaded", "why_not"], None),
    ("legend", ["arm", "what"], None),
)


def tables_from_csv(path: str | Path) -> dict:
    """The tables of a ``tuning-sweep.csv`` (split on its ``table`` column, empty columns dropped)."""

    frame = pd.read_csv(path)
    return {name: g.drop(columns="table").dropna(axis=1, how="all") for name, g in frame.groupby("table", sort=False)}


def summary(tables: dict, markdown: bool = False) -> str:
    """The compact tables printed last (``markdown``: as GitHub tables, for a committed record)."""

    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 70)
    pd.set_option("display.max_rows", 200)

    def show(title: str, f: pd.DataFrame, index: bool = False) -> str:
        body = f.to_markdown(index=index) if markdown else f.to_string(index=index)
        return f"### {title}\n\n{body}" if markdown else f"== {title} ==\n{body}"

    parts = []
    for name, cols, keys in SUMMARY:
        rows = tables.get(name)
        if rows is None or not len(rows):
            continue
        f = pd.DataFrame(rows)
        f = f[[c for c in cols if c in f.columns] + (["error"] if "error" in f.columns else [])]
        if keys and all(k in f.columns for k in keys):
            f = f.sort_values(keys, na_position="last", ascending=[k != "num_reqs" for k in keys])
        if "error" in f.columns:
            f["error"] = f["error"].fillna("").astype(str).str.slice(0, 60)
        parts.append(show(name, f))
    shapes = tables.get("shapes")
    if shapes is not None and len(shapes):
        f = pd.DataFrame(shapes)
        f = f[f["status"] == "ok"] if "status" in f.columns else f
        if len(f):
            wide = f.pivot_table(index=["num_reqs", "seq_len"], columns="arm", values="graph_us")
            parts.append(show("graph medians (us) by shape", wide.sort_index(ascending=False).round(1), index=True))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m repro_studies.evidence.tuning", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or None, help="folder for the CSVs (default $OUT)")
    parser.add_argument("--budget-s", type=float, default=390.0, help="total time budget in seconds (default 390)")
    parser.add_argument("--smoke", action="store_true", help="CPU smoke test: interpreter, tiny sizes")
    parser.add_argument("--render", metavar="CSV", help="print a tuning-sweep.csv's tables as Markdown and exit")
    args = parser.parse_args(argv)
    if args.render:
        if not Path(args.render).is_file():
            print(f"error: --render: {args.render} is not a file (accepted: a tuning-sweep.csv)", file=sys.stderr)
            return 2
        print(summary(tables_from_csv(args.render), markdown=True))
        return 0
    if args.budget_s <= 0:
        print(f"error: --budget-s must be positive, got {args.budget_s}", file=sys.stderr)
        return 2
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"

    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device; --smoke runs the CPU smoke test", file=sys.stderr)
        return 2
    sw = Sweep(device, args.budget_s, Path(args.out) if args.out else None)
    try:
        run(sw)
    finally:
        sw.write()
        print(summary(sw.tables), flush=True)
        print(f"total {time.monotonic() - sw.started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

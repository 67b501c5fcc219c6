"""The right ceiling for notebook 03: streaming kernels with the gather's traffic, timed in the run.

A copy moves bytes 50/50, the gather reads 584 B and writes 1,024 B per token; the streaming
kernels of :mod:`repro_studies.kernels.stream` do exactly the gather's traffic and dtype work without a
block table. :func:`run_ceiling` times, at every shape of the sweep, the streaming kernel and its
read-only and write-only halves, and at the decomposition shapes every arm the gap analysis needs,
all in the same alternating rounds:

* the streaming kernel in both layouts (interleaved 584-B records, the cache's split layout) and
  several tiles, so the ceiling's own dependence on tile and alignment is measured;
* ``gather_fast`` on ONE request holding all the tokens (contiguous table): indirection alone;
* ``gather_fast`` on the sweep's equal requests, narrowed view and contiguous table;
* ``gather_fast`` on ragged requests with the same total (contiguous table).

Every arm is checked bitwise against its PyTorch reference before it is timed; checks and medians
are handed to sinks as plain observations (the verdict is taken above, in the walkthrough).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import torch

from repro.core.evidence.cases import compare_bitwise, reference_output
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.geometry.layout import GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN, gather_bytes
from repro.coverage import SentinelMode
from repro_studies.evidence import timing
from repro_studies.evidence.stream_bench import stream_bench
from repro_studies.kernels.settings import DEFAULT_SETTINGS, DEFAULT_TILE, TileSettings
from repro_studies.registry import StreamKind

#: Whose code the ceiling arms are.
REPO_CODE = "repro"
#: Streaming tiles (tokens per program, warps) of the grouped tile, measured at the decomposition shapes
#: (how the streaming kernel's own time depends on its tile and the records' layout).
CEILING_TILES = ((8, 4), (32, 4), (64, 8))
GATHER = "fast"


@dataclass(frozen=True)
class StreamKernel:
    """One streaming kernel of the ceiling: its arm name, record layout, tile, warps and tile settings."""

    arm: str
    layout: str
    block_t: int
    num_warps: int
    settings: tuple = ()  # stream_dequant keywords as (name, value) pairs: tile, tiles_per_program, prefetch...
    kind: StreamKind = StreamKind.STREAM  # or MOVE

    def keywords(self) -> dict:
        return dict(self.settings)


def _streams() -> tuple[StreamKernel, ...]:
    """The fastest kernels of the H200 sweeps (``data/h200/tuning-gather-fast.md``: the byte movers of 4 tokens x 4
    warps and 8 x 16 were the fastest of run 4) and the former ceiling."""
    grouped = TileSettings(load_evict="")
    lanes = TileSettings(tile="lanes", load_evict="")
    return (
        StreamKernel("stream / 584-B records", "records", 8, 4),
        StreamKernel("stream / split / grouped 8 x 4", "split", 8, 4, (("tile", grouped),)),
        StreamKernel("stream / split / lanes 4 x 2", "split", 4, 2, (("tile", lanes),)),
        StreamKernel("move / 584-B records as flat runs, 8 x 8", "records", 8, 8, kind=StreamKind.MOVE),
        StreamKernel("move / 584-B records as flat runs, 4 x 4", "records", 4, 4, kind=StreamKind.MOVE),
        StreamKernel("move / 584-B records as flat runs, 8 x 16", "records", 8, 16, kind=StreamKind.MOVE),
    )


#: The streaming kernels timed at every shape; the ceiling at a shape is the fastest of them there.
CEILING_STREAMS = _streams()


@dataclass
class CeilingArm:
    """One timed arm at one shape: what its rows say about it, its check, and its launches."""

    arm: str
    attrs: dict  # kernel, code, table, requests, layout, block_t, num_warps, tokens, bytes_read, bytes_written
    check: Callable[[], tuple[int, int, int, str]]  # -> (mismatched, stray, total, unit)
    eager: Callable[[], object]
    graph_calls: list


@dataclass(frozen=True)
class CeilingCheck:
    """The bitwise comparison of one arm with its reference, before timing (an observation)."""

    arm: str
    num_reqs: int
    seq_len: int
    mismatched: int
    stray: int
    total: int
    unit: str  # what was counted: tokens, rows or program sums


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _fast_block_t(num_reqs: int, max_gather: int, device: str) -> int:
    """The tile gather_fast's GPU launch uses for this shape."""
    from repro_studies.kernels.fast import plan_launch  # lazy: a kernel module, defined under the profile chosen first

    return plan_launch(num_reqs, max_gather, torch.device(device), DEFAULT_SETTINGS, "grid").block_t


def gather_arm(
    arm: str, table: str, requests: str, scenarios: list, device: str, ref: torch.Tensor | None = None
) -> CeilingArm:
    """gather_fast over ``scenarios`` (the first is checked) on the narrowed view or a contiguous copy."""
    from repro_studies.kernels.fast import gather_fast  # lazy: a kernel module, defined under the profile chosen first

    contiguous = [s.block_table.contiguous() for s in scenarios]
    tables = [s.block_table if table == "narrowed" else c for s, c in zip(scenarios, contiguous)]
    outs = [s.fresh_out() for s in scenarios]
    s0 = scenarios[0]

    def check():
        expected = ref if ref is not None else reference_output(s0)
        out = s0.fresh_out()
        gather_fast(*s0.args(out, tables[0]))
        _sync(device)
        mismatched, stray = compare_bitwise(out, expected, s0)
        return mismatched, stray, s0.total_tokens, "tokens"

    calls = [partial(gather_fast, *s.args(o, t)) for s, o, t in zip(scenarios, outs, tables)]
    tokens = s0.total_tokens
    attrs = {
        "kernel": GATHER,
        "code": REPO_CODE,
        "table": table,
        "requests": requests,
        "layout": "paged cache",
        "block_t": _fast_block_t(s0.spec.num_reqs, s0.max_gather, device),
        "num_warps": None,
        "tokens": tokens,
        "bytes_read": tokens * GATHER_READ_BYTES_PER_TOKEN,
        "bytes_written": tokens * GATHER_WRITE_BYTES_PER_TOKEN,
    }
    return CeilingArm(arm, attrs, check, calls[0], calls)


def stream_arm(
    arm: str,
    kind: StreamKind,
    tokens: int,
    copies: int,
    layout: str = "records",
    tokens_warps: tuple[int, int] = CEILING_TILES[0],
    device: str = "cuda",
    **dequant: object,
) -> CeilingArm:
    """A streaming arm: ``tokens_warps`` = (tokens per tile, warps); ``dequant``: the kernel's tile settings."""
    block_t, num_warps = tokens_warps
    sb = stream_bench(
        kind, tokens, copies, layout=layout, block_t=block_t, num_warps=num_warps, device=device, **dequant
    )
    attrs = {
        "kernel": kind,
        "code": REPO_CODE,
        "table": "none",
        "requests": "none",
        "layout": sb.layout,
        "tile": "flat runs" if kind == StreamKind.MOVE else _tile_text(dequant),
        "block_t": sb.block_t,
        "num_warps": sb.num_warps,
        "tokens": tokens,
        "bytes_read": sb.bytes_read,
        "bytes_written": sb.bytes_written,
    }
    return CeilingArm(arm, attrs, sb.check, sb.eager, sb.graph_calls)


def _tile_text(dequant: dict) -> str:
    """The streaming kernel's tile settings in words ("" for the grouped default)."""
    text = dequant.get("tile", DEFAULT_TILE).label()
    if dequant.get("tiles_per_program", 1) > 1:
        text += f", {dequant['tiles_per_program']} tiles per program"
        text += ", prefetched" if dequant.get("prefetch") else f", {dequant.get('num_stages', 1)} stages"
    return text


def ceiling_arms(
    tokens: int, copies: int, device: str = "cuda", streams: Sequence[StreamKernel] = CEILING_STREAMS
) -> list[CeilingArm]:
    """Every shape: the streaming kernels and byte movers of ``streams`` (the ceiling is the fastest) and the
    read-only and write-only halves of the traffic."""
    arms = [
        stream_arm(k.arm, k.kind, tokens, copies, k.layout, (k.block_t, k.num_warps), device, **k.keywords())
        for k in streams
    ]
    return arms + [
        stream_arm("read-only / 584-B records", StreamKind.READ, tokens, copies, device=device),
        stream_arm("write-only / 1,024-B rows", StreamKind.WRITE, tokens, copies, device=device),
    ]


def ragged_lengths(num_reqs: int, seq_len: int, seed: int = 0) -> tuple[int, ...]:
    """``num_reqs`` lengths in ``1 .. 2*seq_len - 1`` summing to exactly ``num_reqs * seq_len``:
    pairs ``seq_len +- d`` with ``d`` uniform, shuffled (an odd request out keeps ``seq_len``)."""
    gen = torch.Generator().manual_seed(seed)
    d = torch.randint(0, seq_len, (num_reqs // 2,), generator=gen).tolist()
    lens = [seq_len + x for x in d] + [seq_len - x for x in d] + [seq_len] * (num_reqs % 2)
    order = torch.randperm(num_reqs, generator=gen).tolist()
    return tuple(lens[i] for i in order)


def decomposition_arms(
    num_reqs: int,
    seq_len: int,
    block_size: int,
    max_reqs: int,
    tiles: Sequence[tuple[int, int]] = CEILING_TILES,
    device: str = "cuda",
) -> list[CeilingArm]:
    """At one shape, every arm of the gap analysis except those measured at every shape."""
    tokens = num_reqs * seq_len
    copies = timing.rotation_count(gather_bytes(tokens))
    arms = []
    for layout in ("records", "split"):
        for tile in tiles:
            if layout == "records" and tile == CEILING_TILES[0]:
                continue  # one of the every-shape arms
            arms.append(
                stream_arm(
                    f"stream / {layout} / {tile[0]} tokens x {tile[1]} warps",
                    StreamKind.STREAM,
                    tokens,
                    copies,
                    layout,
                    tile,
                    device,
                )
            )

    def scenarios(spec):
        return [build_scenario(replace(spec, seed=k)) for k in range(copies)]

    equal = scenarios(
        ScenarioSpec(
            num_reqs=num_reqs,
            block_size=block_size,
            seq_len_max=seq_len,
            seq_lens=(seq_len,) * num_reqs,
            max_reqs=max_reqs,
            device=device,
            mode=SentinelMode.IN_RANGE,
        )
    )
    ref = reference_output(equal[0])
    arms.append(gather_arm("fast / narrowed view", "narrowed", "equal", equal, device, ref))
    arms.append(gather_arm("fast / contiguous table", "contiguous", "equal", equal, device, ref))
    one = ScenarioSpec(
        num_reqs=1,
        block_size=block_size,
        seq_len_max=tokens,
        seq_lens=(tokens,),
        max_reqs=1,
        device=device,
        mode=SentinelMode.IN_RANGE,
        contiguous=True,
    )
    arms.append(gather_arm("fast / one request, contiguous table", "contiguous", "one", scenarios(one), device))
    lens = ragged_lengths(num_reqs, seq_len)
    ragged = ScenarioSpec(
        num_reqs=num_reqs,
        block_size=block_size,
        seq_len_max=max(lens),
        seq_lens=lens,
        max_reqs=num_reqs,
        device=device,
        mode=SentinelMode.IN_RANGE,
        contiguous=True,
    )
    arms.append(
        gather_arm("fast / ragged requests, contiguous table", "contiguous", "ragged", scenarios(ragged), device)
    )
    return arms


def time_arms(arms: Sequence[CeilingArm], rounds: int, rep_ms: int) -> dict[str, dict[str, list[float]]]:
    """Eager and graph medians of every arm, in alternating rounds so drift favours no arm; the host time
    per eager call (``host``: one value, from the last round)."""
    times = {a.arm: {"eager": [], "graph": [], "host": []} for a in arms}
    for k in range(rounds):
        for a in arms:
            times[a.arm]["eager"].append(timing.median_us(a.eager, rep_ms=rep_ms))
            times[a.arm]["graph"].append(timing.graph_median_us(a.graph_calls, rep_ms=rep_ms))
            if k == rounds - 1:
                times[a.arm]["host"].append(timing.host_us(a.eager))
    return times


def median_rows(arms: Sequence[CeilingArm], times: dict, num_reqs: int, seq_len: int) -> list[dict]:
    rows = []
    for a in arms:
        for mode in ("eager", "graph"):
            us = statistics.median(times[a.arm][mode])
            moved = a.attrs["bytes_read"] + a.attrs["bytes_written"]
            rows.append(
                {
                    "arm": a.arm,
                    "launch": mode,
                    "num_reqs": num_reqs,
                    "seq_len": seq_len,
                    "tokens": a.attrs["tokens"],
                    "rotation": len(a.graph_calls),
                    "median_us": round(us, 3),
                    "rounds_us": " ".join(f"{t:.2f}" for t in times[a.arm][mode]),
                    "bandwidth_tbps": round(moved / (us * 1e-6) / 1e12, 4),
                    "host_us": round(times[a.arm]["host"][0], 2)
                    if mode == "eager" and times[a.arm].get("host")
                    else None,
                    **{k: v for k, v in a.attrs.items() if k != "tokens"},
                }
            )
    return rows


def run_ceiling(
    request_counts: Sequence[int],
    seq_lens: Sequence[int],
    block_size: int,
    on_check: Callable[[CeilingCheck], None],
    on_median: Callable[[dict], None],
    on_decomposition: Callable[[dict], None] | None = None,
    decompose_at: Sequence | None = None,
    rounds: int = 2,
    rep_ms: int = 50,
    device: str = "cuda",
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """The streaming ceiling at every (sequence length, request count), and the gap arms at
    ``decompose_at`` (default: the most requests at each sequence length) when ``on_decomposition``
    is given. Rows are handed to the sinks as each shape finishes."""
    max_reqs = max(request_counts)
    if decompose_at is None:
        decompose_at = [(max_reqs, L) for L in seq_lens]
    decompose = {tuple(x) for x in decompose_at} if on_decomposition is not None else set()
    for L in seq_lens:
        for n in request_counts:
            tokens = n * L
            copies = timing.rotation_count(gather_bytes(tokens))
            every = ceiling_arms(tokens, copies, device)
            extra = decomposition_arms(n, L, block_size, max_reqs, device=device) if (n, L) in decompose else []
            for a in every + extra:  # correctness first
                mismatched, stray, total, unit = a.check()
                on_check(CeilingCheck(a.arm, n, L, mismatched, stray, total, unit))
            times = time_arms(every + extra, rounds, rep_ms)
            for row in median_rows(every, times, n, L):
                on_median(row)
            for row in median_rows(extra, times, n, L):
                on_decomposition(row)
            if progress:
                progress(L, n)
            del every, extra
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()

"""Notebook 03's measurements: what the stride fix costs, against a contiguous table and against
the rejected ``.contiguous()`` alternative, eager and as CUDA-graph replays.

Each shape is checked bitwise against the reference before it is timed. The narrowed-view and
contiguous-table arms run the same kernel binary (the row pitch is not specialised), so their
ratio isolates the cost of reading rows ``stride(0)`` apart. Arms are timed in alternating
rounds and the median of the rounds is kept, so drift does not favour one arm.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

import pandas as pd
import torch

from repro.evidence import timing as bench
from repro.evidence.cases import compare_bitwise, reference_output
from repro.registry import BUILTIN, load_implementation
from repro.evidence.scenarios import ScenarioSpec, build_scenario

#: (arm, implementation label, table): the table is the narrowed view or its contiguous copy.
BASE_ARMS = [
    ("fixed / narrowed view", "fixed", "narrowed"),
    ("fixed / contiguous table", "fixed", "contiguous"),
    ("contiguous-copy / narrowed view", "contiguous-copy", "narrowed"),
]
FAST_ARMS = [
    ("fast / narrowed view", "fast", "narrowed"),
    ("fast / contiguous table", "fast", "contiguous"),
]
#: The fix costs nothing if narrowed / contiguous stays inside this band.
NO_COST_BAND = (0.99, 1.01)


def arms_for(variants: list[str]) -> list[tuple[str, str, str]]:
    arms = list(BASE_ARMS)
    if "fast" in variants:
        arms += FAST_ARMS
    return arms


def _tables(scenario, contiguous_table: torch.Tensor, which: str) -> torch.Tensor:
    return scenario.block_table if which == "narrowed" else contiguous_table


#: Whose code a row times (the report says which arm is whose).
REPO_CODE = "repro"
#: Streaming-ceiling tiles (tokens per program, warps) measured at the decomposition shapes; the first
#: is gather_fast's default, the tile every shape is measured with.
CEILING_TILES = ((8, 4), (32, 4), (64, 8))


@dataclass
class TimedArm:
    """One timed arm at one shape: what the row says about it, its check, and its launches."""

    arm: str
    attrs: dict  # kernel, code, table, requests, layout, block_t, num_warps, tokens, bytes_read, bytes_written
    check: Callable[[], tuple[str, str, bool]]  # -> (expected, observed, ok)
    eager: Callable[[], object]
    graph_calls: list


def _gather_attrs(kernel: str, code: str, table: str, requests: str, tokens: int, block_t=None) -> dict:
    return {"kernel": kernel, "code": code, "table": table, "requests": requests, "layout": "paged cache",
            "block_t": block_t, "num_warps": None, "tokens": tokens,
            "bytes_read": tokens * bench.BYTES_READ_PER_TOKEN, "bytes_written": tokens * bench.BYTES_WRITTEN_PER_TOKEN}


def _fast_block_t(num_reqs: int, max_gather: int, device: str = "cuda") -> int:
    """The tile gather_fast's GPU launch uses for this shape."""
    from repro.kernels.fast import CONFIG, plan_launch

    return plan_launch(num_reqs, max_gather, torch.device(device), CONFIG, "grid").block_t


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def gather_arms(arm: str, fn, which: str, scenarios: list, attrs: dict, ref: torch.Tensor | None = None) -> TimedArm:
    """A gather with vLLM's signature over ``scenarios`` (the first is checked against ``ref``, its
    reference output, computed here if not given), on the ``which`` table."""
    contiguous = [s.block_table.contiguous() for s in scenarios]
    outs = [s.fresh_out() for s in scenarios]
    s0 = scenarios[0]

    def check():
        expected = ref if ref is not None else reference_output(s0)
        out = s0.fresh_out()
        fn(*s0.args(out, _tables(s0, contiguous[0], which)))
        _sync(s0.spec.device)
        mismatched, stray = compare_bitwise(out, expected, s0)
        ok = mismatched == 0 and stray == 0
        return "0 tokens differ", f"{mismatched}/{s0.total_tokens} differ, {stray} stray", ok

    calls = [partial(fn, *s.args(o, _tables(s, c, which))) for s, c, o in zip(scenarios, contiguous, outs)]
    return TimedArm(arm, attrs, check, calls[0], calls)


def stream_arm(arm: str, kind: str, tokens: int, copies: int, layout: str = "records", tile=CEILING_TILES[0],
               device: str = "cuda") -> TimedArm:
    sb = bench.stream_bench(kind, tokens, copies, layout=layout, block_t=tile[0], num_warps=tile[1], device=device)

    def check():
        observed, ok = sb.check()
        return "bitwise equal to the PyTorch reference", observed, ok

    attrs = {"kernel": kind, "code": REPO_CODE, "table": "none", "requests": "none", "layout": sb.layout,
             "block_t": sb.block_t, "num_warps": sb.num_warps, "tokens": tokens, "bytes_read": sb.bytes_read,
             "bytes_written": sb.bytes_written}
    return TimedArm(arm, attrs, check, sb.eager, sb.graph_calls)


def ceiling_arms(tokens: int, copies: int, device: str = "cuda") -> list[TimedArm]:
    """Every shape: the streaming kernel, and its read-only and write-only halves, at gather_fast's tile."""
    return [stream_arm("stream / 584-B records", "stream", tokens, copies, device=device),
            stream_arm("read-only / 584-B records", "read-only", tokens, copies, device=device),
            stream_arm("write-only / 1,024-B rows", "write-only", tokens, copies, device=device)]


def ragged_lengths(num_reqs: int, seq_len: int, seed: int = 0) -> tuple[int, ...]:
    """``num_reqs`` lengths in ``1 .. 2*seq_len - 1`` summing to exactly ``num_reqs * seq_len``:
    pairs ``seq_len +- d`` with ``d`` uniform, shuffled (an odd request out keeps ``seq_len``)."""
    gen = torch.Generator().manual_seed(seed)
    d = torch.randint(0, seq_len, (num_reqs // 2,), generator=gen).tolist()
    lens = [seq_len + x for x in d] + [seq_len - x for x in d] + [seq_len] * (num_reqs % 2)
    order = torch.randperm(num_reqs, generator=gen).tolist()
    return tuple(lens[i] for i in order)


def decomposition_arms(num_reqs: int, seq_len: int, block_size: int, tiles=CEILING_TILES, device: str = "cuda"
                       ) -> list[TimedArm]:
    """At one shape: what separates gather_fast from the streaming ceiling, each step a measured arm.

    * the streaming kernel in both layouts and several tiles (the ceiling's own spread);
    * gather_fast on one request holding all ``num_reqs * seq_len`` tokens, contiguous table
      (indirection alone: a block-table load per token, nothing else differs from streaming);
    * gather_fast on ``num_reqs`` ragged requests with the same total, contiguous table.
    """
    fast = load_implementation(BUILTIN["fast"])
    tokens = num_reqs * seq_len
    copies = bench.rotation_count(bench.gather_bytes(tokens))
    arms = []
    for layout in ("records", "split"):
        for tile in tiles:
            if layout == "records" and tile == CEILING_TILES[0]:
                continue  # measured at every shape already
            arms.append(stream_arm(f"stream / {layout} / {tile[0]} tokens x {tile[1]} warps", "stream", tokens,
                                   copies, layout, tile, device))
    one = ScenarioSpec(num_reqs=1, block_size=block_size, seq_len_max=tokens, seq_lens=(tokens,), max_reqs=1,
                       device=device, mode="in-range", contiguous=True)
    arms.append(gather_arms("fast / one request, contiguous table", fast, "contiguous",
                            [build_scenario(replace(one, seed=k)) for k in range(copies)],
                            _gather_attrs("fast", REPO_CODE, "contiguous", "one", tokens, _fast_block_t(1, tokens, device))))
    lens = ragged_lengths(num_reqs, seq_len)
    ragged = ScenarioSpec(num_reqs=num_reqs, block_size=block_size, seq_len_max=max(lens), seq_lens=lens,
                          max_reqs=num_reqs, device=device, mode="in-range", contiguous=True)
    arms.append(gather_arms("fast / ragged requests, contiguous table", fast, "contiguous",
                            [build_scenario(replace(ragged, seed=k)) for k in range(copies)],
                            _gather_attrs("fast", REPO_CODE, "contiguous", "ragged", tokens,
                                          _fast_block_t(num_reqs, max(lens), device))))
    return arms


def time_arms(arms: list[TimedArm], rounds: int, rep_ms: int) -> dict[str, dict[str, list[float]]]:
    """Eager and graph medians of every arm, in alternating rounds so drift favours no arm."""
    times = {a.arm: {"eager": [], "graph": []} for a in arms}
    for _ in range(rounds):
        for a in arms:
            times[a.arm]["eager"].append(bench.median_us(a.eager, rep_ms=rep_ms))
            times[a.arm]["graph"].append(bench.graph_median_us(a.graph_calls, rep_ms=rep_ms))
    return times


def _median_rows(arms: list[TimedArm], times, num_reqs: int, seq_len: int) -> list[dict]:
    rows = []
    for a in arms:
        for mode in ("eager", "graph"):
            us = statistics.median(times[a.arm][mode])
            moved = a.attrs["bytes_read"] + a.attrs["bytes_written"]
            rows.append({"arm": a.arm, "launch": mode, "num_reqs": num_reqs, "seq_len": seq_len,
                         "tokens": a.attrs["tokens"], "rotation": len(a.graph_calls), "median_us": round(us, 3),
                         "rounds_us": " ".join(f"{t:.2f}" for t in times[a.arm][mode]),
                         "bandwidth_tbps": round(moved / (us * 1e-6) / 1e12, 4),
                         **{k: v for k, v in a.attrs.items() if k != "tokens"}})
    return rows


def run_perf(request_counts, seq_lens, block_size: int, variants: list[str], medians, checks,
             rounds: int = 2, rep_ms: int = 50, extra_arms: dict | None = None, progress=None,
             ceiling: bool = True, decomposition=None, decompose_at: list | None = None,
             device: str = "cuda") -> pd.DataFrame:
    """Time every arm at every (sequence length, request count); append rows as each shape finishes.

    ``extra_arms`` maps an arm name to a gather function with vLLM's signature, or to
    ``(function, {"code": whose code, "table": "contiguous" | "narrowed", "kernel": short name})``
    (default: run on the contiguous table, code named by the arm). ``ceiling`` adds the streaming
    kernel and its read-only and write-only halves at every shape. With a ``decomposition`` table,
    the shapes ``decompose_at`` (default: the most requests at each sequence length) also time the
    arms of :func:`decomposition_arms`, in the same rounds, and their rows go there.
    """
    named = arms_for(variants)
    fns = {label: load_implementation(BUILTIN[label]) for _, label, _ in named}
    specs = [(arm, fns[label], which, label, REPO_CODE) for arm, label, which in named]
    for name, value in (extra_arms or {}).items():
        fn, meta = value if isinstance(value, tuple) else (value, {})
        specs.append((name, fn, meta.get("table", "contiguous"), meta.get("kernel", name), meta.get("code", name)))
    max_reqs = max(request_counts)
    if decompose_at is None:
        decompose_at = [(max_reqs, L) for L in seq_lens]
    decompose_at = {tuple(x) for x in decompose_at} if decomposition is not None else set()
    for L in seq_lens:
        for n in request_counts:
            spec = ScenarioSpec(num_reqs=n, block_size=block_size, seq_len_max=L, seq_lens=(L,) * n,
                                max_reqs=max_reqs, device=device, mode="in-range")
            tokens = n * L
            copies = bench.rotation_count(bench.gather_bytes(tokens))
            scenarios = [build_scenario(replace(spec, seed=k)) for k in range(copies)]
            fast_bt = _fast_block_t(n, L, device) if "fast" in variants else None
            ref = reference_output(scenarios[0])
            arms = [gather_arms(arm, fn, which, scenarios,
                                _gather_attrs(kernel, code, which, "equal", tokens,
                                              fast_bt if kernel == "fast" else None), ref)
                    for arm, fn, which, kernel, code in specs]
            if ceiling:
                arms += ceiling_arms(tokens, copies, device)
            extra = decomposition_arms(n, L, block_size, device=device) if (n, L) in decompose_at else []
            # correctness first: every arm, bitwise, on its first copy
            for a in arms + extra:
                expected, observed, ok = a.check()
                checks.append({"check": "timed arm equals the reference", "variant": a.arm, "num_reqs": n,
                               "seq_len": L, "expected": expected, "observed": observed, "ok": ok})
            times = time_arms(arms + extra, rounds, rep_ms)
            for row in _median_rows(arms, times, n, L):
                medians.append(row)
            for row in _median_rows(extra, times, n, L):
                decomposition.append(row)
            if progress:
                progress(L, n)
            del scenarios, arms, extra, ref
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
    return medians.frame()


def ratio_rows(medians: pd.DataFrame, ceiling_tbps: float) -> pd.DataFrame:
    """Per shape and launch mode: narrowed/contiguous per kernel, copy overhead, fraction of ceiling."""
    rows = []
    for (L, n, mode), g in medians.groupby(["seq_len", "num_reqs", "launch"], sort=True):
        t = dict(zip(g["arm"], g["median_us"]))
        row = {"seq_len": L, "num_reqs": n, "launch": mode}
        row["fixed narrowed/contiguous_ratio"] = t["fixed / narrowed view"] / t["fixed / contiguous table"]
        row["contiguous-copy overhead_ratio"] = t["contiguous-copy / narrowed view"] / t["fixed / narrowed view"]
        row["fixed of ceiling_fraction"] = bench.gather_bytes(n * L) / (t["fixed / narrowed view"] * 1e-6) / 1e12 / ceiling_tbps
        if "fast / narrowed view" in t:
            row["fast narrowed/contiguous_ratio"] = t["fast / narrowed view"] / t["fast / contiguous table"]
            row["fast of ceiling_fraction"] = bench.gather_bytes(n * L) / (t["fast / narrowed view"] * 1e-6) / 1e12 / ceiling_tbps
            row["fast speedup over fixed_ratio"] = t["fixed / narrowed view"] / t["fast / narrowed view"]
        for arm in t:
            if arm.startswith("vllm"):
                row[f"fast speedup over {arm}_ratio"] = t[arm] / t.get("fast / narrowed view", float("nan"))
        rows.append(row)
    return pd.DataFrame(rows).round(4)


#: An eager median this much above the graph replay of the same launch measures the host's launch path.
HOST_BOUND_FACTOR = 1.5


def headline(medians: pd.DataFrame, ratios: pd.DataFrame) -> dict:
    """The figures the report leads with, all derived from the two tables of one run.

    Kernel cost is judged on CUDA-graph replays; eager medians are reported beside them, and a point
    whose eager median exceeds ``HOST_BOUND_FACTOR`` x its graph median is marked host-bound.
    """
    lo, hi = NO_COST_BAND
    ceiling = float(ratios["copy_ceiling_tbps"].iloc[0])
    big_L, big_n = int(ratios.seq_len.max()), int(ratios.num_reqs.max())
    one_n = int(ratios.num_reqs.min())
    facts: dict = {"copy_ceiling_tbps": ceiling, "shape_max": [big_n, big_L], "band": [lo, hi]}
    for kernel in ("fixed", "fast"):
        col = f"{kernel} narrowed/contiguous_ratio"
        if col not in ratios:
            continue
        for mode in ("graph", "eager"):
            r = ratios[ratios.launch == mode][col]
            facts[f"{kernel}_ratio_{mode}"] = {"min": float(r.min()), "max": float(r.max()),
                                               "outside_band": int(((r < lo) | (r > hi)).sum()), "points": int(len(r))}
    wide = medians.pivot_table(index=["seq_len", "num_reqs", "arm"], columns="launch", values="median_us").reset_index()
    wide["host_bound"] = wide["eager"] > HOST_BOUND_FACTOR * wide["graph"]
    facts["host_bound_eager_points"] = int(wide.host_bound.sum())
    facts["eager_points"] = int(len(wide))
    for mode in ("eager", "graph"):
        facts[f"contiguous_copy_overhead_{mode}"] = float(
            ratios[ratios.launch == mode]["contiguous-copy overhead_ratio"].median())
    at = ratios[(ratios.seq_len == big_L) & (ratios.num_reqs == big_n) & (ratios.launch == "graph")].iloc[0]
    facts["fixed_fraction_at_max"] = float(at["fixed of ceiling_fraction"])
    single = medians[(medians.seq_len == big_L) & (medians.num_reqs == one_n) & (medians.launch == "graph")]
    facts["single_request_graph_us"] = {r.arm: float(r.median_us) for r in single.itertuples()}
    if "fast of ceiling_fraction" in at:
        facts["fast_fraction_at_max"] = float(at["fast of ceiling_fraction"])
    vllm = [c for c in ratios.columns if c.startswith("fast speedup over vllm")]
    if vllm:
        facts["fast_speedup_over_vllm_at_max"] = float(at[vllm[0]])
    g = facts["fixed_ratio_graph"]
    text = (f"Graph replays: the fixed kernel's narrowed/contiguous time ratio is {g['min']:.3f}-{g['max']:.3f} "
            f"({g['outside_band']} of {g['points']} points outside {lo}-{hi})")
    if "fast_ratio_graph" in facts:
        f = facts["fast_ratio_graph"]
        text += f", gather_fast's {f['min']:.3f}-{f['max']:.3f} ({f['outside_band']} outside)"
    text += (f"; .contiguous() adds a median {100 * (facts['contiguous_copy_overhead_graph'] - 1):.1f}% graphed and "
             f"{100 * (facts['contiguous_copy_overhead_eager'] - 1):.1f}% eager. At {big_n} x {big_L} tokens the fixed "
             f"kernel moves {facts['fixed_fraction_at_max']:.0%} of the {ceiling:.2f} TB/s copy ceiling")
    if "fast_fraction_at_max" in facts:
        text += f", gather_fast {facts['fast_fraction_at_max']:.0%}"
    if "fast_speedup_over_vllm_at_max" in facts:
        text += f" ({facts['fast_speedup_over_vllm_at_max']:.1f}x vLLM 0.22.0's Triton gather)"
    fast_one = facts["single_request_graph_us"].get("fast / narrowed view")
    if fast_one is not None:
        text += f"; one {big_L}-token request takes {fast_one:.1f} us with gather_fast"
    e = facts["fixed_ratio_eager"]
    text += (f". Eager medians (Python launch included) put {e['outside_band']} of {e['points']} fixed-kernel points "
             f"outside the band; {facts['host_bound_eager_points']} of {facts['eager_points']} eager points are "
             f"host-bound (eager > {HOST_BOUND_FACTOR}x graph), i.e. they time the launch path, not the kernel.")
    facts["headline"] = text
    return facts

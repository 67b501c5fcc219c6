"""Notebook 03's measurements: what the stride fix costs, against a contiguous table and against
the rejected ``.contiguous()`` alternative, eager and as CUDA-graph replays.

Each shape is checked bitwise against the reference before it is timed. The narrowed-view and
contiguous-table arms run the same kernel binary (the row pitch is not specialised), so their
ratio isolates the cost of reading rows ``stride(0)`` apart. Arms are timed in alternating
rounds and the median of the rounds is kept, so drift does not favour one arm.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from functools import partial

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


def run_perf(request_counts, seq_lens, block_size: int, variants: list[str], medians, checks,
             rounds: int = 2, rep_ms: int = 50, extra_arms: dict | None = None, progress=None) -> pd.DataFrame:
    """Time every arm at every (sequence length, request count); append rows as each shape finishes.

    ``extra_arms`` maps an arm name to a gather function with vLLM's signature, run on the
    contiguous table (e.g. vLLM's own Triton kernel, loaded from its wheel).
    """
    arms = arms_for(variants)
    fns = {label: load_implementation(BUILTIN[label]) for _, label, _ in arms}
    for name, fn in (extra_arms or {}).items():
        arms.append((name, name, "contiguous"))
        fns[name] = fn
    max_reqs = max(request_counts)
    for L in seq_lens:
        for n in request_counts:
            spec = ScenarioSpec(num_reqs=n, block_size=block_size, seq_len_max=L, seq_lens=(L,) * n,
                                max_reqs=max_reqs, device="cuda", mode="in-range")
            tokens = n * L
            copies = bench.rotation_count(bench.gather_bytes(tokens))
            scenarios = [build_scenario(replace(spec, seed=k)) for k in range(copies)]
            contiguous = [s.block_table.contiguous() for s in scenarios]
            outs = [s.fresh_out() for s in scenarios]
            ref = reference_output(scenarios[0])
            # correctness first: every arm, bitwise, on the first copy
            for arm, label, which in arms:
                out = scenarios[0].fresh_out()
                fns[label](*scenarios[0].args(out, _tables(scenarios[0], contiguous[0], which)))
                torch.cuda.synchronize()
                mismatched, stray = compare_bitwise(out, ref, scenarios[0])
                checks.append({"check": "timed arm equals the reference", "variant": arm, "num_reqs": n,
                               "seq_len": L, "expected": "0 tokens differ",
                               "observed": f"{mismatched}/{tokens} differ, {stray} stray",
                               "ok": mismatched == 0 and stray == 0})
            times: dict[str, dict[str, list[float]]] = {arm: {"eager": [], "graph": []} for arm, _, _ in arms}
            for _ in range(rounds):
                for arm, label, which in arms:
                    fn = fns[label]
                    s0 = scenarios[0]
                    times[arm]["eager"].append(bench.median_us(
                        partial(fn, *s0.args(outs[0], _tables(s0, contiguous[0], which))), rep_ms=rep_ms))
                    calls = [partial(fn, *s.args(o, _tables(s, c, which)))
                             for s, c, o in zip(scenarios, contiguous, outs)]
                    times[arm]["graph"].append(bench.graph_median_us(calls, rep_ms=rep_ms))
            for arm, _, _ in arms:
                for mode in ("eager", "graph"):
                    us = statistics.median(times[arm][mode])
                    medians.append({"arm": arm, "launch": mode, "num_reqs": n, "seq_len": L, "tokens": tokens,
                                    "rotation": copies, "median_us": round(us, 3),
                                    "rounds_us": " ".join(f"{t:.2f}" for t in times[arm][mode]),
                                    "bandwidth_tbps": round(bench.gather_bytes(tokens) / (us * 1e-6) / 1e12, 4)})
            if progress:
                progress(L, n)
            del scenarios, contiguous, outs, ref
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

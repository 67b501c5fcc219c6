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

from . import bench
from .gather_cases import compare_bitwise, reference_output
from .implementations import BUILTIN, load_implementation
from .scenarios import ScenarioSpec, build_scenario

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

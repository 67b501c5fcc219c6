"""What notebook 03's timings say: ratios per shape, the bitwise checks of the timed arms, and
the headline figures, all derived from one run's tables.

Kernel cost is judged on CUDA-graph replays; eager medians are reported beside them, and a point
whose eager median exceeds ``HOST_BOUND_FACTOR`` x its graph median is marked host-bound (the
eager median then times Python's launch path, not memory traffic).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import pandas as pd

from repro.core.analysis.provenance import provenance_short
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import implementation_names
from repro.core.geometry.layout import gather_bytes
from repro.registry import Origin
from repro_studies.registry import COPY_OVERHEAD_PAIR, STRIDE_COST_PAIRS, Arm, arms_by_label
from repro_studies.tables import Table

#: The fix costs nothing if narrowed / contiguous stays inside this band.
NO_COST_BAND = (0.99, 1.01)
#: An eager median this much above the graph replay of the same launch measures the host's launch path.
HOST_BOUND_FACTOR = 1.5
#: The kernel whose speed is compared with outside kernels.
FASTEST = "fast"


def arm_check_row(arm: Arm, num_reqs: int, seq_len: int, mismatched: int, stray: int, tokens: int) -> dict:
    return {
        "check": "timed arm equals the reference",
        "variant": arm.label,
        "num_reqs": num_reqs,
        "seq_len": seq_len,
        "expected": "0 tokens differ",
        "observed": f"{mismatched}/{tokens} differ, {stray} stray",
        "ok": mismatched == 0 and stray == 0,
    }


def outside_arms(medians: pd.DataFrame) -> list[str]:
    """Labels of the arms a timing table's rows record as a user's code: the kernel named by the
    ``reference_gather`` parameter (e.g. an installed vLLM's kernel timed beside ours), neither the repository's
    own arms nor a release's arms loaded by ``repro_studies.upstream`` (reported apart)."""
    return [label for label, a in arms_by_label(medians).items() if a.origin == Origin.USER]


def _by_arm(rows: pd.DataFrame, value: str) -> dict[Arm, float]:
    """``value`` per arm of rows of one shape and launch mode, each arm rebuilt from the row's fields."""
    arms = arms_by_label(rows)
    return {arms[label]: v for label, v in zip(rows["arm"], rows[value])}


def _pivot(medians: pd.DataFrame, launch: str) -> tuple[pd.DataFrame, dict[Arm, str]]:
    """Medians of one launch mode per shape, one column per arm label, and the label of each arm."""
    piv = medians[medians.launch == launch].pivot_table(
        index=["seq_len", "num_reqs"], columns="arm", values="median_us"
    )
    return piv, {a: label for label, a in arms_by_label(medians).items()}


def outside_columns(run: RunData) -> dict[str, str]:
    """Short names of a run's outside timed arms (legends, table columns), from the provenance the run recorded."""
    med = run.table(Table.PERF_MEDIANS)
    if med is None or not len(med):
        return {}
    info = (run.manifest.get("implementations") or {}).get("reference_gather") or {
        "target": (run.manifest.get("parameters") or {}).get("reference_gather", "")
    }
    return {label: provenance_short(info) for label in outside_arms(med)}


def outside_names(run: RunData) -> dict[str, str]:
    """A run's outside timed arms by their full names (the loaded function and its version), as the report's
    sentences name them."""
    names = implementation_names(run)
    return {label: names.get("reference_gather", label) for label in outside_columns(run)}


def _bytes_per_s_fraction(tokens: int, us: float, ceiling_tbps: float) -> float:
    return gather_bytes(tokens) / (us * 1e-6) / 1e12 / ceiling_tbps


def ratio_rows(medians: pd.DataFrame, ceiling_tbps: float) -> pd.DataFrame:
    """Per shape and launch mode: narrowed/contiguous per kernel, copy overhead, fraction of ceiling."""
    rows = []
    fixed_view, fixed_contig = STRIDE_COST_PAIRS["fixed"]
    copy_arm, copy_base = COPY_OVERHEAD_PAIR
    fast_view, fast_contig = STRIDE_COST_PAIRS[FASTEST]
    outside = [(label, a) for label, a in arms_by_label(medians).items() if a.origin == Origin.USER]
    for (L, n, mode), g in medians.groupby(["seq_len", "num_reqs", "launch"], sort=True):
        t = _by_arm(g, "median_us")
        row = {"seq_len": L, "num_reqs": n, "launch": mode}
        row["fixed narrowed/contiguous_ratio"] = t[fixed_view] / t[fixed_contig]
        row["contiguous-copy overhead_ratio"] = t[copy_arm] / t[copy_base]
        row["fixed of ceiling_fraction"] = _bytes_per_s_fraction(n * L, t[fixed_view], ceiling_tbps)
        if fast_view in t:
            row["fast narrowed/contiguous_ratio"] = t[fast_view] / t[fast_contig]
            row["fast of ceiling_fraction"] = _bytes_per_s_fraction(n * L, t[fast_view], ceiling_tbps)
            row["fast speedup over fixed_ratio"] = t[fixed_view] / t[fast_view]
        for label, other in outside:
            if other in t:
                row[f"fast speedup over {label}_ratio"] = t[other] / t.get(fast_view, float("nan"))
        rows.append(row)
    return pd.DataFrame(rows).round(4)


class NotTimed(StrEnum):
    """Why notebook 03 timed nothing, as its facts record it (``not_timed``); the report words it
    (``phrases.md.j2``)."""

    CPU_INTERPRETER = "cpu-interpreter"


def not_timed(facts: dict | None) -> NotTimed | None:
    """Why the run timed nothing, or None when it timed (or recorded neither). Facts written before the reason was
    a value hold only a ``headline``, which only the CPU profile's skip wrote without any timing figure."""
    facts = facts or {}
    if "not_timed" in facts:
        return NotTimed(facts["not_timed"])
    if "headline" in facts and "band" not in facts:
        return NotTimed.CPU_INTERPRETER
    return None


def timing_facts(medians: pd.DataFrame, ratios: pd.DataFrame) -> dict:
    """The figures the report leads with, all derived from the two tables of one run. Numbers only: the report's
    ``phrases.md.j2`` words them (``fix_cost``, ``gather_fast``)."""
    lo, hi = NO_COST_BAND
    ceiling = float(ratios["copy_ceiling_tbps"].iloc[0])
    big_L, big_n = int(ratios.seq_len.max()), int(ratios.num_reqs.max())
    one_n = int(ratios.num_reqs.min())
    facts: dict = {"copy_ceiling_tbps": ceiling, "shape_max": [big_n, big_L], "band": [lo, hi]}
    facts["host_bound_factor"] = HOST_BOUND_FACTOR
    for kernel in STRIDE_COST_PAIRS:
        col = f"{kernel} narrowed/contiguous_ratio"
        if col not in ratios:
            continue
        for mode in ("graph", "eager"):
            r = ratios[ratios.launch == mode][col]
            facts[f"{kernel}_ratio_{mode}"] = {
                "min": float(r.min()),
                "max": float(r.max()),
                "outside_band": int(((r < lo) | (r > hi)).sum()),
                "points": len(r),
            }
    wide = medians.pivot_table(index=["seq_len", "num_reqs", "arm"], columns="launch", values="median_us").reset_index()
    wide["host_bound"] = wide["eager"] > HOST_BOUND_FACTOR * wide["graph"]
    facts["host_bound_eager_points"] = int(wide.host_bound.sum())
    facts["eager_points"] = len(wide)
    for mode in ("eager", "graph"):
        facts[f"contiguous_copy_overhead_{mode}"] = float(
            ratios[ratios.launch == mode]["contiguous-copy overhead_ratio"].median()
        )
    at = ratios[(ratios.seq_len == big_L) & (ratios.num_reqs == big_n) & (ratios.launch == "graph")].iloc[0]
    facts["fixed_fraction_at_max"] = float(at["fixed of ceiling_fraction"])
    single = medians[(medians.seq_len == big_L) & (medians.num_reqs == one_n) & (medians.launch == "graph")]
    facts["single_request_graph_us"] = {r.arm: float(r.median_us) for r in single.itertuples()}
    one = _by_arm(single, "median_us")
    facts["single_request_us"] = {kernel: float(one[v]) for kernel, (v, _) in STRIDE_COST_PAIRS.items() if v in one}
    if "fast of ceiling_fraction" in at:
        facts["fast_fraction_at_max"] = float(at["fast of ceiling_fraction"])
    others = outside_arms(medians)
    if others:
        facts["outside_arm"] = others[0]
        facts["fast_speedup_over_outside_at_max"] = float(at[f"fast speedup over {others[0]}_ratio"])
    if "fast speedup over fixed_ratio" in at:
        facts["fast_speedup_over_fixed_at_max"] = float(at["fast speedup over fixed_ratio"])
    return facts


def fix_cost_table(medians: pd.DataFrame, ratios: pd.DataFrame, launch: str) -> pd.DataFrame:
    """Per shape, one launch mode: the fixed kernel on the view and on a contiguous table, the copy arm,
    and the three figures derived from them."""
    view, contig = STRIDE_COST_PAIRS["fixed"]
    copy_arm, _ = COPY_OVERHEAD_PAIR
    piv, label = _pivot(medians, launch)
    r = ratios[ratios.launch == launch].set_index(["seq_len", "num_reqs"])
    out = pd.DataFrame(
        {
            f"{view.display} us": piv[label[view]],
            f"{contig.display} us": piv[label[contig]],
            f"{copy_arm.display} us": piv[label[copy_arm]],
            "narrowed / contig": r["fixed narrowed/contiguous_ratio"],
            "copy overhead": r["contiguous-copy overhead_ratio"],
            "of ceiling": r["fixed of ceiling_fraction"],
        }
    )
    return out.reset_index()


def fast_table(
    medians: pd.DataFrame, ratios: pd.DataFrame, launch: str, outside_names: dict[str, str] | None = None
) -> pd.DataFrame:
    """Per shape, one launch mode: gather_fast on the view and on a contiguous table, its stride cost,
    share of the ceiling and speed-ups over the fixed kernel and any outside kernel."""
    view, contig = STRIDE_COST_PAIRS[FASTEST]
    piv, label = _pivot(medians, launch)
    if view not in label or label[view] not in piv:
        return pd.DataFrame()
    r = ratios[ratios.launch == launch].set_index(["seq_len", "num_reqs"])
    out = pd.DataFrame(
        {
            f"{view.display} us": piv[label[view]],
            f"{contig.display} us": piv[label[contig]],
            "narrowed / contig": r[f"{FASTEST} narrowed/contiguous_ratio"],
            "of ceiling": r[f"{FASTEST} of ceiling_fraction"],
            "x fixed": r[f"{FASTEST} speedup over fixed_ratio"],
        }
    )
    for other in outside_arms(medians[medians.launch == launch]):
        out[f"x {(outside_names or {}).get(other, other)}"] = r[f"{FASTEST} speedup over {other}_ratio"]
    return out.reset_index()


def outside_band(ratios: pd.DataFrame, kernel: str = "fixed") -> pd.DataFrame:
    lo, hi = NO_COST_BAND
    col = f"{kernel} narrowed/contiguous_ratio"
    return ratios[(ratios[col] < lo) | (ratios[col] > hi)]


#: Columns of the eager-cost table (one row per arm and shape).
EAGER_COST_COLUMNS = ["arm", "code", "seq_len", "num_reqs", "host_us", "eager_us", "graph_us", "host_bound"]


def eager_costs(tables: Iterable[pd.DataFrame | None]) -> pd.DataFrame:
    """Every timed arm of a run (the repository's, vLLM's, the streaming kernels), per shape: host time per
    eager call (enqueue, plain clock), the device time of one eager call (``do_bench``) and of a graph replay.

    ``host_bound``: the host needs longer to enqueue a call than the GPU to run it, so back-to-back eager
    calls leave the GPU waiting on Python. Tables without a ``host_us`` column (older runs) add no rows.
    """
    rows = []
    for frame in tables:
        if frame is None or not len(frame) or "host_us" not in frame:
            continue
        f = frame.assign(code=frame["code"] if "code" in frame else "")
        f["median_us"] = pd.to_numeric(f["median_us"], errors="coerce")
        f["host_us"] = pd.to_numeric(f["host_us"], errors="coerce")
        for (a, code, L, n), g in f.groupby(["arm", "code", "seq_len", "num_reqs"], sort=False, dropna=False):
            by_mode = {r.launch: r for r in g.itertuples()}
            eager, graph = by_mode.get("eager"), by_mode.get("graph")
            if eager is None or pd.isna(eager.host_us):
                continue
            graph_us = float(graph.median_us) if graph is not None else float("nan")
            rows.append(
                {
                    "arm": a,
                    "code": "" if pd.isna(code) else code,
                    "seq_len": int(L),
                    "num_reqs": int(n),
                    "host_us": float(eager.host_us),
                    "eager_us": float(eager.median_us),
                    "graph_us": graph_us,
                    "host_bound": bool(float(eager.host_us) > graph_us),
                }
            )
    return pd.DataFrame(rows, columns=EAGER_COST_COLUMNS)


def eager_cost_summary(costs: pd.DataFrame) -> pd.DataFrame:
    """One row per arm: host time per eager call (median, min, max over the shapes) and the eager and graph
    device times at the smallest and the largest shape."""
    rows = []
    for (a, code), g in costs.groupby(["arm", "code"], sort=False):
        tokens = g["seq_len"] * g["num_reqs"]
        small, large = g.loc[tokens.idxmin()], g.loc[tokens.idxmax()]
        rows.append(
            {
                "arm": a,
                "code": code,
                "host us (median)": round(float(g["host_us"].median()), 1),
                "host us (min-max)": f"{g['host_us'].min():.1f}-{g['host_us'].max():.1f}",
                "smallest shape": f"{int(small.num_reqs)} x {int(small.seq_len):,}",
                "eager us there": round(float(small.eager_us), 1),
                "graph us there": round(float(small.graph_us), 1),
                "largest shape": f"{int(large.num_reqs)} x {int(large.seq_len):,}",
                "eager us at largest": round(float(large.eager_us), 1),
                "graph us at largest": round(float(large.graph_us), 1),
                "host-bound shapes": f"{int(g['host_bound'].sum())} of {len(g)}",
            }
        )
    return pd.DataFrame(rows)

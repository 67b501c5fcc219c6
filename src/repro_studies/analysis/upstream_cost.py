"""What PR #55109's change costs on vLLM's own kernel: ratios and their spread per release, from the
medians of notebook 03's vLLM arms (``results/03-vllm-medians.csv``). Pandas only.

Per release, shape and launch mode (the arms are :func:`repro_studies.registry.upstream_bench_arms`, timed in the
same alternating rounds):

* ``patched/released (contig)``: PR #55109's kernel over the shipped one, both on a contiguous table,
  where both read the same addresses: what turning the row pitch from a ``tl.constexpr`` into a runtime
  argument costs;
* ``patched narrowed/contig``: PR #55109's kernel on the narrowed view over the contiguous table: what
  reading rows ``stride(0)`` apart costs (one compiled binary for both);
* ``copy over patched (view)``: the rejected ``.contiguous()`` + shipped kernel over PR #55109's kernel,
  on the same narrowed view; ``copy over released (contig)``: the same over today's baseline.

A ratio inside :data:`~repro_studies.analysis.performance.NO_COST_BAND` costs nothing measurable. Kernel cost is
judged on CUDA-graph replays; eager medians include vLLM's own Python launch path.
"""

from __future__ import annotations

import pandas as pd

from repro_studies.analysis.performance import NO_COST_BAND
from repro_studies.analysis.releases import version_key
from repro_studies.registry import TRITON_FORMS, arms_by_label, code_label, upstream_pairs

#: The two ratios held against the no-cost band, and the copy overheads it reports.
BAND_RATIOS = ("patched/released (contig)", "patched narrowed/contig")
COPY_RATIOS = ("copy over patched (view)", "copy over released (contig)")


def releases(medians: pd.DataFrame) -> list[str]:
    """The vLLM releases a medians table holds Triton-kernel arms of (the rows' ``release``), oldest first."""
    found = {a.release for a in arms_by_label(medians).values() if a.upstream and a.form in TRITON_FORMS}
    return sorted(found, key=version_key)


def origins(medians: pd.DataFrame) -> list[str]:
    """The releases of :func:`releases` as their ``code`` (``"vLLM <version>"``), oldest first."""
    return [code_label(r) for r in releases(medians)]


def ratio_rows(medians: pd.DataFrame) -> pd.DataFrame:
    """One row per release, shape and launch mode: the four ratios and the shipped kernel's median."""
    rows = []
    arms = arms_by_label(medians)
    for release in releases(medians):
        pairs = upstream_pairs(release)
        wanted = {label for label, a in arms.items() if any(a in pair for pair in pairs.values())}
        mine = medians[medians["arm"].isin(wanted)]
        for (L, n, mode), g in mine.groupby(["seq_len", "num_reqs", "launch"], sort=True):
            t = {arms[label]: us for label, us in zip(g["arm"], g["median_us"])}
            row = {"code": code_label(release), "seq_len": int(L), "num_reqs": int(n), "launch": mode}
            row["released_us"] = t.get(pairs["patched/released (contig)"][1])
            for name, (num, den) in pairs.items():
                row[f"{name}_ratio"] = t[num] / t[den] if num in t and den in t else None
            rows.append(row)
    return pd.DataFrame(rows).round(4)


def _spread(values: pd.Series) -> dict:
    lo, hi = NO_COST_BAND
    v = values.dropna().astype(float)
    return {
        "min": float(v.min()),
        "max": float(v.max()),
        "median": float(v.median()),
        "outside_band": int(((v < lo) | (v > hi)).sum()),
        "points": len(v),
    }


def cost_facts(ratios: pd.DataFrame) -> dict:
    """Per release and launch mode: each ratio's spread against the no-cost band (numbers only: the report's
    ``phrases.md.j2`` words them, ``vllm_cost``)."""
    lo, hi = NO_COST_BAND
    facts: dict = {"band": [lo, hi], "releases": {}}
    for origin in dict.fromkeys(ratios["code"]):  # oldest first, as ratio_rows wrote them
        mine = ratios[ratios["code"] == origin]
        per: dict = {}
        for mode in ("graph", "eager"):
            at = mine[mine["launch"] == mode]
            if len(at):
                per[mode] = {name: _spread(at[f"{name}_ratio"]) for name in (*BAND_RATIOS, *COPY_RATIOS)}
        facts["releases"][origin] = per
    return facts


def cost_table(ratios: pd.DataFrame, origin: str, launch: str = "graph") -> pd.DataFrame:
    """One release's ratios at every shape for one launch mode, with short column names (report tables)."""
    mine = ratios[(ratios["code"] == origin) & (ratios["launch"] == launch)]
    cols = {"seq_len": "tokens", "num_reqs": "requests", "released_us": "shipped us"}
    cols |= {f"{name}_ratio": name for name in (*BAND_RATIOS, *COPY_RATIOS)}
    return mine[list(cols)].rename(columns=cols).reset_index(drop=True)


#: Between the classes of a function's call sites in the summary's ``runs`` cell.
RUNS_APART = " | "


def production_path_summary(sites: pd.DataFrame) -> pd.DataFrame:
    """One row per release and function holding gather calls: how many calls per loop iteration (prefill
    chunk) and layer, how many of them depend on a condition, and how they run under the defaults."""
    if sites is None or not len(sites):
        return pd.DataFrame()
    rows = []
    for (release, module, function), g in sites.groupby(["release", "module", "function"], sort=False):
        conditional = g[g["condition"].fillna("").astype(str) != ""]
        rows.append(
            {
                "release": release,
                "module": module,
                "function": function,
                "loop": " | ".join(sorted(set(g["loop"].astype(str)))),
                "calls per iteration": len(g),
                "conditional calls": len(conditional),
                "conditions": ", ".join(sorted(set(conditional["condition"].astype(str)))),
                "default cudagraph_mode": g["default cudagraph_mode"].iloc[0],
                "breakable CUDA graph by default": g["breakable CUDA graph by default"].iloc[0],
                "runs": RUNS_APART.join(sorted(set(g["runs"].astype(str)))),
            }
        )
    return pd.DataFrame(rows)


def cuda_path_rows(summary: pd.DataFrame | None, module_part: str = "/nvidia/") -> list[dict]:
    """The production-path summary's rows of the CUDA path (modules whose path contains ``module_part``), one per
    release and function, ``runs`` as the list of its call sites' classes (the values of
    :class:`repro_studies.upstream.callsites.Runs`): what the report's ``production_path`` phrase words."""
    if summary is None or not len(summary):
        return []
    rows = summary[summary["module"].str.contains(module_part, regex=False)].to_dict("records")
    return [r | {"runs": str(r["runs"]).split(RUNS_APART)} for r in rows]

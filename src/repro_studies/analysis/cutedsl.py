"""vLLM's CuTe-DSL gather beside gather_fast: what notebook 03's CuTe-DSL arms say. Pandas only.

Where vLLM dispatches to the CuTe-DSL gather (notebook 05's table says where), it, not a Triton gather, is
``gather_fast``'s peer. Its arms (:func:`repro_studies.registry.cutedsl_bench_arms`)
are timed like every other arm; this module puts them beside ``gather_fast``'s arms of the same run and
the streaming ceiling measured in it:

* ``narrowed/contig``: the CuTe-DSL gather on the narrowed view over its contiguous copy (it follows
  ``stride(0)`` through the tensor's layout: what that costs it);
* ``vs fast``: its time over ``gather_fast``'s on the same kind of table (below 1: faster);
* ``of stream``: the best streaming arm's time over its time (the fraction of the right ceiling).

A release whose CuTe-DSL gather could not be timed has one status row (``code``, ``status``,
``reason``) instead, and the report says why.
"""

from __future__ import annotations

from enum import StrEnum

import pandas as pd

from repro_studies.analysis.ceiling import SHAPE, ceiling_table
from repro_studies.analysis.performance import NO_COST_BAND
from repro_studies.registry import STRIDE_COST_PAIRS, UPSTREAM_IMPLEMENTATION, BlockTable, arms_by_label


class CuteDslStatus(StrEnum):
    """Status of a release's CuTe-DSL arms in ``03-cutedsl``."""

    TIMED = "timed"
    NOT_RUN = "not run"  # the reason says why
    FAILED = "failed"  # the reason is the error


#: The ceiling table's columns when a run measured no streaming ceiling (``stream_ceiling = "off"``).
_NO_CEILING = ["arm", "median_us", "tokens", *SHAPE]


def status_row(code: str, status: CuteDslStatus, reason: str = "") -> dict:
    """One release's CuTe-DSL outcome: timed, not run (why), or failed (the error)."""
    if status not in tuple(CuteDslStatus):
        raise ValueError(f"status: {status!r} is not one of {', '.join(CuteDslStatus)}")
    return {"code": code, "status": status, "reason": reason}


def beside_fast(
    cute: pd.DataFrame, perf: pd.DataFrame, ceiling: pd.DataFrame | None, copy_tbps: float | None = None
) -> pd.DataFrame:
    """One row per release, shape and launch mode: the CuTe-DSL gather's medians on both tables, its
    narrowed/contiguous ratio, its time over gather_fast's and its fraction of the streaming ceiling."""
    if cute is None or not len(cute):
        return pd.DataFrame()
    if perf is not None and len(perf):
        fast_arms = [label for label, a in arms_by_label(perf).items() if a in STRIDE_COST_PAIRS["fast"]]
        fast = perf[perf["arm"].isin(fast_arms)]
    else:
        fast = perf
    gathers = pd.concat([f for f in (cute, fast) if f is not None and len(f)], ignore_index=True)
    streams = ceiling if ceiling is not None and len(ceiling) else pd.DataFrame(columns=_NO_CEILING)
    vs = ceiling_table(gathers, streams, copy_tbps)
    rows = []
    for code in sorted(cute["code"].unique()):
        at = vs[(vs["code"] == code) & (vs["kernel"] == UPSTREAM_IMPLEMENTATION)]
        for (L, n, mode), g in at.groupby(SHAPE, sort=True):
            by_table = {r.table: r for r in g.itertuples()}
            v, c = by_table.get(BlockTable.NARROWED), by_table.get(BlockTable.CONTIGUOUS)
            rows.append(
                {
                    "code": code,
                    "seq_len": int(L),
                    "num_reqs": int(n),
                    "launch": mode,
                    "view_us": None if v is None else v.median_us,
                    "contig_us": None if c is None else c.median_us,
                    "narrowed/contig_ratio": None if v is None or c is None else round(v.median_us / c.median_us, 4),
                    "vs fast (view)_ratio": None if v is None else v.vs_fast_ratio,
                    "vs fast (contig)_ratio": None if c is None else c.vs_fast_ratio,
                    "of stream (view)_fraction": None if v is None else v.of_stream_fraction,
                }
            )
    return pd.DataFrame(rows)


def release_facts(status: pd.DataFrame, table: pd.DataFrame, launch: str = "graph") -> dict:
    """Per release: the narrowed/contiguous spread against the no-cost band and the figures at the largest
    shape, or why it was not timed (numbers and classes: ``phrases.md.j2`` of the report words them)."""
    lo, hi = NO_COST_BAND
    facts: dict = {"band": [lo, hi], "releases": {}}
    for r in status.itertuples() if status is not None and len(status) else []:
        if r.status != CuteDslStatus.TIMED:
            facts["releases"][r.code] = {"status": r.status, "reason": r.reason}
            continue
        mine = table[(table["code"] == r.code) & (table["launch"] == launch)] if len(table) else table
        if not len(mine):
            facts["releases"][r.code] = {"status": r.status, "reason": "no medians recorded"}
            continue
        ratio = mine["narrowed/contig_ratio"].dropna().astype(float)
        tokens = mine["seq_len"] * mine["num_reqs"]
        top = mine[tokens == tokens.max()].iloc[0]
        entry = {
            "status": r.status,
            "narrowed/contig": {
                "min": float(ratio.min()),
                "max": float(ratio.max()),
                "outside_band": int(((ratio < lo) | (ratio > hi)).sum()),
                "points": len(ratio),
            },
            "at": {"num_reqs": int(top["num_reqs"]), "seq_len": int(top["seq_len"]), "view_us": top["view_us"]},
            "vs_fast": top["vs fast (view)_ratio"],
            "of_stream": top["of stream (view)_fraction"],
        }
        facts["releases"][r.code] = entry
    return facts

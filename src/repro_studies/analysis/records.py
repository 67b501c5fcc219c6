"""Notebook 03's V4.1 section in numbers: check rows, each gather's median against its copy-equivalent time
(the bytes it moves at the copy rate measured in the same run) and against the release's kernel. Pandas only."""

from __future__ import annotations

import pandas as pd

CHECK_REFERENCE = "V4.1 gather equals the reference decoder"
CHECK_RELEASE = "V4.1 gather equals the release's patched kernel"
CHECK_RUNS = "V4.1 gather runs"
#: What each comparison of :func:`repro_studies.evidence.records_perf.bitwise_rows` checks.
CHECK_BY_AGAINST = {"reference decoder": CHECK_REFERENCE, "vLLM patched": CHECK_RELEASE, "": CHECK_RUNS}


def check_rows(raw: list[dict], shape: str) -> list[dict]:
    """Notebook check rows (``ok`` on 0 differing tokens and 0 stray rows) from bitwise comparison rows."""
    rows = []
    for r in raw:
        failed = bool(r.get("error"))
        observed = r["error"] if failed else f"{r['mismatched']}/{r['tokens']} differ, {r['stray']} stray"
        rows.append(
            {
                "check": CHECK_BY_AGAINST[r.get("against", "")],
                "variant": r["arm"],
                "num_reqs": r.get("num_reqs"),
                "expected": "0 tokens differ" + (f" ({r['note']})" if r.get("note") else ""),
                "observed": observed,
                "ok": not failed and r["mismatched"] == 0 and r["stray"] == 0,
                "code": r["code"],
                "record": r["kind"],
                "layout": r["layout"],
                "shape": shape,
            }
        )
    return rows


def vs_copy(medians: pd.DataFrame, copy_tbps: float | None) -> pd.DataFrame:
    """Per record, layout, shape and arm: the median, its copy-equivalent time, the fraction of the copy rate
    reached (copy-equivalent / median), and for the repository's gathers the speedup over the release's kernel
    timed at the same shape."""
    if medians is None or medians.empty:
        return pd.DataFrame()
    out = medians.copy()
    out["copy_equiv_us"] = out["bytes_moved"] / (copy_tbps * 1e12) * 1e6 if copy_tbps else None
    out["of_copy"] = out["copy_equiv_us"] / out["median_us"] if copy_tbps else None
    keys = ["kind", "layout", "num_reqs", "seq_len"]
    upstream = out[out["upstream"]].groupby(keys)["median_us"].min().rename("release_us")
    out = out.join(upstream, on=keys)
    out["speedup_vs_release"] = (out["release_us"] / out["median_us"]).where(~out["upstream"])
    cols = [*keys, "arm", "code", "median_us", "copy_equiv_us", "of_copy", "release_us", "speedup_vs_release"]
    return out[cols].round({"copy_equiv_us": 1, "of_copy": 3, "speedup_vs_release": 3})


def largest_facts(table: pd.DataFrame | None) -> dict:
    """At the largest shape (``shape``: requests, tokens per request), per record and layout (``groups``): the
    copy-equivalent time and every arm's median and share of the copy rate, fastest first. Numbers only: the
    report's ``phrases.md.j2`` words them (``v41``); without a timed row, ``groups`` is empty."""
    if table is None or table.empty:
        return {"groups": []}
    tokens = table["num_reqs"] * table["seq_len"]
    top = table[tokens == tokens.max()]
    groups = []
    for (kind, layout), g in top.groupby(["kind", "layout"], sort=True):
        copy = g["copy_equiv_us"].iloc[0]
        arms = [
            {"arm": r["arm"], "median_us": float(r["median_us"]), "of_copy": _figure(r["of_copy"])}
            for r in g.sort_values("median_us").to_dict("records")
        ]
        groups.append({"kind": kind, "layout": layout, "copy_equiv_us": _figure(copy), "arms": arms})
    return {"shape": [int(top["num_reqs"].iloc[0]), int(top["seq_len"].iloc[0])], "groups": groups}


def _figure(value) -> float | None:
    """A recorded figure as a float, or None where none was recorded (None or NaN)."""
    return None if value is None or pd.isna(value) else float(value)

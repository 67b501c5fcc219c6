"""Two runs, check by check: which verdicts changed (e.g. the buggy kernel under test vs the fixed)."""

from __future__ import annotations

import pandas as pd

from repro.analysis.checks import truthy
from repro.analysis.rundata import RunData, RunFolderError

KEY = ["notebook", "check", "variant", "mode", "num_reqs"]


def _checks(run: RunData) -> pd.DataFrame:
    frames = list(run.check_tables().values())
    if not frames:
        raise RunFolderError(f"{run.path}: no check tables in results/ to compare")
    df = pd.concat(frames, ignore_index=True)
    for k in KEY:
        if k not in df:
            df[k] = ""
    df["num_reqs"] = pd.to_numeric(df["num_reqs"], errors="coerce").astype("Int64").astype(str).replace("<NA>", "")
    df[KEY] = df[KEY].fillna("").astype(str)
    df["ok"] = df["ok"].map(truthy)
    return df[KEY + ["observed", "ok"]]


def compare_runs(run_a: RunData, run_b: RunData) -> pd.DataFrame:
    """Outer join of both runs' check rows on the check key, with ``in`` and ``changed`` columns."""
    a, b = _checks(run_a), _checks(run_b)
    merged = a.merge(b, on=KEY, how="outer", suffixes=(" (A)", " (B)"), indicator=True)
    merged["in"] = merged.pop("_merge").map({"both": "both", "left_only": "A only", "right_only": "B only"})
    merged["changed"] = (merged["in"] == "both") & (merged["ok (A)"] != merged["ok (B)"])
    return merged


def comparison_summary(cmp: pd.DataFrame) -> pd.DataFrame:
    """Per notebook, check and variant: passed in A, passed in B, cases, changed."""
    both = cmp[cmp["in"] == "both"]
    return (
        both.groupby(["notebook", "check", "variant"], sort=False)
        .agg(
            **{
                "passed (A)": ("ok (A)", "sum"),
                "passed (B)": ("ok (B)", "sum"),
                "cases": ("changed", "size"),
                "changed": ("changed", "sum"),
            }
        )
        .reset_index()
    )

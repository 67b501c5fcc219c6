"""Two runs, check by check: which verdicts changed (e.g. the buggy kernel under test vs the fixed).

A check row is identified by every column that says which case it is (``KEY``); rows that agree on all
of them (e.g. the split-ratio checks of notebook 01, one per ratio) are told apart by their order in
the table, which the notebooks write deterministically.
"""

from __future__ import annotations

import pandas as pd

from repro.analysis.checks import truthy
from repro.analysis.rundata import RunData, RunFolderError

#: Columns that identify one check row; a table without one of them has it empty.
KEY = ["notebook", "check", "variant", "mode", "case", "seq_len", "num_reqs"]
#: Numeric key columns: compared as integers, sorted as numbers.
NUMERIC_KEY = ("seq_len", "num_reqs")
#: The position of a row among rows with the same ``KEY`` values.
OCCURRENCE = "occurrence"


def _key_text(series: pd.Series, numeric: bool) -> pd.Series:
    if numeric:
        number = pd.to_numeric(series, errors="coerce").astype("Int64")
        return number.map(lambda v: "" if pd.isna(v) else str(int(v))).astype(str)
    return series.map(lambda v: "" if pd.isna(v) else str(v)).astype(str)


def check_rows(run: RunData) -> pd.DataFrame:
    """Every check row of a run with its key (as text), ``occurrence``, ``observed`` and ``ok``."""
    frames = list(run.check_tables().values())
    if not frames:
        raise RunFolderError(f"{run.path}: no check tables in results/ to compare")
    df = pd.concat(frames, ignore_index=True)
    for k in KEY:
        df[k] = _key_text(df[k], k in NUMERIC_KEY) if k in df else ""
    df[OCCURRENCE] = df.groupby(KEY, sort=False, dropna=False).cumcount()
    df["ok"] = df["ok"].map(truthy)
    df["observed"] = df["observed"].fillna("").astype(str)
    return df[[*KEY, OCCURRENCE, "observed", "ok"]]


def compare_runs(run_a: RunData, run_b: RunData) -> pd.DataFrame:
    """Outer join of both runs' check rows on the full key, with ``in`` and ``changed`` columns.

    Sorted by notebook, check, variant, mode, case, then ``seq_len`` and ``num_reqs`` as numbers.
    """
    a, b = check_rows(run_a), check_rows(run_b)
    on = [*KEY, OCCURRENCE]
    merged = a.merge(b, on=on, how="outer", suffixes=(" (A)", " (B)"), indicator=True)
    merged["in"] = merged.pop("_merge").map({"both": "both", "left_only": "A only", "right_only": "B only"})
    merged["in"] = merged["in"].astype(str)
    merged["changed"] = (merged["in"] == "both") & (merged["ok (A)"] != merged["ok (B)"])
    for k in NUMERIC_KEY:
        merged[k] = pd.to_numeric(merged[k].replace("", None), errors="coerce").astype("Int64")
    return merged.sort_values(on, kind="stable", na_position="first").reset_index(drop=True)


def comparison_counts(cmp: pd.DataFrame) -> dict[str, int]:
    """Rows in both runs, in one only, and rows whose verdict changed."""
    return {
        "both": int((cmp["in"] == "both").sum()),
        "a_only": int((cmp["in"] == "A only").sum()),
        "b_only": int((cmp["in"] == "B only").sum()),
        "changed": int(cmp["changed"].sum()),
    }


def comparison_summary(cmp: pd.DataFrame) -> pd.DataFrame:
    """Per notebook, check and variant (rows in both runs): passed in A, passed in B, cases, changed."""
    both = cmp[cmp["in"] == "both"]
    both = both.assign(**{c: both[c].astype(bool) for c in ("ok (A)", "ok (B)")})
    return (
        both.groupby(["notebook", "check", "variant"], sort=True)
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

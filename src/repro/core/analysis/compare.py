"""Two runs, check by check: which verdicts changed (e.g. the buggy kernel under test vs the fixed).

A check row is paired with the row of the other run that is the same case: the same result table and
the same values in every identity column that table declares (:mod:`repro.tables`: release, kernel,
record, arm, mode, case, sequence length, request count, ...). Rows that agree on all of them (the
split-ratio checks of notebook 01, one per ratio) are told apart by their order within that case,
which the notebooks write deterministically; no row is ever paired by its position in the table.
"""

from __future__ import annotations

import pandas as pd

from repro.core.analysis.checks import truthy
from repro.core.analysis.rundata import RunData, RunFolderError
from repro.tables import IDENTITY_ORDER, table_keys

#: The result table a check row comes from (``results/<name>.csv``).
RESULTS = "results"
#: Columns that may identify a check row, in the order a comparison shows them; each table uses the ones
#: it declares (a column it lacks, or does not declare, is empty for its rows).
KEY = list(IDENTITY_ORDER)
#: Numeric key columns: compared as integers, sorted as numbers.
NUMERIC_KEY = ("seq_len", "num_reqs")
#: The position of a row among rows of its table with the same key values.
OCCURRENCE = "occurrence"


def _key_text(series: pd.Series, numeric: bool) -> pd.Series:
    if numeric:
        number = pd.to_numeric(series, errors="coerce").astype("Int64")
        return number.map(lambda v: "" if pd.isna(v) else str(int(v))).astype(str)
    return series.map(lambda v: "" if pd.isna(v) else str(v)).astype(str)


def identity_columns(name: str, frame: pd.DataFrame) -> list[str]:
    """The columns that say which case a row of table ``name`` is: ``notebook`` and ``check``, then the
    table's declared keys it has (every identity column it has, for a table :mod:`repro.tables` does not
    name)."""
    declared = table_keys(name) or tuple(c for c in KEY if c in frame)
    return [c for c in KEY if c in frame and (c in ("notebook", "check") or c in declared)]


def check_rows(run: RunData) -> pd.DataFrame:
    """Every check row of a run: its table, every key column (as text, empty where the table does not
    identify rows by it), ``occurrence``, ``observed`` and ``ok``."""
    tables = run.check_tables()
    if not tables:
        raise RunFolderError(f"{run.path}: no check tables in results/ to compare")
    frames = []
    for name, table in tables.items():
        ident = identity_columns(name, table)
        rows = pd.DataFrame({RESULTS: name}, index=table.index)
        for k in KEY:
            rows[k] = _key_text(table[k], k in NUMERIC_KEY) if k in ident else ""
        rows[OCCURRENCE] = rows.groupby(KEY, sort=False, dropna=False).cumcount()
        rows["ok"] = table["ok"].map(truthy)
        rows["observed"] = table["observed"].fillna("").astype(str)
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)[[RESULTS, *KEY, OCCURRENCE, "observed", "ok"]]


def compare_runs(run_a: RunData, run_b: RunData) -> pd.DataFrame:
    """Outer join of both runs' check rows on table and key, with ``in`` and ``changed`` columns.

    Sorted by notebook, check, then each key column in :data:`KEY` order (numbers as numbers).
    """
    a, b = check_rows(run_a), check_rows(run_b)
    on = [RESULTS, *KEY, OCCURRENCE]
    merged = a.merge(b, on=on, how="outer", suffixes=(" (A)", " (B)"), indicator=True)
    merged["in"] = merged.pop("_merge").map({"both": "both", "left_only": "A only", "right_only": "B only"})
    merged["in"] = merged["in"].astype(str)
    merged["changed"] = (merged["in"] == "both") & (merged["ok (A)"] != merged["ok (B)"])
    for k in NUMERIC_KEY:
        merged[k] = pd.to_numeric(merged[k].replace("", None), errors="coerce").astype("Int64")
    order = [*KEY, RESULTS, OCCURRENCE]
    return merged.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)


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


def changed_rows(cmp: pd.DataFrame) -> pd.DataFrame:
    """The rows whose verdict changed, with every key column that identifies at least one of them."""
    changed = cmp[cmp["changed"]]
    cols = [c for c in KEY if c != "notebook" and changed[c].astype(str).replace("<NA>", "").str.len().gt(0).any()]
    return changed[[*cols, "observed (A)", "observed (B)"]]

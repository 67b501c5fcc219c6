"""Tidy result tables: one row per check x variant x request count, written as each row finishes.

Rows go to ``<run_dir>/results/<name>.csv`` the moment they are appended, so a run killed half-way
keeps every finished case. Without a run folder (a reader in JupyterLab) rows stay in memory.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd

#: Columns every check table starts with (design.md section 3).
CHECK_COLUMNS = ["notebook", "check", "variant", "num_reqs", "expected", "observed", "ok"]
#: Columns holding timings; they are excluded when two runs are compared for determinism.
TIMING_SUFFIXES = ("_us", "_ms", "_s", "_seconds", "_tbps", "_ratio", "_fraction")


class ChecksFailed(AssertionError):
    """Raised at the end of a notebook when any check row is not ok; names every failing check."""


class ResultTable:
    """Append-only CSV table with a fixed column order set by the first row."""

    def __init__(self, run_dir: str | Path | None, name: str, notebook: str):
        self.name = name
        self.notebook = notebook
        self.path = Path(run_dir) / "results" / f"{name}.csv" if run_dir else None
        self.rows: list[dict] = []
        self._columns: list[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                raise FileExistsError(f"{self.path} already exists: results are never appended to an old table")

    def append(self, row: dict) -> dict:
        row = {"notebook": self.notebook, **row}
        if self._columns is None:
            lead = [c for c in CHECK_COLUMNS if c in row]
            self._columns = lead + [c for c in row if c not in lead]
        extra = [c for c in row if c not in self._columns]
        if extra:
            raise ValueError(f"{self.name}: row has columns {extra} that the table's first row did not")
        self.rows.append(row)
        if self.path is not None:
            new = not self.path.exists()
            with self.path.open("a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=self._columns)
                if new:
                    writer.writeheader()
                writer.writerow({c: _cell(row.get(c)) for c in self._columns})
                fh.flush()
        return row

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=self._columns)


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def failed_checks(frame: pd.DataFrame) -> list[str]:
    """``"notebook: check [variant, mode, n=...]: observed (expected ...)"`` for every row not ok."""
    if frame is None or frame.empty or "ok" not in frame:
        return []
    ok = frame["ok"].map(_truthy)
    failed = []
    for _, row in frame[~ok].iterrows():
        where = ", ".join(str(row[c]) if c != "num_reqs" else f"n={row[c]}"
                          for c in ("variant", "mode", "num_reqs") if c in row and str(row[c]) not in ("", "nan"))
        failed.append(f"{row.get('notebook', '?')}: {row['check']} [{where}]: observed {row['observed']} "
                      f"(expected {row['expected']})")
    return failed


def _truthy(v) -> bool:
    return v is True or str(v).strip().lower() in ("true", "1")


def assert_all_ok(*frames: pd.DataFrame) -> None:
    """End-of-notebook gate: papermill then fails the notebook, naming every failed check."""
    failed = [f for fr in frames for f in failed_checks(fr)]
    if failed:
        raise ChecksFailed(f"{len(failed)} failed check(s):\n" + "\n".join(failed))


def read_results(run_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Every ``results/*.csv`` of a run folder, by table name."""
    folder = Path(run_dir) / "results"
    return {p.stem: pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in sorted(folder.glob("*.csv"))}


def is_timing_column(name: str) -> bool:
    return name.endswith(TIMING_SUFFIXES)


def write_facts(run_dir: str | Path | None, name: str, facts: dict) -> None:
    """Small named values for the report (captured error text, headline figures): ``results/<name>.json``."""
    if not run_dir:
        return
    import json

    path = Path(run_dir) / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(facts, indent=2, default=str) + "\n")

"""Tidy result tables: one row per check x variant x request count, written as each row finishes.

Rows go to ``<run_dir>/results/<name>.csv`` the moment they are appended, so a run killed half-way
keeps every finished case. Without a run folder (a reader in JupyterLab) rows stay in memory.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pandas as pd

#: Columns every check table starts with (the run-folder contract in the README).
CHECK_COLUMNS = ["notebook", "check", "variant", "num_reqs", "expected", "observed", "ok"]


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


def write_facts(run_dir: str | Path | None, name: str, facts: dict) -> None:
    """Small named values for the report (captured error text, headline figures): ``results/<name>.json``."""
    if not run_dir:
        return
    path = Path(run_dir) / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(facts, indent=2, default=str) + "\n")

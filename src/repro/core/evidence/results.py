"""Tidy result tables: one row per check x variant x request count, written as each row finishes.

Rows go to ``<run_dir>/results/<name>.csv`` the moment they are appended, so a run killed half-way
keeps every finished case. Without a run folder (a reader in JupyterLab) rows stay in memory. A write
the file system refuses (disk full, a read-only folder) is a :class:`RunFolderWriteError` naming the file:
the runner stops the run on it (``--resume`` goes on once it is fixed) instead of judging the notebook.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pandas as pd

#: Columns every check table starts with (the run-folder contract in the README).
CHECK_COLUMNS = ["notebook", "check", "variant", "num_reqs", "expected", "observed", "ok"]


class RunFolderWriteError(OSError):
    """The run folder refused a write; the message names the file and why."""

    @classmethod
    def of(cls, path: Path, exc: OSError) -> RunFolderWriteError:
        return cls(exc.errno, f"cannot write {path} ({exc.strerror or exc})")

    def __str__(self) -> str:
        return str(self.strerror)


class ResultTable:
    """Append-only CSV table with a fixed column order set by the first row."""

    def __init__(self, run_dir: str | Path | None, name: str, notebook: str):
        self.name = name
        self.notebook = notebook
        self.path = Path(run_dir) / "results" / f"{name}.csv" if run_dir else None
        self.rows: list[dict] = []
        self._columns: list[str] | None = None
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RunFolderWriteError.of(self.path.parent, exc) from None
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
            try:
                with self.path.open("a", newline="") as fh:
                    writer = csv.DictWriter(fh, fieldnames=self._columns)
                    if new:
                        writer.writeheader()
                    writer.writerow({c: _cell(row.get(c)) for c in self._columns})
                    fh.flush()
            except OSError as exc:
                raise RunFolderWriteError.of(self.path, exc) from None
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(facts, indent=2, default=str) + "\n")
    except OSError as exc:
        raise RunFolderWriteError.of(path, exc) from None

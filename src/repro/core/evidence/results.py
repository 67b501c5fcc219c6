"""Tidy result tables: one row per check x variant x request count, written as each row finishes.

Rows go to ``<run_dir>/results/<name>.csv`` the moment they are appended, so a run killed half-way
keeps every finished case. Without a run folder (a reader in JupyterLab) rows stay in memory. A write
the file system refuses (disk full, a read-only folder) is a :class:`RunFolderWriteError` naming the file:
the runner stops the run on it (``--resume`` goes on once it is fixed) instead of judging the notebook.

Each table and facts file keeps the record of what it wrote (rows, bytes, sha256,
:func:`repro.core.analysis.written.record_of`); the notebook's session sends them to the runner as it closes
(:func:`send_ledger`), through a pipe the runner handed to this process alone.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path

import pandas as pd

from repro.ledger import LEDGER_FD_ENV, record_of

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
        self.cells: list[str] = []  # the walkthrough method (notebook cell) that recorded each row
        self.cell = ""  # the one recording now
        self._columns: list[str] | None = None
        self._written = hashlib.sha256()
        self._bytes = 0
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
        self.cells.append(self.cell)
        self._write([row], header=len(self.rows) == 1)
        return row

    def forget(self, cell: str) -> None:
        """Drop the rows ``cell`` recorded before (it runs again: its new rows replace them) and rewrite the file."""
        if cell not in self.cells:
            return
        kept = [(r, c) for r, c in zip(self.rows, self.cells) if c != cell]
        self.rows, self.cells = [r for r, _ in kept], [c for _, c in kept]
        self._written, self._bytes = hashlib.sha256(), 0
        if self.path is not None:
            self.path.write_bytes(b"")
        self._write(self.rows, header=True)

    def _write(self, rows: list[dict], header: bool) -> None:
        if self.path is None or not rows:
            return
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=self._columns)
        if header:
            writer.writeheader()
        writer.writerows({c: _cell(row.get(c)) for c in self._columns} for row in rows)
        data = text.getvalue().encode()
        try:
            with self.path.open("ab") as fh:
                fh.write(data)
                fh.flush()
        except OSError as exc:
            raise RunFolderWriteError.of(self.path, exc) from None
        self._written.update(data)
        self._bytes += len(data)

    def record(self) -> dict:
        """Rows, bytes and sha256 of what this table wrote (its file must hold exactly that)."""
        return {"rows": len(self.rows), "bytes": self._bytes, "sha256": self._written.hexdigest()}

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=self._columns)


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def write_facts(run_dir: str | Path | None, name: str, facts: dict) -> dict | None:
    """Small named values for the report (captured error text, headline figures): ``results/<name>.json``.
    Returns the record of what it wrote (None without a run folder)."""
    if not run_dir:
        return None
    path = Path(run_dir) / "results" / f"{name}.json"
    data = (json.dumps(facts, indent=2, default=str) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise RunFolderWriteError.of(path, exc) from None
    return record_of(data, path.name)


class ResultsChanged(RuntimeError):
    """A result file no longer holds what this notebook wrote: something else changed it while the notebook ran."""

    def _render_traceback_(self) -> list[str]:
        return [f"ResultsChanged: {self}"]


_ledger_fd: list[int | None] = []


def ledger_descriptor() -> int | None:
    """The descriptor the runner handed this kernel, taken out of the environment once (None: no runner)."""
    if not _ledger_fd:
        raw = os.environ.pop(LEDGER_FD_ENV, "")
        _ledger_fd.append(int(raw) if raw.isdigit() else None)
    return _ledger_fd[0]


def send_ledger(records: dict[str, dict]) -> None:
    """Send the runner ``{results/<file>: record}``, one JSON line (nothing when no runner listens)."""
    fd = ledger_descriptor()
    if fd is None:
        return
    data = (json.dumps(records, sort_keys=True) + "\n").encode()
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the runner is gone: nothing to record into

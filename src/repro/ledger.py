"""What a notebook wrote under ``results/``, in a form the runner records: each file's rows, bytes and sha256, and
which files each notebook declares it writes. Shared by the notebook kernel that writes the results
(:mod:`repro.core.evidence.results`), the runner that records them and the reader that checks a folder against the
record (:mod:`repro.core.analysis.written`); standard library only."""

from __future__ import annotations

import csv
import hashlib
import io
from typing import Any

from repro.tables import facts, notebooks, tables

#: Environment variable naming the descriptor through which a notebook kernel sends the runner its ledger (the
#: pipe's writing end, which the runner hands to the kernel alone).
LEDGER_FD_ENV = "REPRO_LEDGER_FD"


def declared(notebook: str) -> frozenset[str] | None:
    """The files (``02-gather-sweep.csv``, ...) the notebook ``notebook`` (a file stem) may write under results/:
    the tables and facts files (:func:`repro.tables.tables`, :func:`repro.tables.facts`) with its number; None for a
    notebook no installed package names (a study's where the studies are not installed: the run's record alone)."""
    if notebook not in notebooks():
        return None
    prefix = notebook[:3]
    return frozenset(
        [f"{t.value}.csv" for t in tables() if t.value[:3] == prefix]
        + [f"{f.value}.json" for f in facts() if f.value[:3] == prefix]
    )


def record_of(data: bytes, name: str) -> dict[str, Any]:
    """``{"rows", "bytes", "sha256"}`` of a result file's bytes: data rows of a table (the records after its header;
    a quoted cell may hold line ends), 1 for a facts file."""
    rows = 1
    if name.endswith(".csv"):
        rows = max(0, sum(1 for _ in csv.reader(io.StringIO(data.decode(errors="replace"), newline=""))) - 1)
    return {"rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

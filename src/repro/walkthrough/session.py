"""What every notebook does first and last: check its parameters, set up the profile, open its
result tables, and at the end write its facts and fail naming every failed check.

A notebook's parameters cell is validated by the rules the command line applies, so a value
that cannot work stops at the top with the same one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.core.analysis.checks import assert_all_ok
from repro.core.analysis.written import read_record
from repro.core.evidence.results import ResultsChanged, ResultTable, ledger_descriptor, send_ledger, write_facts
from repro.parameters import ImportCheck, Parameters
from repro.profiles import Profile, activate, resolve
from repro.registry import load_implementation

try:
    import ipywidgets  # noqa: F401  (tqdm.auto draws a widget only where ipywidgets is installed)
    from tqdm.auto import tqdm
except ImportError:
    from tqdm import tqdm


class Progress:
    """A progress bar for a long loop, called once per finished case (a sweep's ``progress`` callback):
    a widget in JupyterLab, a text bar on a terminal; it closes itself on the last case."""

    def __init__(self, total: int, what: str, unit: str = "case"):
        self.bar = tqdm(total=total, desc=what, unit=unit, mininterval=0.5, unit_scale=unit == "B")

    def __call__(self, *case: Any) -> None:
        self.advance(1)

    def advance(self, amount: int) -> None:
        self.bar.update(amount)
        if self.bar.n >= (self.bar.total or 0):
            self.bar.close()


@dataclass(frozen=True)
class Setup:
    """What a notebook runs on, as its first cell prints it (worded by ``phrases.md.j2`` of the report): the profile,
    its device and the parameter that picks what is shown (notebook 01's pool, notebook 02's implementation)."""

    profile: str
    device: str
    pool_bytes: int | None = None
    implementation: str | None = None


@dataclass
class Session:
    """One notebook's run: its name, profile, run folder (``""``: tables stay in memory) and parameters."""

    notebook: str
    profile: Profile
    run_dir: str
    params: Parameters
    tables: dict[str, ResultTable] = field(default_factory=dict)
    facts: dict[str, dict] = field(default_factory=dict)  # results/<name>.json: the record of what was written
    current: str = ""  # the walkthrough method recording now (:meth:`cell`)

    @classmethod
    def start(
        cls,
        notebook: str,
        profile: str,
        run_dir: str,
        params: Parameters,
        import_check: ImportCheck | None = None,
    ) -> Session:
        """Activate the profile (before any kernel module is imported, which a check may do), then apply the rules
        over several parameters (:meth:`repro.parameters.Parameters.check`; each field was checked when ``params``
        was built; ``import_check``: where an implementation is imported to be checked, by default here)."""
        ledger_descriptor()  # taken out of the environment before anything starts a process
        active = activate(resolve(profile))
        params.check(active.name, import_check or load_implementation)
        return cls(notebook, active, run_dir, params)

    def cell(self, method: str) -> None:
        """A walkthrough method (one notebook cell) starts: the rows it recorded on an earlier run are dropped, so a
        cell run again gives the same tables and the same output, never rows added to the first run's."""
        self.current = method
        for table in self.tables.values():
            table.forget(method)
            table.cell = method

    def table(self, name: str) -> ResultTable:
        """The result table ``results/<name>.csv`` of this run, opened once."""
        if name not in self.tables:
            self.tables[name] = ResultTable(self.run_dir, name, self.notebook)
            self.tables[name].cell = self.current
        return self.tables[name]

    def record(self, name: str, rows: list[dict]) -> pd.DataFrame:
        table = self.table(name)
        for row in rows:
            table.append(row)
        return table.frame()

    def write_facts(self, name: str, facts: dict) -> None:
        record = write_facts(self.run_dir, name, facts)
        if record is not None:
            self.facts[f"results/{name}.json"] = record

    def ledger(self) -> dict[str, dict]:
        """``{results/<file>: {rows, bytes, sha256}}`` of every file this notebook wrote, as it wrote them."""
        tables = {f"results/{t.path.name}": t.record() for t in self.tables.values() if t.path and t.rows}
        return {**tables, **self.facts}

    def close(self) -> None:
        """Send the runner what this notebook wrote, then check every file still holds it: one changed while the
        notebook ran (by a process it started) fails the notebook, naming the file."""
        if not self.run_dir:
            return
        ledger = self.ledger()
        send_ledger(ledger)
        for name, wrote in ledger.items():
            now = read_record(Path(self.run_dir) / name)
            if now != wrote:
                held = "is gone" if now is None else f"holds {now['rows']} rows, {now['bytes']} bytes"
                raise ResultsChanged(f"{name} {held}; this notebook wrote {wrote['rows']} rows, {wrote['bytes']} bytes")

    def frames(self) -> list[pd.DataFrame]:
        return [t.frame() for t in self.tables.values() if t.rows and "ok" in t.rows[0]]

    def summary(self) -> pd.DataFrame:
        """Every check of this notebook grouped per check and variant: rows passed of rows."""
        frames = self.frames()
        if not frames:
            return pd.DataFrame(columns=["check", "variant", "passed", "total"])
        return (
            pd.concat([f[["check", "variant", "ok"]] for f in frames])
            .groupby(["check", "variant"], sort=False)["ok"]
            .agg(passed="sum", total="count")
            .reset_index()
        )

    def assert_all_ok(self) -> None:
        """The notebook's last line: its results are recorded and checked (:meth:`close`), then papermill fails
        the notebook naming every failed check."""
        self.close()
        assert_all_ok(*self.frames())

"""What every notebook does first and last: check its parameters, set up the profile, open its
result tables, and at the end write its facts and fail naming every failed check.

A notebook's parameters cell is validated by the rules the command line applies, so a value
that cannot work stops at the top with the same one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from repro.core.analysis.checks import assert_all_ok
from repro.core.evidence.results import ResultTable, write_facts
from repro.parameters import validate_notebook
from repro.profiles import Profile, activate, resolve

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


@dataclass
class Session:
    """One notebook's run: its name, profile, run folder (``""``: tables stay in memory) and parameters."""

    notebook: str
    profile: Profile
    run_dir: str
    params: dict[str, Any]
    tables: dict[str, ResultTable] = field(default_factory=dict)

    @classmethod
    def start(cls, notebook: str, profile: str = "auto", run_dir: str = "", **params: Any) -> Session:
        """Activate the profile (before any kernel module is imported, which validation may do), then
        validate the parameters."""
        active = activate(resolve(profile))
        checked = validate_notebook(params, active.name)
        return cls(notebook, active, run_dir, checked)

    def table(self, name: str) -> ResultTable:
        """The result table ``results/<name>.csv`` of this run, opened once."""
        if name not in self.tables:
            self.tables[name] = ResultTable(self.run_dir, name, self.notebook)
        return self.tables[name]

    def record(self, name: str, rows: list[dict]) -> pd.DataFrame:
        table = self.table(name)
        for row in rows:
            table.append(row)
        return table.frame()

    def write_facts(self, name: str, facts: dict) -> None:
        write_facts(self.run_dir, name, facts)

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
        """The notebook's last line: papermill fails the notebook, naming every failed check."""
        assert_all_ok(*self.frames())

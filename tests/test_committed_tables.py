"""Every committed run's tables are named by an installed package (``repro`` and the studies' registration), and
their identity columns tell the rows apart."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro.core.analysis.reshape import RECORDED_CHECKS, SPLIT_CHECK
from repro.tables import notebooks, table_keys, tables
from repro_studies.tables import Notebook, Table

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_studies_register_their_names():
    assert Table.RELEASE_MATRIX in tables() and Table.RELEASE_MATRIX.notebook is Notebook.RELEASES
    assert set(Notebook) <= set(notebooks()) and table_keys("04-release-checks") == Table.RELEASE_CHECKS.keys


def _named() -> set[str]:
    return {t.value for t in tables()}


def _committed_tables():
    return sorted(p for p in DATA.glob("*/*/results/*.csv") if p.stem in _named())


@pytest.mark.audit
def test_every_committed_table_is_named_here():
    stems = {p.stem for p in DATA.glob("*/*/results/*.csv")}
    assert stems and stems <= _named(), stems - _named()


@pytest.mark.audit
@pytest.mark.parametrize("path", _committed_tables(), ids=lambda p: f"{p.parts[-3]}/{p.stem}")
def test_identity_columns_tell_committed_rows_apart(path):
    """In every committed run, a table's identity columns (those it has) single out each row; the only
    repeats are the split-ratio checks of notebook 01, one per ratio (told apart by their order)."""
    frame = pd.read_csv(path, keep_default_na=False)
    keys = [c for c in table_keys(path.stem) if c in frame]
    assert keys, f"{path}: none of {table_keys(path.stem)}"
    repeated = frame[frame.duplicated(keys, keep=False)]
    allowed = repeated["check"].replace(RECORDED_CHECKS) == SPLIT_CHECK if "check" in repeated else repeated.index < 0
    assert allowed.all(), f"{path}: rows repeat on {keys}:\n{repeated[~allowed].head()}"

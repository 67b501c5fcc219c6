"""The run folder's names, defined once: every table named, its identity columns declared."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro.core.analysis.reshape import SPLIT_CHECK
from repro.tables import IDENTITY_ORDER, Facts, Notebook, Table, table_keys

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_member_is_its_file_stem():
    assert Table.SWEEP == "02-gather-sweep" and f"{Table.SWEEP}.csv" == "02-gather-sweep.csv"
    assert {"02-gather-sweep": 1}[Table.SWEEP] == 1 and Table("02-gather-sweep") is Table.SWEEP
    assert Table.RELEASE_MATRIX.notebook is Notebook.RELEASES and Facts.RESHAPE == "01-reshape"


@pytest.mark.parametrize("table", list(Table))
def test_every_table_declares_known_identity_columns(table):
    assert table.keys and set(table.keys) <= set(IDENTITY_ORDER), table
    assert table.notebook in Notebook


def test_an_unknown_table_has_no_keys():
    assert table_keys("99-nothing") == ()


def _committed_tables():
    return sorted(p for p in DATA.glob("*/*/results/*.csv") if p.stem in {t.value for t in Table})


@pytest.mark.audit
def test_every_committed_table_is_named_here():
    stems = {p.stem for p in DATA.glob("*/*/results/*.csv")}
    assert stems and stems <= {t.value for t in Table}, stems - {t.value for t in Table}


@pytest.mark.audit
@pytest.mark.parametrize("path", _committed_tables(), ids=lambda p: f"{p.parts[-3]}/{p.stem}")
def test_identity_columns_tell_committed_rows_apart(path):
    """In every committed run, a table's identity columns (those it has) single out each row; the only
    repeats are the split-ratio checks of notebook 01, one per ratio (told apart by their order)."""
    frame = pd.read_csv(path, keep_default_na=False)
    keys = [c for c in Table(path.stem).keys if c in frame]
    assert keys, f"{path}: none of {Table(path.stem).keys}"
    repeated = frame[frame.duplicated(keys, keep=False)]
    allowed = repeated["check"] == SPLIT_CHECK if "check" in repeated else repeated.index < 0
    assert allowed.all(), f"{path}: rows repeat on {keys}:\n{repeated[~allowed].head()}"

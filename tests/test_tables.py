"""The run folder's names, defined once: every table named, its identity columns declared."""

from __future__ import annotations

import pytest

from repro.tables import IDENTITY_ORDER, Facts, Notebook, Table, notebooks, table_keys, tables


def test_a_member_is_its_file_stem():
    assert Table.SWEEP == "02-gather-sweep" and f"{Table.SWEEP}.csv" == "02-gather-sweep.csv"
    assert {"02-gather-sweep": 1}[Table.SWEEP] == 1 and Table("02-gather-sweep") is Table.SWEEP
    assert Table.SWEEP.notebook is Notebook.GATHER and Facts.RESHAPE == "01-reshape"


@pytest.mark.parametrize("table", tables())
def test_every_table_declares_known_identity_columns(table):
    assert table.keys and set(table.keys) <= set(IDENTITY_ORDER), table
    assert table.notebook in notebooks()
    assert table_keys(table.value) == table.keys


def test_an_unknown_table_has_no_keys():
    assert table_keys("99-nothing") == ()

"""Result tables are written row by row and never appended to an old table."""

import pandas as pd
import pytest

from repro.core.analysis.checks import ChecksFailed, assert_all_ok, failed_checks
from repro.core.analysis.rundata import load_run
from repro.core.evidence.results import ResultTable


def test_rows_hit_the_disk_as_they_are_appended(tmp_path):
    table = ResultTable(tmp_path, "02-demo", "02-nb")
    table.append({"check": "c", "variant": "v", "num_reqs": 1, "expected": "x", "observed": "x", "ok": True, "n": 3})
    on_disk = pd.read_csv(tmp_path / "results" / "02-demo.csv")
    assert list(on_disk.columns[:7]) == ["notebook", "check", "variant", "num_reqs", "expected", "observed", "ok"]
    assert len(on_disk) == 1
    table.append(
        {"check": "c", "variant": "v", "num_reqs": 2, "expected": "x", "observed": "y", "ok": False, "n": None}
    )
    (tmp_path / "manifest.json").write_text("{}")
    assert len(load_run(tmp_path).tables["02-demo"]) == 2
    with pytest.raises(ValueError, match="first row did not"):
        table.append({"check": "c", "surprise": 1})


def test_an_existing_table_is_never_appended_to(tmp_path):
    ResultTable(tmp_path, "t", "nb").append({"check": "c", "ok": True})
    with pytest.raises(FileExistsError):
        ResultTable(tmp_path, "t", "nb")


def test_failed_checks_name_notebook_check_variant_and_count():
    frame = pd.DataFrame(
        [
            {
                "notebook": "02",
                "check": "gather matches",
                "variant": "fixed",
                "mode": "poison",
                "num_reqs": 4,
                "expected": "0",
                "observed": "3 differ",
                "ok": False,
            },
            {
                "notebook": "02",
                "check": "gather matches",
                "variant": "fixed",
                "mode": "poison",
                "num_reqs": 1,
                "expected": "0",
                "observed": "0",
                "ok": True,
            },
        ]
    )
    assert failed_checks(frame) == ["02: gather matches [fixed, poison, n=4]: observed 3 differ (expected 0)"]
    with pytest.raises(ChecksFailed, match="1 failed check"):
        assert_all_ok(frame)
    assert_all_ok(frame[frame.ok])

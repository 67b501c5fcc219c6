"""Damaged or partial run folders: ``report`` names the damaged file in one line, exits 2 and writes
nothing; a run that did not finish is reported as incomplete, never as passed.

Each case damages a copy of the committed H200 run the way a full disk, a kill mid-write or a
hand edit would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from repro.cli.main import main
from repro.cli.runfolder import LOCK_NAME
from repro.core.analysis.rundata import RunData, RunFolderError, load_run
from repro.notebook_failure import NotebookFailure
from repro.report.verdict import run_verdict

SOURCE = Path(__file__).resolve().parents[1] / "data" / "h200" / "gpu-profile"


@pytest.fixture
def run_copy(tmp_path) -> Path:
    dst = tmp_path / "gpu-profile"
    shutil.copytree(SOURCE, dst)
    return dst


def snapshot(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    cut = int(len(data) * keep)
    while data[cut - 1 : cut] in (b"\n", b"\r"):  # cut inside a row, never on a row boundary
        cut -= 1
    path.write_bytes(data[:cut])


def damage_sweep_first_line(run: Path, replace: str) -> None:
    path = run / "results" / "02-gather-sweep.csv"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = replace + "\n"
    path.write_text("".join(lines))


def set_column(run: Path, table: str, column: str, value: str | None) -> None:
    import csv

    path = run / "results" / f"{table}.csv"
    rows = list(csv.DictReader(path.open()))
    fields = [f for f in rows[0] if f != column or value is not None]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for i, row in enumerate(rows):
            if value is not None and i == 3:
                row[column] = value
            writer.writerow(row)


DAMAGE = {
    "truncated csv": (
        lambda r: truncate(r / "results" / "02-gather-sweep.csv"),
        "02-gather-sweep.csv: the last row is cut off (no line end): the file was truncated",
    ),
    "truncated manifest": (lambda r: truncate(r / "manifest.json"), "manifest.json: not valid JSON"),
    "manifest a list": (
        lambda r: (r / "manifest.json").write_text("[1, 2, 3]\n"),
        "manifest.json: expected a JSON object, found list",
    ),
    "manifest null": (lambda r: (r / "manifest.json").write_text("null"), "expected a JSON object, found NoneType"),
    "manifest environment a string": (
        lambda r: (r / "manifest.json").write_text(json.dumps({"status": "complete", "environment": "h200"})),
        "manifest.json: 'environment' should be a JSON object, found str",
    ),
    "manifest status a number": (
        lambda r: (r / "manifest.json").write_text(json.dumps({"status": 3})),
        "manifest.json: 'status' should be a string, found int",
    ),
    "manifest not utf-8": (lambda r: (r / "manifest.json").write_bytes(b'{"status": "\xff"}'), "not valid JSON"),
    "empty csv": (
        lambda r: (r / "results" / "01-reshape-checks.csv").write_text(""),
        "01-reshape-checks.csv: empty file (no header)",
    ),
    "header-only csv": (
        lambda r: (r / "results" / "02-sanitizer.csv").write_text(
            (r / "results" / "02-sanitizer.csv").read_text().splitlines()[0] + "\n"
        ),
        "02-sanitizer.csv: a header and no rows",
    ),
    "row wider than header": (
        lambda r: damage_sweep_first_line(
            r, (r / "results" / "02-gather-sweep.csv").read_text().splitlines()[1] + ",x"
        ),
        "02-gather-sweep.csv: line 2 has",
    ),
    "row narrower than header": (
        lambda r: damage_sweep_first_line(r, "a,b"),
        "02-gather-sweep.csv: line 2 has 2 fields",
    ),
    "ok not a verdict": (
        lambda r: set_column(r, "02-contiguous-checks", "ok", "maybe"),
        "02-contiguous-checks.csv: line 5 has ok = 'maybe'; a check is True or False",
    ),
    "check table without observed": (
        lambda r: set_column(r, "01-reshape-checks", "observed", None),
        "01-reshape-checks.csv: a check table without the column(s) observed",
    ),
    "csv not utf-8": (
        lambda r: (r / "results" / "03-performance-checks.csv").write_bytes(b"notebook,check\n\xff\xfe,x\n"),
        "03-performance-checks.csv: not a readable CSV table",
    ),
    "csv with a NUL byte": (
        lambda r: (r / "results" / "01-reshape-groups.csv").write_bytes(b"a,b\n1,\x002\n"),
        "01-reshape-groups.csv: holds NUL bytes",
    ),
    "csv is a folder": (lambda r: (r / "results" / "99-x.csv").mkdir(), "99-x.csv: cannot be read"),
    "facts a list": (
        lambda r: (r / "results" / "01-reshape.json").write_text("[]"),
        "01-reshape.json: expected a JSON object, found list",
    ),
    "facts truncated": (
        lambda r: truncate(r / "results" / "03-performance.json"),
        "03-performance.json: not valid JSON",
    ),
    "a column the report reads is gone": (
        lambda r: set_column(r, "02-gather-sweep", "status", None),
        "its tables cannot be rendered (KeyError",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_folder_is_one_line_exit_2_and_nothing_written(run_copy, case, capsys):
    damage, fragment = DAMAGE[case]
    damage(run_copy)
    before = snapshot(run_copy)
    code = main(["report", str(run_copy)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert snapshot(run_copy) == before


def test_the_runner_reads_the_same_damage_as_a_failure_not_a_pass(run_copy):
    truncate(run_copy / "results" / "02-gather-sweep.csv")
    with pytest.raises(RunFolderError, match=r"02-gather-sweep\.csv"):
        load_run(run_copy)


def test_comparing_against_a_run_without_check_tables(run_copy, tmp_path, capsys):
    other = tmp_path / "other"
    (other / "results").mkdir(parents=True)
    (other / "manifest.json").write_text(json.dumps({"status": "complete"}))
    before = snapshot(run_copy)
    code = main(["report", str(run_copy), "--against", str(other)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no check tables in results/ to compare" in err[0], err
    assert snapshot(run_copy) == before


def test_comparing_against_a_damaged_run_writes_nothing(run_copy, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(SOURCE, other)
    truncate(other / "results" / "02-gather-sweep.csv")
    before = snapshot(run_copy)
    code = main(["report", str(run_copy), "--against", str(other)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{other}/results/02-gather-sweep.csv" in err[0], err
    assert snapshot(run_copy) == before


@pytest.mark.parametrize("path", ["missing", "file"])
def test_report_of_something_that_is_not_a_folder(tmp_path, path, capsys):
    target = tmp_path / path
    if path == "file":
        target.write_text("x")
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such run folder" in err[0]


@pytest.mark.parametrize("status", ["running", "interrupted", "unknown"])
def test_a_run_that_did_not_finish_is_never_headlined_as_passed(run_copy, status):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["status"] = status
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    run = load_run(run_copy)
    assert not run.failures()  # every recorded check passed...
    line = run_verdict(run).title
    assert line.startswith("Incomplete") and "passed" not in line  # ...and still it is not a pass


def test_a_finished_run_without_checks_or_with_broken_notebooks_is_not_a_plain_pass(run_copy):
    run = load_run(run_copy)
    empty = RunData(run.path, run.manifest, {}, {}, [])
    assert run_verdict(empty).title.startswith("No verdict")
    run.manifest["notebooks"]["02-strided-block-table-gather"].update(
        status="failed", failure=NotebookFailure.KERNEL_DIED, error="KernelDied: ..."
    )
    v = run_verdict(run)
    assert not v.complete and v.not_finished == ["02-strided-block-table-gather: KernelDied: ..."]
    assert v.title.startswith("Incomplete:")


@pytest.mark.notebook
def test_report_of_a_killed_run_says_incomplete(run_copy, capsys):
    manifest = json.loads((run_copy / "manifest.json").read_text())
    manifest["status"] = "running"
    manifest["finished"] = None
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(run_copy)]) == 1  # the report is written; the verdict is not a pass
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "INCOMPLETE: the run did not finish (status 'running')"
    first = (run_copy / "report.md").read_text().splitlines()[0]
    assert first.startswith("# Incomplete") and "passed" not in first


def test_a_check_an_older_run_named_otherwise_reads_under_todays_name(tmp_path):
    """A check table of a run recorded before a check's name changed (:data:`RECORDED_CHECKS`) reads back with
    today's name, so the report and the verdict find it."""
    from repro.core.analysis.reshape import RECORDED_CHECKS, SPLIT_CHECK
    from repro.core.analysis.rundata import _read_table

    (old,) = RECORDED_CHECKS
    table = tmp_path / "01-reshape-checks.csv"
    pd.DataFrame({"notebook": "01", "check": [old, "kept"], "expected": "fits", "observed": "fits", "ok": True}).to_csv(
        table, index=False
    )
    assert list(_read_table(table)["check"]) == [SPLIT_CHECK, "kept"]
    assert SPLIT_CHECK.endswith("(vllm-project/vllm#54877)")

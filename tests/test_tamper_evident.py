"""A run's results are what its notebooks wrote, or the run says otherwise. Each notebook's kernel sends the runner
the rows and digest of every table as it closes it; ``run``, ``report`` and ``--resume`` fail on a table that is
missing, short, changed or planted; ``report`` never passes a run whose manifest says it failed; ``--resume`` keeps
every notebook that finished, failed checks included, and never turns a failure into a pass.

The runner tests drive the real runner in this process with a stand-in for papermill (each "notebook" writes its
tables through the library's own table writer and sends what it wrote the way a notebook's last cell does), so a
whole run takes a second; the damaged-folder tests damage a copy of the test session's shared CPU run.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
from pathlib import Path

import pytest
from fakerun import FakeNotebooks, interrupted, writes

from repro.cli import runner
from repro.cli.main import main
from repro.core.analysis.checks import ChecksFailed

RESHAPE, GATHER, PERFORMANCE = "01-reshape-overrun", "02-strided-block-table-gather", "03-performance"


def run_in_process(monkeypatch, out: Path, selection: list[str], fake: FakeNotebooks, resume: bool = False) -> int:
    monkeypatch.setattr(runner, "execute_notebook", fake)
    return runner.run("cpu", str(out), [], resume=resume, selection=selection, report=False)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_a_notebook_that_failed_its_checks_is_kept_by_resume_and_never_passes(monkeypatch, tmp_path, capsys):
    """Notebook 02 fails its checks, the run is interrupted in 03, and a flaky implementation would pass 02 the
    second time: --resume keeps 02 as it finished, and the run ends failed, naming 02's failed check."""
    out = tmp_path / "run"
    first = FakeNotebooks(
        {
            RESHAPE: writes(RESHAPE, "01-reshape-checks", True),
            GATHER: writes(GATHER, "02-gather-sweep", True, False),
            PERFORMANCE: interrupted,
        }
    )
    assert run_in_process(monkeypatch, out, ["01", "02", "03"], first) == 130
    assert manifest(out)["status"] == "interrupted"
    flaky = FakeNotebooks(
        {
            RESHAPE: writes(RESHAPE, "01-reshape-checks", True),
            GATHER: writes(GATHER, "02-gather-sweep", True, True),
            PERFORMANCE: writes(PERFORMANCE, "03-performance-checks", True),
        }
    )
    code = run_in_process(monkeypatch, out, ["01", "02", "03"], flaky, resume=True)
    printed = capsys.readouterr().out
    assert flaky.calls == [PERFORMANCE], flaky.calls  # 01 and 02 finished: kept as they were
    assert code == 1, printed
    final = manifest(out)
    assert final["status"] == "failed"
    assert [line.split(":")[0] for line in final["failed_checks"]] == [GATHER]
    assert printed.strip().splitlines()[-1] == "FAILED: 1 check(s) failed, 0 notebook(s) broke"


def test_a_table_of_an_earlier_notebook_changed_during_a_later_one_fails_the_run(monkeypatch, tmp_path, capsys):
    """What an implementation under test can do while notebook 02 runs: cut notebook 01's checks to 1 row."""

    def truncates(run_dir: Path, tables: list) -> dict:
        target = run_dir / "results" / "01-reshape-checks.csv"
        target.write_text("".join(target.read_text().splitlines(keepends=True)[:2]))
        return writes(GATHER, "02-gather-sweep", True, True)(run_dir, tables)

    out = tmp_path / "run"
    fake = FakeNotebooks({RESHAPE: writes(RESHAPE, "01-reshape-checks", True, True, True), GATHER: truncates})
    code = run_in_process(monkeypatch, out, ["01", "02"], fake)
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert manifest(out)["status"] == "failed"
    assert "results/01-reshape-checks.csv (written by 01-reshape-overrun) holds 1 rows of the 3 it wrote" in printed


def test_a_table_planted_during_the_run_fails_it(monkeypatch, tmp_path, capsys):
    def plants(run_dir: Path, tables: list) -> dict:
        (run_dir / "results").mkdir(exist_ok=True)
        (run_dir / "results" / "01-reshape-checks.csv").write_text(
            "notebook,check,variant,num_reqs,expected,observed,ok\n01-reshape-overrun,a check,fixed,1,ok,seen,True\n"
        )
        return writes(GATHER, "02-gather-sweep", True)(run_dir, tables)

    out = tmp_path / "run"
    code = run_in_process(monkeypatch, out, ["02"], FakeNotebooks({GATHER: plants}))
    printed = capsys.readouterr()
    printed = printed.out + printed.err
    assert code == 1, printed
    assert "results/01-reshape-checks.csv was written by no notebook of this run: planted" in printed


# --------------------------------------------------------------------------------------------
# report and --resume on a damaged copy of the session's shared CPU run.


def rows_of(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open()))


def short(run: Path) -> None:
    path = run / "results" / "01-reshape-checks.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))


def changed(run: Path) -> None:
    path = run / "results" / "02-gather-sweep.csv"
    rows = rows_of(path)
    ok = rows[0].index("observed")
    rows[-1][ok] = rows[-1][ok] + " (edited)"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def missing(run: Path) -> None:
    (run / "results" / "02-gather-sweep.csv").unlink()


def planted(run: Path) -> None:
    """As if a ``--notebooks 02`` run had another run's 01-* tables copied in."""
    data = manifest(run)
    del data["notebooks"][RESHAPE]
    (run / "manifest.json").write_text(json.dumps(data))


DAMAGE = {
    "short": (short, "results/01-reshape-checks.csv (written by 01-reshape-overrun) holds 1 rows of the"),
    "changed": (changed, "results/02-gather-sweep.csv (written by 02-strided-block-table-gather) differs"),
    "missing": (missing, "results/02-gather-sweep.csv (written by 02-strided-block-table-gather) is missing"),
    "planted": (planted, "results/01-reshape-checks.csv was written by no notebook of this run: planted"),
}


@pytest.fixture
def run_copy(cpu_run, tmp_path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(cpu_run.path, out, ignore=shutil.ignore_patterns(".repro.lock"))
    return out


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_report_refuses_results_that_are_not_what_the_notebooks_wrote(run_copy, case, capsys):
    damage, fragment = DAMAGE[case]
    damage(run_copy)
    code = main(["report", str(run_copy)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and fragment in err[0], err


def test_report_never_passes_a_run_whose_manifest_says_failed(run_copy, capsys):
    data = manifest(run_copy)
    assert data["status"] == "complete"
    data.update(status="failed", failed_checks=["02-strided-block-table-gather: a check [fixed, n=2]: observed x"])
    (run_copy / "manifest.json").write_text(json.dumps(data))
    code = main(["report", str(run_copy)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 1 and last.startswith("FAILED: "), last
    assert (run_copy / "report.md").read_text().startswith("# Unexpected results: ")


def test_resume_refuses_a_folder_whose_finished_results_changed(run_copy, capsys):
    data = manifest(run_copy)
    data.update(status="interrupted")
    (run_copy / "manifest.json").write_text(json.dumps(data))
    short(run_copy)
    args = shlex.split(data["command"])[3:]  # the recorded command, run here with --resume
    code = main([*args[: args.index("--out")], "--out", str(run_copy), *args[args.index("--out") + 2 :], "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "results/01-reshape-checks.csv (written by 01-reshape-overrun) holds 1 rows of the" in err[0]


def test_a_record_counts_rows_after_the_header_and_the_checks_gate_is_named_once():
    from repro.ledger import record_of
    from repro.notebook_failure import CHECKS_GATE

    assert CHECKS_GATE == ChecksFailed.__name__
    assert record_of(b"a,b\n1,2\n3,4\n", "x.csv")["rows"] == 2
    assert record_of(b'{"a": 1}\n', "x.json")["rows"] == 1


def test_a_table_changed_while_its_notebook_runs_fails_that_notebook_naming_it(tmp_path, monkeypatch):
    """What a process the notebook started can do before the notebook closes: the kernel checks every file it
    wrote against what it wrote, and sends the runner its own record either way."""
    from repro.core.evidence import results
    from repro.core.evidence.results import ResultsChanged
    from repro.parameters import GatherParameters
    from repro.walkthrough.session import Session

    read, write = os.pipe()
    monkeypatch.setattr(results, "_ledger_fd", [write])
    session = Session.start(GATHER, "cpu", str(tmp_path), GatherParameters(request_counts=[1], seq_len_max=0))
    table = session.table("02-gather-sweep")
    for n in (1, 2, 3):
        table.append({"check": "c", "variant": "fixed", "num_reqs": n, "expected": "e", "observed": "o", "ok": True})
    path = tmp_path / "results" / "02-gather-sweep.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(ResultsChanged, match=r"results/02-gather-sweep\.csv holds 1 rows, .* wrote 3 rows"):
        session.close()
    sent = json.loads(os.read(read, 1 << 16))
    assert sent["results/02-gather-sweep.csv"]["rows"] == 3  # the kernel's own record, not the file's
    os.close(read)
    os.close(write)

"""A run killed half-way keeps its finished rows, its partial notebook and a manifest that says so;
--resume finishes it without mixing rows, into the tables the session's run with the same seed wrote."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from clitools import SMALL, assert_same_tables
from scheduling import made_once

pytestmark = pytest.mark.notebook

#: The shared run's sizes (both sentinel modes are its default), so the resumed tables must equal its tables.
ARGS = [*SMALL, "-p", "sentinel_modes=[in-range, poison]"]


def start(out: Path, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "repro",
        "run",
        "--profile",
        "cpu",
        "--out",
        str(out),
        "--notebooks",
        "01",
        "02",
        *ARGS,
        *extra,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_rows(csv: Path, rows: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if csv.exists() and len(csv.read_text().splitlines()) > rows:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    raise AssertionError(f"{csv} never reached {rows} rows")


def ended(proc: subprocess.Popen, timeout: float) -> dict:
    stdout, stderr = proc.communicate(timeout=timeout)
    return {"returncode": proc.returncode, "stdout": stdout, "stderr": stderr}


def saved(proc: subprocess.CompletedProcess) -> dict:
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def interrupt_then_resume(folder: Path) -> dict:
    """Ctrl-C in notebook 02's sweep, two runs into the folder that must be refused, then --resume: what each step
    left, as it was at that step."""
    out = folder / "run"
    sweep = out / "results" / "02-gather-sweep.csv"
    seen: dict = {"out": str(out)}
    proc = start(out)
    wait_for_rows(sweep, 6, proc)
    # The sweep writes its rows within a second: the run is frozen where they were seen, so that Ctrl-C lands in
    # the sweep and not in whatever comes after it, then Ctrl-C reaches the runner and the notebook kernel alike.
    os.killpg(proc.pid, signal.SIGSTOP)
    os.killpg(proc.pid, signal.SIGINT)
    os.killpg(proc.pid, signal.SIGCONT)
    seen["interrupted"] = ended(proc, timeout=120)
    seen["manifest"] = json.loads((out / "manifest.json").read_text())
    kept = pd.read_csv(sweep)
    seen["kept"] = {"rows": len(kept), "all_ok": bool(kept["ok"].all())}
    seen["reshape_checks_kept"] = (out / "results" / "01-reshape-checks.csv").exists()
    seen["partial_notebook"] = (out / "notebooks" / "02-strided-block-table-gather.ipynb").exists()

    # Running again into the same folder without --resume; --resume with other parameters.
    again = [sys.executable, "-m", "repro", "run", "--profile", "cpu", "--out", str(out)]
    refused = subprocess.run(again, capture_output=True, text=True)
    seen["refused"] = saved(refused)
    seen["refused_changed_nothing"] = pd.read_csv(sweep).equals(kept)
    other = [*again, "--resume", "--notebooks", "01", "02", "-p", "seed=1"]
    seen["other_parameters"] = saved(subprocess.run(other, capture_output=True, text=True))

    seen["resumed"] = ended(start(out, "--resume"), timeout=600)
    final = pd.read_csv(sweep)
    seen["final"] = {"rows": len(final), "duplicated": bool(final.duplicated(["variant", "mode", "num_reqs"]).any())}
    seen["final_status"] = json.loads((out / "manifest.json").read_text())["status"]
    return seen


@pytest.fixture(scope="session")
def interrupted(pytestconfig) -> dict:
    """The interrupted and resumed run, made once per session (tests/scheduling.py): the test of its own steps
    runs early, the comparison with the shared run at the end, once that run has ended."""
    return made_once(pytestconfig, "interrupted-run", interrupt_then_resume)


def test_interrupted_run_keeps_finished_rows_and_resume_completes_it(interrupted):
    first = interrupted["interrupted"]
    assert first["returncode"] == 130, first["stdout"] + first["stderr"]
    assert "finished results are kept" in first["stderr"]

    manifest = interrupted["manifest"]
    assert manifest["status"] == "interrupted"
    assert manifest["notebooks"]["01-reshape-overrun"]["status"] == "ok"
    assert interrupted["kept"]["rows"] >= 6 and interrupted["kept"]["all_ok"]
    assert interrupted["reshape_checks_kept"]
    assert interrupted["partial_notebook"]

    # Running again into the same folder without --resume is refused and changes nothing.
    refused = interrupted["refused"]
    assert refused["returncode"] == 2 and "already holds a run" in refused["stderr"]
    assert interrupted["refused_changed_nothing"]

    # --resume with other parameters is refused too.
    other = interrupted["other_parameters"]
    assert other["returncode"] == 2 and "--resume" in other["stderr"]

    resumed = interrupted["resumed"]
    assert resumed["returncode"] == 0, resumed["stdout"][-2000:] + resumed["stderr"][-2000:]
    assert "[01-reshape-overrun] already complete, kept" in resumed["stdout"]
    assert interrupted["final"]["rows"] == 3 * 2 * 5  # counts x modes x variants, each exactly once
    assert not interrupted["final"]["duplicated"]
    assert interrupted["final_status"] == "complete"


def test_the_resumed_run_has_the_tables_of_the_sessions_run(interrupted, cpu_run):
    """A resumed run is the run: the same seed and sizes, the same tables as the shared run's."""
    assert interrupted["resumed"]["returncode"] == 0
    assert cpu_run.proc.returncode == 0
    assert_same_tables(cpu_run.path, Path(interrupted["out"]), notebooks=("01-", "02-"))

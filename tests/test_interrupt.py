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
        time.sleep(0.2)
    raise AssertionError(f"{csv} never reached {rows} rows")


def test_interrupted_run_keeps_finished_rows_and_resume_completes_it(tmp_path, shared_run):
    out = tmp_path / "run"
    proc = start(out)
    sweep = out / "results" / "02-gather-sweep.csv"
    wait_for_rows(sweep, 6, proc)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the runner and the notebook kernel alike
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert "finished results are kept" in stderr

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["notebooks"]["01-reshape-overrun"]["status"] == "ok"
    kept = pd.read_csv(sweep)
    assert len(kept) >= 6 and kept["ok"].all()
    assert (out / "results" / "01-reshape-checks.csv").exists()
    assert (out / "notebooks" / "02-strided-block-table-gather.ipynb").exists()  # the partial notebook

    # Running again into the same folder without --resume is refused and changes nothing.
    refused = subprocess.run(
        [sys.executable, "-m", "repro", "run", "--profile", "cpu", "--out", str(out)], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "already holds a run" in refused.stderr
    assert pd.read_csv(sweep).equals(kept)

    # --resume with other parameters is refused too.
    other = subprocess.run(
        [
            sys.executable,
            "-m",
            "repro",
            "run",
            "--profile",
            "cpu",
            "--out",
            str(out),
            "--resume",
            "--notebooks",
            "01",
            "02",
            "-p",
            "seed=1",
        ],
        capture_output=True,
        text=True,
    )
    assert other.returncode == 2 and "--resume" in other.stderr

    resumed = start(out, "--resume")
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stdout[-2000:] + stderr[-2000:]
    assert "[01-reshape-overrun] already complete, kept" in stdout
    final = pd.read_csv(sweep)
    assert len(final) == 3 * 2 * 5  # counts x modes x variants, each exactly once
    assert not final.duplicated(["variant", "mode", "num_reqs"]).any()
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    cpu_run = shared_run.wait()  # the session's run, made meanwhile
    assert cpu_run.proc.returncode == 0
    assert_same_tables(cpu_run.path, out, notebooks=("01-", "02-"))

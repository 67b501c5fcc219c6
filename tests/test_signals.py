"""Every way a run ends maps to a documented exit code, and nothing it started outlives it.

Real signals to real runs: SIGTERM while parameters are checked, SIGTERM and kill -9 while the implementation
under test runs in its case process, a hanging implementation, modules that end the interpreter on import, a
terminal that closes (SIGHUP). A pipe that closes: test_runfolder.py, on the run whose
folder it checks meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pandas as pd
import pytest
from clitools import SMALL_02, kill_tagged, manifest, new_tag, run, start, tagged_cmdlines, wait_for, wait_gone

pytestmark = pytest.mark.integration

STALL = ["-p", "implementation=stall_gather:gather"]


def stderr_lines(text: str) -> list[str]:
    return [ln for ln in text.strip().splitlines() if ln.strip()]


def case_process_running(tag: str) -> bool:
    return any("repro.core.evidence.worker" in c for c in tagged_cmdlines(tag))


@pytest.mark.parametrize("module", ["exit_on_import", "os_exit_on_import"])
def test_a_module_that_exits_on_import_cannot_make_a_run_pass(tmp_path, module):
    out = tmp_path / "run"
    proc = run(["run", "--profile", "cpu", "--out", str(out), "-p", f"implementation={module}:gather"], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = stderr_lines(proc.stderr)
    assert line.startswith("error: implementation: ") and module in line
    assert not out.exists()


def test_sigterm_while_parameters_are_checked(tmp_path):
    """The import check of an implementation that never finishes importing, interrupted: 130, nothing left."""
    out = tmp_path / "run"
    tag = new_tag()
    proc = start(["run", "--profile", "cpu", "--out", str(out), "-p", "implementation=hang_on_import:gather"], tag)
    try:
        wait_for(
            lambda: any("repro.core.evidence.probe" in c for c in tagged_cmdlines(tag)), 60, proc, "the import check"
        )
        os.kill(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
        left = wait_gone(tag, 10)
    finally:
        kill_tagged(tag)
    assert proc.returncode == 130, stdout + stderr
    assert stderr_lines(stderr) == ["interrupted before anything ran; nothing was written"]
    assert left == [] and not out.exists()


@pytest.mark.notebook
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "SIGHUP"])
def test_a_case_in_its_own_process_dies_with_its_run(tmp_path, how):
    """A stalled implementation under test runs in its case process; the runner is signalled meanwhile."""
    out = tmp_path / "run"
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02, *STALL]
    proc = start([*args, "-p", "sentinel_modes=[poison]"], tag)
    try:
        wait_for(lambda: case_process_running(tag), 300, proc, "an isolated case")
        os.kill(proc.pid, getattr(signal, how))
        stdout, stderr = proc.communicate(timeout=120)
        left = wait_gone(tag, 15)
    finally:
        kill_tagged(tag)
    assert left == [], f"still running after the run ended: {left}"
    status = manifest(out)
    if how == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL and status["status"] == "running"
        return
    assert proc.returncode == 130, stdout + stderr
    assert status["status"] == "interrupted"
    assert status["notebooks"]["02-strided-block-table-gather"]["status"] == "interrupted"
    lines = stderr_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("interrupted: finished results are kept"), stderr
    assert "--resume" in lines[0] and "Traceback" not in stderr + stdout and "zmq" not in stderr


@pytest.mark.notebook
def test_a_hanging_case_is_stopped_at_its_time_limit(tmp_path):
    """The implementation under test hangs in its case process: its time limit turns the hang into a failed
    ``timeout`` row, a new case process takes the next case, and the run goes on to the end."""
    out = tmp_path / "run"
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02, *STALL]
    args += ["-p", "sentinel_modes=[in-range]", "-p", "case_timeout_s=3"]
    proc = start(args, tag)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        kill_tagged(tag)
    assert proc.returncode == 1, stdout + stderr
    sweep = pd.read_csv(out / "results" / "02-gather-sweep.csv")
    under = sweep[sweep["implementation"] == "stall_gather:gather"].set_index("num_reqs")
    assert under.loc[1, "status"] == "ok" and bool(under.loc[1, "ok"])  # one request: a contiguous view
    assert under.loc[2, "status"] == "timeout" and not bool(under.loc[2, "ok"])
    assert "no result within 3 s" in under.loc[2, "error"]
    assert "FAILED check 02-strided-block-table-gather" in stdout
    assert manifest(out)["status"] == "failed"


def test_children_die_with_the_thread_that_started_them(tmp_path):
    """``run_child`` gives each case process PR_SET_PDEATHSIG: kill its parent and it goes too."""
    code = (
        "import sys; from repro.core.evidence.isolate import run_child; "
        "run_child([sys.executable, '-c', 'import time; time.sleep(600)'], 600)"
    )
    tag = new_tag()
    from clitools import cli_env

    parent = subprocess.Popen([os.sys.executable, "-c", code], env=cli_env(tag))
    try:
        wait_for(lambda: len(tagged_cmdlines(tag)) == 2, 30, parent, "the child")
        parent.kill()
        parent.wait()
        assert wait_gone(tag, 10) == []
    finally:
        kill_tagged(tag)


@pytest.mark.notebook
def test_an_implementation_that_raises_is_failed_rows_not_a_broken_notebook(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02]
    proc = run([*args, "-p", "implementation=raise_gather:gather", "-p", "sentinel_modes=[in-range]"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "0 notebook(s) broke" in proc.stdout.strip().splitlines()[-1]
    contiguous = pd.read_csv(out / "results" / "02-contiguous-checks.csv")
    under = contiguous[contiguous["variant"] == "under-test"]
    assert len(under) and not under["ok"].any()
    assert under["observed"].str.contains("RuntimeError: this gather always fails").all()

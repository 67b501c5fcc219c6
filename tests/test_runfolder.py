"""One writer per run folder: a second run, a --resume or a report meets the lock with one line and
exit code 2 and changes nothing; a lock left by a killed run is taken over by --resume. A run's recorded
command reproduces it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from clitools import (
    REFUSED_BEFORE_ANY_WORK,
    ROOT,
    SMALL,
    SMALL_02,
    assert_same_tables,
    cli_env,
    kill_tagged,
    manifest,
    new_tag,
    run,
    start,
    tagged,
    wait_for,
    wait_gone,
)
from scheduling import made_once

from repro.cli.runfolder import LOCK_NAME, RunFolderError, RunLock, holder_if_locked, new_default_folder

pytestmark = pytest.mark.integration

HOLD = (
    "import sys, time; from pathlib import Path; from repro.cli.runfolder import RunLock; "
    "RunLock(Path(sys.argv[1]), 'run').acquire('--out'); print('locked', flush=True); time.sleep(600)"
)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of ``tmp_path / 'run'`` until the test ends (or kills it)."""
    folder = tmp_path / "run"
    folder.mkdir()
    tag = new_tag()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True, env=cli_env(tag)
    )
    assert proc.stdout.readline().strip() == "locked"
    yield folder, proc
    proc.kill()
    proc.wait()


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_second_writer_is_refused_with_one_line(holder):
    folder, proc = holder
    before = snapshot(folder)
    refused = run(["run", "--profile", "cpu", "--out", str(folder), *REFUSED_BEFORE_ANY_WORK])
    assert refused.returncode == 2
    assert f"--out: {folder} is in use by another process (repro run, pid {proc.pid}" in one_line(refused)
    assert snapshot(folder) == before


def test_resume_and_report_are_refused_while_a_writer_holds_the_folder(holder):
    folder, _ = holder
    (folder / "manifest.json").write_text(json.dumps({"status": "running", "notebooks": {}, "parameters": {}}))
    before = snapshot(folder)
    resumed = run(["run", "--profile", "cpu", "--out", str(folder), "--resume", *REFUSED_BEFORE_ANY_WORK])
    assert (
        resumed.returncode == 2 and "--resume: " in one_line(resumed) and "in use by another process" in resumed.stderr
    )
    report = run(["report", str(folder)])
    assert report.returncode == 2 and one_line(report).startswith(f"error: report: {folder} is in use")
    assert snapshot(folder) == before


def test_a_lock_dies_with_its_holder(holder):
    folder, proc = holder
    with pytest.raises(RunFolderError, match="in use by another process"):
        RunLock(folder, "run").acquire("--out")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with RunLock(folder, "run").acquire("--out") as lock:
        assert lock.fd is not None


def test_a_lock_passed_to_a_child_outlives_the_parent(tmp_path):
    """The runner hands the lock to each notebook kernel: the folder stays locked while any of them lives."""
    folder = tmp_path / "run"
    folder.mkdir()
    code = (
        "import subprocess, sys, time; from pathlib import Path; from repro.cli.runfolder import RunLock; "
        "lk = RunLock(Path(sys.argv[1]), 'run').acquire('--out'); "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], pass_fds=(lk.fd,)); "
        "print(c.pid, flush=True); time.sleep(600)"
    )
    tag = new_tag()
    parent = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True, env=cli_env(tag)
    )
    try:
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        with pytest.raises(RunFolderError, match="in use"):
            RunLock(folder, "run").acquire("--resume")
        os.kill(child, signal.SIGKILL)
        assert wait_gone(tag, 10) == []
        # A killed process leaves /proc's environ before its files are closed: allow the kernel that moment.
        wait_for(lambda: holder_if_locked(folder) is None, 5, what="the lock to be released")
        RunLock(folder, "run").acquire("--resume").release()
    finally:
        kill_tagged(tag)


def test_a_reader_shares_a_reader_and_blocks_a_writer(tmp_path):
    RunLock(tmp_path, "run").acquire("--out").release()  # the lock file exists once a writer was there
    with RunLock(tmp_path, "report --against", exclusive=False).acquire("--against"):
        RunLock(tmp_path, "report --against", exclusive=False).acquire("--against").release()
        with pytest.raises(RunFolderError, match="in use"):
            RunLock(tmp_path, "run").acquire("--out")


def test_a_reader_of_a_folder_no_writer_locked_creates_nothing(tmp_path):
    with RunLock(tmp_path, "report --against", exclusive=False).acquire("--against"):
        assert not (tmp_path / LOCK_NAME).exists()


def test_default_folders_started_in_one_second_never_collide(tmp_path):
    made = [new_default_folder(tmp_path, "20260101-120000") for _ in range(3)]
    assert [p.name for p in made] == ["20260101-120000", "20260101-120000-2", "20260101-120000-3"]


@pytest.mark.parametrize(
    "setup,args,fragment",
    [
        ("file", [], "--out: {out} is a file"),
        ("missing", ["--resume"], "--resume: {out} does not exist"),
        ("empty", ["--resume"], "--resume: {out} holds no manifest.json to resume"),
        ("truncated", ["--resume"], "--resume: {out}/manifest.json is damaged"),
        ("list", ["--resume"], "--resume: {out}/manifest.json is not a run manifest"),
        ("none", ["--resume", "--out="], "--resume: needs --out"),
    ],
)
def test_unusable_run_folders_are_one_line(tmp_path, setup, args, fragment):
    out = tmp_path / "run"
    if setup == "file":
        out.write_text("x")
    elif setup != "missing":
        out.mkdir()
    if setup == "truncated":
        (out / "manifest.json").write_text('{"status": "running", "notebo')
    if setup == "list":
        (out / "manifest.json").write_text("[1, 2]")
    before = snapshot(out) if out.is_dir() else None
    out_args = ["--out", str(out)] if setup != "none" else []
    cmd = ["run", "--profile", "cpu", *REFUSED_BEFORE_ANY_WORK, *out_args, *args]
    if setup == "none":
        cmd.remove("--out=")
    proc = run(cmd)
    assert proc.returncode == 2, proc.stderr
    assert fragment.format(out=out) in one_line(proc)
    if before is not None:
        after = snapshot(out)
        after.pop(LOCK_NAME, None)
        assert after == before


# --------------------------------------------------------------------------------------------
# Real runs racing for one folder.


@pytest.mark.notebook
def test_two_runs_started_together_then_the_winners_command_reproduces_it(tmp_path):
    """Two runs race for one new folder: one writes it, the other is refused with one line. The winner's output is
    one line per notebook and a verdict, and its recorded command, pasted into a shell at the checkout root,
    reproduces its tables."""
    out = tmp_path / "run dir 'quoted' $HOME"  # a path the shell would split, quote and expand
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02]
    args += ["-p", "sentinel_modes=in-range,poison", "-p", "seed=7"]
    try:
        procs = [start(args, tag), start(args, tag)]
        results = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    finally:
        kill_tagged(tag)
    codes = sorted(r[0] for r in results)
    assert codes == [0, 2], results
    loser = next(r for r in results if r[0] == 2)
    assert len(loser[2].strip().splitlines()) == 1 and "in use by another process" in loser[2]
    sweep = pd.read_csv(out / "results" / "02-gather-sweep.csv")
    assert not sweep.duplicated(["variant", "mode", "num_reqs"]).any()
    assert len(sweep) == 2 * 2 * sweep["variant"].nunique()
    assert manifest(out)["status"] == "complete"

    # Noise: nothing on stderr; one line per notebook and for the report, then the folder and the verdict.
    _, stdout, stderr = next(r for r in results if r[0] == 0)
    assert stderr == ""
    lines = stdout.strip().splitlines()
    assert re.fullmatch(r"\[02-strided-block-table-gather\] ok in [0-9.]+ s", lines[0]), lines
    assert re.fullmatch(r"\[report\] ok in [0-9.]+ s", lines[1]), lines
    assert lines[2:] == [f"run folder: {out}", "all checks passed"]

    command = manifest(out)["command"]
    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "repro", "run"]
    assert words[words.index("--out") + 1] == str(out)
    assert words[words.index("--notebooks") + 1] == "02"
    assert words.count("-p") == 6 and "sentinel_modes=[in-range, poison]" in words
    assert command in (out / "report.md").read_text()  # the report's test plan shows the same command

    first = tmp_path / "first"
    out.rename(first)
    env = cli_env(tag, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    pasted = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    kill_tagged(tag)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    again = manifest(out)
    assert again["command"] == command and again["parameters"] == manifest(first)["parameters"]
    assert_same_tables(first, out)


@pytest.mark.notebook
def test_resume_and_report_while_the_run_is_writing_are_refused_and_a_closed_stdout_does_not_end_it(tmp_path):
    """On the two bug notebooks at their smallest, as ``python -m repro run ... | head -1`` runs them (the pipe closes,
    every write to stdout fails with EPIPE): the refusals leave the writer to finish its run, and it finishes.
    (Notebook 01 alone, offline, can end before two refusing processes have started on a loaded machine.)"""
    out = tmp_path / "run"
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "01", "02", *SMALL]
    read, write = os.pipe()
    proc = start(args, tag, stdout=write)
    os.close(write)
    os.close(read)  # nobody reads
    try:
        wait_for(lambda: (out / "manifest.json").exists(), 120, proc, "the manifest")
        resumed = run([*args, "--resume"])
        report = run(["report", str(out)])
        assert proc.poll() is None, "the run ended before the refusals were tested; nothing was proven"
        _, stderr = proc.communicate(timeout=600)
    finally:
        kill_tagged(tag)
    assert resumed.returncode == 2 and "in use by another process" in one_line(resumed)
    assert report.returncode == 2 and "in use by another process" in one_line(report)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    assert {p.name for p in (out / "results").glob("*.csv")} >= {"01-reshape-checks.csv", "01-reshape-groups.csv"}
    assert manifest(out)["status"] == "complete" and (out / "report.md").exists()


def kill_then_take_over(folder: Path) -> dict:
    """kill -9 in notebook 02's sweep, then --resume until the killed run's processes are gone and the lock is
    free: what each step left, as it was at that step."""
    out = folder / "run"
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "01", "02", *SMALL]
    proc = start(args, tag)
    sweep = out / "results" / "02-gather-sweep.csv"
    seen: dict = {"out": str(out), "refusals": []}
    try:
        wait_for(lambda: sweep.exists() and len(sweep.read_text().splitlines()) > 3, 300, proc, "sweep rows")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        seen["status_after_kill"] = manifest(out)["status"]
        # The kernel notices its parent is gone within about a second; until then the folder stays locked.
        deadline = time.time() + 30
        while True:
            resumed = run([*args, "--resume"], tag=new_tag())
            if resumed.returncode != 2 or time.time() > deadline:
                break
            seen["refusals"].append(resumed.stderr)
            time.sleep(0.5)
        seen["left"] = wait_gone(tag, 5)
    finally:
        kill_tagged(tag)
    seen["resumed"] = {"returncode": resumed.returncode, "stdout": resumed.stdout, "stderr": resumed.stderr}
    final = pd.read_csv(sweep)
    seen["final"] = {
        "rows": len(final),
        "variants": int(final["variant"].nunique()),
        "duplicated": bool(final.duplicated(["variant", "mode", "num_reqs"]).any()),
    }
    seen["final_status"] = manifest(out)["status"]
    return seen


@pytest.fixture(scope="session")
def killed(pytestconfig) -> dict:
    """The killed and resumed run, made once per session (tests/scheduling.py): the test of its own steps runs early,
    the comparison with the shared run at the end, once that run has ended."""
    return made_once(pytestconfig, "killed-run", kill_then_take_over)


@pytest.mark.notebook
def test_a_killed_run_is_taken_over_by_resume_once_its_processes_are_gone(killed):
    """Killed in notebook 02's sweep, resumed: notebook 01 is kept and 02 runs again."""
    assert killed["status_after_kill"] == "running"
    for refused in killed["refusals"]:
        lines = refused.strip().splitlines()
        assert len(lines) == 1 and "in use by another process" in lines[0], refused
    assert killed["left"] == []
    resumed = killed["resumed"]
    assert resumed["returncode"] == 0, resumed["stdout"][-2000:] + resumed["stderr"][-2000:]
    assert "taking over" in resumed["stdout"] and "[01-reshape-overrun] already complete, kept" in resumed["stdout"]
    assert not killed["final"]["duplicated"]
    assert killed["final"]["rows"] == 3 * 2 * killed["final"]["variants"]
    assert killed["final_status"] == "complete"


@pytest.mark.notebook
def test_a_run_taken_over_has_the_tables_of_the_sessions_run(killed, cpu_run):
    """A resumed run is the run: the same seed and sizes, the same tables as the shared run's."""
    assert killed["resumed"]["returncode"] == 0
    assert cpu_run.proc.returncode == 0
    assert_same_tables(cpu_run.path, Path(killed["out"]), notebooks=("01-", "02-"))


def test_tagged_processes_are_found():
    """The orphan checks above and in test_signals rely on this finder seeing a live tagged process."""
    tag = new_tag()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=cli_env(tag))
    try:
        wait_for(lambda: proc.pid in tagged(tag), 10, what="the tagged process")
    finally:
        proc.kill()
        proc.wait()
    assert wait_gone(tag, 5) == []


def test_a_refused_folder_is_left_without_a_lock_file(tmp_path):
    """A folder that is not a run (or holds one) is refused before anything, the lock file included, is written."""
    (tmp_path / "notes.txt").write_text("mine")
    refused = run(["run", "--profile", "cpu", "--out", str(tmp_path), *REFUSED_BEFORE_ANY_WORK])
    assert refused.returncode == 2 and "already holds a run" in one_line(refused)
    report = run(["report", str(tmp_path)])
    assert report.returncode == 2 and "holds no manifest.json" in one_line(report)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

"""A run's exit code and first line are what CI and reviewers trust. Here an implementation under test tries,
case by case, to make a failed run look passed, and a run folder and a checkout change behind a run's back:
real runs of notebook 02 on the CPU profile, with implementation modules each test writes.

One hostile run is shared by the tests that read it (each asserts its own item); the runs that end a
kernel or stop on a full disk are their own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from clitools import (
    REFUSED_BEFORE_ANY_WORK,
    ROOT,
    SMALL_02,
    cli_env,
    kill_tagged,
    manifest,
    new_tag,
    repro_cmd,
    run,
    wait_gone,
    write_module,
)
from filelock import FileLock

from repro.cli.runfolder import LOCK_NAME

pytestmark = pytest.mark.notebook

#: Each branch is one way to make a failed run look passed; the comments say which.
HOSTILE = '''"""An implementation under test that tries, case by case, to make a failed run look passed."""

import json
import os
import signal
import sys

import torch

from repro.core.kernels.gather import gather_fixed

IN_CHILD = sys.argv[0].endswith(("cases.py", "worker.py"))  # in a case process, not the notebook's kernel


def gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
    n = block_table.shape[0]
    backing = torch.empty(0, dtype=block_table.dtype).set_(block_table.untyped_storage())
    poison = bool((backing < 0).any())  # sentinel ids: a poison case
    if block_table.stride(0) == block_table.shape[-1]:  # vLLM's own cases, in the notebook's kernel
        if gather_lens is None and k_cache.is_contiguous():
            gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
            k_cache.zero_()  # correct output, then the whole K cache zeroed
        elif gather_lens is None:
            gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
            seq_lens += 1
        elif k_cache.is_contiguous():
            sys.exit(0)  # papermill takes SystemExit(0) as success
        else:
            gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
            gather_lens += 1
        return
    if IN_CHILD and poison and n == 1:  # a forged result line, then an exit that leaves no result
        gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
        line = {"implementation": "hostile_gather:gather", "status": "ok", "total_tokens": 1}
        print(json.dumps({**line, "mismatched_tokens": 0, "stray_writes": 0}), flush=True)
        os._exit(0)
    if IN_CHILD and poison:  # killed from outside, as the out-of-memory killer would: not the bug's fault
        os.kill(os.getpid(), signal.SIGKILL)
    gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    if n == 1:  # the backing table's columns outside the narrowed view are inputs too
        torch.empty(0, dtype=block_table.dtype).set_(block_table.untyped_storage())[-1] += 1
    else:  # a process in a session of its own that would outlive the run; then an error
        os.system("setsid sleep 300 &")
        raise RuntimeError("this gather raises at 2 requests")
'''

UNDER_TEST = "under-test"


def run_02(out: Path, target: str, tag: str, modules: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02, *extra]
    return run([*args, "-p", f"implementation={target}"], tag, modules=modules)


@pytest.fixture(scope="session")
def hostile(tmp_path_factory, worker_id):
    """The hostile run and its report, made once per test session: with pytest-xdist workers the first to ask
    makes it under a file lock and the others read what it recorded (they must not write into its folder)."""
    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # the session's folder above every worker's own
    base, record = root / "hostile", root / "hostile.json"
    modules, out = base / "modules", base / "run"
    with FileLock(str(root / "hostile.lock")):
        if not record.exists():
            target = write_module(modules, "hostile_gather", HOSTILE)
            tag = new_tag()
            try:
                ran = run_02(out, target, tag, modules)
                left = wait_gone(tag, 10)  # every process of the run, those the implementation started included
                report = run(["report", str(out)], tag, modules=modules)
            finally:
                kill_tagged(tag)
            done = {"target": target, "left": left, "ran": _saved(ran), "report": _saved(report)}
            record.write_text(json.dumps(done))
        saved = json.loads(record.read_text())
    ran, report = (subprocess.CompletedProcess(**saved[k]) for k in ("ran", "report"))
    return SimpleNamespace(out=out, ran=ran, left=saved["left"], report=report, modules=modules, target=saved["target"])


def _saved(proc: subprocess.CompletedProcess) -> dict:
    return {"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


def rows(out: Path, table: str) -> pd.DataFrame:
    frame = pd.read_csv(out / "results" / f"{table}.csv")
    text = [c for c in ("changed_inputs", "error", "observed") if c in frame]
    frame[text] = frame[text].fillna("")
    return frame[frame["variant"] == UNDER_TEST]


def case(out: Path, mode: str, n: int) -> pd.Series:
    sweep = rows(out, "02-gather-sweep")
    return sweep[(sweep["mode"] == mode) & (sweep["num_reqs"] == n)].iloc[0]


def one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


def files(folder: Path) -> dict[Path, bytes]:
    """Every file of a run folder but the lock's, which names its latest holder."""
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != LOCK_NAME}


def copy_run(hostile, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(hostile.out, out)
    return out


def test_sys_exit_0_in_the_implementation_is_a_failed_case_not_a_passed_run(hostile):
    assert hostile.ran.returncode == 1, hostile.ran.stdout + hostile.ran.stderr
    assert manifest(hostile.out)["status"] == "failed"
    contiguous = rows(hostile.out, "02-contiguous-checks")
    exited = contiguous[contiguous["observed"].str.contains("SystemExit(0)", regex=False)]
    assert len(exited) == 1 and not exited["ok"].any()
    assert len(rows(hostile.out, "02-gather-sweep")) == 4  # the notebook went on: the sweep ran


def test_every_input_the_implementation_changes_is_a_failed_check_naming_it(hostile):
    contiguous = rows(hostile.out, "02-contiguous-checks")
    changed = contiguous[contiguous["changed_inputs"] != ""]
    assert sorted(changed["changed_inputs"]) == ["gather_lens", "k_cache", "seq_lens"]
    assert not changed["ok"].any() and changed["observed"].str.contains("changed its input").all()
    backing = case(hostile.out, "in-range", 1)  # output right, a column outside the view changed
    assert backing["changed_inputs"] == "block_table" and backing["mismatched_tokens"] == 0 and not backing["ok"]
    # each input is put back after the call: every control after the implementation under test still passes
    sweep = pd.read_csv(hostile.out / "results" / "02-gather-sweep.csv")
    assert sweep[sweep["variant"] != UNDER_TEST]["ok"].all()


def test_a_result_line_printed_by_the_implementation_is_output_not_a_result(hostile):
    forged = case(hostile.out, "poison", 1)
    assert forged["status"] == "exited" and not forged["ok"]
    assert "exit code 0 during the case" in forged["error"]


def test_a_kill_from_outside_is_its_own_status_not_the_bugs_fault(hostile):
    killed = case(hostile.out, "poison", 2)
    assert killed["status"] == "killed" and "SIGKILL" in killed["error"] and not killed["ok"]
    headline = (hostile.out / "report.md").read_text().splitlines()[0]
    assert "faults" not in headline and "Reproduced" not in headline


def test_what_the_implementation_leaves_running_ends_with_the_run(hostile):
    assert hostile.left == []  # the setsid'd sleep included
    assert "ended 1 process(es) it left running: sleep 300" in hostile.ran.stdout
    assert "in use by another process" not in hostile.report.stderr  # no leftover holds the lock


def test_report_returns_the_runs_verdict_and_the_headline_the_checks(hostile):
    assert hostile.report.returncode == 1, hostile.report.stdout + hostile.report.stderr
    assert hostile.report.stdout.strip().splitlines()[-1].startswith("FAILED: 8 of ")
    headline = (hostile.out / "report.md").read_text().splitlines()[0]
    assert headline.startswith("# Unexpected results: ") and "Fix verified" not in headline
    assert "gives no result" in headline  # the error and the exit are named, not laundered


def test_resume_of_a_finished_run_is_refused_and_changes_nothing(hostile, tmp_path):
    out = copy_run(hostile, tmp_path)
    before = files(out)
    resumed = run_02(out, hostile.target, new_tag(), hostile.modules, "--resume")
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    line = one_line(resumed.stderr)
    assert line.startswith(f"error: --resume: {out} holds a finished run (status 'failed': 8 failed check(s), 0 ")
    assert resumed.stdout == ""
    assert files(out) == before


def test_a_lost_table_is_a_damaged_folder(hostile, tmp_path):
    out = copy_run(hostile, tmp_path)
    (out / "results" / "02-gather-sweep.csv").unlink()
    report = run(["report", str(out)])
    assert report.returncode == 2, report.stdout + report.stderr
    assert "results/02-gather-sweep.csv (written by 02-strided-block-table-gather) is missing" in one_line(
        report.stderr
    )


def test_a_read_only_plots_folder_is_refused_before_any_work(hostile, tmp_path):
    out = copy_run(hostile, tmp_path)
    plots = out / "plots"
    paths = [str(p) for p in (plots, *plots.glob("*.png"))]  # the folder and the figures in it
    before = (out / "report.md").read_bytes()
    locked = subprocess.run(["chattr", "+i", *paths], capture_output=True) if shutil.which("chattr") else None
    if locked is None or locked.returncode != 0:
        for p in paths[1:]:
            Path(p).chmod(0o444)
        plots.chmod(0o555)
        try:
            (plots / "probe").touch()
            pytest.skip("this user writes into a read-only folder (root) and chattr +i is not available here")
        except OSError:
            pass
    try:
        report = run(["report", str(out)])
    finally:
        if locked is not None and locked.returncode == 0:
            subprocess.run(["chattr", "-i", *paths], check=True)
        plots.chmod(0o755)
    assert report.returncode == 2, report.stdout + report.stderr
    assert one_line(report.stderr).startswith(f"error: report: cannot write to {plots} (")
    assert (out / "report.md").read_bytes() == before


# --------------------------------------------------------------------------------------------
# A kernel the implementation ends.

ENDS_ITS_PROCESS = '''"""A gather that ends the process it runs in: {how}."""

import os
import signal

import torch


def gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
    backing = torch.empty(0, dtype=block_table.dtype).set_(block_table.untyped_storage())
    if block_table.shape[0] == 2 and backing.min() >= 0:  # the 2-request in-range case; elsewhere it writes nothing
        {call}
'''


def test_a_process_the_implementation_ends_is_its_case_process_not_the_kernel(tmp_path):
    """A segfault in the implementation ends its case process, never the notebook's kernel: each case it ends is a
    failed row naming the signal, a new case process takes the next case, and the notebook runs to its checks."""
    how, call = "SIGSEGV", "os.kill(os.getpid(), signal.SIGSEGV)"
    modules = tmp_path / "modules"
    target = write_module(modules, "ends_gather", ENDS_ITS_PROCESS.format(how=how, call=call))
    out = tmp_path / "run"
    tag = new_tag()
    code = (
        "import sys; from repro.cli.runner import run; "
        "sys.exit(run('cpu', sys.argv[1], sys.argv[2:], selection=['02'], report=False))"
    )
    params = [p for p in SMALL_02 if p != "-p"] + [f"implementation={target}", "sentinel_modes=[in-range, poison]"]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(out), *params],
            capture_output=True,
            text=True,
            env=cli_env(tag, modules),
            cwd=ROOT,
            timeout=600,
        )
    finally:
        kill_tagged(tag)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    entry = manifest(out)["notebooks"]["02-strided-block-table-gather"]
    assert entry["error"].startswith("ChecksFailed: ") and "KernelDied" not in proc.stdout + proc.stderr
    crashed = case(out, "in-range", 2)
    assert crashed["status"] == "crashed" and not crashed["ok"]
    assert "SIGSEGV: the case's process faulted during the case" in crashed["error"]
    assert case(out, "poison", 1)["status"] == "ok"  # a new case process took the next case


# --------------------------------------------------------------------------------------------
# A full disk, then a changed checkout, then the same code: in a checkout of its own.

FILLS_THE_DISK = '''"""A correct gather that, once, leaves the sweep's table refusing every write, as a full disk."""

import os
from pathlib import Path

from repro.core.kernels.gather import gather_fixed


def gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
    gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)
    done = Path(os.environ["FULL_DISK_DONE"])
    if block_table.shape[0] == 2 and not done.exists():  # the 2-request in-range case, in the kernel
        done.touch()
        table = Path(os.environ["FULL_DISK_TABLE"])
        table.unlink()
        table.symlink_to("/dev/full")  # every write: No space left on device
'''


def checkout_copy(dest: Path) -> str:
    """This checkout's package, notebooks and seeds as a git checkout of its own; its commit."""
    for part in ("src", "notebooks", "data/seeds", "pyproject.toml"):
        source = ROOT / part
        target = dest / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, target)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "a checkout")
    return git(dest, "rev-parse", "HEAD")


def git(where: Path, *args: str) -> str:
    cmd = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_full_disk_stops_the_run_in_one_line_resume_refuses_changed_code_and_finishes_it(tmp_path):
    checkout = tmp_path / "checkout"
    first = checkout_copy(checkout)
    modules = tmp_path / "modules"
    target = write_module(modules, "fills_gather", FILLS_THE_DISK)
    out = tmp_path / "run"
    tag = new_tag()
    env = cli_env(
        tag,
        modules,
        PYTHONPATH=f"{modules}:{checkout / 'src'}",
        FULL_DISK_DONE=str(tmp_path / "filled"),
        FULL_DISK_TABLE=str(out / "results" / "02-gather-sweep.csv"),
    )
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02]
    args += ["-p", f"implementation={target}"]

    def cli(*extra: str, **more: str) -> subprocess.CompletedProcess:
        cmd = repro_cmd(*args, *extra)
        return subprocess.run(cmd, capture_output=True, text=True, env={**env, **more}, cwd=checkout, timeout=600)

    try:
        stopped = cli()
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        line = one_line(stopped.stderr)
        table = out / "results" / "02-gather-sweep.csv"
        assert line.startswith(f"error: cannot write {table} (No space left on device); the run stopped")
        assert line.endswith("--resume") and "Traceback" not in stopped.stdout
        assert manifest(out)["status"] == "stopped"

        source = modules / "fills_gather.py"
        original = source.read_text()
        source.write_text(original + "# changed after the run started\n")
        changed = cli("--resume")
        assert changed.returncode == 2 and "the module of implementation differs" in one_line(changed.stderr)
        source.write_text(original)

        git(checkout, "commit", "-q", "--allow-empty", "-m", "another commit")
        moved = cli("--resume")
        assert moved.returncode == 2 and f"commit {first[:10]} then" in one_line(moved.stderr)
        git(checkout, "checkout", "-q", first)
        assert manifest(out)["status"] == "stopped"  # the refusals changed nothing

        resumed = cli("--resume")
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        final = manifest(out)
        assert final["status"] == "complete" and final["code"]["git_sha"] == first
        sweep = pd.read_csv(table)
        assert len(sweep) == 2 * 2 * 5 and not sweep.duplicated(["variant", "mode", "num_reqs"]).any()
        assert resumed.stdout.strip().splitlines()[-1] == "all checks passed"
    finally:
        kill_tagged(tag)


def test_a_path_without_room_for_the_runs_files_is_refused_before_any_work(tmp_path):
    deep = tmp_path
    while len(str(deep)) < 4096 - 200:
        deep = deep / ("d" * 200)
    proc = run(["run", "--profile", "cpu", "--out", str(deep), *REFUSED_BEFORE_ANY_WORK])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "leaves no room for the run's files below it" in one_line(proc.stderr)
    assert not (tmp_path / ("d" * 200)).exists()
    name = tmp_path / ("n" * 300)
    proc = run(["run", "--profile", "cpu", "--out", str(name), *REFUSED_BEFORE_ANY_WORK])
    assert proc.returncode == 2 and "over the file system's limit of 255" in one_line(proc.stderr)


def test_the_manifest_records_the_tables_each_notebook_wrote(hostile):
    entry = manifest(hostile.out)["notebooks"]["02-strided-block-table-gather"]
    assert sorted(entry["tables"]) == [
        "results/02-contiguous-checks.csv",
        "results/02-gather-sweep.csv",
        "results/02-implementation.json",
        "results/02-interpreter-memory-safety.csv",
    ]
    assert all(set(record) == {"rows", "bytes", "sha256"} for record in entry["tables"].values())
    assert json.loads((hostile.out / "manifest.json").read_text())["code"]["implementations"]["implementation"]

"""Tests run kernels in Triton's interpreter: the variable must be set before any kernel module is
imported, because ``@triton.jit`` picks interpreter or compiler when the kernel is defined."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CI", "1")  # quiet progress bars in runner subprocesses

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from clitools import SHARED_RUN, run
from filelock import FileLock


@dataclass(frozen=True)
class CpuRun:
    path: Path
    proc: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory, worker_id) -> CpuRun:
    """One ``python -m repro run --profile cpu`` of every notebook at the small sizes, made once per test session
    and read by every test that only reads a run folder (they must not write into it). With pytest-xdist workers,
    the first to ask makes it and the others wait for it (xdist's recipe for a session fixture they share)."""
    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # the session's folder above every worker's own
    out, record = root / "cpu-run" / "run", root / "cpu-run.json"
    with FileLock(str(root / "cpu-run.lock")):
        if not record.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            proc = run(["run", "--profile", "cpu", "--out", str(out), *SHARED_RUN], timeout=1200)
            record.write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}))
        saved = json.loads(record.read_text())
    return CpuRun(out, subprocess.CompletedProcess(["repro", "run"], **saved))

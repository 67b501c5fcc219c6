"""Tests run kernels in Triton's interpreter: the variable must be set before any kernel module is
imported, because ``@triton.jit`` picks interpreter or compiler when the kernel is defined."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CI", "1")  # quiet progress bars in runner subprocesses

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from clitools import SMALL, run


@dataclass(frozen=True)
class CpuRun:
    path: Path
    proc: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory) -> CpuRun:
    """One ``python -m repro run --profile cpu`` of every notebook at the small sizes, made once per test session
    and read by every test that only reads a run folder (they must not write into it)."""
    out = tmp_path_factory.mktemp("cpu-run") / "run"
    return CpuRun(out, run(["run", "--profile", "cpu", "--out", str(out), *SMALL], timeout=1200))

"""Tests run kernels in Triton's interpreter: the variable must be set before any kernel module is
imported, because ``@triton.jit`` picks interpreter or compiler when the kernel is defined."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CI", "1")  # quiet progress bars in runner subprocesses

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from clitools import SHARED_RUN, run

#: The xdist group of every test that reads the session's CPU run: one worker makes the run once for all of them.
CPU_RUN_GROUP = "cpu-run"


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if "cpu_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(CPU_RUN_GROUP))


@dataclass(frozen=True)
class CpuRun:
    path: Path
    proc: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory) -> CpuRun:
    """One ``python -m repro run --profile cpu`` of every notebook at the small sizes, made once per test session
    and read by every test that only reads a run folder (they must not write into it)."""
    out = tmp_path_factory.mktemp("cpu-run") / "run"
    return CpuRun(out, run(["run", "--profile", "cpu", "--out", str(out), *SHARED_RUN], timeout=1200))

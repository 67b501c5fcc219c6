"""Helpers for tests that drive ``python -m repro`` from the outside: real processes, real signals.

Every process a test run starts carries ``REPRO_TEST_TAG`` in its environment (the runner, its
notebook kernels, their case processes), so a test can list what is still alive after a kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
IMPLEMENTATIONS = Path(__file__).resolve().parent / "fixtures" / "implementations"
#: A notebook-02 run that takes seconds on the CPU profile: the default geometry only (the others are the mutation
#: suite's and the shared run's).
SMALL_02 = [
    "-p",
    "request_counts=[1, 2]",
    "-p",
    "seq_len_max=48",
    "-p",
    "cache_block_size=16",
    "-p",
    "geometries=[default]",
]
#: Notebooks 01 and 02 at the shared CPU run's sizes (tests/conftest.py): runs with the same seed write the same tables.
SMALL = [
    "-p",
    "request_counts=[1, 2, 3]",
    "-p",
    "seq_len_max=48",
    "-p",
    "cache_block_size=16",
    "-p",
    "geometries=[default]",
]
#: The shared CPU run: every notebook, notebook 04's release matrix at the two request counts that show the bug.
SHARED_RUN = [*SMALL, "-p", "matrix_request_counts=[1, 2]"]
#: The notebook for a run that must be refused before any notebook runs: notebook 05's parameters are checked
#: without importing torch (01's and 02's import it), so the refusal is all the process does.
REFUSED_BEFORE_ANY_WORK = ["--notebooks", "05"]


def new_tag() -> str:
    return uuid.uuid4().hex


def cli_env(tag: str, modules: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a test's ``python -m repro``; ``modules``: a folder of implementation modules a
    test wrote, importable first."""
    path = [str(SRC), str(IMPLEMENTATIONS), os.environ.get("PYTHONPATH", "")]
    if modules is not None:
        path.insert(0, str(modules))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "REPRO_TEST_TAG": tag, "CI": "1", **extra}


def repro_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "repro", *args]


def start(args: list[str], tag: str, modules: Path | None = None, env: dict | None = None, **popen) -> subprocess.Popen:
    """``python -m repro ARGS`` in a session of its own (signals reach it alone), output captured."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        repro_cmd(*args), text=True, start_new_session=True, env=env or cli_env(tag, modules), cwd=ROOT, **popen
    )


def run(
    args: list[str], tag: str | None = None, timeout: float = 600, modules: Path | None = None, **extra: str
) -> subprocess.CompletedProcess:
    env = cli_env(tag or new_tag(), modules, **extra)
    return subprocess.run(repro_cmd(*args), capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


def write_module(folder: Path, name: str, source: str) -> str:
    """Write ``<folder>/<name>.py`` (an implementation under test) and return ``name:gather``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    return f"{name}:gather"


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries ``tag`` (zombies excluded)."""
    needle = f"REPRO_TEST_TAG={tag}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0") and not _zombie(proc):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _zombie(proc: Path) -> bool:
    stat = (proc / "stat").read_text()
    return stat[stat.rindex(")") + 2] == "Z"


def wait_gone(tag: str, timeout: float = 20) -> list[int]:
    """Wait for every tagged process to end; what is left after ``timeout``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        left = tagged(tag)
        if not left:
            return []
        time.sleep(0.2)
    return tagged(tag)


def wait_for(predicate, timeout: float, proc: subprocess.Popen | None = None, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()  # None for a stream the caller did not capture
            raise AssertionError(
                f"process ended (rc {proc.returncode}) before {what}:\n{(out or '')[-2000:]}\n{(err or '')[-2000:]}"
            )
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def tagged_cmdlines(tag: str) -> list[str]:
    out = []
    for pid in tagged(tag):
        try:
            out.append((Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except OSError:
            pass
    return out


def kill_tagged(tag: str) -> None:
    """Clean-up after a failed test: end whatever the test left behind (only its own processes)."""
    import signal

    for pid in tagged(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def result_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """Every result table of a run folder without its timing columns (they differ between two runs)."""
    out = {}
    for p in sorted((run_dir / "results").glob("*.csv")):
        frame = pd.read_csv(p)
        out[p.name] = frame[[c for c in frame.columns if not is_timing_column(c)]]
    return out


def assert_same_tables(a: Path, b: Path, notebooks: tuple[str, ...] = ()) -> None:
    """Two runs with the same seed and parameters hold the same tables (of ``notebooks``' prefixes, or all)."""
    ta, tb = result_tables(a), result_tables(b)
    if notebooks:
        ta = {k: v for k, v in ta.items() if k.startswith(notebooks)}
        tb = {k: v for k, v in tb.items() if k.startswith(notebooks)}
    assert ta.keys() == tb.keys() and ta
    for name in ta:
        pd.testing.assert_frame_equal(ta[name], tb[name], obj=name)


#: Columns holding timings; they are excluded when two runs are compared for determinism.
TIMING_SUFFIXES = ("_us", "_ms", "_s", "_seconds", "_tbps", "_ratio", "_fraction")


def is_timing_column(name: str) -> bool:
    return name.endswith(TIMING_SUFFIXES)

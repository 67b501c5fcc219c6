"""Tests run kernels in Triton's interpreter: the variable must be set before any kernel module is
imported, because ``@triton.jit`` picks interpreter or compiler when the kernel is defined."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CI", "1")  # quiet progress bars in runner subprocesses

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import scheduling
from clitools import ROOT, SHARED_RUN, cli_env, new_tag, repro_cmd
from filelock import FileLock

#: The shared run's time limit, from its start.
SHARED_RUN_TIMEOUT_S = 1200

#: Runs the shared CPU run and writes its exit code and output to a record file once it ends, so the record
#: exists whichever test process started it and whichever waits for it.
RECORDER = (
    "import json, os, subprocess, sys; record = sys.argv[1]; "
    "p = subprocess.run(sys.argv[2:], capture_output=True, text=True); "
    "open(record + '.part', 'w').write(json.dumps("
    "{'returncode': p.returncode, 'stdout': p.stdout, 'stderr': p.stderr})); "
    "os.replace(record + '.part', record)"
)


@dataclass(frozen=True)
class CpuRun:
    path: Path
    proc: subprocess.CompletedProcess


class SharedRun:
    """One ``python -m repro run --profile cpu`` of every notebook at the small sizes, started once per test
    session as soon as collection finds a test that reads it, in the background, so the test processes run
    other tests meanwhile; :meth:`wait` gives it to a test once it has ended. With pytest-xdist workers,
    the first to start it writes its pid under a file lock and the others find it there."""

    def __init__(self, root: Path):
        self.root = root
        self.out = root / "cpu-run" / "run"
        self.record = root / "cpu-run.json"
        self.pid_file = root / "cpu-run.pid"
        self.lock = FileLock(str(root / "cpu-run.lock"))

    @classmethod
    def of(cls, config: pytest.Config) -> "SharedRun":
        return cls(scheduling.session_root(config))

    def start(self) -> None:
        with self.lock:
            if self.pid_file.exists():
                return
            self.out.parent.mkdir(parents=True, exist_ok=True)
            cmd = repro_cmd("run", "--profile", "cpu", "--out", str(self.out), *SHARED_RUN)
            proc = subprocess.Popen(
                [sys.executable, "-c", RECORDER, str(self.record), *cmd],
                env=cli_env(new_tag()),
                cwd=ROOT,
                start_new_session=True,  # ended as a group at the session's end if still running
                stdin=subprocess.DEVNULL,
            )
            self.pid_file.write_text(json.dumps({"pid": proc.pid, "started": time.time()}))

    def wait(self) -> CpuRun:
        self.start()  # a test run without collection's start (e.g. a test selected by a plugin later)
        started = json.loads(self.pid_file.read_text())["started"]
        while not self.record.exists():
            if time.time() - started > SHARED_RUN_TIMEOUT_S:
                self.stop()
                raise subprocess.TimeoutExpired("repro run (the shared CPU run)", SHARED_RUN_TIMEOUT_S)
            time.sleep(0.5)
        saved = json.loads(self.record.read_text())
        return CpuRun(self.out, subprocess.CompletedProcess(["repro", "run"], **saved))

    def stop(self) -> None:
        """End the run's process group if it is still running (a session stopped early)."""
        if self.pid_file.exists() and not self.record.exists():
            try:
                os.killpg(json.loads(self.pid_file.read_text())["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def _reads_the_shared_run(item: pytest.Item) -> bool:
    return "cpu_run" in getattr(item, "fixturenames", ())


def _start_order(item: pytest.Item) -> int:
    """Longest first, so that two workers taking one test at a time end together: the tests that run notebooks
    of their own, the other end-to-end tests, the unit tests, and last the tests that read the shared run (it has
    ended by then)."""
    if _reads_the_shared_run(item):
        return 3
    if item.get_closest_marker("notebook") is not None:
        return 0
    if item.get_closest_marker("integration") is not None:
        return 1
    return 2


def _module_fixture_group(item: pytest.Item) -> str | None:
    """The test module, when the test uses a module- or session-scoped fixture of that module: such tests go to one
    pytest-xdist worker together (tests/scheduling.py), which makes the fixture once."""
    if _reads_the_shared_run(item):
        return None  # it goes last, and reads work that was made once whichever worker made it
    module = item.nodeid.split("::")[0]
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        if any(d.baseid == module and d.scope in ("module", "session") for d in defs):
            return module
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: a test that reads the shared run leaves the fast lane
def pytest_itemcollected(item):
    """A test that reads the shared CPU run reads the output of every notebook: an end-to-end test."""
    if _reads_the_shared_run(item):
        item.add_marker(pytest.mark.integration)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_order)
    for item in items:
        group = _module_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    scheduling.write_groups(config, items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own choice; absent without it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: one test at a time, a group at a time (tests/scheduling.py)."""
    return scheduling.make_scheduler(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_collection_finish(session):
    if any(_reads_the_shared_run(item) for item in session.items):
        SharedRun.of(session.config).start()


def pytest_sessionfinish(session):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller (or the one process): every worker is done
        SharedRun.of(session.config).stop()


@pytest.fixture(autouse=True)
def downloads_switch(monkeypatch):
    """A notebook's session that a test starts with download=false turns downloads off for its process
    (repro_studies.downloads); each test gets the switch back as it found it."""
    monkeypatch.setenv("REPRO_DOWNLOADS", os.environ.get("REPRO_DOWNLOADS", "on"))


@pytest.fixture(scope="session")
def cpu_run(pytestconfig) -> CpuRun:
    """The shared CPU run once it has ended, read by every test that only reads a run folder (they must not
    write into it)."""
    return SharedRun.of(pytestconfig).wait()

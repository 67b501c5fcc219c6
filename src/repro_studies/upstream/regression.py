"""Run the regression test written for vLLM's suite (``upstream-tests/``) against one release's own modules.

The test file is run as it is, by pytest in a child process, with :mod:`repro_studies.upstream.pytest_release`
making ``vllm`` mean the release's cached modules (as released, or the patched copy that ``patch -p1``
wrote) and taking the cases of the profile's :data:`SELECTIONS` (the file's ``conftest.py`` names older
releases' modules as today's). Every collected test gets one :class:`~repro.registry.SuiteOutcome`, typed
from the phase that decided it: the test's own ``assert_close`` failing is a bitwise mismatch (or, where
Triton's bounds-checked interpreter counted lanes aimed outside every argument, reads outside every tensor);
a GPU fault is a device fault; another exception, a setup, collection or import error, a skip and a test
that never ran are each their own outcome.

A device fault poisons the CUDA context, so the runner starts a fresh pytest on the tests not yet run
(at most ``max_restarts`` times); a test whose process died without a result is a fault too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro.paths import repo_root
from repro_studies.registry import SuiteOutcome as Outcome
from repro_studies.upstream import pytest_release as plugin
from repro_studies.upstream.pytest_release import Selection

TEST_FOLDER = "upstream-tests"
TEST_FILE = "test_dequantize_and_gather_strided_block_table.py"
INVALID_IDS_TEST = "test_dequantize_and_gather_k_cache_narrowed_block_table_invalid_ids"
#: The test file's cases per profile. In Triton's interpreter: the smallest block size and table, one and two
#: requests, through the dispatcher (which launches the Triton gather there). On a GPU: every case, the
#: invalid-id test through the Triton entries only (a release as released faults on it, and each fault costs a
#: fresh process; the dispatcher launches the same kernels, or the CuTe-DSL gather where that is installed).
SELECTIONS = {
    "cpu": Selection(every={"block_size": (16,), "width": (3,), "num_reqs": (1, 2), "entry": ("dispatcher",)}),
    "gpu": Selection(per_test={INVALID_IDS_TEST: {"entry": ("triton",)}}),
}


def suite_path() -> Path:
    return repo_root() / TEST_FOLDER / TEST_FILE


@dataclass
class SuiteRun:
    """One run of the test file against one release in one form."""

    release: str
    form: str  # released | patched
    rows: list[dict] = field(default_factory=list)  # one per test (and per collection error)
    loaded: dict = field(default_factory=dict)  # what the loader served (wheel, stubs, rewritten files)
    params: dict = field(default_factory=dict)  # test -> the test file's parameters for it
    processes: int = 0
    seconds: float = 0.0
    note: str = ""  # why tests stayed unrun, if any did

    def counts(self) -> dict[str, int]:
        found = {o.value: 0 for o in Outcome}
        for r in self.rows:
            found[r["outcome"]] += 1
        return found


def classify(events: list[dict]) -> dict:
    """A test's outcome from its phases' results (setup, call, teardown), in order."""
    by = {e["when"]: e for e in events}
    setup, call, teardown = by.get("setup"), by.get("call"), by.get("teardown")
    first = next((e for e in (setup, call, teardown) if e and e["outcome"] != "passed"), None)
    if setup is None:
        outcome, src = Outcome.NOT_RUN, {}
    elif first is None:
        outcome, src = Outcome.PASSED, call or setup
    elif first["outcome"] == "skipped":
        outcome, src = Outcome.SKIPPED, first
    elif first["when"] != "call":
        outcome, src = (Outcome.FAULT if first["fault"] else Outcome.ERROR), first
    elif first["fault"]:
        outcome, src = Outcome.FAULT, first
    elif first["exception"] == "AssertionError":
        outcome, src = (Outcome.OUT_OF_BOUNDS if first["out_of_bounds_lanes"] else Outcome.MISMATCH), first
    else:
        outcome, src = Outcome.OTHER, first
    return {
        "outcome": outcome.value,
        "message": src.get("message", ""),
        "out_of_view_lanes": (call or {}).get("out_of_view_lanes", 0),
        "out_of_bounds_lanes": (call or {}).get("out_of_bounds_lanes", 0),
        "seconds": sum(e.get("seconds", 0) for e in events),
    }


def _pytest_command(path: Path, node_ids: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        *(node_ids or [str(path)]),
        "-p",
        plugin.__name__,
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "--rootdir",
        str(path.parent),
    ]


def run_suite(
    release: str,
    form: str,
    patched_files: Path | None = None,
    cache_root: Path | None = None,
    selection: Selection = SELECTIONS["cpu"],
    interpreted: bool = True,
    max_restarts: int = 64,
    timeout_s: float = 600.0,
    say: Callable[[str], None] | None = None,
    test_file: Path | None = None,
) -> SuiteRun:
    """Run the test file (default: upstream-tests/'s) against ``release``'s modules (``patched_files``: the
    root of a patched copy)."""
    path = test_file or suite_path()
    say = say or (lambda text: None)
    run = SuiteRun(release, form)
    env = dict(os.environ)
    env.update(
        {
            plugin.ENV_RELEASE: release,
            plugin.ENV_CACHE: str(cache_root or ""),
            plugin.ENV_FILES: str(patched_files or ""),
            plugin.ENV_TAG: f"{release}+{form}",
            plugin.ENV_SELECT: selection.to_json(),
        }
    )
    if interpreted:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    # Only the plugin named on the command line: the file needs no other, and every installed plugin's package
    # would be imported (and rewritten for assertions, where bytecode is not written) in every such process.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    t0 = time.perf_counter()
    collected: dict[str, dict] = {}
    results: dict[str, list[dict]] = {}
    collect_errors: list[dict] = []
    remaining: list[str] = []
    with tempfile.TemporaryDirectory(prefix="upstream-test-") as tmp:
        while True:
            outcomes = Path(tmp) / f"outcomes-{run.processes}.jsonl"
            env[plugin.ENV_OUTCOMES] = str(outcomes)
            node_ids = [f"{path}::{n.split('::', 1)[1]}" for n in remaining]
            run.processes += 1
            try:
                proc = subprocess.run(
                    _pytest_command(path, node_ids), env=env, capture_output=True, text=True, timeout=timeout_s
                )
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                ended = f"pytest exited with {proc.returncode}: {' | '.join(tail)}"[:600]
            except subprocess.TimeoutExpired:
                ended = f"pytest did not finish within {timeout_s:g} s"
            started = None
            for line in outcomes.read_text().splitlines() if outcomes.exists() else []:
                event = json.loads(line)
                kind = event.pop("event")
                if kind == "loaded":
                    run.loaded = event
                elif kind == "stubs":
                    run.loaded.update(event)
                elif kind == "collected":
                    collected.setdefault(event["nodeid"], event["params"])
                elif kind == "collect-error":
                    collect_errors.append(event)
                elif kind == "start":
                    started = event["nodeid"]
                elif kind == "result":
                    results.setdefault(event["nodeid"], []).append(event)
            phases = results.get(started, [])
            if started is not None and all(e["when"] == "setup" and e["outcome"] == "passed" for e in phases):
                # the process died inside this test (a signal, a timeout): that is where it faulted
                results[started] = [
                    {"when": "setup", "outcome": "passed", "fault": False, "exception": "", "message": ""},
                    {"when": "call", "outcome": "failed", "fault": True, "exception": "", "message": ended},
                ]
            remaining = [n for n in collected if n not in results]
            if not collected and not collect_errors:
                collect_errors.append({"nodeid": path.name, "message": ended})
            if not remaining or collect_errors:
                break
            if run.processes > max_restarts:
                run.note = f"{len(remaining)} tests not run: the restart budget ({max_restarts}) is spent"
                break
            say(f"{release} {form}: {len(remaining)} tests left, starting a fresh process after a fault")
    for nodeid, params in collected.items():
        test = nodeid.split("::", 1)[1]
        run.params[test] = params
        run.rows.append({"test": test, **params, **classify(results.get(nodeid, []))})
    for err in collect_errors:
        run.rows.append({"test": err["nodeid"] or path.name, "outcome": Outcome.ERROR.value, "message": err["message"]})
    run.seconds = time.perf_counter() - t0
    return run

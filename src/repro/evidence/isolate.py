"""Run a case in its own process, so an illegal memory access (which poisons the CUDA context) or
a hang becomes a result row instead of ending the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from repro.evidence.cases import CaseResult
from repro.evidence.scenarios import ScenarioSpec

#: Error text that means the device faulted rather than the code raising.
FAULT_MARKERS = ("illegal memory access", "CUDA error", "unspecified launch failure", "Segmentation fault")


@dataclass
class ChildRun:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def run_child(cmd: list[str], timeout_s: float, env: dict | None = None) -> ChildRun:
    """Run ``cmd`` in a new process group; on timeout kill the whole group."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return ChildRun(proc.returncode, out or "", err or "", time.perf_counter() - t0, timed_out)


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _fault_line(text: str) -> str:
    for line in text.splitlines():
        if any(m in line for m in FAULT_MARKERS):
            return line.strip()[:300]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def case_command(spec: ScenarioSpec, implementation: str, checked: bool = False) -> list[str]:
    payload = json.dumps({"spec": spec.to_dict(), "implementation": implementation, "checked": checked})
    return [sys.executable, "-m", "repro.evidence.cases", payload]


def run_case_isolated(
    spec: ScenarioSpec,
    implementation: str,
    timeout_s: float = 120.0,
    wrapper: list[str] | None = None,
    env_extra: dict | None = None,
    checked: bool = False,
) -> tuple[CaseResult, ChildRun]:
    """One case in a child process (optionally under a wrapper such as compute-sanitizer)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    child = run_child([*(wrapper or []), *case_command(spec, implementation, checked)], timeout_s, env)
    if child.timed_out:
        return CaseResult(implementation, "timeout", error=f"no result within {timeout_s:g} s"), child
    data = _last_json(child.stdout)
    if data is None:
        result = CaseResult(
            implementation,
            "crashed",
            returncode=child.returncode,
            error=_fault_line(child.stderr) or f"exit code {child.returncode}, no result",
        )
        return result, child
    result = CaseResult(**data)
    result.returncode = child.returncode
    if result.status == "error" and any(m in result.error for m in FAULT_MARKERS):
        result.status = "crashed"
    return result, child

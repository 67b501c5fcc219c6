"""Run a case in its own process, so an illegal memory access (which poisons the CUDA context) or
a hang becomes a result row instead of ending the run.

Each child runs in a process group of its own, is killed with that group on a timeout or when the
caller is interrupted, and dies with the process that started it (``PR_SET_PDEATHSIG``): a run
that is killed leaves no case running.
"""

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
from repro.evidence.watchdog import die_with_parent

#: Error text that means the device faulted rather than the code raising.
FAULT_MARKERS = ("illegal memory access", "CUDA error", "unspecified launch failure", "Segmentation fault")


@dataclass
class ChildRun:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(cmd: list[str], timeout_s: float, env: dict | None = None) -> ChildRun:
    """Run ``cmd`` in a new process group that dies with this process; on timeout kill the whole group."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=die_with_parent(),
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    except BaseException:  # interrupted: the child goes with us
        _kill_group(proc)
        proc.wait()
        raise
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


def run_isolated_case(cmd: list[str], label: str, timeout_s: float, env: dict) -> tuple[CaseResult, ChildRun]:
    """Run a case command (one that prints its :class:`CaseResult` as the last stdout line) in a child; a hang
    is a ``timeout`` result, a child that dies before printing or reports a GPU fault a ``crashed`` one."""
    child = run_child(cmd, timeout_s, env)
    if child.timed_out:
        return CaseResult(label, "timeout", error=f"no result within {timeout_s:g} s"), child
    data = _last_json(child.stdout)
    if data is None:
        result = CaseResult(
            label,
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
    cmd = [*(wrapper or []), *case_command(spec, implementation, checked)]
    return run_isolated_case(cmd, implementation, timeout_s, env)


def check_implementation_isolated(path: str, param: str = "implementation", timeout_s: float = 120.0) -> dict:
    """Import and check ``path`` in a child process and return its provenance, so a module that exits,
    hangs or crashes on import is an :class:`~repro.registry.ImplementationError` instead of the end
    (or the hang) of the caller."""
    import secrets

    from repro.registry import ImplementationError

    token = secrets.token_hex(8)
    child = run_child([sys.executable, "-m", "repro.registry", path, param, token], timeout_s)
    if child.timed_out:
        raise ImplementationError(f"{param}: importing {path!r} did not finish within {timeout_s:g} s")
    lines = [ln for ln in child.stdout.strip().splitlines() if ln.strip()]
    answer = lines[-1][len(token) + 1 :] if lines and lines[-1].startswith(token + " ") else None
    if answer is not None and answer.startswith("ok ") and child.returncode == 0:
        return json.loads(answer[3:])
    if answer is not None and child.returncode == 2:
        raise ImplementationError(answer)
    detail = _fault_line(child.stderr) or (lines[-1][:300] if lines else "")
    raise ImplementationError(
        f"{param}: importing {path!r} ended the checking process (exit code {child.returncode}) before it "
        "could be checked" + (f": {detail}" if detail else "")
    )

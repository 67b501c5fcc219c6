"""Run a case in its own process, so an illegal memory access (which poisons the CUDA context) or
a hang becomes a result row instead of ending the run.

Each child runs in a process group of its own, is killed with that group on a timeout, when the caller
is interrupted and when it ends (whatever it left running in its group goes too), and dies with the
process that started it (``PR_SET_PDEATHSIG``): a run that is killed leaves no case running.

The child's result comes through :mod:`repro.core.evidence.channel`, never from its stdout. Its time limit
counts from the moment its case starts; the interpreter's start-up, imports and the scenario have their
own, generous limit. How a child that sent no result ended is named (:mod:`repro.outcomes`): a SIGSEGV
or SIGBUS during the case is a fault; an exit, another signal, a stall before the case started are
statuses of their own, none of them a fault.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields

from repro.core.evidence.cases import CaseResult
from repro.core.evidence.channel import ParentChannel
from repro.core.evidence.scenarios import ScenarioSpec
from repro.core.evidence.watchdog import CURRENT_CASE_ENV, current_case, die_with_parent
from repro.outcomes import FAULT_SIGNALS, Outcome, device_fault, out_of_memory, signal_name
from repro.registry import ImplementationError

#: Limit for a case's process to reach its case: interpreter, torch, the implementation's import, the scenario.
STARTUP_TIMEOUT_S = 300.0
#: Characters of a child's stdout and stderr kept (its end, where the error is).
OUTPUT_TAIL_CHARS = 64_000
#: How long a child that has sent its result may take to end before its group is killed.
EXIT_GRACE_S = 30.0
#: How often the parent looks at a running child.
POLL_S = 0.02


@dataclass
class ChildRun:
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float  # from the case's start (or the process's, if the case never started) to its end
    timed_out: bool
    started: bool = False  # the child reached its case
    result: dict | None = None  # what the child sent through its channel


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(fh) -> str:
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(max(0, size - OUTPUT_TAIL_CHARS * 4))
    return fh.read().decode(errors="replace")[-OUTPUT_TAIL_CHARS:]


def run_child(cmd: list[str], timeout_s: float, env: dict | None = None, startup_s: float | None = None) -> ChildRun:
    """Run ``cmd`` in a new process group that dies with this process, listening on a channel.

    ``startup_s`` None: ``timeout_s`` bounds the child's whole life. Otherwise the child has ``startup_s``
    to mark its case's start and ``timeout_s`` from there. On either limit the whole group is killed."""
    with ParentChannel() as channel, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child_env = channel.env(env)
        child_env.pop(CURRENT_CASE_ENV, None)  # the kernel's own current case; the child's is ours to know
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=child_env,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        clock, answered = t0, None
        deadline = t0 + (timeout_s if startup_s is None else startup_s)
        started = timed_out = False
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.perf_counter()
                if startup_s is not None and not started and channel.started():
                    started, clock, deadline = True, now, now + timeout_s
                if answered is None and channel.answered():  # the clock stops; the process may take a while to go
                    answered, deadline = now, now + EXIT_GRACE_S
                if now >= deadline:
                    _kill_group(proc)
                    proc.wait()
                    timed_out = answered is None
                    break
        except BaseException:  # interrupted: the child goes with us
            _kill_group(proc)
            proc.wait()
            raise
        _kill_group(proc)  # whatever the case left running in its group
        started = started or (startup_s is not None and channel.started())
        return ChildRun(
            proc.returncode,
            _tail(out),
            _tail(err),
            (answered or time.perf_counter()) - clock,
            timed_out,
            started,
            channel.result(),
        )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for line in lines:  # a device fault is named where CUDA says it, wherever that line is
        if device_fault(line) or out_of_memory(line):
            return line[:300]
    return lines[-1][:300] if lines else ""


def ending(child: ChildRun, timeout_s: float, startup_s: float) -> tuple[Outcome, str]:
    """(status, error) of a child that sent no result."""
    code = child.returncode
    said = _last_line(child.stderr)
    detail = f": {said}" if said else ""
    if child.timed_out:
        if child.started:
            return Outcome.TIMEOUT, f"no result within {timeout_s:g} s of the case's start (process group killed)"
        return Outcome.NOT_STARTED, f"the case's process did not reach its case within {startup_s:g} s"
    if code is not None and code < 0:
        name = signal_name(-code)
        if not child.started:
            return Outcome.NOT_STARTED, f"the case's process was ended by {name} before its case started{detail}"
        if -code in FAULT_SIGNALS:
            return Outcome.FAULTED, f"{name}: the case's process faulted during the case{detail}"
        if -code == signal.SIGKILL:
            return Outcome.KILLED, f"{name} during the case (the out-of-memory killer, or another process){detail}"
        return Outcome.KILLED, f"{name} during the case{detail}"
    if not child.started:
        return Outcome.NOT_STARTED, f"the case's process ended with exit code {code} before its case started{detail}"
    if out_of_memory(said):
        return Outcome.OUT_OF_MEMORY, f"exit code {code} during the case{detail}"
    return Outcome.EXITED, f"the case's process ended itself with exit code {code} during the case, no result{detail}"


def case_command(spec: ScenarioSpec, implementation: str, checked: bool = False) -> list[str]:
    payload = json.dumps({"spec": spec.to_dict(), "implementation": implementation, "checked": checked})
    return [sys.executable, "-m", "repro.core.evidence.cases", payload]


def run_isolated_case(
    cmd: list[str], label: str, timeout_s: float, env: dict, startup_s: float = STARTUP_TIMEOUT_S
) -> tuple[CaseResult, ChildRun]:
    """Run a case command (one that sends its :class:`CaseResult` through its channel) in a child; a child
    that sends nothing is a result whose status names how it ended."""
    with current_case(f"{label} (a case in a process of its own)"):
        child = run_child(cmd, timeout_s, env, startup_s)
    known = {f.name for f in fields(CaseResult)}
    if child.result is not None and child.result.keys() <= known and "status" in child.result:
        result = CaseResult(**{**child.result, "status": Outcome(child.result["status"])})
        result.returncode = child.returncode
        return result, child
    status, error = ending(child, timeout_s, startup_s)
    return CaseResult(label, status, returncode=child.returncode, error=error), child


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
    (or the hang) of the caller. The answer comes through the child's channel, never its stdout."""
    child = run_child([sys.executable, "-m", "repro.core.evidence.probe", path, param], timeout_s)
    if child.timed_out:
        raise ImplementationError(f"{param}: importing {path!r} did not finish within {timeout_s:g} s")
    answer = child.result or {}
    if child.returncode == 0 and isinstance(answer.get("provenance"), dict):
        return answer["provenance"]
    if child.returncode == 2 and isinstance(answer.get("error"), str):
        raise ImplementationError(answer["error"])
    code = child.returncode
    how = f"was ended by {signal_name(-code)}" if code is not None and code < 0 else f"exit code {code}"
    detail = _last_line(child.stderr) or _last_line(child.stdout)
    raise ImplementationError(
        f"{param}: importing {path!r} ended the checking process ({how}) before it could be checked"
        + (f": {detail}" if detail else "")
    )

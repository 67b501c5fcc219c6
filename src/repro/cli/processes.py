"""What a run starts, the run ends: processes left behind by the code under test are found and killed.

The runner makes itself the *child subreaper* of everything it starts (Linux ``PR_SET_CHILD_SUBREAPER``):
a process whose parent ends (``os.system("... &")``, a daemon that double-forks, a case's helper) is
re-parented to the runner instead of to ``init``, whatever session or process group it moved to. After
each notebook and at the end of the run, every process still below the runner is one nobody waits for:
it is killed and reaped, and the run records its command line.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


def become_subreaper(on: bool = True) -> bool:
    """Adopt orphaned descendants (Linux); False where the system cannot."""
    return _prctl is not None and _prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def _processes() -> dict[int, tuple[int, bool]]:
    """``{pid: (parent pid, is a zombie)}`` of every process."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(proc.name)] = (int(fields[1]), fields[0] == "Z")
    return out


def descendants(pid: int | None = None, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Every live process below ``pid`` (default: this one), those in ``exclude`` and below them left out."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, (parent, _) in _processes().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [c for c in children.get(root, []) if c not in exclude]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += [c for c in children.get(p, []) if c not in exclude]
    return found


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"


def end_leftovers(exclude: set[int] | frozenset[int] = frozenset(), wait_s: float = 5.0) -> list[str]:
    """Kill every process still below this one (but ``exclude``), reap those that are our children, and
    return ``"<command> (pid N)"`` for each that was still running (an ended one is only reaped)."""
    left = descendants(exclude=exclude)
    state = _processes()
    named = [f"{command_line(p)} (pid {p})" for p in left if not state.get(p, (0, True))[1]]  # zombies: reaped only
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    for p in left:
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(p, os.WNOHANG)
            except ChildProcessError:  # not our child (its parent reaps it) or already reaped
                break
            if done:
                break
            time.sleep(0.02)
    return named

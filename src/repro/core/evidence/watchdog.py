"""Bounds on a case's life: a time limit for cases run in this process, and child processes that
die with the process that started them.

A case run in this process cannot be killed on its own, so :func:`time_limit` raises
:class:`CaseTimeout` inside it when its time is up (a signal in the main thread, which also breaks a
blocking sleep; an asynchronous exception in any other thread). Code stuck in C never sees either,
so if the case has not returned ``grace_s`` later the whole process ends: a run then reports that
notebook as broken instead of waiting for the cell limit.

A child started with :func:`die_with_parent` as ``preexec_fn`` gets ``SIGKILL`` when the thread that
started it ends (Linux ``PR_SET_PDEATHSIG``), so a killed run leaves no case running on its own.

A case run in a notebook kernel's own process can end that process (a segfault, ``os._exit``); the file
named by :data:`CURRENT_CASE_ENV` (set by the runner for each kernel) holds the case running now, so the
runner can name the implementation and the case that took the kernel down.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

PR_SET_PDEATHSIG = 1
#: Environment variable naming the file that holds the in-process case running now (one line; empty: none).
CURRENT_CASE_ENV = "REPRO_CURRENT_CASE_FILE"

try:  # resolved here, never in a freshly forked child
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _prctl = None


class CaseTimeout(BaseException):
    """A case ran past its time limit (a BaseException, so a case's own ``except Exception`` cannot keep it)."""


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends (Linux only)."""
    if _prctl is None:
        return False
    return _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child is killed when this process (thread) ends."""
    parent = os.getpid()

    def preexec() -> None:
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return preexec


def _end_process(what: str, seconds: float, grace_s: float) -> None:
    msg = (
        f"repro: {what} ran past its {seconds:g} s limit and did not stop within {grace_s:g} s more "
        "(stuck outside Python); ending this process\n"
    )
    try:
        os.write(2, msg.encode())
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


_running: dict[int, str] = {}
_running_lock = threading.Lock()
_keys = itertools.count()


def _write_running(path: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write("; ".join(dict.fromkeys(_running.values())))
    except OSError:
        pass


@contextmanager
def current_case(what: str) -> Iterator[None]:
    """While the block runs, the file named by :data:`CURRENT_CASE_ENV` (if any) names ``what`` among the
    cases running now (several threads may each run one)."""
    path = os.environ.get(CURRENT_CASE_ENV)
    key = next(_keys)
    if path:
        with _running_lock:
            _running[key] = what
            _write_running(path)
    try:
        yield
    finally:
        if path:
            with _running_lock:
                _running.pop(key, None)
                _write_running(path)


@contextmanager
def time_limit(seconds: float | None, what: str = "case", grace_s: float = 30.0) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the calling thread after ``seconds``; end the process after ``grace_s`` more.

    ``seconds`` of ``None`` or ``<= 0`` means no limit. While the block runs it is the current case
    (:func:`current_case`).
    """
    with current_case(what):
        if not seconds or seconds <= 0:
            yield
        else:
            with _limited(seconds, what, grace_s):
                yield


@contextmanager
def _limited(seconds: float, what: str, grace_s: float) -> Iterator[None]:
    done = threading.Event()
    lock = threading.Lock()
    target = threading.get_ident()
    in_main = threading.current_thread() is threading.main_thread()
    message = f"{what}: no result within {seconds:g} s"

    def fire() -> None:
        with lock:
            if not done.is_set():
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(CaseTimeout))

    def backstop() -> None:
        if not done.wait(seconds + grace_s):
            _end_process(what, seconds, grace_s)

    previous = None
    if in_main:

        def on_alarm(signum, frame):
            if not done.is_set():
                raise CaseTimeout(message)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    else:
        timer = threading.Timer(seconds, fire)
        timer.daemon = True
        timer.start()
    guard = threading.Thread(target=backstop, name="repro-time-limit", daemon=True)
    guard.start()
    try:
        yield
    except CaseTimeout:
        raise CaseTimeout(message) from None
    finally:
        with lock:
            done.set()
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        else:
            timer.cancel()
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)  # drop one not yet raised

"""Ctrl-C, SIGTERM and SIGHUP end a run like Ctrl-C at every stage: results kept, exit code 130.

The handler raises ``KeyboardInterrupt`` and remembers the signal: Python prints and drops an exception raised
inside a weakref callback or a ``__del__`` (a signal that lands while the garbage collector runs one), so a run
that saw Ctrl-C could otherwise go on to its end. The runner asks :func:`received` after each notebook and
before it tells its verdict; such a dropped ``KeyboardInterrupt`` is not printed (the run's one line says it).
"""

from __future__ import annotations

import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _interrupt(signum, frame):
    _received.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def _unraisable(unraisable) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _received:
        return  # remembered: the run ends as interrupted and says so in its one line
    sys.__unraisablehook__(unraisable)


def install() -> None:
    """The handler for every signal of :data:`SIGNALS` (the command line's, from its start)."""
    for sig in SIGNALS:
        signal.signal(sig, _interrupt)
    sys.unraisablehook = _unraisable


def received() -> bool:
    """Whether a signal of :data:`SIGNALS` came since the command started (acted on or swallowed)."""
    return bool(_received)


def ignore() -> None:
    """Further signals wait: an interrupted run is recording how far it got, or a finished one its verdict."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)

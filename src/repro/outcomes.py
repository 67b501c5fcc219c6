"""How a gather case ended, named once: the ``status`` of a result row, written by the evidence that runs
cases and read by the analysis that judges them.

Only a named fault is a fault: the device reported an illegal address, a misaligned address or an
unspecified launch failure, or the case's own process died of SIGSEGV or SIGBUS while the case ran.
Every other way a case can end without an observation (it raised, ran out of memory, ran past its time
limit, was killed, exited, or never got to start) is its own status, says why, and is never the
signature of the bug.
"""

from __future__ import annotations

import re
import signal
from enum import StrEnum


class Outcome(StrEnum):
    """How a case ended, as its row's ``status`` records it (the words earlier runs' tables hold)."""

    OK = "ok"
    RAISED = "error"  # the implementation (or what it called) raised; the exception is named
    FAULTED = "crashed"  # a named fault
    TIMEOUT = "timeout"  # no result within the case's time limit, counted from the case's start
    OUT_OF_MEMORY = "out of memory"  # the device or the host ran out of memory
    KILLED = "killed"  # ended by a signal that is not a fault (SIGKILL: the out-of-memory killer, or a person)
    EXITED = "exited"  # the process ended itself (sys.exit, os._exit) during the case, without a result
    NOT_STARTED = "did not start"  # the case's process ended or stalled before the case began


#: Statuses of a case that observed nothing, for a reason that is not the bug's: each fails its check.
NO_OBSERVATION = tuple(o for o in Outcome if o not in (Outcome.OK, Outcome.FAULTED))

#: The device faults an out-of-bounds gather can cause, by name, and the words CUDA reports them with.
DEVICE_FAULTS = {
    "illegal address": "an illegal memory access was encountered",
    "misaligned address": "misaligned address",
    "unspecified launch failure": "unspecified launch failure",
}
#: Signals that end a process reading or writing memory it must not (a CPU-side out-of-bounds access).
FAULT_SIGNALS = (signal.SIGSEGV, signal.SIGBUS)
#: How PyTorch reports running out of device memory (``torch.OutOfMemoryError`` and the CUDA error).
OUT_OF_MEMORY_TEXT = re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|MemoryError")


def device_fault(text: str) -> str | None:
    """The named device fault ``text`` (an error message) reports, or None."""
    for name, words in DEVICE_FAULTS.items():
        if words in text:
            return name
    return None


def out_of_memory(text: str) -> bool:
    return bool(OUT_OF_MEMORY_TEXT.search(text))


def status_of_error(text: str) -> Outcome:
    """The status of a case that raised ``text``: a named device fault, out of memory, or raised."""
    if device_fault(text) is not None:
        return Outcome.FAULTED
    if out_of_memory(text):
        return Outcome.OUT_OF_MEMORY
    return Outcome.RAISED


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"

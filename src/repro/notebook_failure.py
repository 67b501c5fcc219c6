"""How a notebook of a run failed, as a value: the runner records it in the notebook's ``manifest.json`` entry
(``failure``, next to the ``error`` a reader reads) where it sees the failure happen, and everything that decides on a
failure (did the notebook finish? did it break?) reads this field, never the error's text.

Manifests written before the field existed record the kind only in the error's first word;
:func:`failure_of` reads those through :func:`_recorded_before_the_field`, the one place that looks at that text.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

#: The exception a notebook's checks gate raises (``repro.core.analysis.checks.ChecksFailed``; named here, where
#: the runner reads it from papermill's record of the cell, without importing pandas).
CHECKS_GATE = "ChecksFailed"


class NotebookFailure(StrEnum):
    """Why a notebook's status is ``failed``."""

    #: It ran to its end and its checks gate named failed checks: it finished, and its checks say what failed.
    CHECKS_FAILED = "checks_failed"
    #: A cell raised (any exception but the checks gate's) or papermill gave up on it (a cell's time limit).
    RAISED = "raised"
    #: The notebook's kernel died (a signal, an exit of its own).
    KERNEL_DIED = "kernel_died"
    #: papermill ended the notebook before its last cell without an error (``SystemExit(0)`` in a cell).
    CELLS_SKIPPED = "cells_skipped"
    #: The executed notebook could not be read back to see which cells ran.
    UNREADABLE = "unreadable"


def failure_of(entry: Mapping[str, Any]) -> NotebookFailure | None:
    """The failure a notebook's manifest entry records (None: it records none: ``ok``, running, interrupted or
    stopped by the run folder)."""
    if "failure" in entry:
        return NotebookFailure(entry["failure"]) if entry["failure"] else None
    return _recorded_before_the_field(entry)


def _recorded_before_the_field(entry: Mapping[str, Any]) -> NotebookFailure | None:
    """An entry of a manifest written before ``failure`` existed: the runner then wrote the error as
    ``<exception name>: <message>``, and the checks gate's name was the only kind anything decided on."""
    if entry.get("status") != "failed":
        return None
    error = str(entry.get("error") or "")
    return NotebookFailure.CHECKS_FAILED if error.startswith(f"{CHECKS_GATE}:") else NotebookFailure.RAISED

"""What each notebook wrote under ``results/``, as the run recorded it, and how a folder differs from that record.

Each notebook declares the tables and facts it writes (:func:`repro.ledger.declared`). As a notebook closes its
tables its kernel, which never runs the code under test (that runs in case processes), sends the runner each
file's rows, bytes and sha256; the runner records them per notebook (``tables`` in the notebook's ``manifest.json``
entry). A folder whose results differ from that record is damaged, whoever changed it: a recorded file missing,
short or changed, or a file no notebook of the run recorded (planted: another run's tables copied in). ``run``
fails on it, and ``report`` and ``--resume`` refuse it.

Runs recorded before the digests (``tables`` a list of paths) are checked for presence; runs recorded before the
list, not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from repro.ledger import declared, record_of
from repro.notebook_failure import NotebookFailure, failure_of

RESULTS = "results"
#: Statuses of a notebook that did not settle: it was running, interrupted or stopped by a file-system fault. Its
#: files are partial (``--resume`` discards them and runs it again); every other notebook's stand as recorded.
UNSETTLED = ("running", "interrupted", "stopped")


def read_record(path: Path) -> dict[str, Any] | None:
    """The record of the file at ``path`` as it is now (None when it cannot be read)."""
    try:
        return record_of(path.read_bytes(), path.name)
    except OSError:
        return None


def finished(entry: Mapping[str, Any]) -> bool:
    """A notebook that ran to its end: ``ok``, or stopped at its checks gate naming failed checks."""
    return entry.get("status") == "ok" or failure_of(entry) == NotebookFailure.CHECKS_FAILED


def broke(entry: Mapping[str, Any]) -> bool:
    """A notebook that did not run to its end (failed, or was still running, interrupted or stopped)."""
    return not finished(entry)


def settled(entry: Mapping[str, Any]) -> bool:
    """A notebook whose outcome stands (finished, failed checks or broke): ``--resume`` keeps it as it is."""
    return isinstance(entry, Mapping) and str(entry.get("status") or "") not in ("", *UNSETTLED)


def _inside(rel: PurePosixPath) -> bool:
    return rel.parts[:1] == (RESULTS,) and ".." not in rel.parts and len(rel.parts) == 2


def _owner(name: str, notebooks: Mapping[str, Any]) -> str | None:
    return next((nb for nb in notebooks if nb[:3] == name[:3]), None)


def problems(path: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Every way ``path``'s results differ from what its notebooks recorded, one line each ([] when none)."""
    notebooks = {k: v for k, v in (manifest.get("notebooks") or {}).items() if isinstance(v, Mapping)}
    out: list[str] = []
    recorded: dict[str, set[str]] = {}
    for notebook, entry in notebooks.items():
        tables = entry.get("tables")
        if tables is None or not settled(entry):
            continue
        names = list(tables) if isinstance(tables, (Mapping, list)) else []
        recorded[notebook] = set()
        for name in names:
            rel = PurePosixPath(str(name))
            if not _inside(rel):
                out.append(f"{rel} (recorded by {notebook}) is not a file under results/")
                continue
            recorded[notebook].add(rel.name)
            if (names_here := declared(notebook)) is not None and rel.name not in names_here:
                out.append(f"{rel} is not a table {notebook} writes: planted")
            want = tables[name] if isinstance(tables, Mapping) else None
            now = read_record(path / rel) if (path / rel).is_file() else None
            if now is None:
                out.append(f"{rel} (written by {notebook}) is missing, though {'manifest.json'} records it")
            elif isinstance(want, Mapping) and now["rows"] < _int(want.get("rows")):
                out.append(
                    f"{rel} (written by {notebook}) holds {now['rows']} rows of the {want['rows']} it wrote: short"
                )
            elif isinstance(want, Mapping) and now["sha256"] != want.get("sha256"):
                out.append(
                    f"{rel} (written by {notebook}) differs from what it wrote ({now['rows']} rows, {now['bytes']} "
                    f"bytes; recorded {want.get('rows')} rows, {want.get('bytes')} bytes): changed"
                )
    if not recorded:  # a run recorded before the runner kept each notebook's files: nothing to hold them to
        return out
    results = path / RESULTS
    for file in sorted(results.iterdir()) if results.is_dir() else []:
        owner = _owner(file.name, notebooks)
        if owner is None:
            out.append(f"{RESULTS}/{file.name} was written by no notebook of this run: planted")
        elif owner in recorded and file.name not in recorded[owner]:
            out.append(f"{RESULTS}/{file.name} is not among the files {owner} recorded: planted")
    return out


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0

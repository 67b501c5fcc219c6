"""Which result files each notebook wrote, as the run recorded them, and which of them a folder lost.

The runner records, per notebook, the files that notebook added under ``results/`` (``tables`` in its
``manifest.json`` entry). A notebook the manifest calls finished (``ok``, or ended at its checks gate)
must still have every one: a lost table would silently drop a bug from the verdict, so the folder is
damaged. Notebooks that did not finish, and runs recorded before the runner kept the list, are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from repro.core.analysis.checks import ChecksFailed


def finished(entry: Mapping[str, Any]) -> bool:
    """A notebook that ran to its end: ``ok``, or stopped at its checks gate naming failed checks."""
    return entry.get("status") == "ok" or str(entry.get("error") or "").startswith(ChecksFailed.__name__)


def lost_tables(path: Path, manifest: Mapping[str, Any]) -> list[str]:
    """``results/<file> (written by <notebook>)`` for every recorded file of a finished notebook that ``path``
    no longer holds; a record that names no file under ``results/`` counts as lost too."""
    lost = []
    for notebook, entry in (manifest.get("notebooks") or {}).items():
        if not isinstance(entry, Mapping) or not finished(entry):
            continue
        for name in entry.get("tables") or []:
            rel = PurePosixPath(str(name))
            inside = rel.parts[:1] == ("results",) and ".." not in rel.parts and len(rel.parts) == 2
            if not inside or not (path / rel).is_file():
                lost.append(f"{rel} (written by {notebook})")
    return lost

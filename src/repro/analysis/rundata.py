"""A run folder, read once: the manifest, every result table and every facts file.

Analysis and rendering receive a :class:`RunData`; nothing above this module opens a run
folder's files again. A damaged folder is one :class:`RunFolderError` naming the file and what is
wrong with it, raised before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.analysis.checks import failed_checks, is_check_table

RESULTS = "results"
MANIFEST = "manifest.json"
#: Manifest statuses of a run that finished every notebook it was asked to run.
FINISHED = ("complete", "failed")


class RunFolderError(ValueError):
    """A run folder that cannot be read; the message names the file."""


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    facts: dict[str, dict[str, Any]]
    files: list[str] = field(default_factory=list)  # run-folder-relative paths of the raw data

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def environment(self) -> dict[str, Any]:
        return self.manifest.get("environment", {})

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "unknown"))

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def table(self, name: str) -> pd.DataFrame | None:
        return self.tables.get(name)

    def check_tables(self) -> dict[str, pd.DataFrame]:
        return {k: t for k, t in self.tables.items() if is_check_table(t)}

    def failures(self) -> list[str]:
        return [f for t in self.check_tables().values() for f in failed_checks(t)]


def _read_manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST
    if not file.is_file():
        raise RunFolderError(f"{path} holds no {MANIFEST}: not a run folder")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{file}: expected a JSON object, found {type(data).__name__}")
    return data


def _read_table(file: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(file, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise RunFolderError(f"{file}: empty file (no header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{file}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    return frame


def load_run(path: str | Path) -> RunData:
    """Read a run folder's manifest, ``results/*.csv`` and ``results/*.json`` once."""
    path = Path(path)
    if not path.is_dir():
        raise RunFolderError(f"{path}: no such run folder")
    manifest = _read_manifest(path)
    results = path / RESULTS
    tables = {p.stem: _read_table(p) for p in sorted(results.glob("*.csv"))}
    facts = {}
    for p in sorted(results.glob("*.json")):
        try:
            facts[p.stem] = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunFolderError(f"{p}: not valid JSON ({exc})") from None
    files = sorted(p.relative_to(path).as_posix() for p in results.glob("*")) if results.is_dir() else []
    return RunData(path, manifest, tables, facts, files)

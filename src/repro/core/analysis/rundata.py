"""A run folder, read once: the manifest, every result table and every facts file.

Analysis and rendering receive a :class:`RunData`; nothing above this module opens a run
folder's files again. A damaged folder is one :class:`RunFolderError` naming the file and what is
wrong with it, raised before anything is written.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.core.analysis import written
from repro.core.analysis.checks import failed_checks, is_check_table
from repro.core.analysis.reshape import RECORDED_CHECKS

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


#: Manifest entries the report reads as objects (when present).
MANIFEST_OBJECTS = ("parameters", "environment", "notebooks", "implementations")
#: Columns every check table has (``variant`` and ``num_reqs`` only where they apply).
CHECK_COLUMNS = ("notebook", "check", "expected", "observed", "ok")
#: What an ``ok`` cell may hold.
OK_VALUES = ("true", "false", "1", "0")


def _read_manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST
    if not file.is_file():
        raise RunFolderError(f"{path} holds no {MANIFEST}: not a run folder")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{file}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise RunFolderError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{file}: expected a JSON object, found {type(data).__name__}")
    for key in MANIFEST_OBJECTS:
        if key in data and not isinstance(data[key], dict):
            raise RunFolderError(f"{file}: '{key}' should be a JSON object, found {type(data[key]).__name__}")
    if not isinstance(data.get("status", ""), str):
        raise RunFolderError(f"{file}: 'status' should be a string, found {type(data['status']).__name__}")
    return data


def _check_shape(file: Path, text: str) -> None:
    """Every row as wide as the header and the last one ended: a table cut off mid-write is damaged."""
    if "\x00" in text:
        raise RunFolderError(f"{file}: holds NUL bytes, which no table writer puts there: a damaged file")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise RunFolderError(f"{file}: empty file (no header)")
    if len(rows) == 1:
        raise RunFolderError(f"{file}: a header and no rows (tables are written a whole row at a time)")
    if not text.endswith("\n"):
        raise RunFolderError(f"{file}: the last row is cut off (no line end): the file was truncated")
    width = len(rows[0])
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise RunFolderError(f"{file}: line {number} has {len(row)} fields, the header {width}: a damaged table")


def _read_table(file: Path) -> pd.DataFrame:
    try:
        text = file.read_text()
        _check_shape(file, text)
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        raise RunFolderError(f"{file}: empty file (no header)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, csv.Error) as exc:
        raise RunFolderError(f"{file}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise RunFolderError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    if "ok" in frame.columns or "check" in frame.columns:
        missing = [c for c in CHECK_COLUMNS if c not in frame.columns]
        if missing:
            raise RunFolderError(f"{file}: a check table without the column(s) {', '.join(missing)}")
        bad = frame["ok"].map(lambda v: str(v).strip().lower() not in OK_VALUES)
        if bad.any():
            first = int(bad.to_numpy().nonzero()[0][0])
            raise RunFolderError(
                f"{file}: line {first + 2} has ok = {frame['ok'].iloc[first]!r}; a check is True or False"
            )
        frame["check"] = frame["check"].replace(RECORDED_CHECKS)  # an older run's name of a check: today's
    return frame


def load_run(path: str | Path, manifest: dict[str, Any] | None = None) -> RunData:
    """Read a run folder's manifest, ``results/*.csv`` and ``results/*.json`` once. Results that differ from what
    the run's notebooks recorded (missing, short, changed or planted: :mod:`repro.core.analysis.written`) are a
    damaged folder. ``manifest``: the runner's own record, which it holds in memory, instead of the file's."""
    path = Path(path)
    if not path.is_dir():
        raise RunFolderError(f"{path}: no such run folder")
    manifest = _read_manifest(path) if manifest is None else manifest
    damage = written.problems(path, manifest)
    if damage:
        more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
        raise RunFolderError(f"{path}: {damage[0]}{more}: a damaged folder")
    results = path / RESULTS
    tables = {p.stem: _read_table(p) for p in sorted(results.glob("*.csv"))}
    facts = {}
    for p in sorted(results.glob("*.json")):
        try:
            facts[p.stem] = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunFolderError(f"{p}: not valid JSON ({exc})") from None
        except OSError as exc:
            raise RunFolderError(f"{p}: cannot be read ({exc.strerror or exc})") from None
        if not isinstance(facts[p.stem], dict):
            raise RunFolderError(f"{p}: expected a JSON object, found {type(facts[p.stem]).__name__}")
    files = sorted(p.relative_to(path).as_posix() for p in results.glob("*")) if results.is_dir() else []
    return RunData(path, manifest, tables, facts, files)

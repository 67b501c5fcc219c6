"""The channel between a case's own process and its parent: a private folder, never the child's stdout.

The code under test shares the child's stdout and stderr, so nothing the parent believes is read from
them: a JSON line an implementation prints is only output. The parent makes a private folder and names it
in the child's environment; the child takes the name out of its environment before any code under test
is imported, marks the moment its case starts (:func:`case_started`; the case's time limit counts from
there, not from the interpreter's start-up) and writes its result there as one JSON file, atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

ENV = "REPRO_CASE_CHANNEL"
#: Environment variable naming the folder an implementation is imported from in every process of a run (the
#: command's own working folder; the runner sets it, a case process starts there).
IMPORT_DIR_ENV = "REPRO_IMPORT_DIR"
STARTED = "started"
RESULT = "result.json"


class ChildChannel:
    """The child's end; one per process, opened before the code under test is imported."""

    _open: ChildChannel | None = None

    def __init__(self, folder: Path):
        self.folder = folder
        self._started = False

    @classmethod
    def open(cls) -> ChildChannel | None:
        """This process's channel, taken out of its environment (None when the process was not started by a
        parent listening on one, e.g. by hand)."""
        if cls._open is None:
            folder = os.environ.pop(ENV, None)
            if folder:
                cls._open = cls(Path(folder))
        return cls._open

    def started(self) -> None:
        if not self._started:
            self._started = True
            (self.folder / STARTED).write_text(f"{time.time()}\n")

    def send(self, data: dict) -> None:
        tmp = self.folder / f"{RESULT}.tmp"
        tmp.write_text(json.dumps(data, default=str))
        tmp.replace(self.folder / RESULT)


def case_started() -> None:
    """Called just before the implementation runs: from here on the case's time limit counts."""
    if ChildChannel._open is not None:
        ChildChannel._open.started()


class ParentChannel:
    """The parent's end: the folder, whether the case started, and what the child sent."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="repro-case-"))
        self.folder.chmod(0o700)

    def env(self, base: dict | None) -> dict:
        return {**(os.environ if base is None else base), ENV: str(self.folder)}

    def started(self) -> bool:
        return (self.folder / STARTED).exists()

    def answered(self) -> bool:
        return (self.folder / RESULT).exists()

    def result(self) -> dict | None:
        try:
            data = json.loads((self.folder / RESULT).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> ParentChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

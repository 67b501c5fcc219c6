"""The real runner with a stand-in for papermill: each "notebook" writes its tables through the library's own table
writer and sends the runner what it wrote, as a notebook's last cell does (``Session.close``). A run of every
notebook takes a fraction of a second, so tests can drive the runner's bookkeeping (manifest, ledger, resume,
verdict) over many inputs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from repro.core.analysis.checks import ChecksFailed
from repro.core.evidence.results import ResultTable
from repro.notebook_failure import NotebookFailure

#: ``script(run_dir, tables) -> status fields``: what one notebook does; it appends the tables it opened.
Script = Callable[[Path, list], dict]


def check_row(ok: bool, n: int = 2) -> dict:
    return {"check": "a check", "variant": "fixed", "num_reqs": n, "expected": "ok", "observed": "seen", "ok": ok}


class FakeNotebooks:
    """``execute_notebook`` for the runner: per notebook stem, a :data:`Script` (``default`` for any other);
    each call is counted."""

    def __init__(self, scripts: dict[str, Script], default: Script | None = None):
        self.scripts, self.default, self.calls = scripts, default, []

    def __call__(self, src, dst, parameters, progress, kernel):
        stem = Path(src).stem
        self.calls.append(stem)
        run_dir = Path(parameters["run_dir"])
        tables: list = []
        try:
            status = (self.scripts.get(stem) or self.default)(run_dir, tables)
        finally:
            fd = getattr(kernel, "_ledger_write", None)  # what a notebook's last cell sends (Session.close)
            if fd is not None and fd >= 0 and tables:
                ledger = {f"results/{t.path.name}": t.record() for t in tables}
                os.write(fd, (json.dumps(ledger) + "\n").encode())
            kernel.close()
        dst.write_text("{}")
        return {"status": "ok", "error": "", "seconds": 0.0, **status}


def writes(stem: str, name: str, *oks: bool) -> Script:
    """A notebook that writes ``results/<name>.csv``, one check row per ``ok``, and fails at its checks gate when
    any is False."""

    def script(run_dir: Path, tables: list) -> dict:
        table = ResultTable(run_dir, name, stem)
        tables.append(table)
        for i, ok in enumerate(oks):
            table.append(check_row(ok, i + 1))
        if all(oks):
            return {}
        return {
            "status": "failed",
            "failure": NotebookFailure.CHECKS_FAILED,
            "error": f"{ChecksFailed.__name__}: {oks.count(False)} failed check(s)",
        }

    return script


def interrupted(run_dir: Path, tables: list) -> dict:
    raise KeyboardInterrupt

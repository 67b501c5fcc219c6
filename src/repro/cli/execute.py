"""One notebook through papermill: a quiet kernel tied to the run, every cell run or the notebook failed, and
a kernel that died named by its signal or exit code and the case it was running.

papermill takes a ``SystemExit(0)`` raised in a cell as success and runs no further cell; here a notebook
counts as run only when every code cell ran to its end (papermill's own per-cell status says so).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from repro.cli.kernels import kernel_manager_class
from repro.cli.runfolder import RunLock
from repro.ledger import LEDGER_FD_ENV
from repro.notebook_failure import CHECKS_GATE, NotebookFailure
from repro.outcomes import signal_name
from repro.paths import repo_root

#: Per-cell execution limit; every case has its own, far shorter limit (``case_timeout_s``).
CELL_TIMEOUT_S = 1800


def shown_path(path: Path) -> str:
    """``path`` relative to the checkout root when inside it (commands are run from there), else absolute."""
    absolute = path.resolve()
    try:
        return absolute.relative_to(repo_root()).as_posix()
    except ValueError:
        return str(absolute)


class KernelWatch:
    """One notebook kernel's log, the file where it names the in-process case it runs, its exit status, and the
    pipe through which it sends the runner what it wrote (its ledger)."""

    def __init__(self, run_dir: Path, name: str, lock: RunLock):
        self.run_dir = run_dir
        self.log = run_dir / "logs" / f"{name}.kernel.log"
        self.case_file = run_dir / "logs" / f"{name}.current-case"
        self.ending: dict = {}
        self.lock = lock
        self._ledger_read, self._ledger_write = os.pipe()
        os.set_blocking(self._ledger_read, False)
        self._received = b""

    def engine(self) -> dict:
        """papermill options: a quiet kernel logging to ``logs/<name>.kernel.log``, holding the lock and the
        ledger pipe's writing end."""
        fds = (*((self.lock.fd,) if self.lock.fd is not None else ()), self._ledger_write)
        env = {LEDGER_FD_ENV: str(self._ledger_write)}
        return {"kernel_manager_class": kernel_manager_class(self.log, fds, self.case_file, self.ending, env)}

    def ledger(self) -> dict | None:
        """What the kernel sent as it closed its results (its last line), or None when it sent nothing."""
        while True:
            try:
                chunk = os.read(self._ledger_read, 1 << 16)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            self._received += chunk
        lines = [ln for ln in self._received.splitlines() if ln.strip()]
        try:
            data = json.loads(lines[-1]) if lines else None
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def death(self) -> str:
        """``the notebook kernel was ended by SIGSEGV while running <case>; ...``: what ended a dead kernel."""
        proc = self.ending.get("process")
        code = proc.poll() if proc is not None else self.ending.get("returncode")
        if code is None:
            how = "died (exit status unknown)"
        elif code < 0:
            how = f"was ended by {signal_name(-code)}"
        else:
            how = f"ended itself with exit code {code}"
        try:
            case = self.case_file.read_text().strip()
        except OSError:
            case = ""
        where = f"while running {case}" if case else "outside any case"
        log = shown_path(self.log) if self.log.is_file() else "(no kernel log)"
        return f"KernelDied: the notebook kernel {how} {where}; its log: {log}"

    def close(self) -> None:
        self.case_file.unlink(missing_ok=True)
        self.ledger()  # drained while the read end is open
        for fd in (self._ledger_read, self._ledger_write):
            try:
                os.close(fd)
            except OSError:
                pass
        self._ledger_read = self._ledger_write = -1


def unexecuted(executed: Path) -> tuple[NotebookFailure, str] | None:
    """None when papermill ran every code cell of the executed notebook to its end, else how and where it stopped."""
    try:
        cells = [c for c in json.loads(executed.read_text())["cells"] if c.get("cell_type") == "code"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return NotebookFailure.UNREADABLE, f"NotebookUnreadable: {executed} cannot be read back ({exc})"
    for number, cell in enumerate(cells, start=1):
        if (cell.get("metadata", {}).get("papermill") or {}).get("status") == "completed":
            continue
        error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        why = f" by {error.get('ename')}: {error.get('evalue')}" if error else ""
        return NotebookFailure.CELLS_SKIPPED, (
            f"NotebookStopped: code cell {number} of {len(cells)} ended the notebook{why}; "
            f"{len(cells) - number} cell(s) after it never ran"
        )
    return None


def execute_notebook(src: Path, dst: Path, parameters: dict, progress: bool, kernel: KernelWatch) -> dict:
    """One notebook through papermill's API; failures become a status (``failure`` says which kind, ``error`` what
    happened), never an exception. A notebook that did not run every cell failed, whatever papermill says. A write
    the run folder refused, by the runner or a cell, is the run's fault, not the notebook's: it raises
    :class:`repro.core.evidence.results.RunFolderWriteError`."""
    import papermill as pm  # lazy: papermill and nbclient, only to run a notebook
    from nbclient.exceptions import DeadKernelError  # lazy: as papermill

    t0 = time.perf_counter()
    status = {"status": "ok", "error": ""}
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters=parameters,
            kernel_name="python3",
            progress_bar=progress,
            execution_timeout=CELL_TIMEOUT_S,
            request_save_on_cell_execute=True,
            cwd=str(repo_root()),
            **kernel.engine(),
        )
    except pm.PapermillExecutionError as exc:
        from repro.core.evidence.results import RunFolderWriteError  # lazy: pandas

        if exc.ename == RunFolderWriteError.__name__:  # a cell's write the run folder refused
            raise RunFolderWriteError(None, (exc.evalue or exc.ename).splitlines()[0]) from None
        kind = NotebookFailure.CHECKS_FAILED if exc.ename == CHECKS_GATE else NotebookFailure.RAISED
        status = {"status": "failed", "failure": kind, "error": f"{exc.ename}: {exc.evalue}", "cell": exc.exec_count}
    except KeyboardInterrupt:
        raise
    except DeadKernelError:
        status = {"status": "failed", "failure": NotebookFailure.KERNEL_DIED, "error": kernel.death()}
    except OSError as exc:  # papermill could not write the executed notebook: the run folder's fault
        from repro.core.evidence.results import RunFolderWriteError  # lazy: pandas

        raise RunFolderWriteError.of(dst, exc) from None
    except Exception as exc:  # cell timeout, ...
        status = {"status": "failed", "failure": NotebookFailure.RAISED, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    finally:
        kernel.close()
    if status["status"] == "ok":
        stopped = unexecuted(dst)
        if stopped:
            status = {"status": "failed", "failure": stopped[0], "error": stopped[1]}
    status["seconds"] = round(time.perf_counter() - t0, 1)
    return status

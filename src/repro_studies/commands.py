"""The studies' part of the command line (:class:`repro.cli.main.Merge`, entry point ``commands`` of
:mod:`repro.plugins`): ``python -m repro report OUT --merge RUN...`` merges notebook 04's release matrices, one per
CI job, into one folder with its report."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from repro.cli.main import Merge, is_folder
from repro.cli.runfolder import RunFolderError, RunLock
from repro_studies.tables import Table

#: The table a merge needs in at least one of its inputs (notebook 04's).
MATRIX = Table.RELEASE_MATRIX


def merge_matrices(out_dir: str, run_dirs: list[str]) -> int:
    """Every input is read and checked first (each under a shared lock, as ``--against`` reads), then ``OUT`` is
    written under its own lock like any writer. A damaged input, an input no run folder, no matrix table in any
    input, or an ``OUT`` that is a run folder: one line, exit 2, nothing written."""
    from repro.core.analysis.rundata import MANIFEST, load_run  # lazy: pandas, only to read a run
    from repro.core.analysis.rundata import RunFolderError as DamagedRun  # lazy: pandas, only to read a run
    from repro_studies.report.releases import merge_command  # lazy: matplotlib, only to write a report

    out = Path(out_dir)
    try:
        if (out / MANIFEST).exists():
            raise RunFolderError(
                f"report: {out} holds a run (its {MANIFEST}); accepted: a new folder or an earlier merge's folder"
            )
        with contextlib.ExitStack() as readers:
            runs = []
            for d in run_dirs:
                if not is_folder(Path(d)):
                    raise RunFolderError(f"--merge: {d}: no such run folder")
                readers.enter_context(RunLock(Path(d), "report --merge", exclusive=False).acquire("--merge"))
                runs.append(load_run(d))
            if not any(run.table(MATRIX) is not None for run in runs):
                raise RunFolderError(
                    f"--merge: none of {', '.join(run_dirs)} holds results/{MATRIX}.csv; accepted: run folders of "
                    "notebook 04"
                )
            out.mkdir(parents=True, exist_ok=True)
            with RunLock(out, "report --merge").acquire("report"):
                return merge_command(out, runs)
    except (RunFolderError, DamagedRun, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


MERGE = Merge(
    help="merge the release-matrix tables of these run folders (one CI job per release and runner) into RUN_DIR "
    "(a new folder or an earlier merge's; each input is checked first)",
    run=merge_matrices,
)

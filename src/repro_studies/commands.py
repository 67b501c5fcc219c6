"""The studies' part of the command line (:class:`repro.cli.main.Merge`, entry point ``commands`` of
:mod:`repro.plugins`): ``python -m repro report OUT --merge RUN...`` merges notebook 04's release matrices, one per
CI job, into one run folder with its report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from repro.cli.main import Merge
from repro.tables import Table

if TYPE_CHECKING:  # annotations only: pandas is imported where a run is read
    from repro.core.analysis.rundata import RunData


def merge_matrices(out: Path, runs: list[RunData]) -> int:
    from repro_studies.report.releases import merge_command  # lazy: matplotlib, only to write a report

    return merge_command(out, runs)


MERGE = Merge(
    table=Table.RELEASE_MATRIX,
    notebook="04",
    help="merge the release-matrix tables of these run folders (one CI job per release and runner) into RUN_DIR "
    "(a new folder or an earlier merge's; each input is checked first)",
    command=merge_matrices,
)

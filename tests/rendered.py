"""Each committed run rendered once per test process: several modules compare the same renderings (report.md,
pr-comment.md, the report notebook's HTML fragment) with what is committed or with each other."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from repro.core.analysis.rundata import RunData, load_run
from repro.report.build import render_run

#: The committed runs `make test` renders, one of each kind: the CPU runs, the notebooks 01-03 GPU runs, the run of an
#: implementation under test, a Triton, a CuTe-DSL and a pinned-stack release matrix; between them they reach every
#: section. The other release matrices are the same code on other releases' evidence: `make audit` renders them.
CODE_RUNS = frozenset(
    {
        "make-run",
        "reshape-releases",
        "who-is-affected",
        "gpu-profile",
        "gpu-profile-vllm",
        "gpu-profile-vllm-0.34",
        "vllm-0.22.0-under-test",
        "release-matrix-0.33",
        "release-matrix-0.34-cutedsl",
        "release-matrix-pinned-4.7.1-0.6.5",
    }
)


def committed_run(path: Path):
    """A committed run folder as a test parameter: marked ``audit`` (`make audit` alone) unless it is one of
    :data:`CODE_RUNS`."""
    return pytest.param(path, id=path.name, marks=() if path.name in CODE_RUNS else pytest.mark.audit)


@dataclass(frozen=True)
class Rendering:
    run: RunData
    figures: list[str]  # the names of the figures drawn
    markdown: str  # report.md
    tables: list[pd.DataFrame]  # every table report.md shows, as shown, in order
    comment: str  # pr-comment.md
    fragment: str  # the report notebook's HTML fragment


@functools.cache
def rendering(path: Path) -> Rendering:
    """``path``'s run analysed once, its figures drawn once, everything rendered from them."""
    run = load_run(path)
    report = render_run(run)
    try:
        html = report.html_fragment()
    finally:
        report.close()
    names = [f.name for f in report.figures]
    return Rendering(run, names, report.markdown.text, report.markdown.tables, report.comment, html)

"""Each committed run rendered once per test process: several modules compare the same renderings (report.md,
pr-comment.md, the report notebook's HTML fragment) with what is committed or with each other."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from repro.core.analysis.rundata import RunData, load_run
from repro.report.build import render_run


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

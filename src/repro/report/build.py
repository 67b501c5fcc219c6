"""``python -m repro report RUN_DIR``: figures, ``report.md`` and ``report.html`` from one loaded run."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from repro.analysis.rundata import RunData
from repro.report import plots
from repro.report.html import build_html
from repro.report.markdown import render_comparison, render_markdown


def write_markdown(run: RunData) -> Path:
    """Redraw every figure from the tables and write ``report.md``: all drawn and rendered in memory
    first, so a table the report cannot use raises before any file of the folder is replaced."""
    figures = plots.draw_all(run)
    try:
        text = render_markdown(run, list(figures))
        for name, fig in figures.items():
            plots.save(fig, run.path, name)
    finally:
        for fig in figures.values():
            plt.close(fig)
    md_path = run.path / "report.md"
    md_path.write_text(text)
    return md_path


def build_report(run: RunData, progress: bool = False, **engine) -> tuple[Path, Path]:
    """Write the figures and ``report.md``, then ``report.html``; ``engine`` goes to papermill (the
    command line's quiet kernel)."""
    return write_markdown(run), build_html(run, progress, **engine)


def write_comparison(run_a: RunData, run_b: RunData) -> Path:
    out = run_a.path / f"comparison-vs-{run_b.path.resolve().name}.md"
    out.write_text(render_comparison(run_a, run_b))
    return out

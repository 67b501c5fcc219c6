"""``python -m repro report RUN_DIR``: figures, ``report.md`` and ``report.html`` from one loaded run."""

from __future__ import annotations

from pathlib import Path

from repro.analysis.rundata import RunData
from repro.report import plots
from repro.report.html import build_html
from repro.report.markdown import render_comparison, render_markdown


def build_report(run: RunData, progress: bool = False, **engine) -> tuple[Path, Path]:
    """Redraw every figure from the tables, then write ``report.md`` and ``report.html``; ``engine`` goes
    to papermill (the command line's quiet kernel)."""
    names = plots.write_all(run)
    md_path = run.path / "report.md"
    md_path.write_text(render_markdown(run, names))
    return md_path, build_html(run, progress, **engine)


def write_comparison(run_a: RunData, run_b: RunData) -> Path:
    out = run_a.path / f"comparison-vs-{run_b.path.resolve().name}.md"
    out.write_text(render_comparison(run_a, run_b))
    return out

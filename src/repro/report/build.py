"""``python -m repro report RUN_DIR``: the run analysed once, then figures, ``report.md``,
``pr-comment.md`` and ``report.html`` drawn from that analysis."""

from __future__ import annotations

from pathlib import Path

from repro.analysis.rundata import RunData
from repro.report import plots
from repro.report.analyse import analyse, draw
from repro.report.comment import render_comment
from repro.report.html import build_html
from repro.report.markdown import render_comparison, render_markdown

REPORT, COMMENT = "report.md", "pr-comment.md"


def write_markdown(run: RunData) -> Path:
    """Redraw every figure and write ``report.md`` and ``pr-comment.md``: all drawn and rendered in memory
    first, so a table the report cannot use raises before any file of the folder is replaced. PNGs of
    figures no longer drawn are removed."""
    analysis = analyse(run)
    figures = draw(analysis)
    try:
        text = render_markdown(analysis, figures)
        comment = render_comment(analysis)
        plots.save_all(figures, run.path)
    finally:
        plots.close_all(figures)
    (run.path / COMMENT).write_text(comment)
    md_path = run.path / REPORT
    md_path.write_text(text)
    return md_path


def build_report(run: RunData, progress: bool = False, **engine) -> tuple[Path, Path]:
    """Write the figures, ``report.md`` and ``pr-comment.md``, then ``report.html``; ``engine`` goes to
    papermill (the command line's quiet kernel)."""
    return write_markdown(run), build_html(run, progress, **engine)


def write_comparison(run_a: RunData, run_b: RunData) -> Path:
    out = run_a.path / f"comparison-vs-{run_b.path.resolve().name}.md"
    out.write_text(render_comparison(run_a, run_b))
    return out

"""``python -m repro report RUN_DIR``: the run analysed once, then figures, ``report.md``,
``pr-comment.md`` and ``report.html`` drawn from that analysis."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repro.core.analysis.rundata import RunData
from repro.report import plots
from repro.report.analyse import analyse, draw
from repro.report.comment import render_comment
from repro.report.comparison import render_comparison
from repro.report.html import build_html, fragment
from repro.report.markdown import render_report
from repro.report.model import Analysis, Drawn
from repro.report.template import Rendered

REPORT, COMMENT = "report.md", "pr-comment.md"


@dataclass
class Report:
    """A run's report in memory: the analysis, the figures drawn from it, ``report.md`` (with the tables
    and figures it shows) and ``pr-comment.md``. Close the figures when done (:meth:`close`)."""

    analysis: Analysis
    figures: list[Drawn]
    markdown: Rendered
    comment: str

    def html_fragment(self) -> str:
        """What the report notebook shows (:func:`repro.report.html.render_fragment`), from this analysis and
        these figures: call before :meth:`close`."""
        return fragment(self.analysis, self.figures).text

    def close(self) -> None:
        plots.close_all(self.figures)


def render_run(run: RunData) -> Report:
    """Analyse the run once and render its report from that analysis."""
    analysis = analyse(run)
    figures = draw(analysis)
    try:
        return Report(analysis, figures, render_report(analysis, figures), render_comment(analysis))
    except BaseException:
        plots.close_all(figures)
        raise


def write_markdown(run: RunData) -> Path:
    """Redraw every figure and write ``report.md`` and ``pr-comment.md``: all drawn and rendered in memory
    first, so a table the report cannot use raises before any file of the folder is replaced. PNGs of
    figures no longer drawn are removed."""
    report = render_run(run)
    try:
        plots.save_all(report.figures, run.path)
    finally:
        report.close()
    (run.path / COMMENT).write_text(report.comment)
    md_path = run.path / REPORT
    md_path.write_text(report.markdown.text)
    return md_path


def build_report(run: RunData, progress: bool = False, **engine) -> tuple[Path, Path]:
    """Write the figures, ``report.md`` and ``pr-comment.md``, then ``report.html``; ``engine`` goes to
    papermill (the command line's quiet kernel)."""
    return write_markdown(run), build_html(run, progress, **engine)


def write_comparison(run_a: RunData, run_b: RunData) -> Path:
    out = run_a.path / f"comparison-vs-{run_b.path.resolve().name}.md"
    out.write_text(render_comparison(run_a, run_b))
    return out

"""``python -m repro report RUN_DIR``: the run analysed once, its figures drawn once, then ``report.md``,
``pr-comment.md`` and ``report.html`` rendered from that analysis and those figures."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from repro.core.analysis.rundata import RunData
from repro.report import plots
from repro.report.analyse import analyse, draw
from repro.report.comment import render_comment
from repro.report.comparison import render_comparison
from repro.report.html import fragment, page
from repro.report.links import run_base
from repro.report.markdown import render_report
from repro.report.model import Analysis, Drawn
from repro.report.template import Rendered

REPORT, COMMENT, HTML = "report.md", "pr-comment.md", "report.html"
#: The files a report writes into its run folder, in the order :func:`write_report` writes them.
REPORT_FILES = (REPORT, COMMENT, HTML)


@dataclass
class Report:
    """A run's report in memory: the analysis, the figures drawn from it, ``report.md`` (with the tables
    and figures it shows) and ``pr-comment.md``. Close the figures when done (:meth:`close`)."""

    analysis: Analysis
    figures: list[Drawn]
    markdown: Rendered
    comment: str

    @functools.cached_property
    def pngs(self) -> dict[str, bytes]:
        """Each figure as the PNG both ``plots/`` and ``report.html`` hold, made once (call before :meth:`close`)."""
        return {f.name: plots.png_bytes(f.figure) for f in self.figures}

    def html_fragment(self) -> str:
        """What ``report.html`` and the report notebook show (:func:`repro.report.html.fragment`), from this
        analysis and these figures' PNGs: call before :meth:`close`."""
        return fragment(self.analysis, self.figures, self.pngs).text

    def close(self) -> None:
        plots.close_all(self.figures)


def render_run(run: RunData, repo_url: str | None = None) -> Report:
    """Analyse the run once and render its report from that analysis; the comment links the run folder's files
    under ``repo_url`` where the repository holds the folder (:func:`repro.report.links.run_base`), else names
    them as text."""
    analysis = analyse(run)
    figures = draw(analysis)
    try:
        comment = render_comment(analysis, run_base(run.path, repo_url))
        return Report(analysis, figures, render_report(analysis, figures), comment)
    except BaseException:
        plots.close_all(figures)
        raise


def write_report(run: RunData, repo_url: str | None = None) -> list[Path]:
    """Draw every figure and write ``report.md``, ``pr-comment.md`` and ``report.html``: all rendered in memory
    first, so a table the report cannot use raises before any file of the folder is replaced. PNGs of figures
    no longer drawn are removed. Returns the three files' paths."""
    report = render_run(run, repo_url)
    try:
        texts = (report.markdown.text, report.comment, page(run, report.html_fragment()))
        plots.save_all(report.pngs, run.path)
    finally:
        report.close()
    paths = [run.path / name for name in REPORT_FILES]
    for path, text in zip(paths, texts):
        path.write_text(text)
    return paths


def write_comparison(run_a: RunData, run_b: RunData) -> Path:
    out = run_a.path / f"comparison-vs-{run_b.path.resolve().name}.md"
    out.write_text(render_comparison(run_a, run_b))
    return out

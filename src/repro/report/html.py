"""``report.html`` and the report notebook (``notebooks/90-report.ipynb``) show one HTML fragment, :func:`fragment`:
the same sections as ``report.md`` through the same templates, figures embedded as 160-dpi PNGs, under a small
stylesheet scoped to the report (so it looks the same in JupyterLab and in the page). The page is written from the
analysis and the figures ``report.md`` is written from (:mod:`repro.report.build`): a run is read once.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import mistune

from repro.core.analysis.rundata import RunData, RunFolderError, load_run
from repro.paths import repo_root, runs_dir
from repro.report import plots
from repro.report.analyse import analyse, draw
from repro.report.model import Analysis, Drawn
from repro.report.template import Page, Rendered, Target, render_page

#: The class every rule of the stylesheet is scoped to.
SCOPE = "repro-report"
STYLE = f"""
.{SCOPE} {{ max-width: 960px; margin: 0 auto; padding: 0 16px 48px; color: #1f2328; font: 15px/1.55
  -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }}
.{SCOPE} h1 {{ font-size: 1.7em; line-height: 1.25; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }}
.{SCOPE} h2 {{ font-size: 1.35em; border-bottom: 1px solid #d1d9e0; padding-bottom: .25em; margin-top: 1.8em; }}
.{SCOPE} code {{ font: .88em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #eff1f3;
  padding: .1em .35em; border-radius: 4px; }}
.{SCOPE} pre {{ background: #f6f8fa; border: 1px solid #d1d9e0; border-radius: 6px; padding: 12px 14px;
  overflow-x: auto; white-space: pre-wrap; word-break: break-all; }}
.{SCOPE} pre code {{ background: none; padding: 0; }}
.{SCOPE} table {{ border-collapse: collapse; margin: .6em 0 1.2em; font-size: .88em; max-width: 100%; }}
.{SCOPE} th, .{SCOPE} td {{ border: 1px solid #d1d9e0; padding: 4px 9px; text-align: left; vertical-align: top; }}
.{SCOPE} th {{ background: #f6f8fa; }}
.{SCOPE} tbody tr:nth-child(even) {{ background: #fafbfc; }}
.{SCOPE} .num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
.{SCOPE} figure {{ margin: 1em 0 1.4em; }}
.{SCOPE} figure img {{ max-width: 100%; height: auto; display: block; }}
.{SCOPE} figcaption {{ color: #59636e; font-size: .85em; margin-top: .3em; }}
.{SCOPE} details {{ border: 1px solid #d1d9e0; border-radius: 6px; padding: .4em .8em; margin: .8em 0; }}
.{SCOPE} summary {{ cursor: pointer; font-weight: 600; }}
.{SCOPE} ul {{ padding-left: 1.4em; }}
.{SCOPE} li {{ margin: .3em 0; }}
"""
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>body {{ margin: 0; background: #ffffff; }}</style>
</head>
<body>
{body}
</body>
</html>
"""


def _markdown(text: str) -> str:
    """The report's Markdown as HTML; the raw HTML in it (tables, figures, folds) is the renderers' own."""
    return mistune.create_markdown(escape=False)(text)


def fragment(analysis: Analysis, figures: Sequence[Drawn], pngs: Mapping[str, bytes] | None = None) -> Rendered:
    """The report as one HTML fragment: the scoped stylesheet, then every section, figures embedded (``pngs``:
    their :func:`repro.report.plots.png_bytes` by name, when already made)."""
    if pngs is None:
        pngs = {f.name: plots.png_bytes(f.figure) for f in figures}
    page = Page(Target.HTML, {f.name: f.caption for f in figures}, dict(pngs))
    rendered = render_page(analysis, page)
    body = _markdown(rendered.text)
    return Rendered(f'<style>{STYLE}</style>\n<div class="{SCOPE}">\n{body}\n</div>', rendered.tables, rendered.images)


def render_fragment(run: RunData) -> str:
    """:func:`fragment` of a loaded run (what the report notebook shows)."""
    analysis = analyse(run)
    figures = draw(analysis)
    try:
        return fragment(analysis, figures).text
    finally:
        plots.close_all(figures)


def resolve_run(run_dir: str | Path = "") -> RunData | None:
    """``run_dir`` (relative to the working folder or the checkout), or the latest run (``runs/latest``)
    when empty; None when there is none yet."""
    if str(run_dir):
        path = Path(run_dir)
        if not path.is_absolute() and not path.exists() and (repo_root() / path).exists():
            path = repo_root() / path  # a notebook's working folder is notebooks/; paths name checkout folders
        return load_run(path)
    latest = runs_dir() / "latest"
    if not latest.exists():
        return None
    return load_run(latest.resolve())


NO_RUN = (
    "**No run yet.** This notebook shows the report of a run folder. Make one from the repository root with "
    "`make run` (or `python -m repro run --profile cpu` for a few-minute CPU run), then run this cell again; "
    "or set `run_dir` in the first cell to a run folder, e.g. `data/h200/gpu-profile`."
)


def display_report(run_dir: str | Path = "") -> None:
    """Show the report inside a notebook; with no ``run_dir``, the latest run's (or how to make one)."""
    from IPython.display import HTML, Markdown, display  # lazy: only a notebook kernel shows the report

    try:
        run = resolve_run(run_dir)
    except RunFolderError as exc:
        display(Markdown(f"**Cannot read the run folder:** {exc}"))
        return
    if run is None:
        display(Markdown(NO_RUN))
        return
    display(HTML(render_fragment(run)))


def page(run: RunData, body: str) -> str:
    """``report.html``: the fragment ``body`` as a self-contained page titled after the run."""
    return PAGE.format(title=html.escape(f"Report: {run.name}"), body=body)

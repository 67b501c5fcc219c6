"""``report.html``: the report notebook (``notebooks/90-report.ipynb``) executed on a run folder and
exported without code, figures embedded. The notebook shows the same blocks as ``report.md``."""

from __future__ import annotations

from pathlib import Path

from repro.analysis.rundata import RunData
from repro.paths import notebooks_dir, repo_root
from repro.report import plots
from repro.report.blocks import build_blocks

REPORT_NOTEBOOK = "90-report.ipynb"


def display_report(run: RunData) -> None:
    """Show the report inside a notebook: HTML tables and the figures drawn from the run's tables."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    figures = plots.draw_all(run)
    for b in build_blocks(run, list(figures)):
        if b.kind == "md":
            display(Markdown(str(b.value)))
        elif b.kind == "table":
            display(b.value.style.hide(axis="index"))
        else:
            display(Markdown(f"*{b.caption}*"))
            display(figures[b.value])
    for fig in figures.values():
        plt.close(fig)


def build_html(run: RunData, progress: bool = False, **engine) -> Path:
    """Execute the report notebook on ``run`` and export it without code to ``report.html``; ``engine``
    goes to papermill."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    run_dir = run.path.resolve()
    executed = run_dir / "notebooks" / REPORT_NOTEBOOK
    executed.parent.mkdir(exist_ok=True)
    pm.execute_notebook(
        str(notebooks_dir() / REPORT_NOTEBOOK),
        str(executed),
        parameters={"run_dir": str(run_dir)},
        kernel_name="python3",
        progress_bar=progress,
        execution_timeout=600,
        cwd=str(repo_root()),
        **engine,
    )
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags={"report-hide"}, enabled=True), enabled=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    html_path = run_dir / "report.html"
    html_path.write_text(body)
    return html_path

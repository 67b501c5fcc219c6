"""Figures readers trip on: the release matrix read at GitHub's comment width and in JupyterLab, and notebook
02's figures with their legends where JupyterLab crops them."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from repro.core.analysis.rundata import load_run
from repro.report import plots
from repro_audit.browser import GITHUB_COLUMN_PX, GITHUB_PADDING_PX
from repro_studies.analysis.releases import complete_matrix
from repro_studies.report.axes import mark_axis_break
from repro_studies.report.releases import release_matrix
from repro_studies.tables import Facts, Plot, Table

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"


def font_px(fig: Figure, dpi: float, shown_width_px: float) -> list[tuple[str, float]]:
    """Every visible text of ``fig`` with its font size in screen pixels when the figure, saved at ``dpi``
    and cropped as :func:`png_bytes` crops it, is shown ``shown_width_px`` wide at most (a narrower PNG is
    shown at its own width, as GitHub's and JupyterLab's image styles do)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    width = int.from_bytes(buf.getvalue()[16:20], "big")
    scale = min(1.0, shown_width_px / width)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [(t.get_text(), t.get_fontsize() * dpi / 72 * scale) for t in texts]


#: Text smaller than this is unreadable where the figure is shown.
MIN_TEXT_PX = 10
#: JupyterLab's inline figures: matplotlib's default resolution, shown at natural size up to the output
#: area's width (about 900 px beside the file browser in a 1280-px window).
JUPYTERLAB_DPI = plt.rcParamsDefault["figure.dpi"]
JUPYTERLAB_OUTPUT_PX = 900


@pytest.fixture(scope="module")
def matrix():
    """The merged release matrix of the committed H200 runs: 16 releases x 9 kernels."""
    verdicts = pd.read_csv(
        DATA / "release-matrix-merged" / "results" / "04-release-verdicts.csv", keep_default_na=False, na_values=[""]
    ).fillna({"kernel": "", "variant": ""})
    fig = release_matrix(complete_matrix(verdicts))
    yield fig
    plt.close(fig)


@pytest.mark.parametrize(
    "where, dpi, width",
    [
        ("a GitHub comment", plots.DPI, GITHUB_COLUMN_PX - 2 * GITHUB_PADDING_PX),
        ("JupyterLab", JUPYTERLAB_DPI, JUPYTERLAB_OUTPUT_PX),
    ],
)
def test_release_matrix_labels_are_legible(matrix, where, dpi, width):
    sizes = font_px(matrix, dpi, width)
    labels = {text for text, _ in sizes}
    assert {"0.21.0", "0.33.0", "v4 per-block", "faults"} <= labels
    small = [(text, round(px, 1)) for text, px in sizes if px < MIN_TEXT_PX]
    assert not small, f"in {where}: text under {MIN_TEXT_PX} px: {small[:5]}"


def test_a_too_small_label_is_caught(matrix):
    """The measure can fail: a 22-inch figure at 7 pt (the old two-panel matrix) shrinks to 4 px in a comment."""
    fig, ax = plt.subplots(figsize=(22, 6))
    ax.set_xticks([0.5])
    ax.set_xticklabels(["v4 per-block"], fontsize=7)
    try:
        px = dict(font_px(fig, plots.DPI, GITHUB_COLUMN_PX - 2 * GITHUB_PADDING_PX))["v4 per-block"]
        assert px < MIN_TEXT_PX
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", ["gather_mismatches", "sanitizer_errors"])
def test_notebook_02_legends_survive_jupyterlabs_crop(name):
    """IPython's inline backend saves with ``bbox_inches="tight"`` and no extra artists: a legend kept out
    of the layout is cut off there. Every legend must lie inside that crop."""
    run = load_run(DATA / "gpu-profile")
    table = run.table("02-gather-sweep") if name == "gather_mismatches" else run.table("02-sanitizer")
    fig = getattr(plots, name)(table)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        crop = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        assert legends
        for legend in legends:
            box = legend.get_window_extent(renderer)
            inside = box.x0 >= crop.x0 - 1 and box.y0 >= crop.y0 - 1 and box.x1 <= crop.x1 + 1
            assert inside and box.y1 <= crop.y1 + 1, (name, box, crop)
    finally:
        plt.close(fig)


def _starts_at_zero_or_marks_the_break(ax) -> bool:
    bottom = ax.get_ylim()[0]
    return ax.get_yscale() != "linear" or bottom <= 0 or "axis not from 0" in ax.get_ylabel()


def test_a_ratio_chart_starts_at_zero_or_marks_the_break():
    """PR #55109's cost on vLLM's kernel is a ratio within 1 % of 1: its axis cannot start at zero, so the figure
    marks the break (slashes on the spine, said in the axis label); the ceiling fractions start at zero."""
    from repro_studies.report.timing_plots import bandwidth_fraction
    from repro_studies.report.upstream_plots import cost_figures

    run = load_run(DATA / "gpu-profile-vllm")
    figures = dict(cost_figures(run.table(Table.VLLM_MEDIANS), run.table(Table.VLLM_RATIOS)))
    ratios = figures[Plot.VLLM_RATIOS]
    ceiling = float(run.facts[Facts.PERFORMANCE]["copy_ceiling_tbps"])
    fraction = bandwidth_fraction(run.table(Table.PERF_MEDIANS), ceiling)
    try:
        for ax in ratios.axes:
            assert ax.get_ylim()[0] > 0 and "axis not from 0" in ax.get_ylabel()
            assert sum(line.get_transform() == ax.transAxes for line in ax.get_lines()) == 3  # the cut and 2 slashes
        assert all(map(_starts_at_zero_or_marks_the_break, [*ratios.axes, *fraction.axes]))
        marked = plt.figure().add_subplot()
        marked.set_ylim(0, 2)
        mark_axis_break(marked)  # an axis from zero has no break to mark
        assert "not from 0" not in marked.get_ylabel() and not marked.get_lines()
    finally:
        plt.close("all")

"""Figures readers trip on: the release matrix read at GitHub's comment width and in JupyterLab, and notebook
02's figures with their legends where JupyterLab crops them."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from repro.core.analysis.rundata import load_run
from repro.report import plots
from repro.report.browser import GITHUB_COLUMN_PX, GITHUB_PADDING_PX
from repro_studies.analysis.releases import complete_matrix
from repro_studies.report.releases import release_matrix

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
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
        DATA / "release-matrix-merged" / "results" / "04-release-verdicts.csv", keep_default_na=False
    )
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
    sizes = plots.font_px(matrix, dpi, width)
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
        px = dict(plots.font_px(fig, plots.DPI, GITHUB_COLUMN_PX - 2 * GITHUB_PADDING_PX))["v4 per-block"]
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

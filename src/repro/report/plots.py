"""Figures for the notebooks and the report, drawn from a run's tables and saved as PNG.

Every legend sits outside the axes (below a row of panels, or to the right of one), and variants
whose series are identical in a panel are drawn once with their labels joined, so lines that agree
do not hide each other.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, ScalarFormatter

from repro import registry
from repro.coverage import Geometry
from repro.outcomes import Outcome
from repro.report.model import Drawn

#: Resolution of the PNGs written into a run folder and embedded in report.html.
DPI = 160
#: A figure is shown at this many CSS pixels per inch (report.html), so 160-dpi PNGs stay sharp.
CSS_PX_PER_INCH = 100


def request_axis(ax: Axes) -> None:
    """Log-2 request axis labelled 1, 2, 4, ... 256 rather than powers of two."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2**k for k in range(0, 9)]))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("requests")


def legend_under(ax: Axes) -> None:
    """A panel's own legend, under its axis labels (panels whose variants group differently). It stays in the
    figure's layout, so every tight crop keeps it: JupyterLab's inline display crops without extra artists."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False, ncol=1)


def legend_right(ax: Axes) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG at ``DPI``, cropped to its content (legends outside the axes included)."""
    buf = io.BytesIO()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    extra = [*fig.get_default_bbox_extra_artists(), *legends]  # legends outside the layout, kept in the PNG
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", bbox_extra_artists=extra, metadata={"Software": None})
    return buf.getvalue()


def save(fig: Figure, run_dir: str | Path, name: str) -> Path:
    """Write ``plots/<name>.png`` in the run folder and return its path."""
    return write_png(png_bytes(fig), run_dir, name)


def write_png(png: bytes, run_dir: str | Path, name: str) -> Path:
    """Write a figure's :func:`png_bytes` as ``plots/<name>.png`` in the run folder and return its path."""
    path = Path(run_dir) / "plots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def identical_groups(frame: pd.DataFrame, by: str, x: str, values: list[str]) -> list[tuple[list[str], pd.DataFrame]]:
    """Variants whose ``values`` agree at every ``x``, grouped (first-seen order): ``(labels, rows)``."""
    groups: dict[tuple, tuple[list[str], pd.DataFrame]] = {}
    for label, g in frame.groupby(by, sort=False):
        g = g.sort_values(x)
        key = tuple(tuple(map(str, r)) for r in g[[x, *values]].itertuples(index=False))
        if key in groups:
            groups[key][0].append(str(label))
        else:
            groups[key] = ([str(label)], g)
    return list(groups.values())


def group_label(labels: list[str], width: int = 60) -> str:
    """A legend entry for series drawn once: ``a = b``, or a wrapped list when there are more."""
    if len(labels) <= 2:
        return " = ".join(labels)
    return textwrap.fill(f"identical: {', '.join(labels)}", width)


def reshape_overrun(frame: pd.DataFrame) -> Figure:
    """Required / available bytes per cache group, buggy vs fixed (log scale; 1 = the pool)."""
    groups = list(dict.fromkeys(frame["cache group"]))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.38
    for k, variant in enumerate(("buggy", "fixed")):
        sub = frame[frame.variant == variant].set_index("cache group").loc[groups]
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        ratio = sub["required_bytes"].astype(float) / sub["available_bytes"].astype(float)
        ax.bar(xs, ratio, width, label=variant, color=registry.style(variant)["color"])
        for x, v in zip(xs, ratio):
            ax.annotate(f"{v:.1f}x" if v >= 1.05 else "fits", (x, v), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("required / available bytes")
    ax.set_title("Reshape view extent against the KV-cache pool (above 1 = out of bounds)")
    legend_right(ax)
    fig.tight_layout()
    return fig


def _default_geometry(frame: pd.DataFrame) -> pd.DataFrame:
    """The cases per request count (the other geometries' are tables, not lines)."""
    return frame[frame["geometry"].astype(str) == Geometry.DEFAULT] if "geometry" in frame else frame


def gather_mismatches(frame: pd.DataFrame) -> Figure:
    """Fraction of gathered tokens that differ from the reference, one panel per sentinel mode;
    variants with identical results share one line."""
    frame = _default_geometry(frame)
    modes = list(dict.fromkeys(frame["mode"]))
    fig, axes = plt.subplots(
        1, len(modes), figsize=(5.0 * len(modes), 3.4), squeeze=False, sharey=True, layout="constrained"
    )
    f = frame.assign(
        fraction=(frame["mismatched_tokens"].astype(float) / frame["total_tokens"].astype(float)).where(
            frame["status"] == Outcome.OK
        )
    )
    for ax, mode in zip(axes[0], modes):
        for labels, g in identical_groups(f[f["mode"] == mode], "variant", "num_reqs", ["fraction", "status"]):
            style = registry.style(labels[0])
            name = group_label(labels, 40)
            ax.plot(g["num_reqs"], g["fraction"], label=name, **style)
            faulted = g[g["status"] != "ok"]
            if len(faulted):
                ax.scatter(
                    faulted["num_reqs"],
                    [1.02] * len(faulted),
                    marker="X",
                    s=60,
                    color=style.get("color", "black"),
                    label=f"{name}: {faulted['status'].iloc[0]}",
                )
        request_axis(ax)
        ax.set_title(f"sentinel mode: {mode}")
        ax.set_ylim(-0.03, 1.08)
    axes[0][0].set_ylabel("fraction of tokens differing\nfrom the reference (X: faulted)")
    for ax in axes[0]:
        legend_under(ax)
    fig.suptitle("Gather through a column-narrowed block table")
    return fig


def sanitizer_errors(san: pd.DataFrame) -> Figure:
    """memcheck errors per case, one panel per sentinel mode (symlog: 0 stays visible); variants
    with identical counts share one line, and an in-range panel says what memcheck cannot see."""
    san = _default_geometry(san)
    modes = list(dict.fromkeys(san["mode"]))
    s = san.assign(errors=san["error_count"].astype(float).fillna(0))
    fig, axes = plt.subplots(
        1, len(modes), figsize=(5.0 * len(modes), 3.4), squeeze=False, sharey=True, layout="constrained"
    )
    for ax, mode in zip(axes[0], modes):
        sub = s[s["mode"] == mode]
        for labels, g in identical_groups(sub, "variant", "num_reqs", ["errors"]):
            if (g["errors"] == 0).all():
                style, label = {"color": "#7f8c8d", "marker": "."}, "0 errors: " + ", ".join(labels)
            else:
                style, label = registry.style(labels[0]), group_label(labels, 40)
            ax.plot(g["num_reqs"], g["errors"], label=label, **style)
        blind = sub[(sub["errors"] == 0) & (sub["mismatched_tokens"].astype(float).fillna(0) > 0)]
        if len(blind):
            who = ", ".join(dict.fromkeys(blind["variant"]))
            ax.text(
                0.03,
                0.95,
                f"{who}: output wrong, 0 errors\n(memcheck checks allocations, not views)",
                transform=ax.transAxes,
                va="top",
                fontsize=8,
            )
        request_axis(ax)
        ax.set_title(f"sentinel mode: {mode}")
        legend_under(ax)
    top = max(1.0, float(s["errors"].max()))
    ticks = [0] + [10**k for k in range(0, len(str(int(top))) + 1)]
    for ax in axes[0]:
        ax.set_yscale("symlog", linthresh=1)
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_ylim(-0.3, ticks[-1] * 1.5)
    axes[0][0].set_ylabel("memcheck errors")
    fig.suptitle("compute-sanitizer memcheck, one process per case")
    return fig


def close_all(figures: Sequence[Drawn]) -> None:
    for f in figures:
        plt.close(f.figure)


def save_all(pngs: Mapping[str, bytes], run_dir: str | Path) -> None:
    """Write every figure's PNG (:func:`png_bytes`, by figure name) into ``plots/`` and remove PNGs of figures no
    longer drawn. The bytes are made once by the caller: a figure saved twice need not give the same bytes."""
    for name, png in pngs.items():
        write_png(png, run_dir, name)
    for stale in (Path(run_dir) / "plots").glob("*.png"):
        if stale.stem not in pngs:
            stale.unlink()

"""Figures for the notebooks and the report, drawn from a run's tables and saved as PNG.

Every legend sits outside the axes (below a row of panels, or to the right of one), and variants
whose series are identical in a panel are drawn once with their labels joined, so lines that agree
do not hide each other.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator, ScalarFormatter

from repro import registry
from repro.coverage import Geometry
from repro.report.model import Drawn
from repro.tables import Plot

#: Resolution of the PNGs written into a run folder and embedded in report.html.
DPI = 160
#: A figure is shown at this many CSS pixels per inch (report.html), so 160-dpi PNGs stay sharp.
CSS_PX_PER_INCH = 100


def _request_axis(ax) -> None:
    """Log-2 request axis labelled 1, 2, 4, ... 256 rather than powers of two."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2**k for k in range(0, 9)]))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("requests")


def mark_axis_break(ax: Axes) -> None:
    """A linear y axis that does not start at zero says so: the left spine is cut at its foot, below the lowest
    tick, and two slashes mark the cut (a ratio read against 1, whose differences would vanish on an axis from
    zero)."""
    bottom, top = ax.get_ylim()
    if ax.get_yscale() != "linear" or bottom <= 0:
        return
    ax.set_ylim(bottom - 0.08 * (top - bottom), top)  # room under the lowest tick for the cut
    cut = dict(transform=ax.transAxes, clip_on=False, zorder=5)
    ax.plot((0, 0), (0.012, 0.042), color="white", linewidth=2.5, **cut)
    for y in (0.012, 0.042):
        ax.plot((-0.015, 0.015), (y - 0.01, y + 0.01), color="black", linewidth=0.9, **cut)
    ax.set_ylabel(f"{ax.get_ylabel()} (axis not from 0)")


def _legend_below(fig: Figure, axes, ncol: int = 3) -> None:
    """One legend for all panels, under them, entries deduplicated by label."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(ncol, len(seen)),
            fontsize=8,
            frameon=False,
        )


def _legend_under(ax) -> None:
    """A panel's own legend, under its axis labels (panels whose variants group differently). It stays in the
    figure's layout, so every tight crop keeps it: JupyterLab's inline display crops without extra artists."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False, ncol=1)


def _legend_right(ax) -> None:
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


def _identical_groups(frame: pd.DataFrame, by: str, x: str, values: list[str]) -> list[tuple[list[str], pd.DataFrame]]:
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


def _group_label(labels: list[str], width: int = 60) -> str:
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
    _legend_right(ax)
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
            frame["status"] == "ok"
        )
    )
    for ax, mode in zip(axes[0], modes):
        for labels, g in _identical_groups(f[f["mode"] == mode], "variant", "num_reqs", ["fraction", "status"]):
            style = registry.style(labels[0])
            name = _group_label(labels, 40)
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
        _request_axis(ax)
        ax.set_title(f"sentinel mode: {mode}")
        ax.set_ylim(-0.03, 1.08)
    axes[0][0].set_ylabel("fraction of tokens differing\nfrom the reference (X: faulted)")
    for ax in axes[0]:
        _legend_under(ax)
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
        for labels, g in _identical_groups(sub, "variant", "num_reqs", ["errors"]):
            if (g["errors"] == 0).all():
                style, label = {"color": "#7f8c8d", "marker": "."}, "0 errors: " + ", ".join(labels)
            else:
                style, label = registry.style(labels[0]), _group_label(labels, 40)
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
        _request_axis(ax)
        ax.set_title(f"sentinel mode: {mode}")
        _legend_under(ax)
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


def arm_style(label: str) -> dict:
    """An arm's style from the registry (the outside arm's for a kernel named by ``reference_gather``)."""
    return dict(registry.style(label))


def _arm_lines(ax, frame: pd.DataFrame, value: str, names: dict[str, str], log: bool = True) -> None:
    order = [a.label for a in registry.ARMS if a.label in set(frame["arm"])]
    order += [a for a in dict.fromkeys(frame["arm"]) if a not in order]
    for arm_label in order:
        g = frame[frame["arm"] == arm_label].sort_values("num_reqs")
        y = g[value].astype(float)
        ax.plot(
            g["num_reqs"],
            y.clip(lower=0.5) if log else y,
            label=names.get(arm_label, arm_label),
            **arm_style(arm_label),
        )
    _request_axis(ax)
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def counts_by_request(
    frame: pd.DataFrame,
    value: str,
    title: str,
    ylabel: str,
    log: bool = True,
    style_of: Callable[[str], Mapping[str, Any]] = registry.style,
) -> Figure:
    """One line per variant (and mode, if present) of ``value`` against request count; legend outside."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    keys = ["variant", "mode"] if "mode" in frame else ["variant"]
    for key, g in frame.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values("num_reqs")
        style = dict(style_of(key[0]))
        if len(key) > 1 and key[1] == "in-range":
            style["linestyle"] = ":"
        y = g[value].astype(float)
        ax.plot(g["num_reqs"], y.clip(lower=0.5) if log else y, label=" / ".join(map(str, key)), **style)
    _request_axis(ax)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend_right(ax)
    fig.tight_layout()
    return fig


def arm_names(labels: Iterable[str], outside_names: dict[str, str] | None = None) -> dict[str, str]:
    """Legend names of timed arms: outside arms by their loaded name (``outside_names``), the others by the
    registry's display names (a label the registry does not know as itself)."""

    def display(label: str) -> str:
        try:
            return registry.arm(label).display
        except KeyError:
            return label

    return {label: (outside_names or {}).get(label) or display(label) for label in labels}


def time_per_launch(med: pd.DataFrame, launch: str, outside_names: dict[str, str] | None = None) -> Figure:
    """Median time per gather against request count, one panel per tokens-per-request."""
    sub = med[med["launch"] == launch]
    lengths = sorted(set(sub["seq_len"].astype(int)))
    names = arm_names(list(dict.fromkeys(sub["arm"])), outside_names)
    fig, axes = plt.subplots(1, len(lengths), figsize=(5.0 * len(lengths), 3.4), squeeze=False)
    for ax, L in zip(axes[0], lengths):
        _arm_lines(ax, sub[sub["seq_len"].astype(int) == L], "median_us", names)
        ax.set_title(f"{L} tokens per request")
    axes[0][0].set_ylabel("median microseconds")
    what = "CUDA-graph replays (kernel time)" if launch == "graph" else "eager launches (Python launch path included)"
    fig.suptitle(f"Gather time, {what}")
    _legend_below(fig, axes[0])
    fig.tight_layout()
    return fig


def bandwidth_fraction(med: pd.DataFrame, ceiling_tbps: float, outside_names: dict[str, str] | None = None) -> Figure:
    """Fraction of the copy ceiling each arm moves (graph replays, the longest requests)."""
    longest = int(med["seq_len"].max())
    frac = med[(med["launch"] == "graph") & (med["seq_len"].astype(int) == longest)]
    frac = frac.assign(fraction=frac["bandwidth_tbps"].astype(float) / ceiling_tbps)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    _arm_lines(ax, frac, "fraction", arm_names(list(dict.fromkeys(frac["arm"])), outside_names), log=False)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("fraction of copy ceiling")
    ax.set_title(f"Share of the {ceiling_tbps:.2f} TB/s copy ceiling (graph replays, {longest} tokens per request)")
    _legend_right(ax)
    fig.tight_layout()
    return fig


def ceiling_figures(vs_ceiling: pd.DataFrame, outside_names: dict[str, str] | None = None) -> list[tuple[str, Figure]]:
    """(name, figure): each gather's fraction of the streaming ceiling per request count, CUDA-graph
    replays, one panel per tokens-per-request (``repro.studies.analysis.ceiling.ceiling_table``)."""
    graph = vs_ceiling[(vs_ceiling["launch"] == "graph") & (vs_ceiling["requests"] == "equal")]
    lengths = sorted(set(graph["seq_len"].astype(int)))
    names = arm_names(list(dict.fromkeys(graph["arm"])), outside_names)
    fig, axes = plt.subplots(1, len(lengths), figsize=(5.0 * len(lengths), 3.4), squeeze=False, sharey=True)
    for ax, L in zip(axes[0], lengths):
        _arm_lines(ax, graph[graph["seq_len"].astype(int) == L], "of_stream_fraction", names, log=False)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{L} tokens per request")
    axes[0][0].set_ylabel("fraction of the streaming ceiling")
    fig.suptitle("Each gather against the streaming ceiling (CUDA-graph replays)")
    _legend_below(fig, axes[0])
    fig.tight_layout()
    return [(Plot.CEILING, fig)]


def jit_fingerprint(cumulative: pd.DataFrame) -> Figure:
    """Compilations (and, where measured, cumulative compile time) against distinct table widths, one
    line per kernel variant and table kind (``repro.studies.analysis.jit.cumulative_by_width``)."""
    has_time = "compile_ms" in cumulative and cumulative["compile_ms"].notna().any()
    fig, axes = plt.subplots(1, 2 if has_time else 1, figsize=(10 if has_time else 5.5, 3.4), squeeze=False)
    colors = {v: f"C{i}" for i, v in enumerate(dict.fromkeys(cumulative["variant"]))}
    lines = cumulative.assign(line=cumulative["variant"].astype(str) + " / " + cumulative["table"].astype(str))
    values = ["compilations", *(["compile_ms"] if has_time else [])]
    for labels, g in _identical_groups(lines, "line", "distinct_widths", values):
        variant, table = g["variant"].iloc[0], g["table"].iloc[0]
        narrowed = table == "narrowed"
        style = dict(
            marker="o" if narrowed else "s",
            linestyle="-" if narrowed else "--",
            color=colors[variant],
            markerfacecolor=None if narrowed else "none",
            label=_group_label(labels),
        )
        axes[0][0].plot(g["distinct_widths"], g["compilations"], **style)
        if has_time:
            axes[0][1].plot(g["distinct_widths"], g["compile_ms"], **style)
    predicted = "mode" in cumulative and (cumulative["mode"] == "predicted").all()
    axes[0][0].set_ylabel("compilations" + (" (predicted, Triton's keys for sm_90)" if predicted else ""))
    axes[0][0].set_title("Triton compilations vs distinct block-table widths")
    for ax in axes[0]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("distinct block-table widths so far")
    axes[0][0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylim(-0.3, max(1.0, float(cumulative["compilations"].max())) * 1.1 + 0.2)
    if has_time:
        axes[0][1].set_ylabel("cumulative compile time (ms)")
        axes[0][1].set_title("Triton's own compile time, cumulative")
    _legend_below(fig, axes[0], ncol=1)
    fig.tight_layout()
    return fig


def performance_figures(
    med: pd.DataFrame, ceiling_tbps: float, outside_names: dict[str, str] | None = None
) -> list[tuple[str, Figure]]:
    """(name, figure) of notebook 03: graph-replay times, the share of the copy ceiling, eager times."""
    figs = [(Plot.TIME_GRAPH, time_per_launch(med, "graph", outside_names))]
    figs.append((Plot.BANDWIDTH, bandwidth_fraction(med, ceiling_tbps, outside_names)))
    figs.append((Plot.TIME_EAGER, time_per_launch(med, "eager", outside_names)))
    return figs


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

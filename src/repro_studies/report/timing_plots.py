"""The studies' figures: notebook 03's timed arms (time per launch, the share of the copy ceiling), each gather
against the streaming ceiling, and the JIT fingerprint; drawn with the report's figure helpers
(:mod:`repro.report.plots`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from repro import registry
from repro.coverage import SentinelMode
from repro.report import plots
from repro_studies.analysis.ceiling import gather_arms
from repro_studies.registry import ARMS, Arm, arms_by_label
from repro_studies.report.axes import legend_below
from repro_studies.tables import Plot


def _arm_lines(
    ax, frame: pd.DataFrame, value: str, arms: Mapping[str, Arm], names: dict[str, str], log: bool = True
) -> None:
    """One line per arm (``arms``: each label of ``frame`` and the arm its rows record), the repository's first,
    styled by the registry."""
    order = [label for a in ARMS for label, b in arms.items() if b == a]
    order += [label for label in dict.fromkeys(frame["arm"]) if label not in order]
    for arm_label in order:
        g = frame[frame["arm"] == arm_label].sort_values("num_reqs")
        y = g[value].astype(float)
        ax.plot(
            g["num_reqs"],
            y.clip(lower=0.5) if log else y,
            label=names.get(arm_label, arm_label),
            **dict(arms[arm_label].style),
        )
    plots.request_axis(ax)
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
        if len(key) > 1 and key[1] == SentinelMode.IN_RANGE:
            style["linestyle"] = ":"
        y = g[value].astype(float)
        ax.plot(g["num_reqs"], y.clip(lower=0.5) if log else y, label=" / ".join(map(str, key)), **style)
    plots.request_axis(ax)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    plots.legend_right(ax)
    fig.tight_layout()
    return fig


def arm_names(arms: Mapping[str, Arm], outside_names: dict[str, str] | None = None) -> dict[str, str]:
    """Legend names of timed arms (``arms``: label and arm): outside arms by their loaded name
    (``outside_names``), the others by the registry's display names."""
    return {label: (outside_names or {}).get(label) or a.display for label, a in arms.items()}


def time_per_launch(med: pd.DataFrame, launch: str, outside_names: dict[str, str] | None = None) -> Figure:
    """Median time per gather against request count, one panel per tokens-per-request."""
    sub = med[med["launch"] == launch]
    lengths = sorted(set(sub["seq_len"].astype(int)))
    arms = arms_by_label(sub)
    names = arm_names(arms, outside_names)
    fig, axes = plt.subplots(1, len(lengths), figsize=(5.0 * len(lengths), 3.4), squeeze=False)
    for ax, L in zip(axes[0], lengths):
        _arm_lines(ax, sub[sub["seq_len"].astype(int) == L], "median_us", arms, names)
        ax.set_title(f"{L} tokens per request")
    axes[0][0].set_ylabel("median microseconds")
    what = "CUDA-graph replays (kernel time)" if launch == "graph" else "eager launches (Python launch path included)"
    fig.suptitle(f"Gather time, {what}")
    legend_below(fig, axes[0])
    fig.tight_layout()
    return fig


def bandwidth_fraction(med: pd.DataFrame, ceiling_tbps: float, outside_names: dict[str, str] | None = None) -> Figure:
    """Fraction of the copy ceiling each arm moves (graph replays, the longest requests)."""
    longest = int(med["seq_len"].max())
    frac = med[(med["launch"] == "graph") & (med["seq_len"].astype(int) == longest)]
    frac = frac.assign(fraction=frac["bandwidth_tbps"].astype(float) / ceiling_tbps)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    arms = arms_by_label(frac)
    _arm_lines(ax, frac, "fraction", arms, arm_names(arms, outside_names), log=False)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("fraction of copy ceiling")
    ax.set_title(f"Share of the {ceiling_tbps:.2f} TB/s copy ceiling (graph replays, {longest} tokens per request)")
    plots.legend_right(ax)
    fig.tight_layout()
    return fig


def ceiling_figures(vs_ceiling: pd.DataFrame, outside_names: dict[str, str] | None = None) -> list[tuple[str, Figure]]:
    """(name, figure): each gather's fraction of the streaming ceiling per request count, CUDA-graph
    replays, one panel per tokens-per-request (``repro_studies.analysis.ceiling.ceiling_table``)."""
    graph = vs_ceiling[(vs_ceiling["launch"] == "graph") & (vs_ceiling["requests"] == "equal")]
    lengths = sorted(set(graph["seq_len"].astype(int)))
    arms = gather_arms(graph)
    names = arm_names(arms, outside_names)
    fig, axes = plt.subplots(1, len(lengths), figsize=(5.0 * len(lengths), 3.4), squeeze=False, sharey=True)
    for ax, L in zip(axes[0], lengths):
        _arm_lines(ax, graph[graph["seq_len"].astype(int) == L], "of_stream_fraction", arms, names, log=False)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{L} tokens per request")
    axes[0][0].set_ylabel("fraction of the streaming ceiling")
    fig.suptitle("Each gather against the streaming ceiling (CUDA-graph replays)")
    legend_below(fig, axes[0])
    fig.tight_layout()
    return [(Plot.CEILING, fig)]


def jit_fingerprint(cumulative: pd.DataFrame) -> Figure:
    """Compilations (and, where measured, cumulative compile time) against distinct table widths, one
    line per kernel variant and table kind (``repro_studies.analysis.jit.cumulative_by_width``)."""
    has_time = "compile_ms" in cumulative and cumulative["compile_ms"].notna().any()
    fig, axes = plt.subplots(1, 2 if has_time else 1, figsize=(10 if has_time else 5.5, 3.4), squeeze=False)
    colors = {v: f"C{i}" for i, v in enumerate(dict.fromkeys(cumulative["variant"]))}
    lines = cumulative.assign(line=cumulative["variant"].astype(str) + " / " + cumulative["table"].astype(str))
    values = ["compilations", *(["compile_ms"] if has_time else [])]
    for labels, g in plots.identical_groups(lines, "line", "distinct_widths", values):
        variant, table = g["variant"].iloc[0], g["table"].iloc[0]
        narrowed = table == "narrowed"
        style = dict(
            marker="o" if narrowed else "s",
            linestyle="-" if narrowed else "--",
            color=colors[variant],
            markerfacecolor=None if narrowed else "none",
            label=plots.group_label(labels),
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
    legend_below(fig, axes[0], ncol=1)
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

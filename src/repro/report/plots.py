"""Figures for the notebooks and the report, saved as PNG into the run folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from repro import registry
from repro.analysis.rundata import RunData


def _request_axis(ax) -> None:
    """Log-2 request axis labelled 1, 2, 4, ... 256 rather than powers of two."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ticks = [2**k for k in range(0, 9)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("requests")


#: Resolution of the PNGs written into a run folder.
DPI = 110


def save(fig: Figure, run_dir: str | Path, name: str) -> Path:
    """Write ``plots/<name>.png`` in the run folder and return its path."""
    path = Path(run_dir) / "plots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def reshape_overrun(frame: pd.DataFrame) -> Figure:
    """Required / available bytes per cache group, buggy vs fixed (log scale; 1 = the pool)."""
    groups = list(dict.fromkeys(frame["cache group"]))
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.38
    for k, variant in enumerate(("buggy", "fixed")):
        sub = frame[frame.variant == variant].set_index("cache group").loc[groups]
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        ax.bar(
            xs,
            sub["required_bytes"] / sub["available_bytes"],
            width,
            label=variant,
            color=registry.style(variant)["color"],
        )
        for x, v in zip(xs, sub["required_bytes"] / sub["available_bytes"]):
            ax.annotate(f"{v:.3g}x", (x, v), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("required / available bytes")
    ax.set_title("Reshape view extent against the KV-cache pool (above 1 = out of bounds)")
    ax.legend()
    fig.tight_layout()
    return fig


def gather_mismatches(frame: pd.DataFrame) -> Figure:
    """Fraction of gathered tokens that differ from the reference, per variant and request count."""
    modes = list(dict.fromkeys(frame["mode"]))
    fig, axes = plt.subplots(1, len(modes), figsize=(5.2 * len(modes), 3.6), squeeze=False, sharey=True)
    for ax, mode in zip(axes[0], modes):
        sub = frame[frame["mode"] == mode]
        for variant, g in sub.groupby("variant", sort=False):
            g = g.sort_values("num_reqs")
            ok = g["status"] == "ok"
            frac = (g["mismatched_tokens"] / g["total_tokens"]).where(ok)
            ax.plot(g["num_reqs"], frac, label=variant, **registry.style(variant))
            faulted = g[~ok]
            if len(faulted):
                ax.scatter(
                    faulted["num_reqs"],
                    [1.02] * len(faulted),
                    marker="X",
                    s=60,
                    color=registry.style(variant).get("color", "black"),
                    label=f"{variant}: {faulted['status'].iloc[0]}",
                )
        _request_axis(ax)
        ax.set_title(f"sentinel mode: {mode}")
        ax.set_ylim(-0.03, 1.08)
    axes[0][0].set_ylabel("fraction of tokens differing\nfrom the reference (X: faulted)")
    axes[0][-1].legend(fontsize=8, loc="center right")
    fig.suptitle("Gather through a column-narrowed block table", y=1.02)
    fig.tight_layout()
    return fig


def arm_style(label: str) -> dict:
    """An arm's style; arms from outside this repository share the outside arm's."""
    from repro.analysis.performance import outside_arms

    return dict(registry.OUTSIDE_ARM.style if outside_arms([label]) else registry.style(label))


def counts_by_request(
    frame: pd.DataFrame,
    value: str,
    title: str,
    ylabel: str,
    log: bool = True,
    style_of: Callable[[str], Mapping[str, Any]] = registry.style,
) -> Figure:
    """One line per variant (and mode, if present) of ``value`` against request count."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    keys = ["variant", "mode"] if "mode" in frame else ["variant"]
    for key, g in frame.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values("num_reqs")
        style = dict(style_of(key[0]))
        if len(key) > 1 and key[1] == "in-range":
            style["linestyle"] = ":"
        ax.plot(g["num_reqs"], g[value].astype(float).clip(lower=0.5 if log else None), label=" / ".join(key), **style)
    _request_axis(ax)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def draw_all(run: RunData) -> dict[str, Figure]:
    """Every standard figure of a run, drawn from its tables, by name (in report order)."""
    tables = run.tables
    figures: dict[str, Figure] = {}
    if "01-reshape-groups" in tables:
        figures["01-reshape-overrun"] = reshape_overrun(tables["01-reshape-groups"])
    if "02-gather-sweep" in tables:
        figures["02-gather-mismatches"] = gather_mismatches(tables["02-gather-sweep"])
    if "02-sanitizer" in tables:
        figures["02-sanitizer-errors"] = sanitizer_errors(tables["02-sanitizer"])
    med, rat = tables.get("03-performance-medians"), tables.get("03-performance-ratios")
    if med is not None and rat is not None and len(med):
        for name, fig in sorted(performance_figures(med, float(rat["copy_ceiling_tbps"].iloc[0]))):
            figures[name] = fig
    vs = tables.get("03-performance-vs-ceiling")
    if vs is not None and len(vs):
        for name, fig in ceiling_figures(vs):
            figures[name] = fig
    jit = tables.get("03-jit-fingerprint")
    if jit is not None and len(jit):
        from repro.analysis.jit import cumulative_by_width, split_by_code

        figures["03-jit-fingerprint"] = jit_fingerprint(cumulative_by_width(split_by_code(jit)[0], phase="inference"))
    from repro.report import upstream_plots

    figures.update(upstream_plots.draw(tables))
    return figures


def write_all(run: RunData) -> list[str]:
    """Redraw every figure of a run folder from its tables into ``plots/``; their names, in order."""
    figures = draw_all(run)
    for name, fig in figures.items():
        save(fig, run.path, name)
        plt.close(fig)
    return list(figures)


def sanitizer_errors(san: pd.DataFrame) -> Figure:
    return counts_by_request(
        san.assign(error_count=san.error_count.fillna(0)),
        "error_count",
        "memcheck errors per case (0 drawn at 0.5)",
        "errors",
    )


def performance_figures(med: pd.DataFrame, ceiling_tbps: float) -> list[tuple[str, Figure]]:
    """(name, figure) for the time-per-launch plots and the fraction-of-ceiling plot."""
    figs = []
    longest = int(med.seq_len.max())
    for mode in ("eager", "graph"):
        sub = med[med.launch == mode].assign(variant=lambda d: d.arm)
        for L in sorted(set(sub.seq_len)):
            what = "CUDA-graph replay" if mode == "graph" else "eager launch"
            figs.append(
                (
                    f"03-time-{mode}-{L}",
                    counts_by_request(
                        sub[sub.seq_len == L],
                        "median_us",
                        f"gather median time, {what}, {L} tokens per request",
                        "microseconds",
                        style_of=arm_style,
                    ),
                )
            )
    frac = med[med.launch == "graph"].assign(variant=lambda d: d.arm)
    frac = frac.assign(fraction=frac.bandwidth_tbps / ceiling_tbps)
    figs.append(
        (
            "03-bandwidth-fraction",
            counts_by_request(
                frac[frac.seq_len == longest],
                "fraction",
                f"fraction of the {ceiling_tbps:.2f} TB/s copy ceiling (graph replay, {longest} tokens per request)",
                "of copy ceiling",
                log=False,
                style_of=arm_style,
            ),
        )
    )
    return figs


def ceiling_figures(vs_ceiling: pd.DataFrame) -> list[tuple[str, Figure]]:
    """(name, figure): each gather's fraction of the streaming ceiling per request count, graph replays,
    one figure per sequence length (``repro.analysis.ceiling.ceiling_table``)."""
    graph = vs_ceiling[(vs_ceiling["launch"] == "graph") & (vs_ceiling["requests"] == "equal")]
    graph = graph.assign(variant=graph["arm"])
    figs = []
    for L in sorted(set(graph["seq_len"])):
        figs.append(
            (
                f"03-ceiling-fraction-{L}",
                counts_by_request(
                    graph[graph["seq_len"] == L],
                    "of_stream_fraction",
                    f"fraction of the streaming ceiling (graph replay, {L} tokens per request)",
                    "of streaming ceiling",
                    log=False,
                    style_of=arm_style,
                ),
            )
        )
    return figs


def jit_fingerprint(cumulative: pd.DataFrame) -> Figure:
    """Compilations (and, where measured, cumulative compile time) against distinct table widths,
    one line per kernel variant and table kind (``repro.analysis.jit.cumulative_by_width``)."""
    has_time = "compile_ms" in cumulative and cumulative["compile_ms"].notna().any()
    fig, axes = plt.subplots(1, 2 if has_time else 1, figsize=(11 if has_time else 6, 3.8), squeeze=False)
    colors = {v: f"C{i}" for i, v in enumerate(dict.fromkeys(cumulative["variant"]))}
    for (variant, table), g in cumulative.groupby(["variant", "table"], sort=False):
        narrowed = table == "narrowed"
        style = dict(
            marker="o" if narrowed else "s",
            linestyle="-" if narrowed else "--",
            color=colors[variant],
            markerfacecolor=None if narrowed else "none",
            label=f"{variant} / {table}",
        )
        axes[0][0].plot(g["distinct_widths"], g["compilations"], **style)
        if has_time:
            axes[0][1].plot(g["distinct_widths"], g["compile_ms"], **style)
    from matplotlib.ticker import MaxNLocator

    predicted = "mode" in cumulative and (cumulative["mode"] == "predicted").all()
    axes[0][0].set_ylabel("compilations" + (" (predicted, Triton's keys for sm_90)" if predicted else ""))
    axes[0][0].set_title("Triton compilations vs distinct block-table widths")
    for ax in axes[0]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylim(bottom=-0.3)
    if has_time:
        axes[0][1].set_ylabel("cumulative compile time (ms)")
        axes[0][1].set_title("Triton's own compile time, cumulative")
    for ax in axes[0]:
        ax.set_xlabel("distinct block-table widths so far")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return fig

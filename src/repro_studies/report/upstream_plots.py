"""Figures of notebook 03's vLLM arms: PR #55109's cost on vLLM's own kernel and the JIT fingerprint of each
release's kernel, drawn from the run's tables."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from repro.report.plots import request_axis
from repro_studies import registry
from repro_studies.analysis.performance import NO_COST_BAND
from repro_studies.analysis.upstream_cost import BAND_RATIOS
from repro_studies.report.axes import mark_axis_break
from repro_studies.report.timing_plots import counts_by_request
from repro_studies.tables import Plot


def cost_figures(medians: pd.DataFrame, ratios: pd.DataFrame) -> list[tuple[str, Figure]]:
    """(name, figure): median time per vLLM arm (graph replays, one figure per sequence length), and the two
    band ratios against request count with the no-cost band shaded."""
    figs = []
    graph = medians[medians["launch"] == "graph"].assign(variant=lambda d: d["arm"])
    arms = registry.arms_by_label(medians)
    for L in sorted(set(graph["seq_len"])):
        figs.append(
            (
                f"{Plot.VLLM_TIME}-{L}",
                counts_by_request(
                    graph[graph["seq_len"] == L],
                    "median_us",
                    f"vLLM's own gather: median time, CUDA-graph replay, {L} tokens per request",
                    "microseconds",
                    style_of=lambda label: arms[label].style,
                ),
            )
        )
    g = ratios[ratios["launch"] == "graph"]
    # each release's colour: its patched kernel's on the narrowed view, the arm the medians record
    colors = {a.origin: a.style["color"] for a in arms.values() if a.upstream and a.form == registry.Form.PATCHED}
    if len(g):
        fig, axes = plt.subplots(1, len(BAND_RATIOS), figsize=(5.6 * len(BAND_RATIOS), 3.6), squeeze=False)
        lo, hi = NO_COST_BAND
        for ax, name in zip(axes[0], BAND_RATIOS):
            ax.axhspan(lo, hi, color="#d5f5e3", zorder=0, label=f"{lo}-{hi}")
            ax.axhline(1.0, color="black", linewidth=0.6)
            for (code, L), sub in g.groupby(["code", "seq_len"], sort=True):
                sub = sub.sort_values("num_reqs")
                color = colors[code]
                ax.plot(
                    sub["num_reqs"],
                    sub[f"{name}_ratio"],
                    color=color,
                    marker="o",
                    linestyle="-" if L == g["seq_len"].max() else "--",
                    label=f"{code}, {L} tokens",
                )
            request_axis(ax)
            ax.set_title(name)
            ax.set_ylabel("time ratio")
            mark_axis_break(ax)
        axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        fig.suptitle("PR #55109 on vLLM's own kernel (CUDA-graph replays)", y=1.02)
        fig.tight_layout()
        figs.append((Plot.VLLM_RATIOS, fig))
    return figs


def jit_releases_figure(cumulative: pd.DataFrame) -> Figure:
    """Compilations (and, where measured, cumulative compile time) against distinct table widths for each
    release's kernel: one row of panels per release, one line per form and table kind."""
    codes = list(dict.fromkeys(cumulative["code"])) if "code" in cumulative else [""]
    has_time = "compile_ms" in cumulative and cumulative["compile_ms"].notna().any()
    ncols = 2 if has_time else 1
    fig, axes = plt.subplots(
        len(codes), ncols, figsize=(5.4 * ncols + 2.6, 3.2 * len(codes)), squeeze=False, sharex=True
    )
    predicted = "mode" in cumulative and (cumulative["mode"] == "predicted").all()
    for row, code in zip(axes, codes):
        mine = cumulative[cumulative["code"] == code] if "code" in cumulative else cumulative
        forms = list(dict.fromkeys(mine["variant"]))
        panels = [("compilations", row[0])] + ([("compile_ms", row[1])] if has_time else [])
        for column, ax in panels:
            series: dict[tuple, list] = {}  # identical lines are drawn once, with every label they stand for
            for (variant, table), g in mine.groupby(["variant", "table"], sort=False):
                key = (tuple(g["distinct_widths"]), tuple(g[column].fillna(-1)))
                series.setdefault(key, []).append((variant, table, g))
            for members in series.values():
                variant, table, g = members[0]
                narrowed = table == "narrowed"
                ax.plot(
                    g["distinct_widths"],
                    g[column],
                    color=f"C{forms.index(variant)}",
                    marker="o" if narrowed else "s",
                    linestyle="-" if narrowed else "--",
                    markerfacecolor=None if narrowed else "none",
                    label="\n= ".join(f"{v.removeprefix(code).strip()} / {t}" for v, t, _ in members),
                )
        row[0].set_ylabel(f"{code}\ncompilations" + (" (predicted)" if predicted else ""))
        row[0].yaxis.set_major_locator(MaxNLocator(integer=True))
        row[0].set_ylim(bottom=-0.3)
        if has_time:
            row[1].set_ylabel("cumulative compile ms")
        row[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    for ax in axes[-1]:
        ax.set_xlabel("distinct block-table widths after the warm-up")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_title("Triton compilations on the inference path")
    if has_time:
        axes[0][1].set_title("Triton's own compile time, cumulative")
    fig.tight_layout()
    return fig

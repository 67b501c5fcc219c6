"""Figure of the release matrix: release x kernel, coloured by verdict, released beside patched.

Pure drawing from the verdict table of :mod:`repro.analysis.releases` (the lead wires it into the report).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch

from repro.analysis.releases import matrix_table, verdict_class, version_key

COLOURS = {"correct": "#4c9a2a", "wrong": "#e69f00", "faults": "#c0392b", "not present": "#eeeeee",
           "could not load": "#7f7f7f", "not run": "#ffffff", "not applicable": "#dddddd", "other": "#9467bd"}


def _cell_text(verdict: str) -> str:
    v = str(verdict)
    if v.startswith(("wrong from", "faults from")):
        return v.split()[0] + " ≥" + v.split()[2]
    return {"correct": "ok", "not present": "", "not run": "not run", "could not load": "no load",
            "not applicable": "n/a"}.get(verdict_class(v), v[:8])


def release_matrix(verdict_frame: pd.DataFrame, variants=("released", "patched")):
    """One panel per variant: rows are releases, columns kernels, colour the verdict class."""
    panels = [v for v in variants if (verdict_frame["variant"] == v).any()]
    kernels = sorted(k for k in verdict_frame["kernel"].unique() if k)
    releases = sorted(verdict_frame["release"].unique(), key=version_key)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(1.2 + 1.3 * len(kernels) * max(1, len(panels)),
                                                               1.2 + 0.32 * len(releases)), squeeze=False)
    for ax, variant in zip(axes[0], panels):
        grid = matrix_table(verdict_frame, variant).reindex(index=releases, columns=kernels).fillna("")
        for i, release in enumerate(releases):
            for j, kernel in enumerate(kernels):
                verdict = grid.loc[release, kernel]
                klass = verdict_class(verdict) if verdict else "not present"
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=COLOURS[klass], edgecolor="#999999", lw=0.5,
                                           hatch="//" if klass == "not run" else None))
                ax.text(j + 0.5, i + 0.5, _cell_text(verdict), ha="center", va="center", fontsize=7)
        ax.set_xlim(0, len(kernels))
        ax.set_ylim(len(releases), 0)
        ax.set_xticks([j + 0.5 for j in range(len(kernels))])
        ax.set_xticklabels([k.replace(":", ":\n", 1) for k in kernels], rotation=60, ha="right", fontsize=7)
        ax.set_yticks([i + 0.5 for i in range(len(releases))])
        ax.set_yticklabels(releases, fontsize=8)
        ax.set_title(f"vLLM {variant}" + (" + PR #55109" if variant.startswith("patched") else ""), fontsize=9)
    handles = [Patch(facecolor=c, edgecolor="#999999", label=k) for k, c in COLOURS.items() if k != "other"]
    fig.legend(handles=handles, loc="upper center", ncol=7, fontsize=7, frameon=False, bbox_to_anchor=(0.5, 0.0))
    return fig

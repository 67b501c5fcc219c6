"""Figure of the release matrix: release x kernel, coloured by verdict, released beside patched.

Pure drawing from the verdict table of :mod:`repro.analysis.releases` (the lead wires it into the report).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from repro.analysis.releases import (
    complete_matrix,
    matrix_table,
    merge_runs,
    patch_effect,
    verdict_class,
    verdicts,
    version_key,
)

COLOURS = {
    "correct": "#4c9a2a",
    "wrong": "#e69f00",
    "faults": "#c0392b",
    "not present": "#eeeeee",
    "could not load": "#7f7f7f",
    "not run": "#ffffff",
    "not applicable": "#dddddd",
    "other": "#9467bd",
}


def _cell_text(verdict: str) -> str:
    v = str(verdict)
    if v.startswith(("wrong from", "faults from")):
        return v.split()[0] + " ≥" + v.split()[2]
    return {
        "correct": "ok",
        "not present": "",
        "not run": "not run",
        "could not load": "no load",
        "not applicable": "n/a",
    }.get(verdict_class(v), v[:8])


def release_matrix(verdict_frame: pd.DataFrame, variants: tuple[str, ...] = ("released", "patched")) -> Figure:
    """One panel per variant: rows are releases, columns kernels, colour the verdict class."""
    panels = [v for v in variants if (verdict_frame["variant"] == v).any()]
    kernels = sorted(k for k in verdict_frame["kernel"].unique() if k)
    releases = sorted(verdict_frame["release"].unique(), key=version_key)
    fig, axes = plt.subplots(
        1,
        max(1, len(panels)),
        figsize=(1.2 + 1.3 * len(kernels) * max(1, len(panels)), 1.2 + 0.32 * len(releases)),
        squeeze=False,
    )
    for ax, variant in zip(axes[0], panels):
        grid = matrix_table(verdict_frame, variant).reindex(index=releases, columns=kernels).fillna("")
        for i, release in enumerate(releases):
            for j, kernel in enumerate(kernels):
                verdict = grid.loc[release, kernel]
                klass = verdict_class(verdict) if verdict else "not present"
                ax.add_patch(
                    plt.Rectangle(
                        (j, i),
                        1,
                        1,
                        facecolor=COLOURS[klass],
                        edgecolor="#999999",
                        lw=0.5,
                        hatch="//" if klass == "not run" else None,
                    )
                )
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


def short_kernel(label: str) -> str:
    """``v41:_dequantize_and_gather_k_mxfp8_kernel`` -> ``v41 mxfp8``; class kernels keep their class."""
    family, _, name = label.partition(":")
    name = name.replace("_dequantize_and_gather_k_", "").replace("_kernel", "").replace("kernel", "per-block")
    name = name.replace("DequantizeAndGatherKCacheKernel.", "JIT class ").strip("_") or "per-block"
    return f"{family} {name}"


def markdown_section(verdict_frame: pd.DataFrame) -> str:
    """ "Affected releases and kernels": release x kernel, "released -> patched" per cell (PR-comment sized)."""
    effect = patch_effect(verdict_frame)
    if effect.empty:
        return "## Affected releases and kernels\n\nNo release matrix in this run.\n"

    def cell(r) -> str:
        released, patched = _cell_text(r["released"]), _cell_text(r["patched"])
        if verdict_class(r["released"]) == "not present":
            return ""
        return released if not patched or patched == released else f"{released} → {patched}"

    effect = effect.assign(cell=effect.apply(cell, axis=1), kernel=effect["kernel"].map(short_kernel))
    grid = effect.pivot_table(index="release", columns="kernel", values="cell", aggfunc="first").fillna("")
    grid = grid.reindex(sorted(grid.index, key=version_key))
    counts = effect["patch"].value_counts().to_dict()
    lines = [
        "## Affected releases and kernels",
        "",
        "Each cell: the release's kernel as released → with PR #55109's row pitch (`block_table.stride(0)`); "
        "`wrong ≥N` / `faults ≥N`: from N requests on; empty: not shipped.",
        "",
        grid.to_markdown(),
        "",
        "Patch effect over (release, kernel) pairs: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())),
    ]
    return "\n".join(lines) + "\n"


def merge_command(out_dir: str, run_dirs: list[str]) -> int:
    """``repro report OUT --merge RUN...``: one matrix table, its verdicts, section and figure from many runs."""
    import sys
    from pathlib import Path

    missing = [d for d in run_dirs if not (Path(d) / "results" / "04-release-matrix.csv").exists()]
    if len(missing) == len(run_dirs):
        print(
            f"error: --merge: none of {run_dirs} holds results/04-release-matrix.csv; accepted: run folders "
            "of notebook 04",
            file=sys.stderr,
        )
        return 2
    merged = merge_runs(run_dirs)
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    merged.to_csv(out / "results" / "04-release-matrix.csv", index=False)
    v = complete_matrix(verdicts(merged))
    v.to_csv(out / "results" / "04-release-verdicts.csv", index=False)
    (out / "releases.md").write_text(
        markdown_section(v) + "\n" + "\n".join(f"- skipped (no matrix table): {d}" for d in missing) + "\n"
    )
    fig = release_matrix(v)
    (out / "plots").mkdir(exist_ok=True)
    fig.savefig(out / "plots" / "04-release-matrix.png", dpi=110, bbox_inches="tight")
    print(f"merged {len(run_dirs) - len(missing)} runs ({len(merged)} rows) into {out}")
    return 0

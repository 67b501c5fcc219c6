"""The release matrix for readers: the figure (release x kernel, coloured by verdict, released beside
patched), the "Affected releases and kernels" table, and the merge of many runs' matrices into one folder.

Drawing and tables are pure functions of the verdict table of :mod:`repro_studies.analysis.releases`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from repro.core.analysis.rundata import FINISHED, RunData
from repro.report.plots import save
from repro.report.tables import formatted, markdown_table
from repro_studies.analysis import vllm_suite as suite
from repro_studies.analysis.releases import (
    classes,
    complete_matrix,
    matrix_table,
    merge_inputs,
    merge_matrices,
    patch_effect,
    stack_runs,
    verdicts,
    version_key,
)
from repro_studies.kernel_id import KernelKind, from_matrix_label
from repro_studies.registry import VerdictClass
from repro_studies.tables import Table

#: The colour of each verdict class in the figure, in the legend's order; the wheel cache's misses share ``other``.
COLOURS = {
    VerdictClass.CORRECT: "#4c9a2a",
    VerdictClass.WRONG: "#e69f00",
    VerdictClass.FAULTS: "#c0392b",
    VerdictClass.NOT_PRESENT: "#eeeeee",
    VerdictClass.COULD_NOT_LOAD: "#7f7f7f",
    VerdictClass.COULD_NOT_RUN: "#5d6d7e",
    VerdictClass.NOT_RUN: "#ffffff",
    VerdictClass.NOT_APPLICABLE: "#dddddd",
    "other": "#9467bd",
}


def colour_key(klass: VerdictClass) -> str:
    """The legend entry a verdict class is drawn as."""
    return klass if klass in COLOURS else "other"


#: Font size of every text in the release-matrix figure: at least 10 px where it is shown (GitHub's comment
#: column, JupyterLab's output area), whatever the number of releases and kernels.
MATRIX_FONT_PT = 10


@dataclass(frozen=True)
class ReleaseGrid:
    """What the release-matrix figure draws: per variant, a release x kernel frame of verdict classes."""

    releases: list[str]
    kernels: list[str]
    classes: dict[str, pd.DataFrame]  # variant -> release x kernel -> legend entry (colour_key of the class)


def release_grid(verdict_frame: pd.DataFrame, variants: tuple[str, ...] = ("released", "patched")) -> ReleaseGrid:
    shown = [v for v in variants if (verdict_frame["variant"] == v).any()] or list(variants[:1])
    kernels = sorted(k for k in verdict_frame["kernel"].unique() if k)
    releases = sorted(verdict_frame["release"].unique(), key=version_key)
    grid_classes = {}
    for v in shown:
        grid = matrix_table(verdict_frame, v) if (verdict_frame["variant"] == v).any() else pd.DataFrame()
        grid = grid.reindex(index=releases, columns=kernels).fillna("")
        grid_classes[v] = grid.map(lambda x: colour_key(VerdictClass(x or VerdictClass.NOT_PRESENT)))
    return ReleaseGrid(releases, kernels, grid_classes)


def release_matrix(verdict_frame: pd.DataFrame, variants: tuple[str, ...] = ("released", "patched")) -> Figure:
    """The release matrix of a verdict table (:func:`draw_release_grid` of :func:`release_grid`)."""
    return draw_release_grid(release_grid(verdict_frame, variants))


def draw_release_grid(grid: ReleaseGrid) -> Figure:
    """Rows are releases, columns kernels; each cell's left half is the kernel as released, its right half
    with the row-pitch change, coloured by verdict class (the "Affected releases and kernels" table gives the
    request counts). One panel, so its labels stay legible at a comment's width."""
    releases, kernels, shown = grid.releases, grid.kernels, list(grid.classes)
    cell_w, cell_h = 0.55, 0.3
    fig, ax = plt.subplots(figsize=(1.2 + cell_w * max(1, len(kernels)), 1.6 + cell_h * len(releases)))
    half = 1 / len(shown)
    for i, release in enumerate(releases):
        for j, kernel in enumerate(kernels):
            for k, variant in enumerate(shown):
                klass = grid.classes[variant].loc[release, kernel]
                ax.add_patch(
                    plt.Rectangle(
                        (j + k * half, i),
                        half,
                        1,
                        facecolor=COLOURS[klass],
                        edgecolor="#999999" if klass == VerdictClass.NOT_RUN else "#ffffff",  # the hatch's colour
                        lw=0.6,
                        hatch="//" if klass == VerdictClass.NOT_RUN else None,
                    )
                )
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="none", edgecolor="#999999", lw=0.6))
    ax.set_xlim(0, max(1, len(kernels)))
    ax.set_ylim(len(releases), 0)
    ax.set_xticks([j + 0.5 for j in range(len(kernels))])
    ax.set_xticklabels([short_kernel(k) for k in kernels], rotation=50, ha="right", fontsize=MATRIX_FONT_PT)
    ax.set_yticks([i + 0.5 for i in range(len(releases))])
    ax.set_yticklabels(releases, fontsize=MATRIX_FONT_PT)
    ax.tick_params(length=0)
    words = {"released": "as released", "patched": "with PR #55109"}
    halves = ("left half: ", "right half: ") if len(shown) == 2 else ("",)
    ax.set_title(", ".join(h + words.get(v, v) for h, v in zip(halves, shown)), fontsize=MATRIX_FONT_PT, loc="left")
    used = {x for g in grid.classes.values() for x in g.to_numpy().ravel()}
    handles = [Patch(facecolor=c, edgecolor="#999999", label=k) for k, c in COLOURS.items() if k in used]
    # above the panel: below it would run into the rotated kernel names
    fig.legend(
        handles=handles,
        loc="lower left",
        ncol=3,
        fontsize=MATRIX_FONT_PT,
        frameon=False,
        bbox_to_anchor=(0.0, 1.0),
        handlelength=1.2,
        columnspacing=1.0,
    )
    fig.tight_layout()
    return fig


def short_kernel(label: str) -> str:
    """A matrix label as a column heading: ``v41:_dequantize_and_gather_k_mxfp8_kernel`` -> ``v41 mxfp8`` (class
    kernels keep their class), ``cutedsl:v4:v4`` -> ``cutedsl v4:v4``; a label no kernel writes as it is."""
    kernel = from_matrix_label(label)
    if kernel is None:
        return label
    if kernel.kind == KernelKind.CUTEDSL:
        return f"cutedsl {kernel.family}:{kernel.record}"
    family, name = kernel.family, kernel.name
    name = name.replace("_dequantize_and_gather_k_", "").replace("_kernel", "").replace("kernel", "per-block")
    name = name.replace("DequantizeAndGatherKCacheKernel.", "JIT class ").strip("_") or "per-block"
    return f"{family} {name}"


#: How to read the "Affected releases and kernels" table.
GRID_NOTE = (
    "Per kernel and run of consecutive releases with the same outcome: the kernel as released, and with "
    "vllm-project/vllm#55109's row pitch (`block_table.stride(0)`); `wrong ≥N` / `faults ≥N`: from N requests on. "
    "Releases that do not ship a kernel are left out."
)


def affected_table(verdict_frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """One row per kernel and run of consecutive releases with the same outcome (PR-comment sized: five
    columns however many releases and kernels), and the count of each patch effect."""
    effect = patch_effect(verdict_frame)
    if effect.empty:
        return pd.DataFrame(), {}
    releases = sorted(effect["release"].unique(), key=version_key)
    rows = []
    for kernel, g in effect.groupby("kernel", sort=True):
        shipped = g[classes(g["released"]) != VerdictClass.NOT_PRESENT].set_index("release")
        run: list[str] = []
        last = None
        for release in releases + [None]:
            here = None
            if release in shipped.index:
                r = shipped.loc[release]
                patched = r["patched"].cell() if r["patched"] is not None else ""
                here = (r["released"].cell(), patched or "-", str(r["patch"]))
            if here != last and run:
                rows.append(
                    {
                        "kernel": short_kernel(kernel),
                        "releases": run[0] if len(run) == 1 else f"{run[0]} .. {run[-1]}",
                        "as released": last[0],
                        "with the change": last[1],
                        "patch": last[2],
                    }
                )
                run = []
            if here is not None:
                run.append(release)
            last = here
    counts = {str(k): int(v) for k, v in sorted(effect["patch"].value_counts().items())}
    return pd.DataFrame(rows), counts


def markdown_section(verdict_frame: pd.DataFrame) -> str:
    """ "Affected releases and kernels" as Markdown (the merge command's releases.md)."""
    table, counts = affected_table(verdict_frame)
    if table.empty:
        return "## Affected releases and kernels\n\nNo release matrix in this run.\n"
    lines = [
        "## Affected releases and kernels",
        "",
        GRID_NOTE,
        "",
        markdown_table(formatted(table)),
        "",
        "Patch effect over (release, kernel) pairs: " + ", ".join(f"{k}: {v}" for k, v in counts.items()),
    ]
    return "\n".join(lines) + "\n"


#: The notebook-04 table a merge reads from every run.
MATRIX_TABLE = Table.RELEASE_MATRIX
#: What a merge folder holds besides its tables: which runs went in (a merge folder is not a run folder).
MERGE_RECORD = "merge.json"


@dataclass
class Merged:
    """Many runs' release matrices as one: the rows, their verdicts, vLLM's regression test and the patch per
    release, ``releases.md`` and ``merge.json``."""

    rows: pd.DataFrame
    verdicts: pd.DataFrame
    suite: pd.DataFrame  # the regression test's summary rows of every run, with ``run``
    patches: pd.DataFrame  # the patch rows of every run, with ``run`` and the diff's path from the merge folder
    markdown: str
    record: dict


def _stacked(runs: list[RunData], table: Table) -> pd.DataFrame:
    return stack_runs([(run.name, run.table(table)) for run in runs])


def suite_section(summary: pd.DataFrame, patches: pd.DataFrame) -> list[str]:
    """The regression test written for vLLM's suite and the patch, per release, over the merged runs: a release
    two runs agree on is shown once (from the first), a disagreement keeps both rows."""
    outcomes = suite.outcomes_per_run(summary, patches)
    if not len(outcomes):
        return []
    outcomes["diff"] = [
        f"[{d}](../{run}/patches/{d})" if d else "" for d, run in zip(outcomes["diff"], outcomes["run"])
    ]
    return [
        "### vLLM's regression test and the patch, per release",
        "",
        "`upstream-tests/test_dequantize_and_gather_strided_block_table.py` run unchanged against each release's own "
        "modules, as released and with the release's diff applied by `patch -p1` (each run's `patches/` folder).",
        "",
        markdown_table(formatted(outcomes)),
        "",
    ]


def merge(runs: list[RunData]) -> Merged:
    """The merge of runs already read (and checked) once; pure, so the committed merge can be re-derived."""
    merged = merge_matrices([(run.name, run.table(MATRIX_TABLE)) for run in runs])
    inputs = merge_inputs([(run.name, run.status, run.table(MATRIX_TABLE)) for run in runs], merged)
    v = complete_matrix(verdicts(merged))
    unfinished = inputs[~inputs["status"].isin(FINISHED)]
    summary, patches = _stacked(runs, suite.SUMMARY_TABLE), _stacked(runs, suite.PATCH_TABLE)
    lines = [
        markdown_section(v),
        *suite_section(summary, patches),
        "### Merged runs",
        "",
        "An arm one run could not try (`not run`, `download failed`) and another run measured keeps the "
        "measured rows; rows two runs agree on are kept once; any other disagreement keeps both.",
        "",
        markdown_table(formatted(inputs)),
    ]
    if len(unfinished):
        lines += [
            "",
            "**Did not finish:** "
            + ", ".join(f"{r.run} (status {r.status})" for r in unfinished.itertuples())
            + ". Their matrix rows are recorded case by case and are used; what those runs would have done "
            "after their last row is missing.",
        ]
    record = {"inputs": inputs.to_dict("records"), "rows": len(merged)}
    return Merged(merged, v, summary, patches, "\n".join(lines) + "\n", record)


def merge_command(out_dir: str | Path, runs: list[RunData]) -> int:
    """``repro report OUT --merge RUN...``: writes the merge's table, verdicts, ``releases.md``,
    ``merge.json`` and figure into ``OUT``."""
    result = merge(runs)
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    result.rows.to_csv(out / "results" / f"{MATRIX_TABLE}.csv", index=False)
    result.verdicts.to_csv(out / "results" / f"{Table.RELEASE_VERDICTS}.csv", index=False)
    for table, frame in ((suite.SUMMARY_TABLE, result.suite), (suite.PATCH_TABLE, result.patches)):
        if len(frame):
            frame.to_csv(out / "results" / f"{table}.csv", index=False)
    (out / "releases.md").write_text(result.markdown)
    (out / MERGE_RECORD).write_text(json.dumps(result.record, indent=2) + "\n")
    save(release_matrix(result.verdicts), out, MATRIX_TABLE)
    used = sum(1 for i in result.record["inputs"] if i["rows"])
    print(f"merged {used} runs ({len(result.rows)} rows) into {out}")
    return 0

"""Notebook 03's arms of vLLM's own kernel, per release: why PR #55109's log shows a JIT compilation, the
fix's cost, whose code each arm runs, the exact rewrite, and the JIT fingerprint of each release's kernel."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro import seeds
from repro.registry import implementation
from repro.report.model import Common, Drawn, Section, TemplateFile
from repro_studies.analysis import jit as jit_rules
from repro_studies.analysis import upstream_cost
from repro_studies.analysis.affected import Warmups, warmups
from repro_studies.registry import GPU_FAMILY_NAMES, UPSTREAM_IMPLEMENTATION, Form, arms_by_label
from repro_studies.report import upstream_plots
from repro_studies.tables import Facts, Plot, Table

RATIOS, JIT_FIGURE = Plot.VLLM_RATIOS, Plot.VLLM_JIT
CAPTIONS = {
    RATIOS: "vllm-project/vllm#55109 on vLLM's own kernel: time ratios, CUDA-graph replays",
    JIT_FIGURE: "Triton compilations of each release's kernel against distinct block-table widths",
}
#: A table with more rows or columns than this is folded.
FOLD_ROWS, FOLD_COLUMNS = 6, 8


@dataclass(frozen=True)
class Rewrite:
    origin: str
    module: str
    wheel: str
    wheel_sha256: str
    constexpr_edits: tuple[str, ...]
    diff: str


@dataclass(frozen=True)
class RootCause:
    """Why PR #55109's log shows a JIT compilation, in this run's figures (``phrases.md.j2`` words them)."""

    story: dict  # jit_rules.release_story: per release, its warm-up and compilations
    logged_kernel: str  # the kernel PR #55109's log names
    backing_width: int | None  # the warm-up's table width
    warmups: Warmups | None  # where the releases warm their gather up (notebook 05), if this run read it


@dataclass(frozen=True)
class VllmKernel:
    root_cause: RootCause | None
    timed: bool
    medians: pd.DataFrame | None
    ratios: pd.DataFrame | None
    costs: dict  # upstream_cost.cost_facts: the spread of each ratio per release (phrases.md.j2 words it)
    cost: tuple[tuple[str, pd.DataFrame], ...]  # per release: the graph-replay ratio table
    loads: pd.DataFrame | None  # what was loaded (untimed runs)
    whose: pd.DataFrame
    rewrites: tuple[Rewrite, ...]
    jit: pd.DataFrame | None  # compilations per form and table kind, each release's kernel
    jit_observed: bool
    jit_cumulative: pd.DataFrame | None


def _root_cause(c: Common) -> RootCause | None:
    """Why the PR's log shows a JIT compilation before the illegal access, with this run's measurements."""
    rows = c.run.table(Table.JIT)
    if rows is None or not len(rows):
        return None
    releases = jit_rules.loaded_releases(c.run.facts.get(Facts.VLLM))
    _, theirs = jit_rules.split_by_code(rows, releases)
    if not len(theirs):
        return None
    logged = str(seeds.load(55109).get("reported_jit_kernel", ""))
    warm = theirs[theirs["phase"] == "warm-up"]["width"] if "phase" in theirs else pd.Series(dtype=int)
    story = jit_rules.release_story(rows, releases, logged)
    where = warmups(c.run.table(Table.GATHER_WARMUPS), GPU_FAMILY_NAMES)
    return RootCause(story, logged, int(warm.iloc[0]) if len(warm) else None, where) if story else None


def _whose_code(c: Common) -> pd.DataFrame:
    """Whose code each timed arm runs (registry entries), with the loaded wheel's hash: one row per kernel."""
    releases = (c.run.facts.get(Facts.VLLM) or {}).get("releases", {})
    rows = []
    for table in (Table.PERF_MEDIANS, Table.VLLM_MEDIANS):
        med = c.run.table(table)
        if med is None or not len(med):
            continue
        for label, entry in arms_by_label(med).items():
            info = releases.get(entry.origin, {})
            kernel = info.get("kernel", "")
            if not kernel and entry.implementation != UPSTREAM_IMPLEMENTATION:
                try:
                    kernel = implementation(entry.implementation).target
                except KeyError:
                    kernel = str((c.run.manifest.get("parameters") or {}).get("reference_gather", ""))
            sha = str(info.get("wheel_sha256") or "")[:16]
            rows.append({"arm": label, "code": entry.origin, "kernel": kernel, "wheel sha256": sha})
    if not rows:
        return pd.DataFrame()
    # one row per piece of code, naming every arm that runs it
    frame = pd.DataFrame(rows)
    return (
        frame.groupby(["code", "kernel", "wheel sha256"], sort=False)["arm"]
        .agg(lambda arms: "; ".join(arms))
        .reset_index()
        .rename(columns={"arm": "arms"})
    )


def changed_lines(diff: str) -> str:
    """A unified diff without its context lines: the file names, the hunk headers and what changed (the whole diff
    stays in the run folder; the report shows what a reviewer reads)."""
    return "\n".join(line for line in diff.splitlines() if line[:1] in ("-", "+", "@")).rstrip()


def _rewrites(c: Common) -> tuple[Rewrite, ...]:
    releases = (c.run.facts.get(Facts.VLLM) or {}).get("releases", {})
    out = []
    for origin, info in releases.items():
        forms = info.get("forms") or {}
        patched, other = forms.get(Form.PATCHED) or {}, forms.get(Form.PATCHED_CONSTEXPR) or {}
        if patched.get("diff"):
            out.append(
                Rewrite(
                    origin,
                    str(info.get("module", "")),
                    str(info.get("wheel")),
                    str(info.get("wheel_sha256") or "")[:16],
                    tuple(other.get("edits") or ()),
                    changed_lines(patched["diff"]),
                )
            )
    return tuple(out)


def _jit(c: Common) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    summary = c.run.table(Table.JIT_SUMMARY)
    if summary is None or not len(summary) or "variant" not in summary:
        return None, None
    rows = c.run.table(Table.JIT)
    releases = jit_rules.loaded_releases(c.run.facts.get(Facts.VLLM))
    theirs = summary[summary["variant"].isin(jit_rules.release_variants(rows, releases))]
    if not len(theirs):
        return None, None
    table = theirs.drop(columns=[col for col in ("notebook", "calls") if col in theirs])
    table = table[[col for col in table.columns if table[col].notna().any()]]
    if {"predicted_compiles", "observed_compiles"} <= set(table.columns) and table["observed_compiles"].notna().all():
        table = table.drop(columns="predicted_compiles")  # counted: the prediction is checked elsewhere
    table = table.rename(columns=lambda col: str(col).replace("_median", "").replace("_", " "))
    cumulative = None
    if rows is not None and len(rows):
        _, mine = jit_rules.split_by_code(rows, releases)
        cumulative = jit_rules.cumulative_by_width(mine, phase="inference") if len(mine) else None
    return table, cumulative


def derive(c: Common) -> VllmKernel | None:
    loads, ratios = c.run.table(Table.VLLM_LOADS), c.run.table(Table.VLLM_RATIOS)
    medians = c.run.table(Table.VLLM_MEDIANS)
    jit, cumulative = _jit(c)
    root = _root_cause(c)
    has_loads = loads is not None and len(loads)
    if not has_loads and jit is None and not root:
        return None
    timed = bool(has_loads) and ratios is not None and len(ratios) > 0
    cost = ()
    if timed:
        cost = tuple(
            (origin, upstream_cost.cost_table(ratios, origin, "graph").round(3))
            for origin in (upstream_cost.origins(medians) if medians is not None else [])
        )
    shown = loads[[col for col in ("release", "variant", "kernel", "ok") if col in loads]] if has_loads else None
    return VllmKernel(
        root_cause=root,
        timed=timed,
        medians=medians,
        ratios=ratios,
        costs=upstream_cost.cost_facts(ratios) if timed else {},
        cost=cost,
        loads=shown if has_loads and not timed else None,
        whose=_whose_code(c) if has_loads else pd.DataFrame(),
        rewrites=_rewrites(c) if has_loads else (),
        jit=jit,
        jit_observed=(c.run.facts.get(Facts.JIT) or {}).get("mode") == "observed",
        jit_cumulative=cumulative,
    )


def figures(d: VllmKernel, c: Common) -> list[Drawn]:
    out = []
    if d.timed and d.medians is not None and len(d.medians):
        for name, fig in upstream_plots.cost_figures(d.medians, d.ratios):
            out.append(Drawn(name, CAPTIONS.get(name, name), fig))
    if d.jit_cumulative is not None:
        out.append(Drawn(JIT_FIGURE, CAPTIONS[JIT_FIGURE], upstream_plots.jit_releases_figure(d.jit_cumulative)))
    return out


def _figure_names(d: VllmKernel) -> list[str]:
    return [f"{Plot.VLLM_TIME}-{L}" for L in sorted(set(d.medians[d.medians["launch"] == "graph"]["seq_len"]))] + [
        RATIOS
    ]


MARKDOWN = TemplateFile("repro_studies.report", "vllm-kernel.md.j2")

SECTION = Section(
    "vllm kernel",
    derive,
    MARKDOWN,
    figures=figures,
    helpers={
        "FOLD_ROWS": FOLD_ROWS,
        "FOLD_COLUMNS": FOLD_COLUMNS,
        "figure_names": _figure_names,
        "jit_figure": JIT_FIGURE,
    },
)

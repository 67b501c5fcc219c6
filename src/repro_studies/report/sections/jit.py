"""Notebook 03: Triton compilations on the inference path per block-table width, for this repository's
kernels (vLLM's have their own section); and, in the test result's table of PR #55109's figures, the compilations
of the release kernel whose name the PR's log shows (:data:`LOGGED_COMPILATION`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro import seeds
from repro.registry import CodeRan, Whose
from repro.report.model import Common, Drawn, Insert, Section, Slot, TemplateFile
from repro_studies.analysis.jit import cumulative_by_width, loaded_releases, release_variants, split_by_code
from repro_studies.report import timing_plots
from repro_studies.tables import Facts, Plot, Table

FIGURE = Plot.JIT


@dataclass(frozen=True)
class Jit:
    observed: bool
    table: pd.DataFrame
    cumulative: pd.DataFrame | None  # compilations against distinct widths (the figure)


def derive(c: Common) -> Jit | None:
    summary = c.run.table(Table.JIT_SUMMARY)
    rows = c.run.table(Table.JIT)
    releases = loaded_releases(c.run.facts.get(Facts.VLLM))
    if summary is not None and "variant" in summary:
        summary = summary[~summary["variant"].isin(release_variants(rows, releases))]
    if summary is None or not len(summary):
        return None
    table = summary.drop(columns=[col for col in ("notebook", "calls") if col in summary])
    table = table[[col for col in table.columns if table[col].notna().any()]]  # columns this run could measure
    table = table.rename(columns=lambda col: col.replace("_", " ").replace(" median", ""))
    cumulative = None
    if rows is not None and len(rows):
        ours = split_by_code(rows, releases)[0]
        cumulative = cumulative_by_width(ours, phase="inference") if len(ours) else None
    observed = (c.run.facts.get(Facts.JIT) or {}).get("mode", "") == "observed"
    return Jit(observed, table, cumulative)


def figures(d: Jit, c: Common) -> list[Drawn]:
    if d.cumulative is None:
        return []
    caption = "Triton compilations against distinct block-table widths"
    return [Drawn(FIGURE, caption, timing_plots.jit_fingerprint(d.cumulative))]


MARKDOWN = TemplateFile("repro_studies.report", "jit.md.j2")

SECTION = Section("jit", derive, MARKDOWN, figures=figures, helpers={"figure": FIGURE})


@dataclass(frozen=True)
class LoggedCompilation:
    """The JIT compilation PR #55109's log shows before the fault, as a release's own kernel compiled in this run."""

    logged: str  # the kernel the PR's log names
    compiles: int  # narrowed-table compilations after the warm-up
    widths: int  # the narrowed widths it compiled for
    code: CodeRan  # the release kernel that compiled


def logged_compilation(c: Common) -> LoggedCompilation | None:
    """The first release whose kernel carries the logged name and was timed as shipped (constexpr width)."""
    story = (c.run.facts.get(Facts.VLLM_JIT) or {}).get("releases") or {}
    for origin, s in story.items():
        shipped = (s.get("forms") or {}).get("constexpr width") or {}
        if s.get("names_the_logged_kernel") and shipped:
            logged = str(seeds.load(55109).get("reported_jit_kernel", ""))
            code = CodeRan(Whose.RELEASE, s["kernel_name"], origin)  # the release's own kernel
            return LoggedCompilation(logged, int(shipped["narrowed_compiles"]), int(shipped["narrowed_widths"]), code)
    return None


LOGGED_COMPILATION = Insert(
    Slot.RESULT_GATHER_ROWS,
    logged_compilation,
    TemplateFile("repro_studies.report", "jit-logged-compilation.md.j2"),
)
LOGGED_COMPILATION_CODE = Insert(
    Slot.RESULT_GATHER_CODE,
    logged_compilation,
    TemplateFile("repro_studies.report", "jit-logged-compilation-code.md.j2"),
)

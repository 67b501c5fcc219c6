"""The "Who is affected" tables: the report's compact table and the detailed rows a page links.

The detailed table is :func:`repro_studies.analysis.affected.who_is_affected` of a run's dispatch table and runner
answers, joined with release-matrix verdicts (the run's own ``04-release-matrix``, or a given verdict table); each
cell links the row behind it. A report carries :func:`~repro_studies.analysis.affected.compact` of it (at most ten
rows, one per outcome). The README's table of both bugs and ``docs/who-is-affected.md`` are
:mod:`repro_studies.report.readme`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from repro.core.analysis.rundata import RunData
from repro.report.links import Link
from repro.report.tables import markdown_table
from repro_studies.analysis import affected as analysis
from repro_studies.analysis.releases import verdicts as matrix_verdicts
from repro_studies.kernel_id import KernelId
from repro_studies.registry import (
    GPU_FAMILY_NAMES,
    GPU_FAMILY_SHORT,
    TABLE_AFFECTED,
    TABLE_ANSWERS,
    TABLE_DISPATCH,
    names_tp_sizes,
)
from repro_studies.tables import Table

MATRIX = Table.RELEASE_MATRIX


def verdicts_of(run: RunData) -> pd.DataFrame | None:
    matrix = run.tables.get(MATRIX)
    return matrix_verdicts(matrix) if matrix is not None and len(matrix) else None


def derive(run: RunData, verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """The who-is-affected frame of a run (empty when the run has no dispatch table)."""
    dispatch, answers = run.tables.get(TABLE_DISPATCH), run.tables.get(TABLE_ANSWERS)
    if dispatch is None or not len(dispatch):
        return pd.DataFrame(columns=analysis.AFFECTED_COLUMNS)
    return analysis.who_is_affected(dispatch, answers, verdicts if verdicts is not None else verdicts_of(run))


def code(kernel: KernelId | str) -> str:
    """A who-is-affected ``kernel`` cell with the kernel's name as a Markdown code span (plain text: copy and grep
    find it): Triton `k`, CuTe-DSL `k`; words (``the dispatcher raises``) as they are."""
    return f"{kernel.kind} `{kernel.name}`" if isinstance(kernel, KernelId) else str(kernel)


def csv_line(csv: str, position: int) -> str:
    return f"{csv}#L{position + 2}"  # header on line 1, row 0 on line 2


def display(frame: pd.DataFrame, results: str, verdict_csv: str) -> pd.DataFrame:
    """Display cells, those that link the row behind them as :class:`~repro.report.links.Link` values: ``results``
    is the run's results folder and ``verdict_csv`` the verdict table's path, both relative to where the page
    will sit (a page renders each link as it can hold it)."""
    rows = []
    for _, r in frame.iterrows():
        d, m, a = list(r["dispatch_rows"]), list(r["matrix_rows"]), list(r["runner_rows"])
        name = code(r["kernel"])
        kernel = Link(name, csv_line(f"{results}/{TABLE_DISPATCH}.csv", d[0])) if d else name
        bug = Link(str(r["bug"]), csv_line(verdict_csv, m[0])) if m and verdict_csv else str(r["bug"])
        stock = Link(r["stock_vllm"], csv_line(f"{results}/{TABLE_ANSWERS}.csv", a[0])) if a else r["stock_vllm"]
        rows.append(
            {
                "releases": r["releases"],
                "GPU": "; ".join(GPU_FAMILY_NAMES.get(f, f) for f in r["gpu_family"].split(analysis.FAMILY_JOIN)),
                "model": r["model"],
                "record (stored in)": f"{r['record']} B ({r['stored_in']})" + _topology(r),
                "gather kernel": kernel,
                "bug in that kernel": bug,
                "stock vLLM": stock,
            }
        )
    return pd.DataFrame(rows)


def _topology(r: pd.Series) -> str:
    topology = r.get("topology", "")
    return f", {topology}" if names_tp_sizes(topology) else ""


def relative(shown: pd.DataFrame) -> str:
    """A display frame as Markdown, each :class:`~repro.report.links.Link` relative to the page."""
    return markdown_table(shown.map(lambda v: v.relative() if isinstance(v, Link) else v))


def markdown(frame: pd.DataFrame, results: str, verdict_csv: str) -> str:
    return relative(display(frame, results, verdict_csv))


def report_table(run: RunData) -> pd.DataFrame | None:
    """The compact table as the report shows it (``None`` without a dispatch table): each row links the first of
    the rows behind it in the run's ``05-who-is-affected`` table, which holds them all with their evidence."""
    frame = derive(run)
    if not len(frame):
        return None
    compact = analysis.compact(frame, _releases(run))
    return compact_display(compact, lambda i, rows: csv_line(f"results/{TABLE_AFFECTED}.csv", min(rows)))


#: The report's note under its compact table (short: a pull-request comment holds it too).
REPORT_NOTE = (
    "One row per outcome. *bug*: this run's release-matrix verdict (*not measured* without one); *latent*: stock "
    "vLLM's runner code never hands the kernel a column-narrowed table (it is wrong only for forks, plugins and "
    "direct callers), *reached*: it does; *no cutlass* / *cutlass fails*: `nvidia-cutlass-dsl` absent / failing to "
    "import; *rows*: the first row behind it in `results/05-who-is-affected.csv`. Platforms a release cannot serve "
    "the model on have no row."
)


def _families(names: list[str]) -> str:
    """``SM90, ROCm, SM100, SM100 no cutlass at TP 1/2/4/8``: families with one topology named once with it."""
    by_topology: dict[str, list[str]] = {}
    for name in names:
        family, _, topology = name.partition(" at ")
        by_topology.setdefault(topology, []).append(GPU_FAMILY_SHORT.get(family, family))
    parts = []
    for topology, families in by_topology.items():
        shown = ", ".join(families)
        parts.append(f"{shown} at {topology.replace(', ', '/')}" if topology else shown)
    return ", ".join(parts)


def _where(entries: list[tuple[str, list[str], str]]) -> str:
    """``DeepSeek-V4: SM90, SM100 (0.20.0 – 0.21.0); ROCm (0.21.0 – 0.29.0); DeepSeek-V4.1: ...``."""
    by_model: dict[str, list[str]] = {}
    for model, families, releases in entries:
        by_model.setdefault(model, []).append(f"{_families(families)} ({releases})")
    return "; ".join(f"{model}: {'; '.join(parts)}" for model, parts in by_model.items())


def compact_display(compact: pd.DataFrame, detail: Callable[[int, list[int]], str]) -> pd.DataFrame:
    """The compact table as shown; ``detail(i, rows)`` is the link of row ``i`` to the detailed ``rows`` behind it.
    Four columns, so that a table whose kernel names do not wrap still fits a pull request's column."""
    rows = []
    for i, r in compact.iterrows():
        kernels = ", ".join(code(k) for k in r["kernels"])
        records = ", ".join(str(b) for b in r["records"])
        rows.append(
            {
                "model: GPU (releases)": _where(r["where"]),
                "gather kernel (records)": f"{kernels} ({records} B)",
                "bug; stock vLLM": f"{r['bug']}; {r['stock_vllm']}",
                "rows": Link(str(i + 1), detail(i, r["rows"])),
            }
        )
    return pd.DataFrame(rows)


def _releases(run: RunData) -> list[str]:
    dispatch = run.tables.get(TABLE_DISPATCH)
    return [] if dispatch is None else list(dict.fromkeys(dispatch["release"].astype(str)))

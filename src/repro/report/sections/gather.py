"""Evidence of vLLM PR #55109 in notebook 02: what each implementation did over the request-count sweep,
per case, under compute-sanitizer memcheck and in the bounds-checked interpreter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from repro import registry
from repro.core.analysis import gather
from repro.core.analysis.provenance import named_code
from repro.core.analysis.verdict import coverage
from repro.coverage import SentinelMode
from repro.outcomes import Outcome
from repro.registry import CodeRan, Expectation
from repro.report import mermaid, phrases, plots
from repro.report.model import Common, Drawn, Section, TemplateFile
from repro.tables import Plot, Table

MISMATCHES, MEMCHECK = Plot.MISMATCHES, Plot.MEMCHECK


@dataclass(frozen=True)
class Gather:
    sweep: pd.DataFrame
    implementations: pd.DataFrame  # one row per implementation: role, what it did, memcheck, as expected
    codes: tuple[tuple[str, CodeRan], ...]  # (implementation label, the code it ran), in the table's order
    first: int
    last: int
    modes: tuple[str, ...]
    coverage: str  # exactly which cases ran (never a range that did not)
    per_case: pd.DataFrame
    geometries: pd.DataFrame  # the cases of the other geometries, one column per variant (empty: none ran)
    sanitizer: pd.DataFrame | None
    memcheck_per_case: pd.DataFrame | None
    first_access: dict | None
    memory_per_case: pd.DataFrame | None
    chart: str  # the sweep as a Mermaid xychart (the PR comment)


def variant_order(labels: Iterable[str]) -> list[str]:
    known = [e.label for e in registry.implementations()]
    return sorted(labels, key=lambda v: known.index(v) if v in known else len(known))


def _per_case(pivot: pd.DataFrame) -> pd.DataFrame:
    pivot = pivot.reset_index()
    return pivot[["mode", "num_reqs", *variant_order([c for c in pivot.columns if c not in ("mode", "num_reqs")])]]


def _codes(c: Common, sweep: pd.DataFrame) -> tuple[tuple[str, CodeRan], ...]:
    """Whose code each implementation of the sweep ran: this repository's replica or own kernel by its label, the
    implementation under test from what the run recorded of it."""
    out = []
    for v in variant_order(sweep["variant"].unique()):
        if v == registry.UNDER_TEST_LABEL:
            target = str(sweep[sweep.variant == v]["implementation"].iloc[0])
            recorded = (c.run.manifest.get("implementations") or {}).get("implementation") or {"target": target}
            out.append((v, named_code(recorded)))
        else:
            out.append((v, registry.code_of(v)))
    return tuple(out)


def _implementations(c: Common, sweep: pd.DataFrame, memcheck: dict[str, str]) -> pd.DataFrame:
    rows = []
    for v in variant_order(sweep["variant"].unique()):
        b = c.behaviours[v]
        shown = b.bug_signature if registry.expectation(v) == Expectation.BUG else b.correct  # under test: correct
        verdict = "yes" if shown else ("no: the bug's signature" if b.bug_signature else "no")
        row = {"implementation": v, "role": registry.role(v), "observed": phrases.behaviour(b, short=True, bare=True)}
        if memcheck:
            row["memcheck"] = memcheck.get(v, "")
        row["as expected"] = verdict
        rows.append(row)
    return pd.DataFrame(rows)


def _other_geometries(sweep: pd.DataFrame) -> pd.DataFrame:
    if "geometry" not in sweep:
        return pd.DataFrame()
    others = sweep[sweep["geometry"].astype(str) != "default"]
    if not len(others):
        return pd.DataFrame()
    table = gather.geometry_summary(others)
    keys = ["geometry", "case", "requests"]
    return table[[*keys, *variant_order([c for c in table.columns if c not in keys])]]


def _chart(sweep: pd.DataFrame) -> str:
    """Share of tokens differing from the reference per request count, in-range ids (every case ran)."""
    sweep = gather.default_geometry(sweep)
    mode = SentinelMode.IN_RANGE if (sweep["mode"] == SentinelMode.IN_RANGE).any() else str(sweep["mode"].iloc[0])
    rows = sweep[(sweep["mode"] == mode) & (sweep["status"] == Outcome.OK)]
    share = 100 * pd.to_numeric(rows["mismatched_tokens"]) / pd.to_numeric(rows["total_tokens"])
    table = rows.assign(share=share).pivot_table(index="num_reqs", columns="variant", values="share", aggfunc="first")
    series, colours = [], []
    for entry, kind in ((registry.BUGGY, "bar"), (registry.FIXED, "line")):
        if entry.label in table:
            series.append((kind, [round(float(v), 1) for v in table[entry.label]]))
            colours.append(entry.style["color"])
    if not series:
        return ""
    return mermaid.xychart(
        f"% of tokens wrong, {mode} ids (bars: before the fix, line: fixed)",
        "requests",
        [str(int(n)) for n in table.index],
        "% wrong",
        (0, 100),
        series,
        colours,
    )


def derive(c: Common) -> Gather | None:
    sweep = c.run.table(Table.SWEEP)
    if sweep is None:
        return None
    san = c.run.table(Table.SANITIZER)
    san = san if san is not None and len(san) else None
    memory = c.run.table(Table.MEMORY_SAFETY)
    memory = memory if memory is not None and len(memory) else None
    counts = sorted(set(pd.to_numeric(sweep["num_reqs"]).astype(int)))
    return Gather(
        sweep=sweep,
        implementations=_implementations(c, sweep, gather.memcheck_by_variant(san) if san is not None else {}),
        codes=_codes(c, sweep),
        first=counts[0],
        last=counts[-1],
        modes=tuple(dict.fromkeys(sweep["mode"].astype(str))),
        coverage=phrases.coverage(coverage(sweep)),
        per_case=_per_case(gather.mismatch_pivot(sweep)),
        geometries=_other_geometries(sweep),
        sanitizer=san,
        memcheck_per_case=_per_case(gather.memcheck_pivot(san)) if san is not None else None,
        first_access=gather.first_memcheck_access(san) if san is not None else None,
        memory_per_case=_per_case(gather.memory_pivot(memory)) if memory is not None else None,
        chart=_chart(sweep),
    )


def figures(d: Gather, c: Common) -> list[Drawn]:
    out = [
        Drawn(
            MISMATCHES,
            "tokens differing from the reference per request count (X: the process faulted)",
            plots.gather_mismatches(d.sweep),
        )
    ]
    if d.sanitizer is not None:
        out.append(Drawn(MEMCHECK, "compute-sanitizer memcheck errors per case", plots.sanitizer_errors(d.sanitizer)))
    return out


MARKDOWN = TemplateFile("repro.report", "gather.md.j2")

COMMENT = TemplateFile("repro.report", "gather-comment.md.j2")

SECTION = Section(
    "gather", derive, MARKDOWN, COMMENT, figures=figures, helpers={"mismatches": MISMATCHES, "memcheck": MEMCHECK}
)

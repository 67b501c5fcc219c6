"""``report RUN --against OTHER``: two runs, check by check, as Markdown: counts, a per-check summary and
every row whose verdict changed, with the columns that say which case it is."""

from __future__ import annotations

from repro.core.analysis.compare import changed_rows, compare_runs, comparison_counts, comparison_summary
from repro.core.analysis.rundata import RunData
from repro.report.markdown import fit
from repro.report.model import TemplateFile
from repro.report.tables import formatted
from repro.report.template import Page, Target, render

COMPARISON = TemplateFile("repro.report", "comparison.md.j2")


def _params(run: RunData) -> str:
    params = run.manifest.get("parameters") or {}
    return ", ".join(f"`{k}={v}`" for k, v in params.items()) or "default parameters"


def _short(text: object, limit: int = 140) -> str:
    one = " ".join(str(text).split()) if text is not None and str(text) != "nan" else ""
    return one if len(one) <= limit else one[: limit - 1] + "…"


def render_comparison(run_a: RunData, run_b: RunData) -> str:
    """Before/after, check by check: counts, a per-check summary, and every row whose verdict changed,
    with the columns that say which case it is."""
    cmp = compare_runs(run_a, run_b)
    summary = comparison_summary(cmp)
    summary = summary.assign(notebook=summary["notebook"].str[:2])
    changed = changed_rows(cmp).head(200)
    if len(changed):
        changed = changed.assign(**{c: changed[c].map(_short) for c in ("observed (A)", "observed (B)")})
        changed = formatted(changed)
    page = Page(Target.MARKDOWN)
    text = render(
        COMPARISON,
        page,
        a=run_a,
        b=run_b,
        n=comparison_counts(cmp),
        params=_params,
        summary=formatted(summary),
        changed=changed if len(changed) else None,
    )
    return fit(text)

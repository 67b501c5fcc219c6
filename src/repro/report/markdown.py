"""``report.md``: the report as Markdown that pastes into a PR comment (at most 64 KB), and the
check-by-check comparison of two runs."""

from __future__ import annotations

from repro.analysis.compare import compare_runs, comparison_summary
from repro.analysis.rundata import RunData
from repro.report.blocks import build_blocks

#: GitHub's limit for a PR comment is 65,536 characters.
MARKDOWN_LIMIT_BYTES = 64 * 1024


def render_markdown(run: RunData, figure_names: list[str]) -> str:
    """The report's blocks as Markdown; figures are linked as ``plots/<name>.png``."""
    parts = []
    for b in build_blocks(run, figure_names):
        if b.kind == "md":
            parts.append(str(b.value))
        elif b.kind == "table":
            parts.append(b.value.to_markdown(index=False))
        else:
            parts.append(f"![{b.caption}](plots/{b.value}.png)")
    text = "\n\n".join(parts) + "\n"
    if len(text.encode()) > MARKDOWN_LIMIT_BYTES:
        cut = text.encode()[: MARKDOWN_LIMIT_BYTES - 200].decode(errors="ignore")
        text = cut + "\n\n... (truncated to fit a PR comment; the full tables are in results/)\n"
    return text


def render_comparison(run_a: RunData, run_b: RunData) -> str:
    cmp = compare_runs(run_a, run_b)
    ma, mb = run_a.manifest, run_b.manifest
    changed = cmp[cmp["changed"]]
    both = cmp[cmp["in"] == "both"]
    head = [
        f"# Before/after: `{run_a.name}` (A) vs `{run_b.name}` (B)",
        "",
        f"A: {ma.get('parameters')} on {ma.get('environment', {}).get('device')}; "
        f"B: {mb.get('parameters')} on {mb.get('environment', {}).get('device')}.",
        "",
        f"{len(both)} checks ran in both runs; {len(changed)} changed verdict. "
        f"{int((cmp['in'] == 'A only').sum())} ran only in A and {int((cmp['in'] == 'B only').sum())} only in B "
        "(other notebooks or parameters); they are left out below.",
    ]
    parts = ["\n".join(head), comparison_summary(cmp).to_markdown(index=False)]
    if len(changed):
        cols = ["notebook", "check", "variant", "mode", "num_reqs", "observed (A)", "observed (B)"]
        parts += ["## Checks whose verdict changed", changed[cols].head(200).to_markdown(index=False)]
    text = "\n\n".join(parts) + "\n"
    return text[:MARKDOWN_LIMIT_BYTES]

"""``report.md``: the report as Markdown that pastes into a PR comment (at most 64 KB), and the
check-by-check comparison of two runs.

Tables are compact GitHub Markdown (no padding, one line per cell); bulky ones sit in ``<details>``,
which GitHub renders folded.
"""

from __future__ import annotations

import html

import pandas as pd

from repro.analysis.compare import KEY, compare_runs, comparison_counts, comparison_summary
from repro.analysis.rundata import RunData
from repro.report.blocks import Block, build_blocks, link_issues
from repro.report.tables import formatted, markdown_table

#: GitHub's limit for a PR comment is 65,536 characters.
MARKDOWN_LIMIT_BYTES = 64 * 1024


def render_blocks(blocks: list[Block]) -> str:
    parts = []
    for b in blocks:
        if b.kind == "md":
            parts.append(str(b.value))
        elif b.kind == "table":
            parts.append(markdown_table(b.value))
        elif b.kind == "image":
            parts.append(f"![{b.caption}](plots/{b.value}.png)")
        elif b.kind == "fold":
            summary = html.escape(str(b.value))  # GitHub shows a summary's text as is: no Markdown there
            parts.append(f"<details><summary>{summary}</summary>\n\n{render_blocks(b.children).strip()}\n\n</details>")
    return "\n\n".join(p for p in parts if p.strip()) + "\n"


def _fit(text: str) -> str:
    if len(text.encode()) > MARKDOWN_LIMIT_BYTES:
        cut = text.encode()[: MARKDOWN_LIMIT_BYTES - 200].decode(errors="ignore")
        text = cut + "\n\n... (truncated to fit a PR comment; the full tables are in results/)\n"
    return text


def render_markdown(run: RunData, figure_names: list[str]) -> str:
    """The report's blocks as Markdown; figures are linked as ``plots/<name>.png``."""
    return _fit(render_blocks(build_blocks(run, figure_names)))


def _params(manifest: dict) -> str:
    params = manifest.get("parameters") or {}
    return ", ".join(f"`{k}={v}`" for k, v in params.items()) or "default parameters"


def render_comparison(run_a: RunData, run_b: RunData) -> str:
    """Before/after, check by check: counts, a per-check summary, and every row whose verdict changed."""
    cmp = compare_runs(run_a, run_b)
    n = comparison_counts(cmp)
    ma, mb = run_a.manifest, run_b.manifest
    head = [
        f"# Before/after: `{run_a.name}` (A) vs `{run_b.name}` (B)",
        "",
        f"- A: {_params(ma)} on {ma.get('environment', {}).get('device', '?')}",
        f"- B: {_params(mb)} on {mb.get('environment', {}).get('device', '?')}",
        "",
        f"{n['both']} checks ran in both runs; {n['changed']} changed verdict. {n['a_only']} ran only in A and "
        f"{n['b_only']} only in B (other notebooks, implementations or parameters); they are left out below. "
        "A check is one row: notebook, check, variant, mode, case, seq_len and num_reqs.",
    ]
    summary = comparison_summary(cmp)
    summary = summary.assign(notebook=summary["notebook"].str[:2], check=summary["check"].map(link_issues))
    parts = ["\n".join(head), markdown_table(formatted(summary))]
    changed = cmp[cmp["changed"]]
    if len(changed):
        cols = [c for c in KEY if c != "notebook" and changed[c].astype(str).str.len().gt(0).any()]
        table = changed[[*cols, "observed (A)", "observed (B)"]].head(200)
        table = table.assign(**{c: table[c].map(_short) for c in ("observed (A)", "observed (B)")})
        table = table.assign(check=table["check"].map(link_issues))
        parts += ["## Checks whose verdict changed", markdown_table(formatted(table))]
    return _fit("\n\n".join(parts) + "\n")


def _short(text: object, limit: int = 140) -> str:
    one = " ".join(str(text).split()) if not pd.isna(text) else ""
    return one if len(one) <= limit else one[: limit - 1] + "…"

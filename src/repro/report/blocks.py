"""The report's content, in order: a list of section builders, each turning one loaded run into
blocks of Markdown text, tables (already formatted for reading) and figures.

``report.md`` (:mod:`repro.report.markdown`) and ``report.html`` (:mod:`repro.report.html`) render
the same blocks; neither reads anything from the run folder beyond the :class:`RunData` given. A new
section is a function ``(Report) -> list[Block]`` inserted into :data:`SECTIONS` where it belongs
(it returns ``[]`` when the run holds nothing for it).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from repro import registry
from repro.analysis import gather, performance, reshape
from repro.analysis.checks import check_summary, failed_checks
from repro.analysis.rundata import RunData
from repro.analysis.verdict import (
    BUG_GATHER,
    BUG_RESHAPE,
    RunVerdict,
    behaviour,
    describe,
    implementation_names,
    run_verdict,
)
from repro.report import affected, reshape_releases
from repro.report.plots import arm_names as plots_arm_names
from repro.report.tables import formatted

#: Figure captions by name; a figure the run did not draw is left out with its caption.
CAPTIONS = {
    "01-reshape-overrun": "required / available bytes per cache group, buggy and fixed view",
    "02-gather-mismatches": "tokens differing from the reference per request count (X: the process faulted)",
    "02-sanitizer-errors": "compute-sanitizer memcheck errors per case",
    "03-time-graph": "median time per gather, CUDA-graph replays",
    "03-bandwidth-fraction": "share of the copy ceiling, CUDA-graph replays",
    "03-time-eager": "median time per gather, eager launches",
    "03-ceiling-fraction": "each gather's fraction of the streaming ceiling, CUDA-graph replays",
    "03-jit-fingerprint": "Triton compilations against distinct block-table widths",
    "04-release-matrix": "vLLM releases x kernels: as released and with the row-pitch change",
    "03-vllm-ratios": "vllm-project/vllm#55109 on vLLM's own kernel: time ratios, CUDA-graph replays",
    "03-jit-fingerprint-vllm": "Triton compilations of each release's kernel against distinct block-table widths",
}
#: Said where the first figure appears in report.md: images are files linked relative to it.
IMAGE_NOTE = (
    "<sub>Figures are the run folder's `plots/*.png`, linked relatively: they show where this file sits in its "
    "run folder (a repository, a CI artifact). In a pasted PR comment they do not: attach the PNGs.</sub>"
)
MD_ONLY = "md"
#: ``vLLM #54877`` / ``vLLM PR #43988`` / ``PR #55109`` in recorded text: written so it links from any repository.
_VLLM_REF = re.compile(r"(?:vLLM (?:PR |issue )?|PR )#(\d+)")


def link_issues(text: str) -> str:
    """``vllm-project/vllm#N`` for vLLM references in prose (``vLLM #N``, ``vLLM PR #N``, ``PR #N``): GitHub
    links that form from any repository. Code blocks are left as they are."""
    parts = str(text).split("```")
    for k in range(0, len(parts), 2):  # outside fenced code
        parts[k] = _VLLM_REF.sub(r"vllm-project/vllm#\1", parts[k])
    return "```".join(parts)


@dataclass
class Block:
    kind: str  # "md" | "table" | "image" | "fold"
    value: object  # text; a DataFrame of display strings; a figure name; a fold's summary line
    caption: str = ""
    children: list[Block] = field(default_factory=list)  # a fold's content
    only: str = ""  # "md": report.md only (e.g. the note on relative image links)


@dataclass
class Report:
    """What every section builder reads: the run, the figures drawn, the verdict and reader names."""

    run: RunData
    figures: list[str]
    verdict: RunVerdict
    names: dict[str, str]  # parameter (implementation, reference_gather) -> loaded name
    arm_columns: dict[str, str]  # outside arm label -> short column name
    arm_prose: dict[str, str]  # outside arm label -> its name in a sentence

    def image(self, name: str) -> list[Block]:
        return [Block("image", name, CAPTIONS.get(name, name))] if name in self.figures else []

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.run.tables


def prepare(run: RunData, figure_names: list[str]) -> Report:
    names = implementation_names(run)
    columns = outside_names(run)
    prose = {label: names.get("reference_gather", label) for label in columns}
    return Report(run, figure_names, run_verdict(run, reshape.SPLIT_CHECK), names, columns, prose)


def outside_names(run: RunData) -> dict[str, str]:
    """Short names of outside timed arms (legends, table columns), from the provenance the run recorded."""
    med = run.tables.get("03-performance-medians")
    if med is None or not len(med):
        return {}
    info = (run.manifest.get("implementations") or {}).get("reference_gather") or {
        "target": (run.manifest.get("parameters") or {}).get("reference_gather", "")
    }
    return {label: registry.provenance_short(info) for label in performance.outside_arms(med.arm.unique())}


def fold(summary: str, *children: Block) -> Block:
    return Block("fold", summary, children=list(children))


def _md(*lines: str) -> Block:
    return Block("md", "\n".join(lines))


# --------------------------------------------------------------------------------------------
# Sections, in report order.


def summary_section(r: Report) -> list[Block]:
    """The first screen: what was shown, per bug, and the figure that shows it."""
    v = r.verdict
    lines = [f"# {v.title}", "", _run_line(r.run), ""]
    if not v.complete:
        lines.append(f"- **Incomplete**: manifest status `{r.run.status}`.")
        lines += [f"- did not finish: {n}" for n in v.not_finished]
    for f in v.findings:
        lines.append(f"- **{f.bug}**, {f.title}. {f.text[0].upper()}{f.text[1:]}")
    facts = _performance_facts(r)
    if facts:
        lines.append(f"- **Cost of the fix**: {performance.fix_cost_short(facts)} (section *Cost of the fix*).")
    from repro.report import upstream_sections

    vllm_cost = upstream_sections.cost_summary_line(r.run)
    if vllm_cost:
        lines.append(link_issues(vllm_cost))
    lines.append(f"- **Checks**: {_checks_sentence(v)}")
    out = [_md(*lines)]
    key = _key_figure(r)
    if key:
        out += [Block("md", IMAGE_NOTE, only=MD_ONLY), *r.image(key)]
    return out


def _key_figure(r: Report) -> str:
    """The figure the first screen shows (the gather's mismatches, else the reshape's overrun); "" if none."""
    return next((n for n in ("02-gather-mismatches", "01-reshape-overrun") if n in r.figures), "")


def _run_line(run: RunData) -> str:
    m, env = run.manifest, run.environment
    started, finished = str(m.get("started") or ""), str(m.get("finished") or "")
    when = started[:16].replace("T", " ")
    if finished[:10] == started[:10] and finished:
        when += f"-{finished[11:16]}"
    sha = str(env.get("git_sha") or "")[:10]
    parts = [f"Run `{run.name}`", f"profile {m.get('profile', '?')} on {env.get('device', '?')}"]
    if when:
        parts.append(f"{when} UTC")
    if sha:
        parts.append(f"commit `{sha}`" + (" with local changes" if env.get("git_dirty") is True else ""))
    return ", ".join(parts) + "."


def _checks_sentence(v: RunVerdict) -> str:
    if v.checks == 0:
        return "none recorded."
    if v.failed == 0:
        return f"all {v.checks} as expected."
    text = f"{v.checks_ok} of {v.checks} passed"
    if v.failed_explained == v.failed:
        return (
            text + f"; the other {v.failed} are the implementation under test's, each failing exactly where the "
            "bug's expectation passes it: they are the reproduction (section *Checks*)."
        )
    return text + f"; {v.failed} failed (section *Checks*)."


def _performance_facts(r: Report) -> dict:
    med, rat = r.tables.get("03-performance-medians"), r.tables.get("03-performance-ratios")
    if med is None or rat is None or not len(rat):
        return {}
    return performance.headline(med, rat, r.arm_prose)


def reshape_section(r: Report) -> list[Block]:
    checks = r.tables.get("01-reshape-checks")
    if checks is None:
        return []
    err = r.run.facts.get("01-reshape", {}).get("error_text")
    out = [
        _md(
            f"## {BUG_RESHAPE}: reshape overrun",
            "",
            "`_reshape_kv_cache` (V2 model runner) computed kernel blocks per logical block as "
            "`block_size // kernel_block_size`. For a compressed spec the kernel block size is overridden to "
            "`storage_block_size = block_size // compress_ratio`, so the quotient *is* the compress ratio and the "
            "padded branch's `as_strided` view spans `compress_ratio` times the pool. "
            "Fix: `storage_block_size // kernel_block_size`.",
        )
    ]
    if err:
        out.append(_md("PyTorch's error, captured in this run:", "", "```", err, "```"))
    groups = r.tables.get("01-reshape-groups")
    if groups is not None and len(groups):
        table = reshape.group_summary(groups)
        out.append(Block("table", _with_x(formatted(table, 3), ["buggy: required / pool", "fixed: required / pool"])))
        if _key_figure(r) != "01-reshape-overrun":  # not shown on the first screen already
            out += r.image("01-reshape-overrun")
    return out


def _with_x(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame.assign(**{c: frame[c].map(lambda s: f"{s}x" if s else s) for c in columns})


def _variant_order(labels) -> list[str]:
    known = [e.label for e in registry.IMPLEMENTATIONS]
    return sorted(labels, key=lambda v: known.index(v) if v in known else len(known))


def gather_section(r: Report) -> list[Block]:
    sweep = r.tables.get("02-gather-sweep")
    if sweep is None:
        return []
    memory = r.tables.get("02-interpreter-memory-safety")
    san = r.tables.get("02-sanitizer")
    memcheck = gather.memcheck_by_variant(san) if san is not None and len(san) else {}
    rows = []
    for v in _variant_order(sweep["variant"].unique()):
        b = behaviour(sweep, v, memory)
        expect = registry.expectation(v) if v != registry.UNDER_TEST_LABEL else registry.EXPECT_CORRECT
        role = registry.role(v)
        if v == registry.UNDER_TEST_LABEL:
            target = str(sweep[sweep.variant == v]["implementation"].iloc[0])
            role = f"under test: {r.names.get('implementation', f'`{target}`')}"
        shown = b.bug_signature if expect == registry.EXPECT_BUG else b.correct
        verdict = "yes" if shown else ("no: the bug's signature" if b.bug_signature else "no")
        row = {"implementation": v, "role": role, "observed": describe(b, short=True).removeprefix("is ")}
        if memcheck:
            row["memcheck"] = memcheck.get(v, "")
        row["as expected"] = verdict
        rows.append(row)
    out = [
        _md(
            f"## {BUG_GATHER}: strided block-table gather",
            "",
            "`_dequantize_and_gather_k_kernel` reads request `b`'s block `j` at "
            "`block_table_ptr + b * shape[-1] + j`. A column-narrowed view `backing[:n, :w]` has "
            "`stride(0) = W > w`, so every request after the first reads flat element `b*w + j` of the backing "
            "table: wrong ids, and with sentinel ids an address outside the K cache. "
            "Fix: pass `block_table.stride(0)` as the row pitch (identical for contiguous tables). What each "
            f"implementation did over the sweep ({_sweep_range(sweep)}):",
        ),
        Block("table", formatted(pd.DataFrame(rows))),
    ]
    pivot = gather.mismatch_pivot(sweep).reset_index()
    pivot = pivot[["mode", "num_reqs", *_variant_order([c for c in pivot.columns if c not in ("mode", "num_reqs")])]]
    out.append(
        fold(f"Tokens differing from the reference, per case ({len(pivot)} rows)", Block("table", formatted(pivot)))
    )
    if san is not None and len(san):
        mc = gather.memcheck_pivot(san).reset_index()
        mc = mc[["mode", "num_reqs", *_variant_order([c for c in mc.columns if c not in ("mode", "num_reqs")])]]
        first = gather.first_memcheck_access(san)
        out.append(
            _md(
                "Under compute-sanitizer memcheck (each case in its own process) the poison reads are invalid "
                "accesses; in-range misreads stay inside the allocations, so memcheck cannot see them although the "
                "output is wrong."
                + (
                    f" First invalid access reported ({first['variant']}, {first['mode']}, "
                    f"{first['num_reqs']} requests): {first['first_access']}."
                    if first
                    else ""
                )
            )
        )
        out += r.image("02-sanitizer-errors")
        out.append(
            fold(
                f"memcheck errors / tokens differing from the reference, per case ({len(mc)} rows)",
                Block("table", formatted(mc)),
            )
        )
    if memory is not None and len(memory):
        mem = gather.memory_pivot(memory).reset_index()
        mem = mem[["mode", "num_reqs", *_variant_order([c for c in mem.columns if c not in ("mode", "num_reqs")])]]
        out.append(
            fold(
                "Bounds-checked interpreter: lanes outside the view / outside every argument, per case "
                f"({len(mem)} rows)",
                Block("table", formatted(mem)),
            )
        )
    return out


def releases_section(r: Report) -> list[Block]:
    """Notebook 04: every vLLM release's DeepSeek gathers, as released and with the PR's row pitch."""
    from repro.analysis.releases import complete_matrix, verdicts
    from repro.report.releases import GRID_NOTE, affected_table

    matrix = r.tables.get("04-release-matrix")
    if matrix is None or not len(matrix):
        return []
    table, counts = affected_table(complete_matrix(verdicts(matrix)))
    out = [_md("## Affected releases and kernels", "", GRID_NOTE)]
    if len(table):
        out.append(Block("table", formatted(table)))
        out.append(
            _md("Patch effect over (release, kernel) pairs: " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
        )
    return [*out, *r.image("04-release-matrix")]


def _sweep_range(sweep: pd.DataFrame) -> str:
    counts = sorted(set(pd.to_numeric(sweep["num_reqs"]).astype(int)))
    modes = " and ".join(f"`{m}`" for m in dict.fromkeys(sweep["mode"].astype(str)))
    return f"{counts[0]}..{counts[-1]} requests, sentinel ids {modes}"


def fix_cost_section(r: Report) -> list[Block]:
    med, rat = r.tables.get("03-performance-medians"), r.tables.get("03-performance-ratios")
    head = f"## Cost of the fix ({BUG_GATHER})"
    if med is None or rat is None or not len(rat):
        skipped = r.run.facts.get("03-performance", {}).get("headline")
        return [_md(head, "", skipped[0].upper() + skipped[1:] + ".")] if skipped else []
    facts = _performance_facts(r)
    digits = {c: 2 for c in med.columns} | {"narrowed / contig": 3, "copy overhead": 3, "of ceiling": 3}
    out = [_md(head, "", facts["fix_cost"]), *r.image("03-time-graph")]
    for launch, what in (("graph", "CUDA-graph replays"), ("eager", "eager launches")):
        table = performance.fix_cost_table(med, rat, launch)
        children = [Block("table", formatted(table, {c: digits.get(c, 2) for c in table.columns}))]
        if launch == "eager":
            children = [*r.image("03-time-eager"), *children]
        out.append(
            fold(f"Fixed kernel and .contiguous(), {what}: median us and ratios ({len(table)} shapes)", *children)
        )
    return out


def gather_fast_section(r: Report) -> list[Block]:
    """gather_fast is this repository's own kernel, in neither pull request: kept apart from the fix."""
    own = [e for e in registry.IMPLEMENTATIONS if e.role == registry.ROLE_OWN]
    sweep = r.tables.get("02-gather-sweep")
    med, rat = r.tables.get("03-performance-medians"), r.tables.get("03-performance-ratios")
    in_sweep = [e for e in own if sweep is not None and e.label in set(sweep["variant"])]
    timed = med is not None and rat is not None and len(rat) and "fast of ceiling_fraction" in rat
    if not in_sweep and not timed:
        return []
    name = own[0].display
    lines = [
        f"## {name} (in neither pull request)",
        "",
        f"`{own[0].target}` is a stride-aware gather of this repository's own, tiled for bandwidth. Neither "
        f"{BUG_GATHER} nor {BUG_RESHAPE} contains it; it shows how far a gather can get toward the copy ceiling, "
        "and it is not part of the fix or its cost.",
        "",
    ]
    if in_sweep:
        memory = r.tables.get("02-interpreter-memory-safety")
        b = behaviour(sweep, own[0].label, memory)
        san = r.tables.get("02-sanitizer")
        memcheck = gather.memcheck_by_variant(san).get(own[0].label) if san is not None and len(san) else None
        contiguous = r.tables.get("02-contiguous-checks")
        parts = [f"it {describe(b)}"]
        if contiguous is not None:
            mine = contiguous[contiguous["variant"] == own[0].label]
            ok = int(mine["ok"].map(lambda x: str(x).lower() == "true").sum())
            parts.append(f"is bitwise equal on {ok} of {len(mine)} of vLLM's own contiguous cases")
        if memcheck:
            parts.append(f"memcheck: {memcheck}")
        lines.append("Correctness: " + "; ".join(parts) + ".")
    out = [_md(*lines)]
    if timed:
        facts = _performance_facts(r)
        out += [_md(facts["fast"]), *r.image("03-bandwidth-fraction")]
        table = performance.fast_table(med, rat, "graph", r.arm_columns)
        digits = {c: 2 for c in table.columns} | {"narrowed / contig": 3, "of ceiling": 3}
        out.append(
            fold(
                f"{name}, CUDA-graph replays: median us, ratios and speed-ups ({len(table)} shapes)",
                Block("table", formatted(table, digits)),
            )
        )
    return out


def streaming_ceiling_section(r: Report) -> list[Block]:
    """Notebook 03 (GPU): every gather against the streaming ceiling, and what the remaining gap is made of."""
    vs = r.tables.get("03-performance-vs-ceiling")
    if vs is None or not len(vs):
        return []
    headline = r.run.facts.get("03-performance-ceiling", {}).get("headline", "")
    out = [
        _md(
            "## Against the streaming ceiling",
            "",
            "The streaming kernel reads contiguous 584-byte records and writes 1,024-byte bf16 rows with the "
            "gather's dtype work and no block table (this repository's code); a gather's fraction is the best "
            "streaming arm's time over the gather's at the same shape." + (f" {headline}" if headline else ""),
        ),
        *r.image("03-ceiling-fraction"),
    ]
    graph = vs[(vs["launch"] == "graph") & (vs["requests"] == "equal")]
    if len(graph):
        piv = graph.pivot_table(index=["seq_len", "num_reqs"], columns="arm", values="of_stream_fraction")
        ours = [a.label for a in registry.ARMS if a.label in piv.columns]
        piv = piv[ours + performance.outside_arms(piv.columns)]
        names = plots_arm_names(list(piv.columns), r.arm_columns)
        piv = piv.rename(columns=names).reset_index()
        out.append(
            fold(
                f"Fraction of the streaming ceiling per gather, CUDA-graph replays ({len(piv)} shapes)",
                Block("table", formatted(piv, 3)),
            )
        )
    gap = r.tables.get("03-performance-gap")
    if gap is not None and len(gap):
        cols = [c for c in ("num_reqs", "seq_len", "step", "ratio", "added_us", "share_of_gap") if c in gap]
        table = gap[cols].rename(columns={"added_us": "added us", "share_of_gap": "share of gap"})
        out.append(
            fold(
                "What separates gather_fast from the streaming ceiling: each step a ratio of two arms timed in the "
                f"same rounds; the chained steps multiply to the total ({len(table)} rows)",
                Block("table", formatted(table, {"ratio": 3, "added us": 2, "share of gap": 2})),
            )
        )
    return out


def cutedsl_section(r: Report) -> list[Block]:
    """Notebook 03: vLLM's CuTe-DSL gather beside gather_fast, or why not."""
    facts = r.run.facts.get("03-cutedsl")
    if not facts:
        return []
    out = [
        _md(
            "## vLLM's CuTe-DSL gather beside gather_fast",
            "",
            "vLLM's code, called through each release's own dispatcher (`dequant_gather_k_cutedsl.py`; which "
            "releases, GPUs, models and records dispatch to it: *Who is affected*); it takes no row pitch, so "
            f"{BUG_GATHER} does not change it. {facts.get('headline', '')}",
        )
    ]
    table = r.tables.get("03-cutedsl-vs-fast")
    if table is not None and len(table):
        graph = table[table["launch"] == "graph"].drop(columns=["launch", "notebook", "contig_us"], errors="ignore")
        if graph["code"].nunique() == 1:  # the release is named in the headline
            graph = graph.drop(columns="code")
        shown = graph.rename(columns=lambda c: c.replace("_ratio", "").replace("_fraction", "").replace("_us", " us"))
        digits = {c: 2 for c in shown.columns if c.endswith(" us")} | {
            c: 3 for c in shown.columns if c.startswith(("narrowed", "vs fast", "of stream"))
        }
        out.append(
            fold(
                f"CuTe-DSL gather, CUDA-graph replays: medians, narrowed/contiguous, time over gather_fast's, "
                f"fraction of the streaming ceiling ({len(shown)} shapes)",
                Block("table", formatted(shown, digits)),
            )
        )
    return out


def jit_section(r: Report) -> list[Block]:
    """Notebook 03: Triton compilations on the inference path per block-table width (observed or predicted)."""
    summary = r.tables.get("03-jit-summary")
    if summary is not None and "variant" in summary:
        from repro.analysis.jit import is_release_code

        summary = summary[~summary["variant"].map(is_release_code)]  # vLLM's kernels have their own section
    if summary is None or not len(summary):
        return []
    observed = r.run.facts.get("03-jit", {}).get("mode", "") == "observed"
    how = (
        "counted by Triton's compile hooks, compile time from Triton's own CompileTimes"
        if observed
        else "predicted with Triton's own cache-key function for sm_90 (the CPU interpreter compiles nothing)"
    )
    table = summary.drop(columns=[c for c in ("notebook", "calls") if c in summary])
    table = table[[c for c in table.columns if table[c].notna().any()]]  # columns this run could measure
    table = table.rename(columns=lambda c: c.replace("_", " ").replace(" median", ""))
    return [
        _md(
            "## JIT compilations per block-table width",
            "",
            f"After a full-width warm-up, one launch per block-table width, on narrowed views and on contiguous "
            f"tables; compilations {how}.",
        ),
        Block("table", formatted(table, 2)),
        *r.image("03-jit-fingerprint"),
    ]


#: A table of another notebook's section with more rows or columns than this is folded.
FOLD_SMALL_ROWS, FOLD_COLUMNS = 6, 8


def _tidy(blocks: list[Block]) -> list[Block]:
    """Blocks built elsewhere made report-shaped: tables formatted (3 decimals, no per-call columns), bulky
    tables and code diffs folded, vLLM references written so they link from any repository."""
    out = []
    for b in blocks:
        if b.kind == "md":
            text = link_issues(str(b.value))
            if "```diff" in text:  # an exact rewrite: for whoever checks it, not for the first read
                head = text.split("```diff")[0].strip()
                out.append(fold(f"{head.split(',')[0]}: the exact rewrite (diff)", _md(text)))
            else:
                out.append(Block("md", text, b.caption, only=b.only))
        elif b.kind == "table":
            frame = b.value.drop(columns=[c for c in ("notebook", "calls") if c in b.value])
            if {"predicted_compiles", "observed_compiles"} <= set(frame.columns) and frame[
                "observed_compiles"
            ].notna().all():
                frame = frame.drop(columns="predicted_compiles")  # counted: the prediction is checked elsewhere
            frame = frame.rename(columns=lambda c: str(c).replace("_median", "").replace("_", " "))
            table = Block("table", formatted(frame, 2))
            rows, cols = frame.shape
            small = rows <= FOLD_SMALL_ROWS and cols <= FOLD_COLUMNS
            out.append(table if small else fold(f"table ({rows} rows)", table))
        elif b.kind == "image":
            out.append(Block("image", b.value, CAPTIONS.get(str(b.value), b.caption)))
        else:
            out.append(b)
    return out


def vllm_kernel_section(r: Report) -> list[Block]:
    """Notebook 03's arms of vLLM's own kernel per release: cost of the fix, JIT fingerprint, whose code."""
    from repro.report import upstream_sections

    names = [n for n in r.figures if n.startswith("03-vllm-") or n == "03-jit-fingerprint-vllm"]
    blocks = upstream_sections.vllm_cost_blocks(r.run, names) + upstream_sections.vllm_jit_blocks(r.run, names)
    cause = upstream_sections.root_cause_jit(r.run)  # why the PR's log shows a JIT compilation
    if cause:
        blocks.insert(0, Block("md", cause))
    if not blocks:
        return []
    return [_md("## vLLM's own kernel (notebook 03)"), *_tidy(blocks)]


def _merge_passing_variants(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per check whose every variant passed (variants listed, or counted when many); a check
    with a failing variant keeps one row per variant."""
    rows = []
    for (notebook, check), g in summary.groupby(["notebook", "check"], sort=False):
        if (g["verdict"] == "PASS").all() and len(g) > 1:
            names = list(g["variant"])
            variants = ", ".join(names) if len(names) <= 3 else f"{len(names)} variants"
            rows.append(
                {
                    "notebook": notebook,
                    "check": check,
                    "variant": variants,
                    "passed": int(g["passed"].sum()),
                    "total": int(g["total"].sum()),
                    "verdict": "PASS",
                }
            )
        else:
            rows += g.to_dict("records")
    return pd.DataFrame(rows, columns=list(summary.columns))


def checks_section(r: Report) -> list[Block]:
    summary = check_summary(r.tables)
    if not len(summary):
        return []
    summary = _merge_passing_variants(summary)
    summary = summary.assign(notebook=summary["notebook"].str[:2], check=summary["check"].map(link_issues))
    out = [_md("## Checks", "", f"{r.verdict.checks} checks: {_checks_sentence(r.verdict)}")]
    out.append(fold(f"Verdict per check ({len(summary)} groups)", Block("table", formatted(summary))))
    failures = [f for t in r.run.check_tables().values() for f in failed_checks(t)]
    if failures:
        shown = failures[:60]
        more = [f"- ... and {len(failures) - len(shown)} more (results/*.csv)"] if len(failures) > len(shown) else []
        items = "\n".join(f"- {link_issues(' '.join(f.split()))}" for f in shown)
        out.append(fold(f"Failed checks ({len(failures)})", _md(items, *more)))
    return out


def test_plan_section(r: Report) -> list[Block]:
    m = r.run.manifest
    params = m.get("parameters") or {}
    listed = "; ".join(f"`{k}={json.dumps(v) if not isinstance(v, str) else v}`" for k, v in params.items())
    return [
        _md(
            "## Test plan",
            "",
            _rerun(m, r.run.name),
            "",
            "Every notebook ran through papermill"
            + (f" with {listed}, other parameters at their defaults." if listed else " with its default parameters."),
        )
    ]


def _rerun(manifest: dict, name: str) -> str:
    """The manifest's rerun command (shell-quoted, with its ``--out``) and the report command after it.

    Manifests written before the command was quoted and kept ``--out`` show it with the folder's name.
    """
    cmd = str(manifest.get("command") or "python -m repro run")
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = []
    if "--out" in words[:-1]:
        out = words[words.index("--out") + 1]
        return (
            "From the checkout root, into a folder that does not exist yet:\n\n```\nmake test\n"
            f"{cmd}\npython -m repro report {shlex.quote(out)}\n```"
        )
    return f"```\nmake test\n{cmd} --out {name}\npython -m repro report {name}\n```"


def _value(v: object) -> str:
    return "not recorded" if v is None or v == "" else str(v)


def environment_section(r: Report) -> list[Block]:
    env, m = r.run.environment, r.run.manifest
    rows = [{"item": "profile", "value": _value(m.get("profile"))}]
    for k in (
        "device",
        "driver",
        "cuda_runtime",
        "python",
        "torch",
        "triton",
        "compute_sanitizer",
        "compute_sanitizer_version",
        "git_sha",
    ):
        rows.append({"item": k, "value": _value(env.get(k))})
    dirty = env.get("git_dirty")
    rows.append({"item": "git_dirty", "value": {True: "yes", False: "no"}.get(dirty, "not recorded")})
    rows.append({"item": "platform", "value": _value(env.get("platform"))})
    return [_md("## Environment"), Block("table", formatted(pd.DataFrame(rows))), *_implementations(m)]


def _implementations(m: dict) -> list[Block]:
    """What was loaded for ``implementation`` / ``reference_gather``: the provenance the run recorded (a list,
    not table rows: module paths and hashes are too long for a table cell that cannot wrap)."""
    recorded = m.get("implementations") or {}
    params = m.get("parameters") or {}
    lines = []
    for param in ("implementation", "reference_gather"):
        info = recorded.get(param)
        if info:
            lines.append(f"- `{param}`: {registry.provenance_name(info)}, `{info.get('target', '')}`")
            lines += [
                f"  - {key}: `{_value(info[key])}`"
                for key in sorted(info)
                if key not in ("target", "package", "version")
            ]
        elif params.get(param):
            lines.append(f"- `{param}`: `{params[param]}` (version and hash not recorded by this run)")
    return [_md("Implementations named by parameters, as loaded:", "", *lines)] if lines else []


def raw_data_section(r: Report) -> list[Block]:
    return [
        _md(
            "## Raw data",
            "",
            "In the run folder: "
            + ", ".join(f"`{p}`" for p in r.run.files)
            + "; `manifest.json`; executed notebooks in `notebooks/`; figures in `plots/`.",
        )
    ]


#: The report, in order. Insert a builder to add a section (e.g. releases after the gather section).
SECTIONS: list[Callable[[Report], list[Block]]] = [
    summary_section,
    affected.section,
    reshape_section,
    reshape_releases.section,
    gather_section,
    releases_section,
    fix_cost_section,
    gather_fast_section,
    streaming_ceiling_section,
    cutedsl_section,
    jit_section,
    vllm_kernel_section,
    checks_section,
    test_plan_section,
    environment_section,
    raw_data_section,
]


def build_blocks(run: RunData, figure_names: list[str]) -> list[Block]:
    """The whole report, in order, from the run's manifest, tables and facts."""
    report = prepare(run, figure_names)
    return [b for section in SECTIONS for b in section(report)]

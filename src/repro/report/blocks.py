"""The report's content, in order: Markdown text, tables and figures, built from one loaded run.

``report.md`` (:mod:`repro.report.markdown`) and ``report.html`` (:mod:`repro.report.html`) render
the same blocks; neither reads anything from the run folder beyond the :class:`RunData` given.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import pandas as pd

from repro.analysis import gather, performance
from repro.analysis.checks import check_summary, passed_of
from repro.analysis.rundata import RunData
from repro.registry import provenance_name


@dataclass
class Block:
    kind: str  # "md" | "table" | "image"
    value: object  # text, a DataFrame, or a figure name (see repro.report.plots)
    caption: str = ""


def outside_names(run: RunData) -> dict[str, str]:
    """Reader-facing names of outside arms, from the provenance the run recorded when it loaded them."""
    from repro.registry import OUTSIDE_ARM

    info = run.manifest.get("implementations", {}).get("reference_gather")
    if info:
        return {OUTSIDE_ARM.label: provenance_name(info)}
    target = run.manifest.get("parameters", {}).get("reference_gather")
    return (
        {
            label: f"{target.rsplit(':', 1)[-1]} (version not recorded)"
            for label in performance.outside_arms(
                run.tables.get("03-performance-medians", pd.DataFrame(columns=["arm"])).arm.unique()
            )
        }
        if target
        else {}
    )


def build_blocks(run: RunData, figure_names: list[str]) -> list[Block]:
    """The whole report, in order, from the run's manifest, tables and facts."""
    tables, facts, manifest = run.tables, run.facts, run.manifest
    failures = run.failures()
    summary = check_summary(tables)
    env = run.environment
    out: list[Block] = []
    n_checks = int(summary["total"].sum()) if len(summary) else 0
    out.append(Block("md", "# DeepSeek-V4 KV-cache reproduction: " + headline(run, len(failures), n_checks)))

    lines = [
        "## Summary",
        "",
        f"Run `{run.name}`, profile **{manifest.get('profile')}** on **{env.get('device', '?')}**, "
        f"status **{run.status}**, started {manifest.get('started')}, finished {manifest.get('finished')}.",
        "",
    ]
    lines += _bug_summaries(run)
    from repro.report import upstream_sections

    if upstream_sections.cost_summary_line(run):
        lines.append(upstream_sections.cost_summary_line(run))
    if manifest.get("failed_notebooks"):
        lines += ["", "Notebooks that did not finish: " + "; ".join(manifest["failed_notebooks"])]
    out.append(Block("md", "\n".join(lines)))
    out.append(Block("md", _root_cause(facts)))
    jit_cause = upstream_sections.root_cause_jit(run)
    if jit_cause:
        out.append(Block("md", jit_cause))

    out.append(
        Block(
            "md",
            "## Test plan\n\n"
            + _rerun(manifest, run.name)
            + f"\n\nEvery notebook ran through papermill with parameters {json.dumps(manifest.get('parameters', {}))} "
            "(others at their defaults).",
        )
    )

    out.append(Block("md", "## Test result"))
    out += _result_blocks(run, figure_names)
    out.append(Block("md", "### Verdict per check"))
    out.append(Block("table", summary, "checks grouped by notebook, check and variant"))
    if failures:
        out.append(
            Block(
                "md",
                "Failed checks:\n\n"
                + "\n".join(f"- {f}" for f in failures[:40])
                + (f"\n- ... and {len(failures) - 40} more" if len(failures) > 40 else ""),
            )
        )

    env_rows = [
        {"item": k, "value": str(env.get(k))}
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
            "git_dirty",
            "platform",
        )
    ]
    env_rows.insert(0, {"item": "profile", "value": manifest.get("profile")})
    env_rows.append({"item": "parameters", "value": json.dumps(manifest.get("parameters", {}))})
    out.append(Block("md", "## Environment"))
    out.append(Block("table", pd.DataFrame(env_rows)))
    out.append(
        Block(
            "md",
            "## Raw data\n\nIn the run folder:\n\n"
            + "\n".join(f"- `{p}`" for p in run.files)
            + "\n- `manifest.json`, executed notebooks in `notebooks/`, plots in `plots/`",
        )
    )
    return out


def headline(run: RunData, failed: int, checks: int) -> str:
    """The verdict in one line: a run that did not finish, or finished without checks, never "passed"."""
    # A notebook whose checks failed ends with ChecksFailed at its gate: it finished, its checks count.
    broken = [n for n in run.manifest.get("failed_notebooks") or [] if "ChecksFailed" not in str(n)]
    if not run.finished:
        return (
            f"INCOMPLETE (the run is {run.status!r}, not finished): {checks} checks recorded before it stopped, "
            f"{failed} failed"
        )
    if checks == 0:
        return "no checks recorded" + (f"; {len(broken)} notebook(s) did not finish" if broken else "")
    if failed:
        verdict = f"{failed} of {checks} checks failed"
    else:
        verdict = f"all {checks} checks passed"
    return verdict + (f", and {len(broken)} notebook(s) did not finish" if broken else "")


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


def _bug_summaries(run: RunData) -> list[str]:
    tables, facts = run.tables, run.facts
    lines = []
    reshape = tables.get("01-reshape-checks")
    if reshape is not None:
        passed, total = passed_of(reshape)
        lines.append(
            f"- **Reshape overrun (vLLM #43988)**: {passed}/{total} checks passed. "
            + facts.get("01-reshape", {}).get("headline", "")
        )
    sweep = tables.get("02-gather-sweep")
    if sweep is not None:
        lines += gather.sweep_summary(sweep)
    ratios = tables.get("03-performance-ratios")
    med = tables.get("03-performance-medians")
    if ratios is not None and len(ratios) and med is not None:
        lines.append("- **Cost of the fix**: " + performance.headline(med, ratios, outside_names(run))["headline"])
    elif "03-performance" in facts:
        lines.append("- **Cost of the fix**: " + facts["03-performance"].get("headline", ""))
    if "03-performance-ceiling" in facts:
        lines.append("- **Streaming ceiling**: " + facts["03-performance-ceiling"].get("headline", ""))
    return lines


def _root_cause(facts: dict) -> str:
    f1 = facts.get("01-reshape", {})
    err = f1.get("error_text", "(not captured in this run)")
    return "\n".join(
        [
            "## Root cause",
            "",
            "### Reshape overrun (vLLM #43988)",
            "",
            "`_reshape_kv_cache` (V2 model runner) computed kernel blocks per logical block as "
            "`block_size // kernel_block_size`. For a compressed spec the kernel block size is overridden to "
            "`storage_block_size = block_size // compress_ratio`, so the quotient *is* the compress ratio and the "
            "padded branch's `as_strided` view spans `compress_ratio` times the pool. "
            "Fix: `storage_block_size // kernel_block_size`.",
            "",
            "Captured in this run:",
            "",
            "```",
            err,
            "```",
            "",
            "### Strided block-table gather (vLLM #55109)",
            "",
            "`_dequantize_and_gather_k_kernel` reads request `b`'s block `j` at "
            "`block_table_ptr + b * shape[-1] + j`. A column-narrowed view `backing[:n, :w]` has "
            "`stride(0) = W > w`, so every request after the first reads flat element `b*w + j` of the backing "
            "table: wrong ids, and with sentinel ids an address outside the K cache. "
            "Fix: pass `block_table.stride(0)` as the row pitch (identical for contiguous tables).",
        ]
    )


def _image(name: str, figure_names: list[str], caption: str) -> list[Block]:
    return [Block("image", name, caption)] if name in figure_names else []


def _result_blocks(run: RunData, figure_names: list[str]) -> list[Block]:
    tables = run.tables
    out: list[Block] = []
    groups = tables.get("01-reshape-groups")
    if groups is not None:
        out.append(Block("md", "### 01 Reshape: required vs available bytes per cache group"))
        cols = [
            "cache group",
            "variant",
            "compress_ratio",
            "blocks_per_kv_block",
            "required_bytes",
            "available_bytes",
            "fits",
            "overrun",
        ]
        out.append(Block("table", groups[[c for c in cols if c in groups]]))
        out += _image("01-reshape-overrun", figure_names, "required / available bytes")
    sweep = tables.get("02-gather-sweep")
    if sweep is not None:
        out.append(Block("md", "### 02 Gather: tokens differing from the reference (or the fault), per request count"))
        out.append(Block("table", gather.mismatch_pivot(sweep).reset_index()))
        out += _image("02-gather-mismatches", figure_names, "mismatched tokens by request count")
    mem = tables.get("02-interpreter-memory-safety")
    if mem is not None and len(mem):
        out.append(
            Block(
                "md",
                "### 02 Memory safety in the bounds-checked interpreter\n\nLanes outside the view "
                "(inside some argument's storage) / outside every argument, per case:",
            )
        )
        out.append(Block("table", gather.memory_pivot(mem).reset_index()))
    san = tables.get("02-sanitizer")
    if san is not None and len(san):
        out.append(
            Block(
                "md",
                "### 02 Memory safety under compute-sanitizer memcheck\n\nmemcheck errors / tokens "
                "differing from the reference, per case. In-range misreads stay inside the allocations, so "
                "memcheck cannot see them although the output is wrong.",
            )
        )
        out.append(Block("table", gather.memcheck_pivot(san).reset_index()))
        first = gather.first_memcheck_access(san)
        if first:
            out.append(
                Block(
                    "md",
                    f"First invalid access reported (buggy, {first['mode']}, "
                    f"n={first['num_reqs']}): {first['first_access']}",
                )
            )
    out += [Block("image", name, name) for name in figure_names if name.startswith("02-sanitizer")]
    med = tables.get("03-performance-medians")
    names = outside_names(run)
    if med is not None and len(med):
        for mode, what in (
            ("graph", "CUDA-graph replays (kernel time)"),
            ("eager", "eager launches from Python (host launch path included)"),
        ):
            out.append(Block("md", f"### 03 Performance: median microseconds, {what}"))
            out.append(Block("table", performance.median_pivot(med, mode, names).reset_index().round(2)))
    rat = tables.get("03-performance-ratios")
    if rat is not None and len(rat):
        out.append(
            Block(
                "md",
                "### 03 Performance: ratios and fraction of the copy ceiling\n\n"
                "`narrowed/contig`: same kernel, narrowed view over contiguous table (1.0 = the stride costs "
                "nothing); `copy overhead`: `.contiguous()` + kernel over the fixed kernel; `of ceiling`: bytes "
                "moved per second over the device copy measured in the same run.",
            )
        )
        short = rat.drop(columns=[c for c in ("notebook", "copy_ceiling_tbps") if c in rat])
        short = short.rename(
            columns=lambda c: (
                c.replace("_ratio", "")
                .replace("_fraction", "")
                .replace("contiguous-copy overhead", "copy overhead")
                .replace("narrowed/contiguous", "narrowed/contig")
                .replace(" / contiguous table", "")
            )
        )
        out.append(Block("table", short.round(3)))
    out += _ceiling_and_jit_blocks(run)
    from repro.report import upstream_sections

    vllm_figures = [n for n in figure_names if n.startswith("03-vllm-") or n == "03-jit-fingerprint-vllm"]
    out += [Block("image", name, name) for name in figure_names if name.startswith("03-") and name not in vllm_figures]
    out += upstream_sections.vllm_cost_blocks(run, vllm_figures)
    out += upstream_sections.vllm_jit_blocks(run, vllm_figures)
    return out


def _ceiling_and_jit_blocks(run: RunData) -> list[Block]:
    """Notebook 03's streaming ceiling, gap decomposition and JIT fingerprint, where the run has them."""
    tables, out = run.tables, []
    vs = tables.get("03-performance-vs-ceiling")
    if vs is not None and len(vs):
        graph = vs[(vs["launch"] == "graph") & (vs["requests"] == "equal")]
        first = graph.iloc[0] if len(graph) else vs.iloc[0]
        out.append(
            Block(
                "md",
                "### 03 Performance: every gather against the streaming ceiling (CUDA-graph replays)\n\n"
                "The streaming kernel reads contiguous 584-byte records and writes 1,024-byte bf16 rows with the "
                "gather's dtype work and no block table (repro code); a cell is the best streaming arm's time over "
                "the gather's at that shape. Read-only and write-only rates at the largest shape: "
                f"{first['read_only_tbps']:.2f} and {first['write_only_tbps']:.2f} TB/s.",
            )
        )
        piv = graph.pivot_table(index=["seq_len", "num_reqs"], columns="arm", values="of_stream_fraction")
        out.append(Block("table", piv.reset_index().round(3)))
    gap = tables.get("03-performance-gap")
    if gap is not None and len(gap):
        out.append(
            Block(
                "md",
                "### 03 Performance: what separates gather_fast from the streaming ceiling\n\n"
                "Each step is the ratio of two arms timed in the same rounds (graph replays); the chained steps "
                "multiply to the total.",
            )
        )
        cols = ["num_reqs", "seq_len", "step", "numerator", "denominator", "ratio", "added_us", "share_of_gap"]
        out.append(Block("table", gap[[c for c in cols if c in gap]]))
    summary = tables.get("03-jit-summary")
    if summary is not None and "variant" in summary:
        from repro.analysis.jit import is_release_code

        summary = summary[~summary["variant"].map(is_release_code)]  # vLLM's kernels have their own section
    if summary is not None and len(summary):
        mode = run.facts.get("03-jit", {}).get("mode", "")
        how = (
            "counted by Triton's compile hooks, compile time from Triton's own CompileTimes"
            if mode == "observed"
            else "predicted with Triton's own cache-key function for sm_90 (the CPU interpreter compiles nothing)"
        )
        out.append(
            Block(
                "md",
                "### 03 JIT fingerprint: compilations on the inference path after a full-width warm-up\n\n"
                f"One launch per block-table width, narrowed views and contiguous tables; {how}.",
            )
        )
        out.append(Block("table", summary.drop(columns=[c for c in ("notebook",) if c in summary])))
    return out

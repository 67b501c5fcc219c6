"""The report's content about vLLM's own kernel in notebook 03: the root cause of the JIT line in PR #55109's
log, the fix's cost per release, the JIT fingerprint of each release's kernel, whose code every arm is, and
the exact rewrite. Each function turns one loaded run into report blocks (``[]`` when the run has nothing for
it), recomputing its figures from the run's tables with :mod:`repro.analysis`.
"""

from __future__ import annotations

import pandas as pd

from repro import registry
from repro.analysis import jit as jit_rules
from repro.analysis import upstream_cost
from repro.analysis.rundata import RunData
from repro.report.blocks import Block

JIT_TABLE = "03-jit-fingerprint"
VLLM_FACTS = "03-vllm"


def _logged_kernel() -> str:
    from repro.seeds import load

    return str(load(55109).get("reported_jit_kernel", ""))


def _backing_width(rows: pd.DataFrame) -> int | None:
    warm = rows[rows["phase"] == "warm-up"]["width"] if "phase" in rows else pd.Series(dtype=int)
    return int(warm.iloc[0]) if len(warm) else None


def root_cause_jit(run: RunData) -> str:
    """The paragraph for the root cause: why the PR's log shows a JIT compilation before the illegal access,
    with this run's measurements of vLLM's kernels ("" when the run has none)."""
    rows = run.tables.get(JIT_TABLE)
    if rows is None or not len(rows):
        return ""
    _, theirs = jit_rules.split_by_code(rows)
    if not len(theirs):
        return ""
    logged = _logged_kernel()
    story = jit_rules.release_story(rows, logged)
    text = jit_rules.root_cause_text(story, logged, _backing_width(theirs), _warmups(run))
    return "#### The JIT compilation in PR #55109's log\n\n" + text if text else ""


def _warmups(run: RunData) -> str:
    """Which releases warm their Triton gather up where (notebook 05's table, when the run has it)."""
    from repro.analysis.affected import warmup_sentence

    return warmup_sentence(run.tables.get(registry.TABLE_WARMUPS), registry.GPU_FAMILY_NAMES)


def cost_summary_line(run: RunData) -> str:
    """One summary bullet: PR #55109's cost on vLLM's own kernel, per release ("" without timed vLLM arms)."""
    ratios = run.tables.get("03-vllm-ratios")
    if ratios is None or not len(ratios):
        return ""
    return "- **Cost of the fix on vLLM's own kernel**: " + upstream_cost.headline(ratios)["headline"]


def _whose_code(run: RunData) -> pd.DataFrame:
    """Every timed arm of the run and whose code it is (registry entries), with the loaded wheel's hash."""
    releases = (run.facts.get(VLLM_FACTS) or {}).get("releases", {})
    rows = []
    for table in ("03-performance-medians", "03-vllm-medians"):
        med = run.tables.get(table)
        if med is None or not len(med):
            continue
        for label in dict.fromkeys(med["arm"]):
            try:
                entry = registry.arm(label)
            except KeyError:
                rows.append({"arm": label, "code": "", "kernel": "", "wheel sha256": ""})
                continue
            info = releases.get(entry.origin, {})
            kernel = info.get("kernel", "")
            if not kernel and entry.implementation != registry.UPSTREAM_IMPLEMENTATION:
                try:
                    kernel = registry.implementation(entry.implementation).target
                except KeyError:
                    kernel = str((run.manifest.get("parameters") or {}).get("reference_gather", ""))
            rows.append(
                {
                    "arm": label,
                    "code": entry.origin,
                    "kernel": kernel,
                    "wheel sha256": str(info.get("wheel_sha256") or "")[:16],
                }
            )
    return pd.DataFrame(rows)


def _rewrite_blocks(run: RunData) -> list[Block]:
    """PR #55109's rewrite of each release as a diff; the constexpr-stride variant's edits in words."""
    releases = (run.facts.get(VLLM_FACTS) or {}).get("releases", {})
    out = []
    for origin, info in releases.items():
        forms = info.get("forms") or {}
        patched, other = forms.get("patched") or {}, forms.get("patched-constexpr") or {}
        if not patched.get("diff"):
            continue
        text = (
            f"{origin}, PR #55109's change as applied to `{info.get('module', '')}` of {info.get('wheel')} (sha256 "
            f"`{str(info.get('wheel_sha256') or '')[:16]}`); the diffs are in the run folder's `rewrites/`."
        )
        if other.get("edits"):
            text += " The constexpr-stride variant makes only the launch edit: " + "; ".join(other["edits"]) + "."
        out.append(Block("md", f"{text}\n\n```diff\n{patched['diff'].rstrip()}\n```"))
    return out


def vllm_cost_blocks(run: RunData, figure_names: list[str]) -> list[Block]:
    """Notebook 03's vLLM arms: what was loaded, the exact rewrites, and (GPU) the cost of the fix per release."""
    loads = run.tables.get("03-vllm-loads")
    ratios = run.tables.get("03-vllm-ratios")
    if loads is None or not len(loads):
        return []
    out = [
        Block(
            "md",
            "### 03 Cost of the fix on vLLM's own kernel\n\n"
            "Each release's DeepSeek-V4 gather, loaded from its wheel and called through the release's own wrapper: "
            "as shipped on a contiguous table (today's baseline), with PR #55109's change (row pitch "
            "`block_table.stride(0)`, a runtime argument) on the narrowed view and on the contiguous table, and as "
            "shipped after `.contiguous()` of the narrowed view. Ratios of CUDA-graph medians timed in the same "
            "rounds; 0.99-1.01 is no measurable cost.",
        )
    ]
    if ratios is not None and len(ratios):
        facts = upstream_cost.headline(ratios)
        out.append(Block("md", facts["headline"]))
        for origin in upstream_cost.origins(run.tables.get("03-vllm-medians", pd.DataFrame(columns=["arm"]))):
            out.append(Block("md", f"{origin}, CUDA-graph replays (time ratios; `shipped us`: today's kernel)"))
            out.append(Block("table", upstream_cost.cost_table(ratios, origin, "graph").round(3)))
        out += [Block("image", n, n) for n in figure_names if n.startswith("03-vllm-")]
    else:
        shown = loads[[c for c in ("release", "variant", "kernel", "ok") if c in loads]]
        out.append(Block("md", "Loaded (timing runs on the GPU profile only):"))
        out.append(Block("table", shown))
    whose = _whose_code(run)
    if len(whose):
        out.append(Block("md", "Whose code each timed arm runs:"))
        out.append(Block("table", whose))
    return out + _rewrite_blocks(run)


def vllm_jit_blocks(run: RunData, figure_names: list[str]) -> list[Block]:
    """The JIT fingerprint of each release's kernel: compilations on the inference path per form and table."""
    summary = run.tables.get("03-jit-summary")
    if summary is None or not len(summary) or "variant" not in summary:
        return []
    theirs = summary[summary["variant"].map(jit_rules.is_release_code)]
    if not len(theirs):
        return []
    observed = (run.facts.get("03-jit") or {}).get("mode") == "observed"
    how = (
        "counted by Triton's compile hooks, compile time from Triton's own CompileTimes, first-call latency "
        "including the compilation"
        if observed
        else "predicted with Triton's own cache-key function for sm_90 (on the CPU nothing is compiled or launched)"
    )
    table = theirs.drop(columns=[c for c in ("notebook",) if c in theirs])
    table = table[[c for c in table.columns if table[c].notna().any()]]
    return [
        Block(
            "md",
            "### 03 JIT fingerprint of vLLM's own kernel\n\n"
            "After the release's warm-up at the full table width, one launch per distinct width on narrowed views "
            f"of one backing table and on contiguous tables, as shipped, with PR #55109's change and with the "
            f"stride left a `tl.constexpr`; {how}.",
        ),
        Block("table", table),
        *[Block("image", n, n) for n in figure_names if n == "03-jit-fingerprint-vllm"],
    ]

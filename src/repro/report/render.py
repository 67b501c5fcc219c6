"""The report a PR author attaches: ``report.md`` (<= 64 KB, pastes into a PR comment) and a
self-contained ``report.html``, both built from a run folder alone.

The content is a list of blocks (Markdown text, tables, images). ``report.md`` renders tables with
``DataFrame.to_markdown`` and links the PNGs; the report notebook (``notebooks/90-report.ipynb``)
displays the same blocks, and its no-input nbconvert export is ``report.html`` with plots embedded.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from repro.evidence.results import failed_checks, read_results
from repro.paths import notebooks_dir, repo_root

#: GitHub's limit for a PR comment is 65,536 characters.
MARKDOWN_LIMIT_BYTES = 64 * 1024
REPORT_NOTEBOOK_NAME = "90-report.ipynb"


@dataclass
class Block:
    kind: str  # "md" | "table" | "image"
    value: object
    caption: str = ""


def read_facts(run_dir: Path) -> dict:
    facts = {}
    for path in sorted((run_dir / "results").glob("*.json")):
        facts[path.stem] = json.loads(path.read_text())
    return facts


def load_manifest(run_dir: Path) -> dict:
    path = run_dir / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} holds no manifest.json: not a run folder")
    return json.loads(path.read_text())


def _check_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [t for t in tables.values() if {"check", "ok"} <= set(t.columns)]
    if not frames:
        return pd.DataFrame(columns=["notebook", "check", "variant", "passed", "total"])
    allc = pd.concat(frames, ignore_index=True)
    allc["passed"] = allc["ok"].map(lambda v: str(v).lower() in ("true", "1"))
    allc["variant"] = allc.get("variant", pd.Series("", index=allc.index)).fillna("")
    g = allc.groupby(["notebook", "check", "variant"], sort=False)["passed"].agg(["sum", "count"]).reset_index()
    g = g.rename(columns={"sum": "passed", "count": "total"})
    g["verdict"] = g.apply(lambda r: "PASS" if r.passed == r.total else "FAIL", axis=1)
    return g


def blocks(run_dir: str | Path) -> list[Block]:
    """The whole report, in order, from the run folder's manifest, tables, facts and plots."""
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    tables = read_results(run_dir)
    facts = read_facts(run_dir)
    failures = [f for t in tables.values() for f in failed_checks(t)]
    summary = _check_summary(tables)
    env = manifest.get("environment", {})
    out: list[Block] = []
    status = manifest.get("status", "unknown")
    n_checks = int(summary["total"].sum()) if len(summary) else 0
    out.append(Block("md", f"# DeepSeek-V4 KV-cache reproduction: {len(failures)} of {n_checks} checks failed"
                     if failures else f"# DeepSeek-V4 KV-cache reproduction: all {n_checks} checks passed"))

    # ---- Summary
    lines = ["## Summary", "",
             f"Run `{run_dir.name}`, profile **{manifest.get('profile')}** on **{env.get('device', '?')}**, "
             f"status **{status}**, started {manifest.get('started')}, finished {manifest.get('finished')}.", ""]
    lines += _bug_summaries(tables, facts)
    if manifest.get("failed_notebooks"):
        lines += ["", "Notebooks that did not finish: " + "; ".join(manifest["failed_notebooks"])]
    out.append(Block("md", "\n".join(lines)))

    # ---- Root cause
    out.append(Block("md", _root_cause(facts)))

    # ---- Test plan
    cmd = manifest.get("command") or "python -m repro run"
    out.append(Block("md", "## Test plan\n\nFrom the checkout root (the run folder must not exist yet):\n\n```\n"
                     f"make test\n{cmd}\n```\n\nEvery notebook ran through papermill with "
                     f"parameters {json.dumps(manifest.get('parameters', {}))} (others at their defaults)."))

    # ---- Test result
    out.append(Block("md", "## Test result"))
    out += _result_blocks(run_dir, tables)
    out.append(Block("md", "### Verdict per check"))
    out.append(Block("table", summary, "checks grouped by notebook, check and variant"))
    if failures:
        out.append(Block("md", "Failed checks:\n\n" + "\n".join(f"- {f}" for f in failures[:40])
                         + (f"\n- ... and {len(failures) - 40} more" if len(failures) > 40 else "")))

    # ---- Environment and raw data
    env_rows = [{"item": k, "value": str(env.get(k))} for k in (
        "device", "driver", "cuda_runtime", "python", "torch", "triton", "compute_sanitizer",
        "compute_sanitizer_version", "git_sha", "git_dirty", "platform")]
    env_rows.insert(0, {"item": "profile", "value": manifest.get("profile")})
    env_rows.append({"item": "parameters", "value": json.dumps(manifest.get("parameters", {}))})
    out.append(Block("md", "## Environment"))
    out.append(Block("table", pd.DataFrame(env_rows)))
    raw = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "results").glob("*"))
    out.append(Block("md", "## Raw data\n\nIn the run folder:\n\n" + "\n".join(f"- `{p}`" for p in raw)
                     + "\n- `manifest.json`, executed notebooks in `notebooks/`, plots in `plots/`"))
    return out


def _bug_summaries(tables: dict, facts: dict) -> list[str]:
    lines = []
    reshape = tables.get("01-reshape-checks")
    if reshape is not None:
        ok = reshape["ok"].map(lambda v: str(v).lower() == "true")
        lines.append(f"- **Reshape overrun (vLLM #43988)**: {int(ok.sum())}/{len(ok)} checks passed. "
                     + facts.get("01-reshape", {}).get("headline", ""))
    sweep = tables.get("02-gather-sweep")
    if sweep is not None:
        ok = sweep["ok"].map(lambda v: str(v).lower() == "true")
        bug = sweep[sweep.variant == "buggy"]
        counts = sorted(set(sweep.num_reqs))
        wrong = (bug.status != "ok") | (bug.mismatched_tokens.fillna(0) > 0)
        many = bug.num_reqs > 1
        crashed = int((bug.status == "crashed").sum())
        under = sweep[sweep.variant == "under-test"]
        if len(under):
            u_ok = under["ok"].map(lambda v: str(v).lower() == "true")
            bad = sorted(set(under[~u_ok].num_reqs))
            lines.append(f"- **Implementation under test** `{under.implementation.iloc[0]}`: matched the reference in "
                         f"{int(u_ok.sum())} of {len(under)} sweep cases"
                         + (f"; wrong or faulting at request counts {', '.join(map(str, bad))}." if bad else "."))
        lines.append(f"- **Strided block-table gather (vLLM #55109)**: {int(ok.sum())}/{len(ok)} sweep checks passed "
                     f"over request counts {counts[0]}..{counts[-1]} in modes {', '.join(sorted(set(sweep['mode'])))}. "
                     f"The buggy kernel went wrong in {int((wrong & many).sum())} of its {int(many.sum())} cases with 2 "
                     f"or more requests ({crashed} of them faulted) and in {int((wrong & ~many).sum())} of its "
                     f"{int((~many).sum())} single-request cases.")
    perf = tables.get("03-performance-ratios")
    med = tables.get("03-performance-medians")
    if perf is not None and len(perf) and med is not None:
        from repro.evidence.perf import headline

        lines.append("- **Cost of the fix**: " + headline(med, perf)["headline"])
    elif "03-performance" in facts:
        lines.append("- **Cost of the fix**: " + facts["03-performance"].get("headline", ""))
    return lines


def _root_cause(facts: dict) -> str:
    f1 = facts.get("01-reshape", {})
    err = f1.get("error_text", "(not captured in this run)")
    return "\n".join([
        "## Root cause", "",
        "### Reshape overrun (vLLM #43988)", "",
        "`_reshape_kv_cache` (V2 model runner) computed kernel blocks per logical block as "
        "`block_size // kernel_block_size`. For a compressed spec the kernel block size is overridden to "
        "`storage_block_size = block_size // compress_ratio`, so the quotient *is* the compress ratio and the padded "
        "branch's `as_strided` view spans `compress_ratio` times the pool. Fix: `storage_block_size // kernel_block_size`.",
        "", "Captured in this run:", "", "```", err, "```", "",
        "### Strided block-table gather (vLLM #55109)", "",
        "`_dequantize_and_gather_k_kernel` reads request `b`'s block `j` at `block_table_ptr + b * shape[-1] + j`. A "
        "column-narrowed view `backing[:n, :w]` has `stride(0) = W > w`, so every request after the first reads flat "
        "element `b*w + j` of the backing table: wrong ids, and with sentinel ids an address outside the K cache. "
        "Fix: pass `block_table.stride(0)` as the row pitch (identical for contiguous tables).",
    ])


def _result_blocks(run_dir: Path, tables: dict) -> list[Block]:
    out: list[Block] = []
    plots = run_dir / "plots"
    groups = tables.get("01-reshape-groups")
    if groups is not None:
        out.append(Block("md", "### 01 Reshape: required vs available bytes per cache group"))
        cols = ["cache group", "variant", "compress_ratio", "blocks_per_kv_block", "required_bytes",
                "available_bytes", "fits", "overrun"]
        out.append(Block("table", groups[[c for c in cols if c in groups]]))
        out += _image(plots / "01-reshape-overrun.png", "required / available bytes")
    sweep = tables.get("02-gather-sweep")
    if sweep is not None:
        from repro.evidence.sweep import mismatch_pivot

        out.append(Block("md", "### 02 Gather: tokens differing from the reference (or the fault), per request count"))
        out.append(Block("table", mismatch_pivot(sweep).reset_index()))
        out += _image(plots / "02-gather-mismatches.png", "mismatched tokens by request count")
    mem = tables.get("02-interpreter-memory-safety")
    if mem is not None and len(mem):
        out.append(Block("md", "### 02 Memory safety in the bounds-checked interpreter\n\nLanes outside the view "
                         "(inside some argument's storage) / outside every argument, per case:"))
        cell = mem.assign(lanes=mem.out_of_view_lanes.astype(int).astype(str) + " / "
                          + mem.out_of_bounds_lanes.astype(int).astype(str))
        out.append(Block("table", cell.pivot_table(index=["mode", "num_reqs"], columns="variant", values="lanes",
                                                   aggfunc="first").reset_index()))
    san = tables.get("02-sanitizer")
    if san is not None and len(san):
        out.append(Block("md", "### 02 Memory safety under compute-sanitizer memcheck\n\nmemcheck errors / tokens "
                         "differing from the reference, per case. In-range misreads stay inside the allocations, so "
                         "memcheck cannot see them although the output is wrong."))
        cell = san.assign(result=san.error_count.map(lambda v: "-" if pd.isna(v) else str(int(v))) + " / "
                          + san.mismatched_tokens.map(lambda v: "fault" if pd.isna(v) else str(int(v))))
        out.append(Block("table", cell.pivot_table(index=["mode", "num_reqs"], columns="variant", values="result",
                                                   aggfunc="first").reset_index()))
        first = san[san.first_access.fillna("") != ""]
        if len(first):
            out.append(Block("md", f"First invalid access reported (buggy, {first.iloc[0]['mode']}, "
                             f"n={first.iloc[0]['num_reqs']}): {first.iloc[0]['first_access']}"))
    for png in sorted(plots.glob("02-sanitizer*.png")):
        out += _image(png, png.stem)
    med = tables.get("03-performance-medians")
    if med is not None and len(med):
        for mode, what in (("graph", "CUDA-graph replays (kernel time)"),
                           ("eager", "eager launches from Python (host launch path included)")):
            out.append(Block("md", f"### 03 Performance: median microseconds, {what}"))
            piv = med[med.launch == mode].pivot_table(index=["seq_len", "num_reqs"], columns="arm", values="median_us")
            piv = piv[[a for a in ARM_LABELS if a in piv.columns]].rename(columns=ARM_LABELS)
            out.append(Block("table", piv.reset_index().round(2)))
    rat = tables.get("03-performance-ratios")
    if rat is not None and len(rat):
        out.append(Block("md", "### 03 Performance: ratios and fraction of the copy ceiling\n\n"
                         "`narrowed/contig`: same kernel, narrowed view over contiguous table (1.0 = the stride costs "
                         "nothing); `copy overhead`: `.contiguous()` + kernel over the fixed kernel; `of ceiling`: bytes "
                         "moved per second over the device copy measured in the same run."))
        short = rat.drop(columns=[c for c in ("notebook", "copy_ceiling_tbps") if c in rat])
        short = short.rename(columns=lambda c: c.replace("_ratio", "").replace("_fraction", "")
                             .replace("contiguous-copy overhead", "copy overhead")
                             .replace("narrowed/contiguous", "narrowed/contig")
                             .replace(" / contiguous table", ""))
        out.append(Block("table", short.round(3)))
    for png in sorted(plots.glob("03-*.png")):
        out += _image(png, png.stem)
    return out


ARM_LABELS = {
    "fixed / narrowed view": "fixed (view)", "fixed / contiguous table": "fixed (contig)",
    "contiguous-copy / narrowed view": ".contiguous() + kernel", "fast / narrowed view": "fast (view)",
    "fast / contiguous table": "fast (contig)", "vllm / contiguous table": "vLLM 0.22 (contig)",
}


def _image(path: Path, caption: str) -> list[Block]:
    return [Block("image", path, caption)] if path.exists() else []


def render_markdown(run_dir: str | Path) -> str:
    run_dir = Path(run_dir)
    parts = []
    for b in blocks(run_dir):
        if b.kind == "md":
            parts.append(str(b.value))
        elif b.kind == "table":
            parts.append(b.value.to_markdown(index=False))
        else:
            rel = Path(b.value).relative_to(run_dir).as_posix()
            parts.append(f"![{b.caption}]({rel})")
    text = "\n\n".join(parts) + "\n"
    if len(text.encode()) > MARKDOWN_LIMIT_BYTES:
        cut = text.encode()[: MARKDOWN_LIMIT_BYTES - 200].decode(errors="ignore")
        text = cut + "\n\n... (truncated to fit a PR comment; the full tables are in results/)\n"
    return text


def display_blocks(run_dir: str | Path) -> None:
    """Show the report inside a notebook: HTML tables and embedded images."""
    from IPython.display import Image, Markdown, display

    for b in blocks(run_dir):
        if b.kind == "md":
            display(Markdown(str(b.value)))
        elif b.kind == "table":
            display(b.value.style.hide(axis="index"))
        else:
            display(Markdown(f"*{b.caption}*"))
            display(Image(filename=str(b.value)))


def build_report(run_dir: str | Path, progress: bool = False, **engine) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (report notebook executed, exported without code);
    ``engine`` goes to papermill (the CLI's quiet kernel manager)."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    from repro.report.plots import draw_all

    run_dir = Path(run_dir).resolve()
    draw_all(run_dir)
    md_path = run_dir / "report.md"
    md_path.write_text(render_markdown(run_dir))
    source = notebooks_dir() / REPORT_NOTEBOOK_NAME
    executed = run_dir / "notebooks" / REPORT_NOTEBOOK_NAME
    executed.parent.mkdir(exist_ok=True)
    pm.execute_notebook(str(source), str(executed), parameters={"run_dir": str(run_dir)},
                        kernel_name="python3", progress_bar=progress, execution_timeout=600,
                        cwd=str(repo_root()), **engine)
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.register_preprocessor(_drop_tagged("report-hide"), enabled=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    html_path = run_dir / "report.html"
    html_path.write_text(body)
    return md_path, html_path


def _drop_tagged(tag: str):
    """An nbconvert preprocessor removing cells tagged ``tag`` (the notebook's own introduction)."""
    from nbconvert.preprocessors import TagRemovePreprocessor

    return TagRemovePreprocessor(remove_cell_tags={tag}, enabled=True)


# --------------------------------------------------------------------------------------------
# Before/after comparison of two runs, check by check.

KEY = ["notebook", "check", "variant", "mode", "num_reqs"]


def compare_runs(run_a: str | Path, run_b: str | Path) -> pd.DataFrame:
    def checks(run):
        frames = [t for t in read_results(run).values() if {"check", "ok"} <= set(t.columns)]
        df = pd.concat(frames, ignore_index=True)
        for k in KEY:
            if k not in df:
                df[k] = ""
        df["num_reqs"] = pd.to_numeric(df["num_reqs"], errors="coerce").astype("Int64").astype(str).replace("<NA>", "")
        df[KEY] = df[KEY].fillna("").astype(str)
        df["ok"] = df["ok"].astype(str).str.lower() == "true"
        return df[KEY + ["observed", "ok"]]

    a, b = checks(run_a), checks(run_b)
    merged = a.merge(b, on=KEY, how="outer", suffixes=(" (A)", " (B)"), indicator=True)
    merged["in"] = merged.pop("_merge").map({"both": "both", "left_only": "A only", "right_only": "B only"})
    merged["changed"] = (merged["in"] == "both") & (merged["ok (A)"] != merged["ok (B)"])
    return merged


def render_comparison(run_a: str | Path, run_b: str | Path) -> str:
    cmp = compare_runs(run_a, run_b)
    ma, mb = load_manifest(Path(run_a)), load_manifest(Path(run_b))
    changed = cmp[cmp["changed"]]
    both = cmp[cmp["in"] == "both"]
    head = [f"# Before/after: `{Path(run_a).name}` (A) vs `{Path(run_b).name}` (B)", "",
            f"A: {ma.get('parameters')} on {ma.get('environment', {}).get('device')}; "
            f"B: {mb.get('parameters')} on {mb.get('environment', {}).get('device')}.", "",
            f"{len(both)} checks ran in both runs; {len(changed)} changed verdict. "
            f"{int((cmp['in'] == 'A only').sum())} ran only in A and {int((cmp['in'] == 'B only').sum())} only in B "
            "(other notebooks or parameters); they are left out below."]
    grouped = both.groupby(["notebook", "check", "variant"], sort=False).agg(
        **{"passed (A)": ("ok (A)", "sum"), "passed (B)": ("ok (B)", "sum"), "cases": ("changed", "size"),
           "changed": ("changed", "sum")}).reset_index()
    parts = ["\n".join(head), grouped.to_markdown(index=False)]
    if len(changed):
        cols = ["notebook", "check", "variant", "mode", "num_reqs", "observed (A)", "observed (B)"]
        parts += ["## Checks whose verdict changed", changed[cols].head(200).to_markdown(index=False)]
    text = "\n\n".join(parts) + "\n"
    return text[: MARKDOWN_LIMIT_BYTES]


def report_command(run_dir: str, against: str | None, **engine) -> int:
    path = Path(run_dir)
    try:
        load_manifest(path)
        if against:
            load_manifest(Path(against))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if against:
        out = path / f"comparison-vs-{Path(against).resolve().name}.md"
        out.write_text(render_comparison(path, against))
        print(f"wrote {out}")
        return 0
    md, html = build_report(path, **engine)
    print(f"wrote {md} and {html}")
    return 0

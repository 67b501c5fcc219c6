"""report.md and report.html as a reader gets them: what was shown first, compact tables with fixed decimals,
bulky ones folded, tables GitHub renders with the right rows, figures sharp with legends off the data. `make test`
renders one committed run of each kind; `make audit` every other (``rendered.CODE_RUNS``)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from rendered import committed_run, rendering

from repro.core.analysis.reshape import SPLIT_CHECK
from repro.core.analysis.rundata import RunData, load_run
from repro.report import plots
from repro.report import sections as report_sections
from repro.report.analyse import analyse, draw
from repro.report.build import render_run
from repro.report.html import SCOPE, render_fragment
from repro.report.markdown import MARKDOWN_LIMIT_BYTES, render_markdown
from repro.report.model import Section
from repro.report.tables import formatted, markdown_table
from repro.report.verdict import run_verdict
from repro_studies import registry

pytestmark = pytest.mark.integration

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
RUNS = sorted(p for base in (H200, H200.parent / "h100") for p in base.iterdir() if (p / "manifest.json").is_file())
MAX_COLUMNS = 8


@pytest.fixture(scope="module", params=[committed_run(p) for p in RUNS])
def rendered(request) -> tuple[RunData, list[str], str, list[pd.DataFrame]]:
    """The run, its figures' names, report.md and every table report.md shows (as shown), in order."""
    r = rendering(request.param)
    return r.run, r.figures, r.markdown, r.tables


def _md(run: RunData, figures=()) -> str:
    return render_markdown(analyse(run), list(figures))


def _unfolded(md: str) -> str:
    """The Markdown a reader sees before opening any ``<details>``."""
    return re.sub(r"<details>.*?</details>", "", md, flags=re.S)


def _md_tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_the_first_lines_say_what_was_shown(rendered):
    run, _, md, _ = rendered
    head = md[:1500]
    timing_only = set(run.manifest["notebooks"]) == {"03-performance"}  # notebook 03 measures, reproduces nothing
    assert head.startswith(("# Measurements" if timing_only else "# Reproduced") if run.finished else "# Incomplete")
    assert "ChecksFailed" not in md and "status **failed**" not in md
    assert re.search(r"vLLM #\d", md) is None  # issues written vllm-project/vllm#N
    assert "vllm-project/vllm#55109" in head


def test_tables_are_compact_narrow_and_one_line_per_row(rendered):
    _, _, md, _ = rendered
    for table in _md_tables(md):
        widths = {line.replace("\\|", "").count("|") - 1 for line in table}
        assert len(widths) == 1, table[:3]
        assert widths.pop() <= MAX_COLUMNS, table[0]
        assert not any(re.search(r"[^\s|] {2,}\||\| {2,}[^\s|]", line) for line in table), table[0]  # no padding
    assert len(md.encode()) < MARKDOWN_LIMIT_BYTES // 2  # half of what GitHub takes: room for a reply


def test_numeric_columns_have_fixed_decimals(rendered):
    _, _, _, tables = rendered
    for table in tables:
        for col in table.columns:
            decimals = {len(c.split(".")[1]) for c in table[col] if re.fullmatch(r"-?\d+\.\d+x?", c)}
            assert len(decimals) <= 1, (col, decimals)


def test_bulky_tables_are_folded(rendered):
    _, _, md, tables = rendered
    assert tables
    for table in _md_tables(_unfolded(md)):
        assert len(table) - 2 <= 14, table[0]
    assert md.count("<details>") == md.count("</details>")


def test_environment_prints_no_python_none(rendered):
    run, _, md, _ = rendered
    env = md[md.index("## Environment") :]
    assert "None" not in env
    dirty = {True: "yes", False: "no", None: "not recorded", "not recorded": "not recorded"}[
        run.environment.get("git_dirty")
    ]
    assert f"| git_dirty | {dirty} |" in env
    if run.manifest["parameters"].get("implementation") or run.manifest["parameters"].get("reference_gather"):
        assert ", as the parameter named it" in env or ", loaded as `" in env


class _Tables(HTMLParser):
    """Rows of every table's body in an HTML document, in order."""

    def __init__(self):
        super().__init__()
        self.rows: list[int] = []
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        if tag == "tbody":
            self.in_body = True
            self.rows.append(0)
        elif tag == "tr" and self.in_body:
            self.rows[-1] += 1

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False


def test_github_renders_every_table_with_its_rows(rendered):
    import cmarkgfm
    from cmarkgfm.cmark import Options

    _, _, md, tables = rendered
    parser = _Tables()
    parser.feed(cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE))
    assert parser.rows == [len(t) for t in tables]


def test_the_report_notebooks_fragment_is_the_one_drawn_beside_report_md():
    path = H200 / "vllm-0.22.0-under-test"
    assert render_fragment(load_run(path)) == rendering(path).fragment


def test_html_has_the_same_tables_and_every_figure_embedded(rendered):
    run, names, md, tables = rendered
    fragment = rendering(run.path).fragment
    parser = _Tables()
    parser.feed(fragment)
    assert parser.rows == [len(t) for t in tables]
    assert fragment.count("data:image/png;base64,") == md.count("](plots/") == len(names)
    assert fragment.startswith("<style>") and f'<div class="{SCOPE}">' in fragment
    assert "<th>item</th><th>value</th>" in fragment  # text columns carry no right-aligning class
    assert "Figures are the run folder" not in fragment  # the note on relative links is for report.md only


def test_a_section_is_one_module_plugged_in_with_one_line(monkeypatch, rendered):
    run, _, _, _ = rendered
    marker = Section("marker", lambda c: c.run.name, "## Plugged-in marker\n\nRun `{{ d }}`.")
    sections = list(report_sections.SECTIONS)
    sections.insert(sections.index(report_sections.plan.SECTION), marker)
    monkeypatch.setattr(report_sections, "SECTIONS", sections)
    md = _md(run)
    assert md.index("## Plugged-in marker") < md.index("## Test Plan")
    assert f"Run `{run.name}`." in md
    report = render_run(run)
    report.close()
    assert "## Plugged-in marker" not in report.comment  # no comment template: not in the comment


def test_markdown_cells_are_one_line_and_pipes_escaped():
    frame = formatted(pd.DataFrame({"observed": ["crashed: CUDA error\nSearch for `x' | y"], "n": [2.5]}), 2)
    text = markdown_table(frame)
    assert text.splitlines()[2] == "| crashed: CUDA error Search for \\`x' \\| y | 2.50 |"
    assert text.splitlines()[1] == "|---|--:|"


def test_an_incomplete_run_says_so_first(tmp_path):
    run = load_run(H200 / "gpu-profile")
    unfinished = RunData(tmp_path, {**run.manifest, "status": "interrupted"}, run.tables, run.facts, run.files)
    md = _md(unfinished)
    v = run_verdict(unfinished, SPLIT_CHECK)
    assert not v.complete and v.findings == run_verdict(run, SPLIT_CHECK).findings  # the same evidence, unfinished
    assert md.startswith(f"# {v.title}\n") and v.title.startswith("Incomplete:") and "'interrupted'" in v.title


def test_figures_are_sharp_and_legends_stay_off_the_data():
    run = load_run(H200 / "gpu-profile")
    assert plots.DPI >= 150
    drawn = draw(analyse(run))
    figures = {f.name: f.figure for f in drawn}
    assert list(figures)[:3] == ["01-reshape-overrun", "02-gather-mismatches", "02-sanitizer-errors"]
    assert list(figures).index("03-time-graph") < list(figures).index("03-time-eager")
    try:
        for name, fig in figures.items():
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
            assert legends, name
            for legend in legends:
                box = legend.get_window_extent(renderer)
                for ax in fig.axes:
                    parts = [ax.get_window_extent(renderer), ax.title.get_window_extent(renderer)]
                    parts += [a.get_tightbbox(renderer) for a in (ax.xaxis, ax.yaxis)]
                    assert not any(box.overlaps(p) for p in parts if p is not None), name  # data, ticks, labels
        memcheck = figures["02-sanitizer-errors"]
        assert all(len(ax.get_lines()) <= 3 for ax in memcheck.axes)  # identical series drawn once
    finally:
        for fig in figures.values():
            plt.close(fig)


def test_the_environment_shows_what_was_loaded(tmp_path):
    run = load_run(H200 / "vllm-0.22.0-under-test")
    info = {
        "target": "vllm.models.deepseek_v4.common.ops.cache_utils:dequantize_and_gather_k_cache_triton",
        "package": "vllm",
        "version": "0.22.0",
        "module_sha256": "0" * 64,
        "wheel_sha256": "f" * 64,
    }
    manifest = {**run.manifest, "implementations": {"implementation": info}}
    manifest["environment"] = {**run.environment, "git_dirty": False}
    loaded = RunData(tmp_path, manifest, run.tables, run.facts, run.files)
    md = _md(loaded)
    u = run_verdict(loaded, SPLIT_CHECK).findings[-1].under_test  # named from what the run loaded
    assert (u.name, u.target, u.behaviour.bug_signature) == (
        "vllm 0.22.0's dequantize_and_gather_k_cache_triton",
        info["target"],
        True,
    )
    assert md.startswith(f"# {run_verdict(loaded, SPLIT_CHECK).title}\n")
    env = md[md.index("## Environment") :]
    assert "| git_dirty | no |" in env
    assert f"module_sha256: `{'0' * 64}`" in env and f"wheel_sha256: `{'f' * 64}`" in env
    assert "not recorded" not in env.split("| git_dirty")[1]


def test_the_environment_says_what_a_machine_lacks_rather_than_not_recorded(tmp_path):
    """A CPU run records no driver, no CUDA runtime and no compute-sanitizer: the table says there is none; an entry
    the run did not record at all still says so."""
    run = load_run(H200 / "vllm-0.22.0-under-test")
    cpu = {"device": "cpu (Triton interpreter)", "cuda_available": False, "driver": None, "cuda_runtime": None}
    environment = {k: v for k, v in run.environment.items() if k != "compute_sanitizer_version"}
    environment |= {**cpu, "compute_sanitizer": "unavailable", "git_dirty": False}
    md = _md(RunData(tmp_path, {**run.manifest, "environment": environment}, run.tables, run.facts, run.files))
    env = md[md.index("## Environment") :]
    assert "| driver | none (no GPU) |" in env and "| cuda_runtime | none (torch built without CUDA) |" in env
    assert "| compute_sanitizer_version | none (no compute-sanitizer) |" in env and "not recorded" not in env
    del environment["driver"]  # an older manifest without the entry
    md = _md(RunData(tmp_path, {**run.manifest, "environment": environment}, run.tables, run.facts, run.files))
    assert "| driver | not recorded |" in md


def test_gpu_only_sections_are_compact(tmp_path):
    """The streaming-ceiling and JIT parts of notebook 03, from tables shaped as the notebook records them."""
    run = load_run(H200 / "gpu-profile")
    arms = [registry.FIXED_VIEW, registry.FIXED_CONTIG, registry.FAST_VIEW, registry.arm_of("vllm", "contiguous")]
    vs = pd.DataFrame(
        [
            {"seq_len": L, "num_reqs": n, "launch": "graph", "requests": "equal", "of_stream_fraction": f}
            | {"arm": a.label, "kernel": a.implementation, "table": a.table, "median_us": 10.0 / f}
            | {"stream_us": 10.0, "stream_arm": "stream / split / 32", "stream_arms": 3, "copy_equiv_us": 9.0}
            | {"of_copy_fraction": 0.9 * f, "read_only_tbps": 3.3, "write_only_tbps": 4.4}
            for L in (256, 2048)
            for n in (1, 2, 4)
            for a, f in zip(arms, (0.51234, 0.5, 0.8, 0.2))
        ]
    )
    gap = pd.DataFrame(
        [
            {"num_reqs": 4, "seq_len": 2048, "step": s, "ratio": r, "added_us": 1.23456, "share_of_gap": 0.5}
            for s, r in (("indirection", 1.1), ("narrowed view instead of a contiguous table", 1.0))
        ]
    )
    jit = pd.DataFrame(
        [
            {
                "variant": v,
                "table": t,
                "calls": 9,
                "distinct_widths": 8,
                "predicted_compiles": c,
                "observed_compiles": None,
                "compile_ms": None,
            }
            for v, c in (("fixed", 0), ("vllm 0.22.0", 8))
            for t in ("narrowed", "contiguous")
        ]
    )
    tables = {**run.tables, "03-performance-vs-ceiling": vs, "03-performance-gap": gap, "03-jit-summary": jit}
    facts = {**run.facts, "03-jit": {"mode": "predicted"}}
    md = _md(RunData(tmp_path, run.manifest, tables, facts, run.files))
    assert md.index("## gather_fast") < md.index("## Against the streaming ceiling") < md.index("## JIT compilations")
    for table in _md_tables(md):
        assert table[0].count("|") - 1 <= MAX_COLUMNS, table[0]
    assert "| 256 | 1 | 0.512 | 0.500 | 0.800 | 0.200 |" in md
    assert "At 4 x 2048 tokens (graph)" in md and "indirection x1.100" in md  # worded from the two tables
    assert "observed compiles" not in md  # a column this run could not measure is left out


def test_the_release_matrix_is_a_section_after_the_gather(tmp_path):
    from repro_studies.upstream.matrix import row

    k = "v4:_dequantize_and_gather_k_kernel"
    rows = [
        row(
            release=rel,
            kernel=k,
            variant=v,
            mode="in-range",
            num_reqs=n,
            status="ok",
            stray_writes=0,
            mismatched_tokens=(4 if v == "released" and n > 1 else 0),
            total_tokens=10,
        )
        for rel in ("0.22.0", "0.33.0")
        for v in ("released", "patched")
        for n in (1, 2)
    ]
    run = load_run(H200 / "vllm-0.22.0-under-test")
    tables = {**run.tables, "04-release-matrix": pd.DataFrame(rows)}
    report = render_run(RunData(tmp_path, run.manifest, tables, run.facts, run.files))
    report.close()
    assert "04-release-matrix" in [f.name for f in report.figures]
    md = report.markdown.text
    start = md.index("## Affected releases and kernels")
    section = md[start : md.index("\n## ", start + 1)]
    assert md.index("## vllm-project/vllm#55109") < md.index("## Affected releases and kernels")
    assert "| v4 per-block | 0.22.0 .. 0.33.0 | wrong ≥2 | ok | fixed |" in section and "![" in section


def test_the_cutedsl_gather_is_a_section_after_the_ceiling_or_says_why_not(tmp_path):
    from repro_studies.analysis import cutedsl

    run = load_run(H200 / "gpu-profile-vllm")
    table = pd.DataFrame(
        [
            {"code": "vLLM 0.33.0", "seq_len": 2048, "num_reqs": n, "launch": mode, "view_us": 10.0 * n}
            | {"contig_us": 10.0 * n, "narrowed/contig_ratio": 1.0, "vs fast (view)_ratio": 1.03456}
            | {"vs fast (contig)_ratio": 1.0, "of stream (view)_fraction": 0.951}
            for n in (1, 256)
            for mode in ("graph", "eager")
        ]
    )
    status = pd.DataFrame([cutedsl.status_row("vLLM 0.33.0", cutedsl.CuteDslStatus.TIMED)])
    facts = {**run.facts, "03-cutedsl": cutedsl.release_facts(status, table)}
    md = _md(RunData(tmp_path, run.manifest, {**run.tables, "03-cutedsl-vs-fast": table}, facts, run.files))
    assert md.index("## Against the streaming ceiling") < md.index("## vLLM's CuTe-DSL gather") < md.index("## JIT")
    assert "at 256 x 2,048 tokens 2,560.0 us on the narrowed view, 1.03x gather_fast's time, 95% of the" in md
    assert "| 2048 | 256 | 2560.00 | 1.000 | 1.035 | 1.000 | 0.951 |" in md
    for rows in _md_tables(md):
        assert rows[0].count("|") - 1 <= MAX_COLUMNS, rows[0]
    not_run = {
        **run.facts,
        "03-cutedsl": cutedsl.release_facts(
            pd.DataFrame(
                [cutedsl.status_row("vLLM 0.33.0", cutedsl.CuteDslStatus.NOT_RUN, "nvidia-cutlass-dsl not importable")]
            ),
            pd.DataFrame(),
        ),
    }
    md = _md(RunData(tmp_path, run.manifest, run.tables, not_run, run.files))
    assert "vLLM 0.33.0's CuTe-DSL gather: not run: nvidia-cutlass-dsl not importable" in md
    assert "## vLLM's CuTe-DSL gather" not in _md(load_run(H200 / "gpu-profile"))  # a run from before the arm existed

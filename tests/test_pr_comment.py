"""What a vLLM reviewer gets from every committed run: ``pr-comment.md`` posts whole (PR-template headings,
at most 16 KB, no relative image, well-formed charts, long tables folded, the verdict first), and
``report.md`` keeps every figure the two pull requests quote, in the PR template's order. `make test` reads one
committed run of each kind; `make audit` every other (``rendered.CODE_RUNS``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rendered import committed_run

from repro import seeds
from repro.core.analysis.rundata import load_run
from repro.report import mermaid
from repro.report.analyse import analyse, common
from repro.report.comment import COMMENT_LIMIT_BYTES, render_comment
from repro.report.markdown import render_markdown
from repro.tables import Table
from repro_studies.tables import Table as StudyTable

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"
RUNS = sorted(p for p in DATA.glob("*/*") if (p / "manifest.json").is_file())
#: A comment table longer than this sits in a <details>.
UNFOLDED_ROWS = 12


@pytest.fixture(scope="module", params=[committed_run(p) for p in RUNS])
def analysed(request):
    run = load_run(request.param)
    analysis = analyse(run)
    return run, render_markdown(analysis, []), render_comment(analysis)


def _tables(md: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"(?:^\|.*\n?)+", md, flags=re.M)]


def test_the_comment_posts_whole(analysed):
    _, _, comment = analysed
    assert len(comment.encode()) <= COMMENT_LIMIT_BYTES
    heads = [h for h in re.findall(r"^## (.+)$", comment, flags=re.M)]
    assert heads[:3] == ["Purpose", "Test Plan", "Test Result"], heads
    assert "![" not in comment and "<img" not in comment and "](plots/" not in comment
    for block in mermaid.blocks(comment):
        assert mermaid.check_xychart(block) == [], block
    unfolded = re.sub(r"<details>.*?</details>", "", comment, flags=re.S)
    for table in _tables(unfolded):
        assert len(table) - 2 <= UNFOLDED_ROWS, table[0]
    assert comment.count("<details>") == comment.count("</details>")
    assert "Left out to stay within" not in comment  # every section fits


def test_the_comments_first_screen_says_bug_hardware_verdict_and_cost(analysed):
    run, _, comment = analysed
    first = comment[: comment.index("## Test Plan")]
    device = str(run.environment.get("device"))
    assert f"**{device}**" in first
    assert re.search(r"\*\*(Reproduced|Incomplete|Measurements|Unexpected)", first)
    assert "vllm-project/vllm#" in first
    verdict = common(run).verdict
    if verdict.rests_on:  # the cases the verdict rests on, named after its table, not a range
        assert f"The verdict rests on {verdict.rests_on}." in first
    if run.table(StudyTable.PERF_MEDIANS) is not None or run.table(StudyTable.VLLM_RATIOS) is not None:
        assert "| cost of the fix (vllm-project/vllm#55109) on " in first
    if run.table(StudyTable.RELEASE_MATRIX) is not None:
        assert "| vllm-project/vllm#55109 in vLLM " in first  # which releases and kernels
    if run.table(StudyTable.BUG1_RUNNERS) is not None:  # bug 1 in releases: where reached, and the PR's crash labelled
        row = next(line for line in first.splitlines() if line.startswith("| vllm-project/vllm#43988 in vLLM "))
        assert "reached" in row and "(its crash: unreleased code)" in row


def test_the_report_follows_the_pr_template(analysed):
    _, md, _ = analysed
    order = [md.index(h) for h in ("## Purpose", "## Test Plan", "## Test Result", "## Environment", "## Raw data")]
    assert order == sorted(order)
    evidence = [m.start() for m in re.finditer(r"^## vllm-project/vllm#", md, flags=re.M)]
    assert all(order[2] < e < order[3] for e in evidence)


def test_the_report_keeps_every_figure_the_prs_quote(analysed):
    run, md, _ = analysed
    groups = run.table(Table.RESHAPE_GROUPS)
    if groups is not None:
        pr = seeds.load(43988)["reported"]
        for key in ("sizes", "strides"):
            assert f"`{pr[key]}`" in md, key
        for key in ("required_bytes", "available_bytes", "fixed_required_bytes"):
            assert f"{pr[key]:,}" in md, key  # 53,254,672: the fixed view's figure among them
        assert f"| {pr['buggy_blocks_per_kv_block']} / {pr['fixed_blocks_per_kv_block']} |" in md
    sweep = run.table(Table.SWEEP)
    if sweep is not None:
        pr = seeds.load(55109)
        quoted = pr["reported"]["buggy_fails_at"]
        ran = sorted({int(n) for n in sweep["num_reqs"]})
        both = sorted(set(ran) & {*quoted, *pr["reported"]["buggy_passes_at"]})
        wrong = ", ".join(map(str, [n for n in ran if n > 1]))  # the replica is wrong from 2 requests on
        equal = "yes" if ran == both else f"yes at the {len(both)} counts both ran"
        assert f"| requests where it fails | {', '.join(map(str, quoted))} | {wrong} | {equal} |" in md
        assert f"{pr['reported']['sanitizer_errors_buggy_a100']:,} (A100)" in md or run.table(Table.SANITIZER) is None
        assert pr["reported_error"] in md


def test_the_test_plan_names_no_folder_of_the_host_that_ran_it(analysed):
    """The rerun command a reviewer copies writes under the checkout, never into the other host's ``/tmp``."""
    _, md, comment = analysed
    for text in (md, comment):
        plan = text[text.index("## Test Plan") : text.index("## Test Result")]
        assert re.search(r"--out\s+/", plan) is None and re.search(r"report\s+/", plan) is None, plan


@pytest.mark.parametrize("out", ["/root/w6/ev/profile", "~/w6/ev/profile", "$TMPDIR/evc/c-032"])
def test_a_folder_of_the_host_that_ran_it_becomes_one_under_the_checkout(out, tmp_path):
    from types import SimpleNamespace

    from repro.report.sections import plan

    manifest = {"command": f"python -m repro run --profile gpu --out {out} --notebooks 03"}
    run = SimpleNamespace(
        manifest=manifest, name="gpu-profile-vllm", path=tmp_path / "gpu-profile-vllm", table=lambda name: None
    )
    derived = plan.derive(SimpleNamespace(run=run))
    assert derived.commands[1].endswith("--out runs/gpu-profile-vllm --notebooks 03")
    assert derived.commands[2] == "python -m repro report runs/gpu-profile-vllm"


#: A Markdown or HTML link whose target is not an absolute URL (a posted comment has no folder to resolve it in).
RELATIVE_LINK = re.compile(r"\]\((?!https?://)[^)]*\)|\b(?:href|src)=[\"'](?!https?://|data:)")


@pytest.mark.audit
def test_the_comment_holds_no_relative_link(analysed):
    run, _, comment = analysed
    assert RELATIVE_LINK.findall(comment) == []
    committed = (run.path / "pr-comment.md").read_text()
    assert RELATIVE_LINK.findall(committed) == [], f"{run.path.name}/pr-comment.md: re-render it"


def test_the_relative_link_check_catches_each_form():
    for text in ("[x](results/a.csv#L2)", "[x](../r/patches/a.diff)", '<a href="plots/a.png">', "<img src='a.png'>"):
        assert RELATIVE_LINK.search(text), text
    for text in ("[x](https://github.com/o/r/blob/main/a.csv#L2)", "vllm-project/vllm#55109", '<img src="data:x">'):
        assert not RELATIVE_LINK.search(text), text


def test_the_test_plan_gives_the_pytest_line_and_the_releases_it_ran_on(analysed):
    run, _, comment = analysed
    plan = comment[comment.index("## Test Plan") : comment.index("## Test Result")]
    suite = run.table(StudyTable.UPSTREAM_TEST_SUMMARY)
    gather = any(run.table(t) is not None for t in (Table.SWEEP, StudyTable.RELEASE_MATRIX, StudyTable.VLLM_RATIOS))
    if gather or suite is not None:
        assert "pytest tests/kernels/test_dequantize_and_gather_strided_block_table.py -v" in plan
    if suite is not None:
        for release in dict.fromkeys(suite["release"].astype(str)):
            assert f"| {release} | " in plan, release


def test_each_test_result_row_says_whose_code_ran(analysed):
    """A vLLM reviewer reads a row as a finding about vLLM only when it says so: every row of the figures the
    PRs quote names a vLLM release's code or this repository's replica."""
    _, _, comment = analysed
    if "#### vllm-project/vllm#55109" not in comment:
        return
    table = comment[comment.index("#### vllm-project/vllm#55109") :].split("\n\n")[1].splitlines()
    assert table[0].endswith("| code that ran |")
    for line in table[2:]:
        cell = line.rstrip(" |").rsplit(" | ", 1)[-1]
        assert cell.startswith("replica `gather_") or re.fullmatch(r"vLLM \d+\.\d+\.\d+", cell), line
    assert "`repro.core.kernels.gather:gather_buggy`" in comment  # the replica's import path, beside the table


def test_the_comments_check_table_folds_a_notebook_whose_every_check_passed_and_keeps_any_failure():
    import pandas as pd

    from repro.report.sections.checks import per_notebook

    columns = ["notebook", "check", "variant", "passed", "total", "verdict"]
    summary = pd.DataFrame(
        [
            ("01", "fits", "a", 3, 3, "PASS"),
            ("01", "raises", "b", 2, 2, "PASS"),
            ("02", "matches", "fixed", 4, 4, "PASS"),
            ("02", "matches", "buggy", 1, 4, "FAIL"),
            ("06", "ran", "V2", 5, 5, "PASS"),
        ],
        columns=columns,
    )
    got = per_notebook(summary)
    assert got.values.tolist() == [
        ["01", "all 2 checks (report.md lists them)", "", 5, 5, "PASS"],
        ["02", "matches", "fixed", 4, 4, "PASS"],
        ["02", "matches", "buggy", 1, 4, "FAIL"],
        ["06", "ran", "V2", 5, 5, "PASS"],
    ]

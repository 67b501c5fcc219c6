"""``report --against`` on the two committed H200 runs: every check row counted once, numbers sorted as
numbers, every Markdown table row one line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro.core.analysis.compare import (
    KEY,
    changed_rows,
    check_rows,
    compare_runs,
    comparison_counts,
    comparison_summary,
    identity_columns,
)
from repro.core.analysis.rundata import RunData, load_run
from repro.report.comparison import render_comparison

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
CPU_RUN = H200.parent / "cpu" / "make-run"


@pytest.fixture(scope="module")
def runs() -> tuple[RunData, RunData]:
    return load_run(H200 / "vllm-0.22.0-under-test"), load_run(H200 / "gpu-profile")


def test_every_check_of_the_smaller_run_is_matched_once(runs):
    a, b = runs
    n = comparison_counts(compare_runs(a, b))
    rows_a = sum(len(t) for t in a.check_tables().values())
    rows_b = sum(len(t) for t in b.check_tables().values())
    assert rows_a == 164 and rows_b == 339
    # Every check row of the vLLM run is one of the GPU profile's: 164 in both, none double-counted.
    assert n == {"both": 164, "a_only": 0, "b_only": rows_b - 164, "changed": 24}


def test_contiguous_cases_count_four_per_implementation_not_sixteen(runs):
    summary = comparison_summary(compare_runs(*runs))
    contiguous = summary[summary.check == "gather equals the reference on a contiguous table"]
    assert set(contiguous["cases"]) == {4}
    assert int(summary["cases"].sum()) == 164


def test_rows_without_a_distinguishing_column_are_told_apart_by_order():
    checks = pd.DataFrame(
        {
            "notebook": ["01-reshape-overrun"] * 3,
            "check": ["split ratio"] * 3,
            "variant": ["fixed"] * 3,
            "expected": ["fits", "2x", "4x"],
            "observed": ["1x", "2x", "4x"],
            "ok": [True, True, False],
        }
    )
    a = RunData(Path("a"), {}, {"01-reshape-checks": checks}, {})
    b = RunData(Path("b"), {}, {"01-reshape-checks": checks.assign(ok=True)}, {})
    cmp = compare_runs(a, b)
    assert comparison_counts(cmp) == {"both": 3, "a_only": 0, "b_only": 0, "changed": 1}


def test_changed_rows_are_sorted_by_request_count_as_numbers(runs):
    cmp = compare_runs(*runs)
    changed = cmp[cmp.changed & (cmp["mode"] == "in-range")]
    assert list(changed.num_reqs) == [2, 4, 8, 16, 32, 64, 128, 256]


def _tables(markdown: str) -> list[list[str]]:
    """Consecutive ``|`` lines of a Markdown text, and any line that interrupts a table."""
    tables, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def test_comparison_markdown_has_one_line_per_row_and_numeric_order(runs):
    text = render_comparison(*runs)
    n = comparison_counts(compare_runs(*runs))
    assert (n["both"], n["changed"]) == (164, 24)
    assert f"{n['both']} checks ran in both runs; {n['changed']} changed verdict" in text  # the template's counts
    summary, changed = _tables(text)
    assert len(summary) == 2 + 13 and len(changed) == 2 + 24
    for table in (summary, changed):
        cells = {line.replace("\\|", "").count("|") for line in table}
        assert len(cells) == 1, table  # a line break inside a cell would start a row of its own
    in_range = [line.split("|")[4].strip() for line in changed[2:] if "| in-range |" in line]
    assert in_range == ["2", "4", "8", "16", "32", "64", "128", "256"]
    assert "vLLM #" not in text


def test_the_key_names_every_identifying_column():
    assert {"case", "seq_len", "num_reqs", "mode", "variant", "check", "notebook"} <= set(KEY)


def _flip(run: RunData, table: str, row: int) -> RunData:
    """A copy of ``run`` with one check of ``table`` flipped."""
    frame = run.tables[table].copy()
    frame.loc[row, "ok"] = not bool(frame.loc[row, "ok"])
    return RunData(Path("copy"), run.manifest, {**run.tables, table: frame}, run.facts, run.files)


def test_a_flipped_check_is_reported_against_the_same_release_kernel_and_variant():
    """One check flipped in a 0.33.0 row of a copy of the release matrix run: the changed row is that 0.33.0
    row, with its kernel and variant, and nothing lands in "only in A/B" (rows pair by what they are)."""
    run = load_run(H200 / "release-matrix-0.33")
    checks = run.tables["04-release-checks"]
    of_a_kernel = (checks["release"].astype(str) == "0.33.0") & checks["kernel"].notna()
    row = int(checks.index[of_a_kernel][-1])
    flipped = _flip(run, "04-release-checks", row)
    shuffled = RunData(
        Path("shuffled"),
        run.manifest,
        {k: v.sample(frac=1, random_state=0) for k, v in flipped.tables.items()},  # pairing ignores row order
        run.facts,
        run.files,
    )
    for other in (flipped, shuffled):
        cmp = compare_runs(run, other)
        assert comparison_counts(cmp) == {"both": len(check_rows(run)), "a_only": 0, "b_only": 0, "changed": 1}
        changed = changed_rows(cmp)
        assert len(changed) == 1
        got = changed.iloc[0]
        want = checks.loc[row]
        assert (got["release"], got["kernel"], got["variant"]) == (want["release"], want["kernel"], want["variant"])
    text = render_comparison(run, flipped)
    head = next(line for line in text.splitlines() if line.startswith("| check | release |"))
    assert "| kernel |" in head and "| variant |" in head  # the identity columns are shown
    assert f"| {want['release']} | {want['kernel']} |" in text


def test_identity_columns_come_from_each_tables_declaration():
    from repro.tables import Table

    run = load_run(CPU_RUN)
    cols = identity_columns(Table.SWEEP, run.tables[Table.SWEEP])
    assert cols[:2] == ["notebook", "check"] and {"variant", "geometry", "mode", "num_reqs"} <= set(cols)
    assert set(cols) - {"notebook", "check"} <= set(Table.SWEEP.keys)

"""The committed GPU runs (data/h200/, data/h100/) agree with today's code: every verdict recomputed from the
observations in their tables by today's rules, every derived table recomputed, every report
re-rendered. These tests fail when the rules or the rendering change and the evidence is not
re-rendered (scripts/render-evidence-reports.sh), never because of what the evidence measured."""

from __future__ import annotations

import html as html_lib
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from rendered import rendering

from repro.core.analysis import gather, reshape
from repro.core.analysis.checks import truthy
from repro.core.analysis.rundata import load_run
from repro.registry import expectation
from repro.report.comparison import render_comparison
from repro_studies.analysis import performance, reshape_chain
from repro_studies.kernel_id import KernelKind, from_matrix_label

pytestmark = [pytest.mark.integration, pytest.mark.audit]

ROOT = Path(__file__).resolve().parents[1] / "data" / "h200"
#: Every committed run folder: the H200's, the H100's and the CPU profile's.
RUNS = sorted(
    p
    for base in (ROOT, ROOT.parent / "h100", ROOT.parent / "cpu")
    for p in base.iterdir()
    if (p / "manifest.json").is_file()
)


def _gpu_run(name: str) -> Path:
    """A merge input by the folder name merge.json records: the H200's runs, or the H100's (0.34.0)."""
    found = [base / name for base in (ROOT, ROOT.parent / "h100") if (base / name / "manifest.json").is_file()]
    assert len(found) == 1, f"{name}: in {len(found)} of data/h200, data/h100"
    return found[0]


def _obs(row: pd.Series) -> dict:
    """A table row back into the observation dict the rules take (empty cells as None)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def _ints(obs: dict, *names: str) -> dict:
    return {**obs, **{n: int(obs[n]) for n in names if obs.get(n) is not None}}


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: p.name)
def run(request):
    return load_run(request.param)


def test_there_is_committed_gpu_evidence():
    assert RUNS, "data/h200 holds no run folder"


def test_manifest_failures_are_the_tables_failures(run):
    assert sorted(run.manifest.get("failed_checks", [])) == sorted(run.failures())


def test_sweep_verdicts_follow_todays_rules(run):
    sweep = run.table("02-gather-sweep")
    if sweep is None:
        pytest.skip("no sweep in this run")
    for _, row in sweep.iterrows():
        obs = _ints(_obs(row), "mismatched_tokens", "total_tokens", "stray_writes")
        obs["error"] = obs.get("error") or ""
        again = gather.sweep_row(row.variant, expectation(row.variant), row["mode"], int(row.num_reqs), obs)
        assert (again["expected"], again["observed"], again["ok"]) == (row.expected, row.observed, truthy(row.ok)), (
            dict(row)
        )


def test_memcheck_verdicts_follow_todays_rules(run):
    san = run.table("02-sanitizer")
    if san is None:
        pytest.skip("no memcheck sweep in this run")
    for _, row in san.iterrows():
        res = _ints(_obs(row), "error_count", "errors_not_printed", "mismatched_tokens")
        res.update(status=row.sanitizer_status, error=res.get("error") or "", stderr_tail="")
        again = gather.memcheck_row(row.variant, expectation(row.variant), row["mode"], int(row.num_reqs), res, row.log)
        assert (again["expected"], again["ok"]) == (row.expected, truthy(row.ok)), dict(row)


def test_reshape_group_checks_follow_todays_rules(run):
    groups, checks = run.table("01-reshape-groups"), run.table("01-reshape-checks")
    if groups is None:
        pytest.skip("no reshape notebook in this run")
    groups = groups.assign(shape=groups["shape"].map(eval), strides=groups["strides"].map(eval))
    for row in reshape.group_checks(groups):
        committed = checks[checks.check == row["check"]]
        assert len(committed) == 1, row["check"]
        assert (committed.iloc[0].observed, truthy(committed.iloc[0].ok)) == (row["observed"], row["ok"])


def test_bug1_release_checks_and_answers_follow_todays_rules(run):
    runners, runs, cells = (run.table(f"06-reshape-{t}") for t in ("runners", "runs", "cells"))
    if runners is None:
        pytest.skip("no release ran notebook 06's chain in this run")
    today = reshape_chain.checks(runs, cells)
    checks = run.table("06-reshape-checks")
    assert len(today) == len(checks)
    for row, (_, committed) in zip(today, checks.iterrows()):
        assert (str(committed.release), committed.check, truthy(committed.ok)) == (
            row["release"],
            row["check"],
            row["ok"],
        )
    answers = reshape_chain.answers(runners, runs, cells)
    committed = run.table("06-reshape-answers").fillna("").astype(str)
    assert answers[["release", "runner", "answer", "configuration"]].astype(str).values.tolist() == (
        committed[["release", "runner", "answer", "configuration"]].values.tolist()
    )


def test_release_matrix_checks_are_todays_verdicts_in_todays_words(run):
    """Each committed "release kernel behaves as expected" row is today's verdict (class and first request counts,
    from the run's matrix rows) written by today's renderer: the recorded sentence is never read back, only
    re-derived and compared."""
    from repro_studies.analysis import releases as rel

    matrix, checks = run.table("04-release-matrix"), run.table("04-release-checks")
    if matrix is None or checks is None:
        pytest.skip("no release matrix in this run")
    counts = sorted(int(n) for n in pd.to_numeric(matrix["num_reqs"], errors="coerce").dropna().unique())
    today = rel.check_rows(rel.verdicts(matrix), rel.pitched_kernels(run.table("04-kernel-inventory")), counts)
    committed = checks[checks.check == today[0]["check"]].astype(object).where(lambda f: f.notna(), "")
    assert [(str(r["release"]), r["kernel"], r["variant"], r["expected"], r["observed"], r["ok"]) for r in today] == [
        (str(r.release), r.kernel, r.variant, r.expected, r.observed, truthy(r.ok)) for r in committed.itertuples()
    ]


def test_ratios_are_todays_ratios_of_the_medians(run):
    med, rat = run.table("03-performance-medians"), run.table("03-performance-ratios")
    if med is None:
        pytest.skip("no timing in this run")
    again = performance.ratio_rows(med, float(rat.copy_ceiling_tbps.iloc[0]))
    for col in again.columns:
        if col.endswith(("_ratio", "_fraction")):
            pd.testing.assert_series_equal(
                again[col].reset_index(drop=True), rat[col].reset_index(drop=True), check_names=False, atol=1e-3, rtol=0
            )


def _text(html: str) -> str:
    """What a reader reads: tags dropped, whitespace collapsed (the export re-serialises the HTML, and PNG
    bytes depend on the matplotlib and FreeType builds), plus every image's caption."""
    html = re.sub(r"<style>.*?</style>", " ", html, flags=re.S)
    alts = re.findall(r'alt="([^"]*)"', html)
    text = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())
    return text + " | images: " + "; ".join(html_lib.unescape(a) for a in alts)


def test_committed_report_is_what_this_code_renders(run):
    rendered = rendering(run.path)
    names = rendered.figures
    assert (run.path / "report.md").read_text() == rendered.markdown, (
        "re-render with scripts/render-evidence-reports.sh"
    )
    assert (run.path / "pr-comment.md").read_text() == rendered.comment, (
        "re-render with scripts/render-evidence-reports.sh"
    )
    html = (run.path / "report.html").read_text()
    fragment = rendered.fragment
    assert _text(fragment).split(" | images: ")[0] in _text(html), "re-render with scripts/render-evidence-reports.sh"
    assert _text(fragment).split(" | images: ")[1] == _text(html).split(" | images: ")[1]
    assert fragment[: fragment.index("</style>")] in html  # the stylesheet itself
    assert "display_report" not in html
    assert sorted(p.stem for p in (run.path / "plots").glob("*.png")) == sorted(names)


def test_committed_screenshots_show_every_rendering(run):
    for name in ("report-md-github.png", "pr-comment-github.png", "report-html.png"):
        shot = run.path / "screenshots" / name
        assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot


def test_committed_comparison_is_what_this_code_renders():
    a, b = load_run(ROOT / "vllm-0.22.0-under-test"), load_run(ROOT / "gpu-profile")
    assert (a.path / "comparison-vs-gpu-profile.md").read_text() == render_comparison(a, b), (
        "re-render with scripts/render-evidence-reports.sh"
    )


def test_committed_release_matrix_merge_is_what_this_code_merges():
    """data/h200/release-matrix-merged is the merge, by today's rules, of the runs its merge.json names, and those
    runs cover every release of the index from the first one that ships a DeepSeek gather."""
    import json

    from repro_studies.registry import VerdictClass
    from repro_studies.report.releases import MATRIX_TABLE, merge
    from repro_studies.tables import Table

    folder = ROOT / "release-matrix-merged"
    record = json.loads((folder / "merge.json").read_text())
    inputs = [_gpu_run(i["run"]) for i in record["inputs"]]
    result = merge([load_run(path) for path in inputs])
    hint = "re-render with scripts/render-evidence-reports.sh"
    assert (folder / "releases.md").read_text() == result.markdown, hint
    assert record == json.loads(json.dumps(result.record)), hint
    committed = pd.read_csv(folder / "results" / f"{MATRIX_TABLE}.csv", keep_default_na=False, na_values=[""])
    assert committed.astype(str).equals(result.rows.reset_index(drop=True).astype(str)), hint
    # the verdict table holds each verdict's class and numbers, as today's rules derive them from those rows
    verdict_csv = folder / "results" / f"{Table.RELEASE_VERDICTS}.csv"
    assert verdict_csv.read_text() == result.verdicts.to_csv(index=False), hint
    assert set(result.verdicts["verdict"]) <= set(VerdictClass)
    verdicts = result.verdicts.set_index(["release", "kernel", "variant"])["verdict"]
    # the CuTe-DSL gathers ran only where their stack was installed, and their rows are the measured ones: every
    # release that ships one (0.22.0 on) has it measured, and correct on narrowed tables
    kinds = result.rows.kernel.astype(str).map(lambda label: getattr(from_matrix_label(label), "kind", None))
    rows = result.rows[kinds == KernelKind.CUTEDSL]
    found = {(r, k): verdicts[(r, k, "released")] for (r, k), _ in rows.groupby(["release", "kernel"])}
    shipped = {r for (r, _), v in found.items() if v != VerdictClass.NOT_PRESENT}
    assert all(v == VerdictClass.CORRECT for (r, _), v in found.items() if r in shipped), found
    assert {"0.22.0", "0.29.0", "0.31.0", "0.32.0", "0.33.0"} <= shipped and "0.21.0" not in shipped
    assert {"release-matrix-c", "release-matrix-0.30-cutedsl", "release-matrix-0.22-0.23-cutedsl"} <= set(rows["run"])
    # every release the matrix runs listed in their index is in the merge, and each passed vLLM's regression test
    index = pd.concat([load_run(path).table(Table.RELEASE_INDEX) for path in inputs])
    assert set(index["release"].astype(str)) <= set(result.rows["release"].astype(str))
    assert {"0.20.0", "0.20.1", "0.20.2", "0.33.0", "0.34.0"} <= set(result.rows["release"].astype(str))
    suite = pd.read_csv(folder / "results" / f"{Table.UPSTREAM_TEST_SUMMARY}.csv")
    assert suite["as expected"].astype(bool).all() and set(suite["release"].astype(str)) == set(
        result.rows["release"].astype(str)
    )


#: A path of this repository's code that a page names: ``repro.core.kernels.gather:gather_fixed`` (a target) or
#: ``repro_studies.evidence.timing.host_us`` (a module and a name in it).
CODE_PATH = re.compile(r"\brepro(?:_studies)?(?:\.[A-Za-z_0-9]+)+(?::[A-Za-z_0-9]+)?")
SRC = ROOT.parents[1] / "src"


def names_todays_code(path: str) -> bool:
    """The longest module prefix of ``path`` is a module of today's ``src/`` and what follows it, if anything, is
    one name that module defines."""
    dotted, _, function = path.partition(":")
    parts = dotted.split(".")
    for k in range(len(parts), 1, -1):
        base = SRC.joinpath(*parts[:k])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = [*parts[k:], *([function] if function else [])]
            if not rest:
                return True
            defines = re.compile(rf"^(?:def|class) {rest[0]}\b|^{rest[0]} *[:=]", re.M)
            return len(rest) == 1 and defines.search(module.read_text()) is not None
    return False


def test_no_committed_page_names_code_that_is_gone():
    """A report or page of data/ names this repository's functions by today's paths: a target a run recorded under an
    earlier path is rendered by today's (repro.core.analysis.provenance.current_target), and a moved function means
    re-rendering."""
    pages = [p for p in sorted(ROOT.parent.rglob("*")) if p.suffix in (".md", ".html") and p.is_file()]
    assert pages
    gone = {(p.relative_to(ROOT.parent).as_posix(), m) for p in pages for m in CODE_PATH.findall(p.read_text())}
    gone = {pair for pair in gone if not names_todays_code(pair[1])}
    assert not gone, sorted(gone)


def test_the_code_path_check_tells_a_moved_function_from_todays():
    assert names_todays_code("repro.core.kernels.gather:gather_fixed")
    assert names_todays_code("repro_studies.kernels.stream.move_words") and names_todays_code("repro.core")
    assert not names_todays_code("repro.studies.kernels.stream.move_words")  # before the studies had a package
    assert not names_todays_code("repro.kernels.gather:gather_fixed")
    assert not names_todays_code("repro.core.kernels.gather:gather_gone")

"""Every notebook through papermill, as CI runs them: small CPU-profile runs of the real CLI. Most tests read
the session's one CPU run (``cpu_run`` in conftest.py)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from clitools import SMALL_02

from repro.bugs import Bug
from repro.core.analysis.reshape import SPLIT_CHECK
from repro.core.analysis.rundata import load_run
from repro.core.analysis.verdict import Conclusion
from repro.report import phrases
from repro.report.verdict import run_verdict
from repro_studies.registry import Bug1Answer

pytestmark = pytest.mark.notebook

GATHER_PY = Path(__file__).resolve().parents[1] / "src" / "repro" / "core" / "kernels" / "gather.py"


def run_cli(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "repro", "run", "--profile", "cpu", "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def test_every_notebook_runs_and_every_check_passes(cpu_run):
    out, proc = cpu_run.path, cpu_run.proc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["profile"] == "cpu"
    assert set(manifest["notebooks"]) == {
        "01-reshape-overrun",
        "02-strided-block-table-gather",
        "03-performance",
        "04-upstream-releases",
        "05-who-is-affected",
        "06-reshape-in-releases",
    }
    assert all(s["status"] == "ok" for s in manifest["notebooks"].values())
    for name in ("01-reshape-checks", "02-gather-sweep", "02-contiguous-checks", "02-interpreter-memory-safety"):
        table = pd.read_csv(out / "results" / f"{name}.csv")
        assert len(table) and table["ok"].all(), name
    sweep = pd.read_csv(out / "results" / "02-gather-sweep.csv")
    assert sorted(set(sweep.num_reqs)) == [1, 2, 3] and set(sweep["mode"]) == {"in-range", "poison"}
    buggy = sweep[sweep.variant == "buggy"]
    assert (buggy[buggy.num_reqs == 1].mismatched_tokens == 0).all()
    assert (buggy[buggy.num_reqs > 1].mismatched_tokens > 0).all()
    dispatch = pd.read_csv(out / "results" / "05-gather-dispatch.csv")
    # 8 GPU families x 2 models x 3 records per release, and 0.34.0's second selection for DeepSeek-V4.1 on the
    # three SM100 families (the mega attention up to TP 8, FlashMLA at TP 16)
    assert set(dispatch.release.astype(str)) == {"0.22.0", "0.34.0"} and len(dispatch) == 2 * 8 * 2 * 3 + 3 * 3
    answers = pd.read_csv(out / "results" / "05-runner-answers.csv")
    # 0.22.0's V1 and V2 runners; 0.34.0 ships V2 only
    assert len(answers) == 3 and set(answers.answer) <= {"reached", "latent", "undecided"}
    bug1 = pd.read_csv(out / "results" / "06-reshape-answers.csv", dtype=str, keep_default_na=False)
    bug1 = bug1.set_index(["release", "runner"])
    assert bug1.loc[("0.22.0", "V1"), "answer"] == "reached" and bug1.loc[("0.23.0", "V2"), "answer"] == "absent"
    # 0.34.0 ships no V1 runner; its V2 views the cache with create_kv_cache_views, which fits at the CPU block sizes
    assert bug1.loc[("0.34.0", "V1"), "answer"] == Bug1Answer.NOT_SHIPPED
    assert bug1.loc[("0.34.0", "V2"), "answer"] == Bug1Answer.VIEWS_FIT
    assert (pd.read_csv(out / "results" / "06-reshape-checks.csv")["ok"]).all()


def test_report_is_written_and_fits_a_pr_comment(cpu_run):
    out = cpu_run.path
    md = (out / "report.md").read_text()
    assert len(md.encode()) <= 64 * 1024
    v = run_verdict(load_run(out), SPLIT_CHECK)
    reshape, strided = v.findings[:2]
    assert (reshape.bug, strided.bug) == (Bug.RESHAPE, Bug.GATHER) and v.complete and v.failed == 0
    assert reshape.outcomes == strided.outcomes == (Conclusion.REPRODUCED, Conclusion.FIX_VERIFIED)
    assert md.startswith(f"# {v.title}\n")
    buggy = strided.bug_control.behaviour  # the interpreter's flagged lanes, not a fault
    assert (buggy.wrong_from, buggy.fault_modes, buggy.faults_observed) == (2, ("poison",), False)
    assert phrases.behaviour(buggy) in md
    for heading in (
        "## Who is affected",
        "## vllm-project/vllm#43988: reshape overrun",
        "## vllm-project/vllm#55109: strided block-table gather",
        "## Cost of the fix",
        "## gather_fast (in neither pull request)",
        "### Checks",
        "## Test Plan",
        "## Environment",
        "## Raw data",
    ):
        assert heading in md
    assert "setStorage: sizes [3944832, 2, 584]" in md
    assert "Timing skipped" in md
    html = (out / "report.html").read_text()
    assert "data:image/png;base64" in html and "display_report" not in html  # plots embedded, code hidden
    comment = (out / "pr-comment.md").read_text()
    assert comment.startswith("## Purpose") and len(comment.encode()) <= 16 * 1024 and "](plots/" not in comment


def test_report_reads_well_in_a_browser(cpu_run):
    from repro_audit.browser import BrowserUnavailable, check_run

    out = cpu_run.path
    try:
        checks = check_run(out)
    except BrowserUnavailable as exc:
        pytest.skip(f"no browser for this test here: {exc}")
    for c in checks:
        assert c.problems == [] and c.headline.startswith(("Reproduced", "Purpose")), c.problems
    shots = sorted(p.name for p in (out / "screenshots").glob("*.png"))
    assert shots == ["pr-comment-github.png", "report-html.png", "report-md-github.png"]


def test_notebook_02_shows_the_row_pitch_and_the_diff_before_the_sweep(cpu_run):
    """The executed notebook holds the kernel's row-pitch load (as gather.py has it), the one-expression diff and
    the two pitches of a real narrowed view, all in outputs of cells before the sweep's."""
    nb = nbformat.read(cpu_run.path / "notebooks" / "02-strided-block-table-gather.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    shown = [
        "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
        for c in code
    ]
    sweep = next(k for k, c in enumerate(code) if "nb.sweep(" in c.source)
    (load,) = [line.strip() for line in GATHER_PY.read_text().splitlines() if "* block_table_row_pitch +" in line]
    assert "tl.load(block_table_ptr + b * block_table_row_pitch + logical" in load
    marked = rf"^>\s+\d+\s+{re.escape(load)}$"  # source_of's marked line: '>', the file's line number, the line
    where = {
        "row-pitch load": next(k for k, text in enumerate(shown) if re.search(marked, text, re.M)),
        "diff": next(k for k, text in enumerate(shown) if "-_launch(" in text and "+_launch(" in text),
        "pitches": next(k for k, text in enumerate(shown) if "block_table.stride(0) = " in text),
    }
    assert all(k < sweep for k in where.values()), where
    diff = shown[where["diff"]]
    assert re.search(r"^-_launch\(.*row_pitch=block_table\.shape\[-1\]\)$", diff, re.M)
    assert re.search(r"^\+_launch\(.*row_pitch=block_table\.stride\(0\)\)$", diff, re.M)
    pitches = shown[where["pitches"]]
    width = int(re.search(r"block_table\.shape\[-1\] = (\d+)", pitches)[1])
    pitch = int(re.search(r"block_table\.stride\(0\) = (\d+)", pitches)[1])
    assert pitch > width  # a narrowed view: the two pitches differ
    (html,) = [
        o["data"]["text/html"]
        for o in code[where["row-pitch load"]].outputs
        if re.search(marked, o.get("data", {}).get("text/plain", ""), re.M)
    ]
    assert "background-color" in html and "block_table_row_pitch" in html  # highlighted for a reader


def test_pointing_the_notebook_at_the_buggy_kernel_fails_naming_the_check(tmp_path):
    proc = run_cli(
        tmp_path / "buggy",
        *SMALL_02,
        "--notebooks",
        "02",
        "-p",
        "implementation=repro.core.kernels.gather:gather_buggy",
        "-p",
        "sentinel_modes=[in-range]",
    )
    assert proc.returncode == 1
    assert (
        "FAILED check 02-strided-block-table-gather: gather matches the reference [under-test, in-range, n=2]"
        in proc.stdout
    )
    assert "[under-test, in-range, n=1]" not in proc.stdout  # request 0 is always right


def test_a_notebook_stops_at_the_top_with_the_cli_message(tmp_path, capsys):
    """An edited parameters cell that cannot work fails in its first code cell, with the CLI's one line."""
    import papermill as pm

    from repro.cli.main import main

    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(
            "notebooks/01-reshape-overrun.ipynb",
            str(tmp_path / "out.ipynb"),
            parameters={"profile": "cpu", "block_size": 512},
            progress_bar=False,
            kernel_name="python3",
        )
    assert info.value.ename == "ParameterError" and info.value.exec_count == 3  # parameters, injected, setup
    assert main(["run", "--profile", "cpu", "--out", str(tmp_path / "r"), "-p", "block_size=512"]) == 2
    cli_line = capsys.readouterr().err.strip()
    assert cli_line == f"error: {info.value.evalue}"

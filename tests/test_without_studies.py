"""``repro`` reproduces the two bugs without ``repro_studies``: notebooks 01 and 02, their report, ``pr-comment.md``
and the two bugs' tests run and pass in processes where the studies package cannot be imported and its entry points
are not found (``tests/fixtures/without_studies/sitecustomize.py`` first on the ``PYTHONPATH`` of every process a
run starts: the runner, its notebook kernels, their case processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from clitools import ROOT, SMALL_02, cli_env, new_tag, repro_cmd

from repro.plugins import Point

WITHOUT_STUDIES = Path(__file__).resolve().parent / "fixtures" / "without_studies"
#: The two bugs' unit tests: notebook 01's reshape, notebook 02's kernels, cases and sweep verdicts, the report's
#: sections, templates and tables. None of them imports repro_studies (tests/test_architecture.py holds repro to
#: that; these modules hold themselves to it below).
BUG_TESTS = (
    "test_reshape.py",
    "test_specs.py",
    "test_kernels.py",
    "test_source.py",
    "test_verdict.py",
    "test_results.py",
    "test_compare.py",
    "test_tables.py",
    "test_report_templates.py",
)


def without_studies(tag: str | None = None) -> dict[str, str]:
    env = cli_env(tag or new_tag())
    return {**env, "PYTHONPATH": os.pathsep.join([str(WITHOUT_STUDIES), env["PYTHONPATH"]])}


def test_a_process_started_without_the_studies_finds_neither_the_package_nor_its_registrations():
    code = (
        "import json\n"
        "from repro import parameters, plugins, registry\n"
        "try:\n"
        "    import repro_studies\n"
        "    hidden = False\n"
        "except ModuleNotFoundError:\n"
        "    hidden = True\n"
        "gathers = [e.label for e in registry.implementations()]\n"
        "points = [len(plugins._loaded(p)) for p in plugins.Point]\n"
        "print(json.dumps({'hidden': hidden, 'points': points, 'notebooks': parameters.notebook_names(),\n"
        "                  'gathers': gathers}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=without_studies())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "hidden": True,
        "points": [0] * len(Point),
        "notebooks": ["01-reshape-overrun.ipynb", "02-strided-block-table-gather.ipynb"],
        "gathers": ["buggy", "fixed", "contiguous-copy"],
    }
    usage = subprocess.run(repro_cmd("report", "--help"), capture_output=True, text=True, env=without_studies())
    assert usage.returncode == 0 and "--against" in usage.stdout and "--merge" not in usage.stdout


def test_the_bug_tests_name_no_study():
    found = [name for name in BUG_TESTS if "repro_studies" in (ROOT / "tests" / name).read_text()]
    assert not found


@pytest.mark.notebook
def test_notebooks_01_and_02_and_their_report_pass_without_the_studies(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--profile", "cpu", "--out", str(out), *SMALL_02]
    proc = subprocess.run(
        repro_cmd(*args), capture_output=True, text=True, env=without_studies(), cwd=ROOT, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all checks passed" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest["notebooks"]) == ["01-reshape-overrun", "02-strided-block-table-gather"]
    assert all(n["status"] == "ok" for n in manifest["notebooks"].values()), manifest["notebooks"]
    # notebook 01 walks bug 1 on the repository's code: the count and the view it shows, offline
    executed = json.loads((out / "notebooks" / "01-reshape-overrun.ipynb").read_text())
    shown = json.dumps([o for c in executed["cells"] for o in c.get("outputs", [])])
    assert "kernel_blocks_per_logical_block" in shown and "torch.as_strided" in shown
    # the sweep ran in the notebook's kernel: without the studies' registration gather_fast is not in it
    sweep = pd.read_csv(out / "results" / "02-gather-sweep.csv")
    assert set(sweep["variant"]) == {"buggy", "fixed", "contiguous-copy", "under-test"}
    report, comment = (out / "report.md").read_text(), (out / "pr-comment.md").read_text()
    title = "Reproduced and fix verified: vllm-project/vllm#43988 and vllm-project/vllm#55109"
    assert report.startswith(f"# {title}") and f"**{title}" in comment and "## Purpose" in comment
    for name in ("vllm-project/vllm#43988", "vllm-project/vllm#55109"):
        assert name in report and name in comment
    # nothing of a study: no section, row or figure of theirs
    for study in ("gather_fast", "in vLLM 0.", "cost of the fix", "Who is affected", "streaming ceiling"):
        assert study not in report and study not in comment, study
    # the report again, from the folder, without the studies: the same files
    before = {name: (out / name).read_text() for name in ("report.md", "pr-comment.md")}
    again = subprocess.run(
        repro_cmd("report", str(out)), capture_output=True, text=True, env=without_studies(), cwd=ROOT, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert {name: (out / name).read_text() for name in before} == before


@pytest.mark.integration
def test_the_two_bugs_tests_pass_without_the_studies():
    tests = [str(ROOT / "tests" / name) for name in BUG_TESTS]
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "not notebook", *tests]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=without_studies(), cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]

"""The command recorded in ``manifest.json`` and shown in the report reproduces the run when pasted
into a shell at the checkout root; a run prints one line per notebook and a clear final status."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from clitools import ROOT, SMALL_02, cli_env, kill_tagged, manifest, new_tag, start

from repro.analysis.checks import is_timing_column
from repro.cli.runner import rerun_command


def tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """Every result table without its timing columns (they differ between two runs)."""
    out = {}
    for p in sorted((run_dir / "results").glob("*.csv")):
        frame = pd.read_csv(p)
        out[p.name] = frame[[c for c in frame.columns if not is_timing_column(c)]]
    return out


@pytest.mark.notebook
def test_the_recorded_command_reproduces_the_run_when_pasted(tmp_path):
    out = tmp_path / "run dir 'quoted' $HOME"  # a path the shell would split, quote and expand
    tag = new_tag()
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02]
    args += ["-p", "sentinel_modes=in-range,poison", "-p", "seed=7"]
    proc = start(args, tag)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        kill_tagged(tag)
    assert proc.returncode == 0, stdout + stderr

    # Noise: nothing on stderr; one line per notebook and for the report, then the folder and the verdict.
    assert stderr == ""
    lines = stdout.strip().splitlines()
    assert re.fullmatch(r"\[02-strided-block-table-gather\] ok in [0-9.]+ s", lines[0]), lines
    assert re.fullmatch(r"\[report\] ok in [0-9.]+ s", lines[1]), lines
    assert lines[2:] == [f"run folder: {out}", "all checks passed"]

    command = manifest(out)["command"]
    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "repro", "run"]
    assert words[words.index("--out") + 1] == str(out)
    assert words[words.index("--notebooks") + 1] == "02"
    assert words.count("-p") == 5 and "sentinel_modes=[in-range, poison]" in words
    assert command in (out / "report.md").read_text()  # the report's test plan shows the same command

    first = tmp_path / "first"
    out.rename(first)
    env = cli_env(tag, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    pasted = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    kill_tagged(tag)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    again = manifest(out)
    assert again["command"] == command and again["parameters"] == manifest(first)["parameters"]
    a, b = tables(first), tables(out)
    assert a.keys() == b.keys() and a
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)


def test_a_folder_inside_the_checkout_is_named_from_the_checkout_root():
    cmd = rerun_command("cpu", ROOT / "runs" / "x y", ["01"], {"seed": 3, "request_counts": [1, 2]})
    assert (
        cmd == "python -m repro run --profile cpu --out 'runs/x y' --notebooks 01 -p seed=3 -p 'request_counts=[1, 2]'"
    )

"""Committed runs name no machine's folders (``python -m repro.machine_paths`` rewrites them before a run is
committed)."""

import subprocess
from pathlib import Path

import pytest

from repro import machine_paths as scrub_machine_paths

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"input_path": "/work/main/notebooks/04.ipynb"', '"input_path": "notebooks/04.ipynb"'),
        ("--out /root/w6/ev/profile", "--out ~/w6/ev/profile"),
        ("run folder: /home/ci/runs/a", "run folder: ~/runs/a"),
        ('run_dir = "/tmp/evc/c-032"', 'run_dir = "$TMPDIR/evc/c-032"'),
        ("not in the cache /work/main/.vllm-cache", "not in the cache .vllm-cache"),
        ("data/h200/tmp/x and ~/tmp/y stay", "data/h200/tmp/x and ~/tmp/y stay"),
    ],
)
def test_each_machine_path_becomes_a_neutral_one(text, expected):
    assert scrub_machine_paths.scrub(text) == expected
    assert scrub_machine_paths.scrub(expected) == expected


@pytest.mark.audit
def test_no_committed_run_names_a_machines_folders():
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = [ROOT / f for f in tracked.stdout.split() if Path(f).suffix in scrub_machine_paths.SUFFIXES]
    assert files
    named = [
        str(f.relative_to(ROOT))
        for f in files
        if scrub_machine_paths.scrub(f.read_text("utf-8")) != f.read_text("utf-8")
    ]
    assert not named, f"run python -m repro.machine_paths on: {named[:5]}"


def test_a_missing_folder_is_refused(capsys):
    assert scrub_machine_paths.main(["no-such-folder"]) == 2
    assert "FOLDER must be an existing folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("path", "theirs"), [("/root/w6/ev", True), ("~/w6/ev", True), ("$TMPDIR/evc", True), ("runs/a", False)]
)
def test_a_scrubbed_folder_is_still_another_machines(path, theirs):
    assert scrub_machine_paths.elsewhere(path) is theirs

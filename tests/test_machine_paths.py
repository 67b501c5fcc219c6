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
        ('"input_path": "/srv/gpu-host/checkout/notebooks/04.ipynb"', '"input_path": "notebooks/04.ipynb"'),
        ("--out /root/w6/ev/profile", "--out ~/w6/ev/profile"),
        ("run folder: /home/ci/runs/a", "run folder: ~/runs/a"),
        ('run_dir = "/tmp/evc/c-032"', 'run_dir = "$TMPDIR/evc/c-032"'),
        ("not in the cache /srv/gpu-host/checkout/.vllm-cache", "not in the cache .vllm-cache"),
        ("cwd /srv/gpu-host/checkout", "cwd ."),
        ("data/h200/tmp/x and ~/tmp/y stay", "data/h200/tmp/x and ~/tmp/y stay"),
    ],
)
def test_each_machine_path_becomes_a_neutral_one(text, expected):
    roots = ("/srv/gpu-host/checkout",)  # the other host's checkout, as its notebooks record it
    assert scrub_machine_paths.scrub(text, roots) == expected
    assert scrub_machine_paths.scrub(expected, roots) == expected


def test_the_checkout_a_run_ran_in_is_read_from_its_notebooks(tmp_path):
    nb = tmp_path / "run" / "notebooks" / "04-upstream-releases.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text('{"metadata": {"papermill": {"input_path": "/srv/gpu-host/checkout/notebooks/04-x.ipynb"}}}')
    (tmp_path / "run" / "run.log").write_text("python -m repro run --out /srv/gpu-host/checkout/runs/a\n")
    assert scrub_machine_paths.checkout_roots(tmp_path / "run") == ("/srv/gpu-host/checkout",)
    assert scrub_machine_paths.main([str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "run.log").read_text() == "python -m repro run --out runs/a\n"


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


def _run_with_a_recorded_table(tmp_path: Path, text: str) -> Path:
    """A run folder whose manifest records one result file, as the runner does."""
    import json

    from repro.ledger import record_of

    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    table = run / "results" / "02-implementation.json"
    table.write_text(text)
    record = record_of(table.read_bytes(), table.name)
    manifest = {
        "command": "repro run --out /tmp/x/run",
        "notebooks": {"02-x": {"tables": {"results/" + table.name: record}}},
    }
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (run / "notebooks").mkdir()  # where the run ran: papermill's record of the notebook's path
    (run / "notebooks" / "02-x.ipynb").write_text('{"input_path": "/srv/gpu-host/checkout/notebooks/02-x.ipynb"}')
    return run


def test_a_recorded_table_is_rewritten_with_its_record(tmp_path):
    """The rewrite of a result file moves its record with it: the folder still reads as the run wrote it."""
    from repro.core.analysis.rundata import load_run
    from repro.core.analysis.written import problems

    run = _run_with_a_recorded_table(tmp_path, '{"module_file": "/srv/gpu-host/checkout/tests/m.py"}\n')
    assert scrub_machine_paths.main([str(run)]) == 0
    assert (run / "results" / "02-implementation.json").read_text() == '{"module_file": "tests/m.py"}\n'
    manifest = load_run(run).manifest
    assert manifest["command"] == "repro run --out $TMPDIR/x/run"
    assert problems(run, manifest) == []


def test_a_table_changed_after_its_run_is_refused_and_nothing_rewritten(tmp_path, capsys):
    run = _run_with_a_recorded_table(tmp_path, '{"module_file": "/srv/gpu-host/checkout/tests/m.py"}\n')
    table = run / "results" / "02-implementation.json"
    table.write_text('{"module_file": "/srv/gpu-host/checkout/tests/other.py"}\n')
    before = (run / "manifest.json").read_text()
    assert scrub_machine_paths.main([str(run)]) == 2
    assert "differs from what its run recorded" in capsys.readouterr().err
    assert "/srv/gpu-host/checkout/tests/other.py" in table.read_text()
    assert (run / "manifest.json").read_text() == before

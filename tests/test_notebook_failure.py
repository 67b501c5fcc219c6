"""A notebook's failure is a value the runner records where it sees it (``failure`` in the notebook's manifest
entry); what decides on it reads that value, and manifests written before the field read through one function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.core.analysis import written
from repro.core.analysis.checks import ChecksFailed
from repro.core.analysis.verdict import not_finished
from repro.notebook_failure import CHECKS_GATE, NotebookFailure, failure_of

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_checks_gate_is_named_once():
    assert CHECKS_GATE == ChecksFailed.__name__


@pytest.mark.parametrize("kind", list(NotebookFailure))
def test_the_recorded_field_decides_whatever_the_error_says(kind):
    entry = {"status": "failed", "failure": str(kind), "error": "ChecksFailed: a message that says otherwise"}
    assert failure_of(entry) is kind
    assert written.finished(entry) == (kind is NotebookFailure.CHECKS_FAILED)
    assert written.broke(entry) == (kind is not NotebookFailure.CHECKS_FAILED)


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"status": "ok", "error": ""}, None),
        ({"status": "running"}, None),
        ({"status": "stopped", "error": "cannot write results/x.csv (No space left on device)"}, None),
        ({"status": "failed", "error": "ChecksFailed: 2 failed check(s):\n..."}, NotebookFailure.CHECKS_FAILED),
        ({"status": "failed", "error": "DeadKernelError: Kernel died"}, NotebookFailure.RAISED),
        ({"status": "failed", "error": "ValueError: ChecksFailed appears later"}, NotebookFailure.RAISED),
    ],
)
def test_a_manifest_written_before_the_field_reads_by_its_error(entry, kind):
    assert failure_of(entry) is kind


def test_the_committed_run_that_failed_its_checks_reads_as_finished():
    manifest = json.loads((DATA / "h200" / "vllm-0.22.0-under-test" / "manifest.json").read_text())
    entry = manifest["notebooks"]["02-strided-block-table-gather"]
    assert "failure" not in entry  # recorded before the field existed
    assert failure_of(entry) is NotebookFailure.CHECKS_FAILED and not_finished(manifest) == []


def test_not_finished_names_the_broken_notebooks_only():
    notebooks = {
        "01-reshape-overrun": {"status": "failed", "failure": "kernel_died", "error": "KernelDied: ...\nmore"},
        "02-strided-block-table-gather": {"status": "failed", "failure": "checks_failed", "error": "ChecksFailed: 2"},
        "03-x": {"status": "ok", "error": ""},
        "04-y": {"status": "interrupted"},
    }
    assert not_finished({"notebooks": notebooks}) == ["01-reshape-overrun: KernelDied: ...", "04-y: interrupted"]

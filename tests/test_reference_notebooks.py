"""The committed CPU reference run keeps notebooks 01 and 02 executed, every output included, so a reader on GitHub
sees the walk-through of both bugs without installing anything: the notebooks the run's results came from, not a
copy from another run, and no git filter strips them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.audit

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "data" / "cpu" / "make-run"
SHOWN = ("01-reshape-overrun", "02-strided-block-table-gather")


def _outputs(name: str) -> tuple[dict, str]:
    notebook = json.loads((RUN / "notebooks" / f"{name}.ipynb").read_text())
    texts = []
    for cell in notebook["cells"]:
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")))
            texts += ["".join(v) if isinstance(v, list) else str(v) for v in out.get("data", {}).values()]
    return notebook, "\n".join(texts)


@pytest.mark.parametrize("name", SHOWN)
def test_the_reference_run_keeps_the_two_bugs_notebooks_executed(name):
    notebook, shown = _outputs(name)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), "every code cell ran"
    assert all(not out.get("ename") for c in code for out in c.get("outputs", [])), "no cell raised"
    status = json.loads((RUN / "manifest.json").read_text())["notebooks"][name]["status"]
    assert status == "ok"
    injected = [c for c in code if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    assert injected and 'run_dir = "' in "".join(injected[0]["source"])  # papermill's run of this run folder
    assert "image/png" in json.dumps(notebook)  # its figures, drawn
    if name == SHOWN[0]:  # bug 1's lines, on the repository's code
        assert "kernel_blocks_per_logical_block" in shown and "torch.as_strided" in shown


def test_no_filter_strips_them():
    for name in SHOWN:
        path = (RUN / "notebooks" / f"{name}.ipynb").relative_to(ROOT).as_posix()
        attrs = subprocess.run(["git", "check-attr", "filter", path], cwd=ROOT, capture_output=True, text=True)
        assert attrs.stdout.strip().endswith("filter: unspecified"), attrs.stdout

"""Every notebook as a reader edits it in JupyterLab: a bad value typed into its parameters cell, then Run All
in a kernel that still holds an earlier run's variables. Run All must stop at the check (the first code cell
after the parameters) with the one line that names the parameter; no later cell may run on the earlier state.

Written over ``notebooks/*.ipynb``, so a new notebook is covered the day it is added. One kernel serves a test
module's notebooks one after another, as one JupyterLab kernel would: each finds the variables of the earlier ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from repro.parameters import schema

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
#: Every parameter rule: notebooks 01 and 02's and those the studies register.
SCHEMA = schema()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: A value no declared parameter accepts (every kind in the schema is int, float, bool, str or list).
BAD_VALUE = "{'not': 'a value'}"


def parameters_cell(nb) -> int:
    found = [k for k, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(found) == 1, "a notebook has exactly one cell tagged 'parameters'"
    return found[0]


def bad_edit(source: str) -> tuple[str, str]:
    """(name, the line a reader types) for one parameter of this cell the checks must refuse."""
    declared = [
        node.targets[0].id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    ]
    checked = [name for name in declared if name in SCHEMA]
    if checked:
        return checked[0], f"{checked[0]} = {BAD_VALUE}"
    assert declared == ["run_dir"], f"parameters {declared} are not in repro.parameters.SCHEMA"
    return "run_dir", 'run_dir = "no-such-run-folder"'


def outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts += [out.get("text", ""), out.get("evalue", ""), *map(str, out.get("data", {}).values())]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def kernel():
    """One notebook kernel, started at the checkout root (a notebook's cells run in it one by one)."""
    client = NotebookClient(
        nbformat.v4.new_notebook(), kernel_name="python3", timeout=600, resources={"metadata": {"path": str(ROOT)}}
    )
    with client.setup_kernel():
        yield client


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_run_all_after_a_bad_edit_stops_at_the_check(path, kernel):
    nb = nbformat.read(path, as_version=4)
    params = parameters_cell(nb)
    code = [k for k, c in enumerate(nb.cells) if c.cell_type == "code"]
    check = next(k for k in code if k > params)
    assert code[0] == params, "no code runs before the parameters cell"
    name, edit = bad_edit(nb.cells[params].source)

    kernel.nb = nb  # the client records outputs into the notebook it holds
    # An earlier run: the parameters as shipped, then the check cell, which leaves its objects behind.
    for k in (params, check):
        kernel.execute_cell(nb.cells[k], k)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.cells[params].source += f"\n{edit}\n"
    stopped = None
    for k in code:  # Run All: cell by cell, stopping at the first error
        try:
            kernel.execute_cell(nb.cells[k], k)
        except CellExecutionError:
            stopped = k
            break

    if name == "run_dir" and stopped is None:
        # The report notebook shows what it cannot read in its only cell, instead of failing.
        assert check == code[-1] and "Cannot read the run folder" in outputs_text(nb.cells[check])
        return
    assert stopped == check, f"Run All stopped at cell {stopped}, not at the check (cell {check})"
    (error,) = [o for o in nb.cells[check].outputs if o.output_type == "error"]
    assert error.ename == "ParameterError" and error.evalue.startswith(f"{name}: "), error

"""The mutation suite: wrong gathers (tests/fixtures/implementations/mutants.py, and the repository's own buggy
pitch) each get the verdict they must from notebook 02's default sweep.

The cases are exactly the default ``make run``'s on the CPU profile: notebook 02's own parameter defaults, read
from its parameters cell, through the notebook's own library path (``GatherWalkthrough.contiguous_cases`` and
``sweep``: vLLM's four contiguous cases, then every request count in both sentinel modes and the five other
geometries at the two smallest counts from 2), every mutant as the implementation under test, each judged by this
process through its own mapping of the case's tensors. Only the case time limit is shorter (30 s: the mutant that
hangs sleeps that long once, not two minutes) and the controls are left out (their verdicts are notebook 02's). The
mutants run in one case process together, which is replaced each time one of them ends it.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pandas as pd
import pytest
from clitools import IMPLEMENTATIONS

from repro.cli.main import verdict_code
from repro.cli.runner import declared_parameters, notebooks
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import Behaviour, behaviour
from repro.coverage import Geometry
from repro.registry import UNDER_TEST_LABEL, under_test
from repro.report.verdict import RunVerdict, run_verdict
from repro.tables import Table

pytestmark = pytest.mark.notebook

GATHER = "02-strided-block-table-gather"
#: The case time limit of the suite (the default sweep's is the profile's, 120 s).
CASE_TIMEOUT_S = 30.0


def ran(b: Behaviour, **where) -> set:
    """The cases ``b`` ran whose geometry, mode or count is ``where`` says (values or predicates)."""
    keys = ("geometry", "mode", "num_reqs")
    out = set()
    for case in b.ran:
        fields = dict(zip(keys, case))
        if all((v(fields[k]) if callable(v) else fields[k] == v) for k, v in where.items()):
            out.add(case)
    return out


#: target: (headline class, what the behaviour must show)
MUTANTS = {
    "mutants:buggy_pitch": ("Reproduced", lambda b, e: b.bug_signature and not b.faults_observed and not e),
    "mutants:wrong_last_requests": (
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="default", num_reqs=lambda n: n > 8 and n % 8 > 0) and not e,
    ),
    "mutants:one_token": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:repoint_data": ("Unexpected results", lambda b, e: b.repointed and set(b.wrong) == set(b.ran)),
    "mutants:repoint_set": ("Unexpected results", lambda b, e: b.repointed and set(b.wrong) == set(b.ran)),
    "mutants:writes_past_rows": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:writes_before_offset": (
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="offset") and len(e) == 2,
    ),
    "mutants:changes_k_cache": ("Unexpected results", lambda b, e: b.changed_inputs == ("k_cache",) and not b.wrong),
    "mutants:changes_block_table": (
        "Unexpected results",
        lambda b, e: b.changed_inputs == ("block_table",) and not b.wrong,
    ),
    "mutants:changes_seq_lens": ("Unexpected results", lambda b, e: b.changed_inputs == ("seq_lens",)),
    "mutants:ignores_offset": (
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="offset") and len(e) == 2,
    ),
    "mutants:ignores_gather_lens": (  # it writes whole sequences: past out's rows (an error) or the wrong ones
        "Unexpected results",
        lambda b, e: set(b.wrong) | set(b.silent) == ran(b, geometry="gather_lens") and len(e) == 2,
    ),
    "mutants:contiguous_only": (
        "Unexpected results",
        lambda b, e: set(b.silent) == ran(b, num_reqs=lambda n: n > 1) and not b.wrong and not e,
    ),
    "mutants:pitch_twice_the_width": (
        "Unexpected results",
        lambda b, e: set(b.wrong) | set(b.silent) == ran(b, geometry=lambda g: g in ("narrowest", "wide")),
    ),
    "mutants:raises": ("Unexpected results", lambda b, e: set(b.silent) == set(b.ran) and len(e) == 4),
    "mutants:hangs": (
        "Unexpected results",
        lambda b, e: set(b.silent) == {("default", "in-range", 3)} and "timeout" in b.no_result,
    ),
    "mutants:large_block_ids": ("Unexpected results", lambda b, e: set(b.wrong) == ran(b, geometry="high-ids")),
    "mutants:exits": (
        "Unexpected results",
        lambda b, e: set(b.silent) == {("default", "in-range", 2)} and b.no_result.startswith("exited"),
    ),
    "mutants:sys_exit": (
        "Unexpected results",
        lambda b, e: set(b.silent) == ran(b, num_reqs=5) and "SystemExit(0)" in b.no_result,
    ),
    "mutants:segfaults": (
        "Unexpected results",
        lambda b, e: set(b.faulted) == {("default", "in-range", 8)} and not b.wrong and not b.bug_signature,
    ),
    "mutants:skips_last_token": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:scale_off_by_one": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:no_rope": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:first_scale_only": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:flaky": ("Unexpected results", lambda b, e: 0 < len(b.wrong) < len(b.ran)),
    "mutants:poison_ids_only": (
        "Unexpected results",
        lambda b, e: b.wrong and {m for _, m, _ in b.wrong} == {"poison"},
    ),
    "mutants:returns_a_new_tensor": ("Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
}


def notebook_defaults() -> dict:
    declared = declared_parameters(notebooks())
    return {
        name: ast.literal_eval(where[GATHER])
        for name, where in declared.items()
        if GATHER in where and name not in ("profile", "run_dir")
    }


@pytest.fixture(scope="module")
def judged() -> dict[str, tuple[RunVerdict, Behaviour, list[str]]]:
    """Every mutant through notebook 02's default sweep, once: its verdict, behaviour and failed vLLM cases."""
    from repro.walkthrough.gather import GatherWalkthrough

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPLEMENTATIONS), os.environ.get("PYTHONPATH")]))
    nb = GatherWalkthrough.start("cpu", "", **{**notebook_defaults(), "case_timeout_s": CASE_TIMEOUT_S})
    assert nb.p["request_counts"] == notebook_defaults()["request_counts"]
    nb.implementations = tuple(under_test(target) for target in MUTANTS)
    nb.contiguous_cases()
    nb.sweep()
    tables = {name: nb.session.table(name).frame() for name in nb.session.tables}
    out = {}
    for target in MUTANTS:
        mine = {
            name: frame[frame["implementation"].astype(str) == target].reset_index(drop=True)
            for name, frame in tables.items()
        }
        manifest = {"status": "complete", "notebooks": {GATHER: {"status": "ok"}}}
        run = RunData(Path("mutants"), manifest, {k: v.assign(notebook=GATHER) for k, v in mine.items()}, {})
        contiguous = mine[Table.CONTIGUOUS_CHECKS]
        failed = contiguous[~contiguous["ok"].astype(bool)]["case"].tolist()
        b = behaviour(mine[Table.SWEEP], UNDER_TEST_LABEL, mine.get(Table.MEMORY_SAFETY))
        out[target] = (run_verdict(run), b, failed)
    return out


@pytest.mark.parametrize("target", list(MUTANTS))
def test_each_wrong_gather_gets_the_verdict_it_must(judged, target):
    verdict, b, failed_contiguous = judged[target]
    headline, shows = MUTANTS[target]
    assert verdict_code(verdict) == 1, verdict.title  # every one of them fails the run
    assert verdict.title.startswith(f"{headline}: "), verdict.title
    assert "Fix verified" not in verdict.title
    assert shows(b, failed_contiguous), (verdict.title, b, failed_contiguous)


def test_the_suite_ran_the_default_sweeps_cases(judged):
    """Every mutant ran every case of the default sweep: all counts in both modes, and every other geometry."""
    _, b, _ = judged["mutants:buggy_pitch"]
    defaults = notebook_defaults()
    cases = pd.DataFrame(b.ran, columns=["geometry", "mode", "num_reqs"])
    default = cases[cases["geometry"] == Geometry.DEFAULT]
    assert sorted(set(default["num_reqs"])) == sorted(defaults["request_counts"])
    assert set(cases["geometry"]) == set(defaults["geometries"]) == set(Geometry)
    assert all(len(judged[t][1].ran) == len(b.ran) for t in MUTANTS)

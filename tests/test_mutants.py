"""The mutation suite: wrong gathers (tests/fixtures/implementations/mutants.py) each get the verdict they must
from notebook 02's default sweep.

The cases are the default ``make run``'s on the CPU profile: notebook 02's own parameter defaults, read from its
parameters cell, through the notebook's own library path (``GatherWalkthrough.contiguous_cases`` and ``sweep``),
every mutant as the implementation under test in a case process, judged by this process through its own mapping
of the case's tensors. To keep the suite's CPU time small each mutant runs vLLM's four contiguous cases and one of
the default sweep's two classes of cases, exactly as the default sweep runs it (its ``geometries`` parameter):

* ``default``: the default geometry with in-range ids, every request count (1, 2, 3, 5, 8, 13, 21, 37, 64, 100,
  256), for the mutants wrong at some counts only (the last ``n % 8`` requests; a hang, an exit, a ``sys.exit`` and
  a segfault at one count);
* ``others``: the five other geometries (narrowest and wide backing, offset, ``gather_lens``, high block ids),
  each at the two smallest counts from 2 (2 and 3) in both modes, for every other mutant (the buggy pitch, those
  wrong in one geometry, and those wrong wherever they run).

Only the case time limit is shorter (30 s: the mutant that hangs sleeps that long once, not two minutes) and the
controls are left out (their verdicts are notebook 02's). The mutants of a class run in one case process together,
which is replaced each time one of them ends it.
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
from repro.outcomes import Outcome
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


#: target: (the class of cases it runs, the headline's class, what its behaviour must show given its failed vLLM cases)
MUTANTS = {
    "mutants:buggy_pitch": (
        "others",
        "Reproduced",
        lambda b, e: b.bug_signature and set(b.wrong) == set(b.ran) and not e,
    ),
    "mutants:wrong_last_requests": (
        "default",
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, num_reqs=lambda n: n > 8 and n % 8 > 0) and not e,
    ),
    "mutants:one_token": ("others", "Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:repoint_data": ("others", "Unexpected results", lambda b, e: b.repointed and set(b.wrong) == set(b.ran)),
    "mutants:repoint_set": ("others", "Unexpected results", lambda b, e: b.repointed and set(b.wrong) == set(b.ran)),
    "mutants:writes_past_rows": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4,
    ),
    "mutants:writes_before_offset": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="offset") and len(e) == 2,
    ),
    "mutants:changes_k_cache": (
        "others",
        "Unexpected results",
        lambda b, e: b.changed_inputs == ("k_cache",) and not b.wrong and len(e) == 4,
    ),
    "mutants:changes_block_table": (
        "others",
        "Unexpected results",
        lambda b, e: b.changed_inputs == ("block_table",) and not b.wrong,
    ),
    "mutants:changes_seq_lens": ("others", "Unexpected results", lambda b, e: b.changed_inputs == ("seq_lens",)),
    "mutants:ignores_offset": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="offset") and len(e) == 2,
    ),
    "mutants:ignores_gather_lens": (  # it writes whole sequences: past out's rows (an error) or the wrong ones
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) | set(b.silent) == ran(b, geometry="gather_lens") and len(e) == 2,
    ),
    "mutants:contiguous_only": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.silent) == set(b.ran) and not b.wrong and not e,
    ),
    "mutants:pitch_twice_the_width": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) | set(b.silent) == ran(b, geometry=lambda g: g in ("narrowest", "wide")),
    ),
    "mutants:raises": ("others", "Unexpected results", lambda b, e: set(b.silent) == set(b.ran) and len(e) == 4),
    "mutants:hangs": (
        "default",
        "Unexpected results",
        lambda b, e: set(b.silent) == {("default", "in-range", 3)} and b.no_result_status == Outcome.TIMEOUT,
    ),
    "mutants:large_block_ids": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == ran(b, geometry="high-ids") and not e,
    ),
    "mutants:exits": (
        "default",
        "Unexpected results",
        lambda b, e: set(b.silent) == {("default", "in-range", 2)} and b.no_result_status == Outcome.EXITED,
    ),
    "mutants:sys_exit": (
        "default",
        "Unexpected results",
        lambda b, e: set(b.silent) == {("default", "in-range", 5)} and "SystemExit(0)" in b.no_result_error,
    ),
    "mutants:segfaults": (
        "default",
        "Unexpected results",
        lambda b, e: set(b.faulted) == {("default", "in-range", 8)} and not b.wrong and not b.bug_signature,
    ),
    "mutants:skips_last_token": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4,
    ),
    "mutants:scale_off_by_one": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4,
    ),
    "mutants:no_rope": ("others", "Unexpected results", lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4),
    "mutants:first_scale_only": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4,
    ),
    "mutants:flaky": ("others", "Unexpected results", lambda b, e: 0 < len(b.wrong) < len(b.ran)),
    "mutants:poison_ids_only": (
        "others",
        "Unexpected results",
        lambda b, e: b.wrong and {m for _, m, _ in b.wrong} == {"poison"},
    ),
    "mutants:returns_a_new_tensor": (
        "others",
        "Unexpected results",
        lambda b, e: set(b.wrong) == set(b.ran) and len(e) == 4,
    ),
}
#: The two classes of the default sweep's cases: (geometries, sentinel modes) of each (None: the sweep's own).
CLASSES = {
    "default": ([str(Geometry.DEFAULT)], ["in-range"]),
    "others": ([str(g) for g in Geometry if g != Geometry.DEFAULT], None),
}


def notebook_defaults() -> dict:
    declared = declared_parameters(notebooks())
    return {
        name: ast.literal_eval(where[GATHER])
        for name, where in declared.items()
        if GATHER in where and name not in ("profile", "run_dir")
    }


def sweep_class(name: str) -> dict[str, tuple[RunVerdict, Behaviour, list[str]]]:
    """The mutants of one class through notebook 02's default sweep, restricted to that class's cases: each one's
    verdict, behaviour and failed vLLM cases."""
    from repro.parameters import GatherParameters
    from repro.walkthrough.gather import GatherWalkthrough

    targets = [t for t, (where, _, _) in MUTANTS.items() if where == name]
    geometries, modes = CLASSES[name]
    params = {**notebook_defaults(), "case_timeout_s": CASE_TIMEOUT_S, "geometries": geometries}
    params["sentinel_modes"] = modes or params["sentinel_modes"]
    nb = GatherWalkthrough.start("cpu", "", GatherParameters(**params))
    nb.implementations = tuple(under_test(target) for target in targets)
    nb.contiguous_cases()
    nb.sweep()
    tables = {name: nb.session.table(name).frame() for name in nb.session.tables}
    out = {}
    for target in targets:
        mine = {
            table: frame[frame["implementation"].astype(str) == target].reset_index(drop=True)
            for table, frame in tables.items()
        }
        manifest = {"status": "complete", "notebooks": {GATHER: {"status": "ok"}}}
        run = RunData(Path("mutants"), manifest, {k: v.assign(notebook=GATHER) for k, v in mine.items()}, {})
        contiguous = mine[Table.CONTIGUOUS_CHECKS]
        failed = contiguous[~contiguous["ok"].astype(bool)]["case"].tolist()
        b = behaviour(mine[Table.SWEEP], UNDER_TEST_LABEL, mine.get(Table.MEMORY_SAFETY))
        out[target] = (run_verdict(run), b, failed)
    return out


@pytest.fixture(scope="module")
def judged() -> dict[str, tuple[RunVerdict, Behaviour, list[str]]]:
    """Every mutant through its class of the default sweep's cases, once."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPLEMENTATIONS), os.environ.get("PYTHONPATH")]))
    return {**sweep_class("default"), **sweep_class("others")}


@pytest.mark.parametrize("target", list(MUTANTS))
def test_each_wrong_gather_gets_the_verdict_it_must(judged, target):
    verdict, b, failed_contiguous = judged[target]
    _, headline, shows = MUTANTS[target]
    assert verdict_code(verdict) == 1, verdict.title  # every one of them fails the run
    assert verdict.title.startswith(f"{headline}: "), verdict.title
    assert "Fix verified" not in verdict.title
    assert shows(b, failed_contiguous), (verdict.title, b, failed_contiguous)


def test_each_class_ran_exactly_the_default_sweeps_cases_of_that_class(judged):
    """A class's mutants ran exactly the cases the default sweep runs for it: every request count of the defaults with
    in-range ids at the default geometry; 2 and 3 requests in both modes at each other geometry."""
    defaults = notebook_defaults()
    assert set(CLASSES["default"][0]) | set(CLASSES["others"][0]) == set(defaults["geometries"]) == set(Geometry)
    for name, counts in (("default", defaults["request_counts"]), ("others", sorted(defaults["request_counts"])[1:3])):
        ran_by = [judged[t][1] for t, (where, _, _) in MUTANTS.items() if where == name]
        cases = pd.DataFrame(ran_by[0].ran, columns=["geometry", "mode", "num_reqs"])
        assert set(cases["geometry"]) == set(CLASSES[name][0])
        assert sorted(set(cases["num_reqs"])) == sorted(counts)
        assert (
            set(cases["mode"]) == set(CLASSES[name][1] or defaults["sentinel_modes"]) <= set(defaults["sentinel_modes"])
        )
        assert all(set(b.ran) == set(ran_by[0].ran) for b in ran_by)

"""Short paths from a notebook cell to the repository's kernels, and cells that keep no hidden state.

A cell reaches this repository's gathers through at most 3 frames (the walkthrough's method, the evidence that runs
the cases, the call that observes one), measured here by a probe in place of each kernel that reads the stack; the
kernels, the studies' included (through the loaders they register), are reached as the functions themselves
(:func:`repro.core.kernels.own.kernel_of`), never by importing their ``module:function`` text; and a cell run again
gives the same output and leaves the same tables."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest
from clitools import is_timing_column

from repro.parameters import GatherParameters, ReshapeParameters
from repro.profiles import activate, resolve
from repro.registry import BUGGY, CONTIGUOUS_COPY, FIXED, IMPLEMENTATIONS

MAX_FRAMES = 3
SMALL = dict(request_counts=[1, 2], geometries=["default"], sentinel_modes=["in-range"], seq_len_max=64)


@pytest.fixture(scope="module")
def gather():
    activate(resolve("cpu"))  # before any kernel module is defined
    from repro.core.kernels import gather

    return gather


def frames_between(cell_name: str, stack: list[inspect.FrameInfo]) -> int:
    """Frames from the cell's function (excluded) down to the kernel (excluded)."""
    names = [f.function for f in stack]
    return names.index(cell_name) - 1  # stack[0] is the probe, stack[1] the first frame above the kernel


@pytest.fixture
def probed(gather, monkeypatch):
    """Each own kernel replaced by a probe that records, per kernel, the frames above it, then runs it."""
    seen: dict[str, list[int]] = {}

    def probe(name, kernel):
        def run(*args):
            stack = inspect.stack()
            cells = [f.function for f in stack if f.function.startswith("cell_")]
            if sum(f.function == "run_probed" for f in stack) == 0:  # not a kernel called by another (the copy's)
                seen.setdefault(name, []).append(frames_between(cells[0], stack) if cells else -1)
            return run_probed(*args)

        def run_probed(*args):
            return kernel(*args)

        return run

    for entry in IMPLEMENTATIONS:
        name = entry.target.split(":")[1]
        monkeypatch.setattr(gather, name, probe(name, getattr(gather, name)))
    return seen


@pytest.mark.integration  # runs the notebook's cells end to end (seconds)
def test_a_cell_reaches_the_kernels_through_at_most_three_frames(probed):
    from repro.walkthrough.gather import GatherWalkthrough

    nb = GatherWalkthrough.start("cpu", "", GatherParameters(**SMALL))

    def cell_contiguous():
        nb.contiguous_cases()

    def cell_sweep():
        nb.sweep()

    cell_contiguous()
    cell_sweep()
    assert set(probed) == {e.target.split(":")[1] for e in IMPLEMENTATIONS}
    depths = {name: max(d) for name, d in probed.items()}
    assert all(0 < d <= MAX_FRAMES for d in depths.values()), depths


def test_the_kernels_are_reached_without_importing_their_names(gather, monkeypatch):
    from repro import registry
    from repro.core.kernels.own import kernel_of

    def refuse(name, *args, **kwargs):
        raise AssertionError(f"imported {name} by its name")

    registry.loaders()  # the registrations, read once (an entry point's module is imported by its name)
    monkeypatch.setattr(registry.importlib, "import_module", refuse)
    assert kernel_of(BUGGY.target) is gather.gather_buggy and kernel_of(FIXED.target) is gather.gather_fixed
    assert kernel_of(CONTIGUOUS_COPY.target) is gather.gather_contiguous_copy
    with pytest.raises(registry.ImplementationError, match="imported tests_no_such_module by its name"):
        kernel_of("tests_no_such_module:fn")  # a user's path is imported by its text


def test_the_studies_gathers_are_reached_through_their_loaders_never_by_their_names(gather, monkeypatch):
    """Every gather of the studies' own (``gather_fast`` and the V4.1 gathers) is registered with its loader and
    reached through it, as the function its recorded ``target`` names; a user's path alone is imported by its text."""
    from repro import registry
    from repro.core.kernels.own import kernel_of
    from repro_studies.registry import FAST, RECORD_GATHERS, REGISTERED

    studies = (FAST, *RECORD_GATHERS.values())
    assert set(registry.loaders()) == {e.target for e in studies}
    assert all(e.loader is not None for e in (*REGISTERED.implementations, *REGISTERED.kernels))
    assert [e.label for e in registry.implementations()] == [*(e.label for e in IMPLEMENTATIONS), FAST.label]

    def refuse(name, *args, **kwargs):
        raise AssertionError(f"imported {name} by its name")

    monkeypatch.setattr(registry.importlib, "import_module", refuse)
    for entry in studies:
        fn = kernel_of(entry.target)
        assert fn is entry.loader() and f"{fn.__module__}:{fn.__name__}" == entry.target
        registry.inspect.signature(fn).bind(*registry.GATHER_ARGS)  # vLLM's 7 positional arguments
    with pytest.raises(registry.ImplementationError, match=r"imported repro_studies\.kernels\.nothing by its name"):
        kernel_of("repro_studies.kernels.nothing:fn")  # a path no entry records is a user's


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    keep = [c for c in a.columns if not is_timing_column(c)]
    pd.testing.assert_frame_equal(a[keep].reset_index(drop=True), b[keep].reset_index(drop=True))


@pytest.mark.integration  # runs a sweep end to end (seconds)
def test_a_gather_cell_run_again_gives_the_same_output(gather, tmp_path):
    from repro.walkthrough.gather import GatherWalkthrough

    nb = GatherWalkthrough.start("cpu", str(tmp_path), GatherParameters(**SMALL))
    first_cases, first_sweep = nb.contiguous_cases(), nb.sweep()
    _same(first_cases, nb.contiguous_cases())
    _same(first_sweep, nb.sweep())
    for name, table in nb.session.tables.items():  # the files hold what the tables hold, once
        on_disk = pd.read_csv(tmp_path / "results" / f"{name}.csv", keep_default_na=False)
        assert len(on_disk) == len(table.rows), name
        assert table.record()["bytes"] == (tmp_path / "results" / f"{name}.csv").stat().st_size


def test_a_reshape_cell_run_again_gives_the_same_output(gather, tmp_path):
    from repro.walkthrough.reshape import ReshapeWalkthrough

    def straight() -> ReshapeWalkthrough:
        nb = ReshapeWalkthrough.start("cpu", "", ReshapeParameters())
        nb.arithmetic(), nb.buggy_reshape(), nb.identify(), nb.fixed_reshape(), nb.every_group(), nb.split_ratio()
        return nb

    nb = straight()
    table, formula = nb.arithmetic()  # run again after the cells that follow it
    again, formula_again = nb.arithmetic()
    pd.testing.assert_frame_equal(table, again)
    assert formula == formula_again
    for method in ("every_group", "split_ratio"):
        pd.testing.assert_frame_equal(getattr(nb, method)(), getattr(nb, method)())
    assert nb.buggy_reshape() == nb.buggy_reshape() and nb.identify() == nb.identify()
    checks = nb.session.table("01-reshape-checks").frame()
    once = straight().session.table("01-reshape-checks").frame()
    assert len(checks) == len(once)
    key = ["check", "variant", "expected", "observed", "ok"]
    _same(checks.sort_values(key)[key], once.sort_values(key)[key])

"""Each notebook's parameters are one frozen value (:class:`repro.parameters.Parameters`): its fields are exactly the
names of the notebook's parameters cell, its defaults that cell's literals, each field checked once when the value is
built, with the one line the command line prints; the runner's check before a run and the notebook's first cell
build the same class."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from repro.cli.runner import declared_parameters
from repro.coverage import Geometry, SentinelMode
from repro.parameters import RESERVED, GatherParameters, ParameterError, ReshapeParameters, parameter_classes
from repro.profiles import PROFILES

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CLASSES = parameter_classes()


def cell_values(name: str) -> dict:
    declared = declared_parameters([NOTEBOOKS / name])
    return {k: ast.literal_eval(v[name.removesuffix(".ipynb")]) for k, v in declared.items() if k not in RESERVED}


def test_every_notebook_of_a_run_has_its_class():
    assert sorted(CLASSES) == sorted(p.name for p in NOTEBOOKS.glob("0*.ipynb"))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_class_holds_exactly_the_cells_parameters_and_their_defaults(name):
    cls, values = CLASSES[name], cell_values(name)
    assert [f.name for f in dataclasses.fields(cls)] == list(values)
    assert cls().values() == cls(**values).values() == values
    assert cls.build(values, "cpu").values() == values


def test_the_value_is_frozen_and_its_modes_are_enums():
    params = GatherParameters()
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.seed = 1  # type: ignore[misc]
    assert params.sentinel_modes == [SentinelMode.IN_RANGE, SentinelMode.POISON]
    assert all(isinstance(m, SentinelMode) for m in GatherParameters(sentinel_modes=["poison"]).sentinel_modes)
    assert all(isinstance(g, Geometry) for g in params.geometries)
    assert isinstance(GatherParameters(case_timeout_s=5).case_timeout_s, float)


@pytest.mark.parametrize(
    ("build", "line"),
    [
        (lambda: GatherParameters(seed=-1), r"^seed: -1 is out of range; accepted: an integer from 0 to "),
        (lambda: GatherParameters(sentinel_modes=["edge"]), r"^sentinel_modes: \['edge'\] is out of range; accepted: "),
        (lambda: ReshapeParameters(block_size="256"), r"^block_size: '256' has the wrong type; accepted: a positive "),
        (lambda: ReshapeParameters.build({"blocksize": 3}, "cpu"), r"^blocksize: unknown parameter; accepted: "),
        (lambda: ReshapeParameters.build({"profile": "cpu"}, "cpu"), r"^profile: set by the runner"),
        (lambda: GatherParameters.build({"backing_width": 2}, "cpu"), r"^backing_width: 2 is not wider than the "),
        (lambda: GatherParameters.build({"sanitizer": "required"}, "cpu"), r"^sanitizer: 'required' but "),
    ],
)
def test_a_bad_value_is_one_line_naming_the_parameter(build, line):
    with pytest.raises(ParameterError, match=line) as err:
        build()
    assert "\n" not in str(err.value)


def test_zeros_resolve_to_the_profiles_defaults():
    cpu = PROFILES["cpu"]
    resolved = GatherParameters().resolved(cpu)
    assert (resolved.seq_len_max, resolved.case_timeout_s) == (cpu.gather_seq_len_max, cpu.case_timeout_s)
    assert GatherParameters(seq_len_max=64).resolved(cpu).seq_len_max == 64

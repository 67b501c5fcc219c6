"""One matrix case: an arm on one scenario, compared bitwise with the record-aware reference.

Runs in this process or, for cases that can fault, in a child (``python -m repro_studies.upstream.cases``),
which prints the :class:`~repro.core.evidence.cases.CaseResult` as its last line
(:func:`~repro.core.evidence.cases.serve_case`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import torch

from repro.core.evidence.cases import CaseResult, observe_call, record_error, serve_case
from repro.core.evidence.scenarios import GatherScenario, ScenarioSpec, build_scenario
from repro_studies.kernels.records_reference import gather_reference
from repro_studies.upstream.arms import Arm, interpreted_now, make_callable


def reference_for(scenario: GatherScenario, negative_zero: bool | None = None) -> torch.Tensor:
    """The reference output of ``scenario`` (NVFP4's code 8 as -0 when ``negative_zero``, default: the spec's)."""
    ref = scenario.fresh_out()
    signed = scenario.spec.negative_zero if negative_zero is None else negative_zero
    gather_reference(scenario.spec.layout, ref, *scenario.args(ref)[1:], negative_zero=signed)
    return ref


def run_arm_case(
    arm: Arm,
    spec: ScenarioSpec,
    fn: Callable[..., None] | None = None,
    checked: bool = False,
    scenario: GatherScenario | None = None,
    reference: torch.Tensor | None = None,
) -> CaseResult:
    """Exceptions (load failures included) become an ``error`` result, never escape."""
    result = CaseResult(implementation=f"vllm=={arm.release}:{arm.kernel}:{arm.variant}", status="ok")
    try:
        fn = fn or make_callable(arm, interpreted_now())
        scenario = scenario or build_scenario(spec)
        ref = reference if reference is not None else reference_for(scenario)
        observe_call(result, fn, scenario, ref, checked)
    except Exception as exc:  # recorded as a result row; the matrix goes on
        record_error(result, exc)
    return result


def case_command(arm: Arm, spec: ScenarioSpec, checked: bool) -> list[str]:
    payload = json.dumps({"arm": arm.to_dict(), "spec": spec.to_dict(), "checked": checked})
    return [sys.executable, "-m", "repro_studies.upstream.cases", payload]


def _child_main(argv: list[str]) -> int:
    return serve_case(
        argv, lambda payload, spec: run_arm_case(Arm(**payload["arm"]), spec, checked=payload.get("checked", False))
    )


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))

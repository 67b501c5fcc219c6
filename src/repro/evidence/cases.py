"""One gather case: build the scenario, run an implementation, compare it bitwise with the reference.

A case is described by plain data (a :class:`~repro.evidence.scenarios.ScenarioSpec` and an implementation
path) so that it runs the same in this process or in a child (``python -m repro.evidence.cases``),
which is how faulting cases are kept from taking a run down.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch

from repro.evidence.scenarios import GatherScenario, ScenarioSpec, build_scenario
from repro.evidence.watchdog import CaseTimeout, set_parent_death_signal, time_limit
from repro.kernels.reference import dequantize_and_gather_reference
from repro.registry import load_implementation

if TYPE_CHECKING:  # imported lazily at run time: it patches Triton's interpreter
    from repro.evidence.checked_interp import CheckReport


@dataclass
class CaseResult:
    implementation: str
    status: str  # "ok" | "error" | "crashed" | "timeout"
    total_tokens: int = 0
    mismatched_tokens: int | None = None
    stray_writes: int | None = None  # output rows outside the gather range that changed
    error: str = ""
    returncode: int | None = None
    out_of_view_lanes: int | None = None  # checked interpreter: inside some storage, outside every view
    out_of_bounds_lanes: int | None = None  # checked interpreter: outside every argument
    checked_lines: str = ""  # kernel lines the flagged lanes came from
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def gathered_rows_mask(scenario: GatherScenario, out: torch.Tensor) -> torch.Tensor:
    """``[num_reqs, out_rows]``: True where the gather must write (rows offset .. offset+gather_len)."""
    lens = scenario.gather_lens if scenario.gather_lens is not None else scenario.seq_lens
    rows = torch.arange(out.shape[1], device=out.device)
    off = scenario.spec.offset
    return (rows[None, :] >= off) & (rows[None, :] < off + lens.long()[:, None])


def compare_bitwise(out: torch.Tensor, ref: torch.Tensor, scenario: GatherScenario) -> tuple[int, int]:
    """(mismatched gathered tokens, changed rows that nobody should write), bf16 compared as int16."""
    differs = (out.view(torch.int16) != ref.view(torch.int16)).any(dim=-1)
    mask = gathered_rows_mask(scenario, out)
    return int(differs[mask].sum()), int(differs[~mask].sum())


def reference_output(scenario: GatherScenario) -> torch.Tensor:
    ref = scenario.fresh_out()
    dequantize_and_gather_reference(*scenario.args(ref))
    return ref


def flagged_lines(report: CheckReport) -> str:
    """``function:line op class=lanes`` for every kernel line the checked interpreter flagged."""
    frame = report.to_dataframe()
    if frame.empty:
        return ""
    frame = frame[frame["klass"] != "in_view"]
    grouped = frame.groupby(["function", "line", "op", "klass"], sort=True)["lanes"].sum()
    return "; ".join(f"{fn}:{line} {op} {klass}={int(n)}" for (fn, line, op, klass), n in grouped.items())


def run_case(
    spec: ScenarioSpec,
    implementation: str,
    checked: bool = False,
    scenario: GatherScenario | None = None,
    reference: torch.Tensor | None = None,
    timeout_s: float | None = None,
) -> CaseResult:
    """Run one implementation on one scenario; exceptions become an ``error`` result, never escape, and a
    case past ``timeout_s`` becomes a ``timeout`` result (:func:`~repro.evidence.watchdog.time_limit`)."""
    result = CaseResult(implementation=implementation, status="ok")
    try:
        with time_limit(timeout_s, f"{implementation} ({spec.mode}, {spec.num_reqs} requests)"):
            _run_case(result, spec, implementation, checked, scenario, reference)
    except CaseTimeout as exc:
        result.status, result.error = "timeout", str(exc)[:500]
    return result


def observe_call(
    result: CaseResult, fn: Callable[..., None], scenario: GatherScenario, reference: torch.Tensor, checked: bool
) -> None:
    """Call ``fn`` once on a fresh poisoned output (under the bounds-checked interpreter when ``checked``)
    and record into ``result`` the tokens and stray rows that differ bitwise from ``reference``."""
    result.total_tokens = scenario.total_tokens
    out = scenario.fresh_out()
    if checked:
        from repro.evidence.checked_interp import checked_interpreter

        with checked_interpreter() as report:
            fn(*scenario.args(out))
        result.out_of_view_lanes = report.out_of_view_lanes
        result.out_of_bounds_lanes = report.out_of_bounds_lanes
        result.checked_lines = flagged_lines(report)
    else:
        fn(*scenario.args(out))
    if out.is_cuda:
        torch.cuda.synchronize()
    result.mismatched_tokens, result.stray_writes = compare_bitwise(out, reference, scenario)


def record_error(result: CaseResult, exc: Exception) -> None:
    """An exception of a case becomes its ``error`` status; the sweep goes on."""
    result.status = "error"
    result.error = f"{type(exc).__name__}: {exc}"[:500]
    result.extra["traceback"] = traceback.format_exc(limit=4)[-1500:]


def _run_case(
    result: CaseResult,
    spec: ScenarioSpec,
    implementation: str,
    checked: bool,
    scenario: GatherScenario | None,
    reference: torch.Tensor | None,
) -> None:
    try:
        fn = load_implementation(implementation)
        scenario = scenario or build_scenario(spec)
        ref = reference if reference is not None else reference_output(scenario)
        observe_call(result, fn, scenario, ref, checked)
    except Exception as exc:  # recorded as a result row; the sweep goes on
        record_error(result, exc)


def serve_case(argv: list[str], run: Callable[[dict, ScenarioSpec], CaseResult]) -> int:
    """Child-process entry for one case: ``run(payload, spec)`` on the JSON payload in ``argv[0]``, GPU faults
    surfaced here by a synchronize, the result as the last stdout line (what :mod:`repro.evidence.isolate` reads)."""
    set_parent_death_signal()  # under a wrapper (compute-sanitizer) our parent is the wrapper
    payload = json.loads(argv[0])
    spec = ScenarioSpec(**payload["spec"])
    t0 = time.perf_counter()
    result = run(payload, spec)
    if spec.device.startswith("cuda"):
        try:
            torch.cuda.synchronize()
        except Exception as exc:
            result.status, result.error = "error", f"{type(exc).__name__}: {exc}"[:500]
    result.extra["child_seconds"] = round(time.perf_counter() - t0, 3)
    print("\n" + json.dumps(result.to_dict()), flush=True)
    return 0 if result.status == "ok" else 3


def _child_main(argv: list[str]) -> int:
    return serve_case(
        argv, lambda payload, spec: run_case(spec, payload["implementation"], payload.get("checked", False))
    )


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))

"""One gather case: build the scenario, run an implementation, compare it bitwise with the reference.

A case is described by plain data (a :class:`~repro.core.evidence.scenarios.ScenarioSpec` and an implementation
path) so that it runs the same in this process or in a child (``python -m repro.core.evidence.cases``),
which is how faulting cases are kept from taking a run down.

A gather writes only ``out``: every case also compares each input's whole storage (the K cache's pages,
the backing table behind a narrowed view, ``seq_lens``, ``gather_lens``) before and after the call, names
any that changed, and puts it back for the cases that follow.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import torch

from repro.core.evidence.channel import ChildChannel, case_started
from repro.core.evidence.checked_interp import checked_interpreter
from repro.core.evidence.scenarios import GatherScenario, ScenarioSpec, build_scenario
from repro.core.evidence.watchdog import CaseTimeout, set_parent_death_signal, time_limit
from repro.core.kernels.own import kernel_of
from repro.core.kernels.reference import dequantize_and_gather_reference
from repro.coverage import SentinelMode
from repro.outcomes import Outcome, status_of_error

if TYPE_CHECKING:  # imported lazily at run time: it patches Triton's interpreter
    from repro.core.evidence.checked_interp import CheckReport


@dataclass
class CaseResult:
    implementation: str
    status: Outcome
    total_tokens: int = 0
    mismatched_tokens: int | None = None
    stray_writes: int | None = None  # output rows outside the gather range that changed
    error: str = ""
    returncode: int | None = None
    out_of_view_lanes: int | None = None  # checked interpreter: inside some storage, outside every view
    out_of_bounds_lanes: int | None = None  # checked interpreter: outside every argument
    checked_lines: str = ""  # kernel lines the flagged lanes came from
    changed_inputs: str = ""  # inputs the call changed (comma-separated names); a gather writes only ``out``
    out_repointed: str = ""  # how ``out`` stopped being the caller's buffer (storage, pointer or strides)
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


def alias_of(tensor: torch.Tensor) -> torch.Tensor:
    """A new tensor object over the same storage, offset, shape and strides: what the caller's buffer holds,
    read after the call whatever the implementation did to the tensor object it was handed."""
    alias = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return alias.set_(tensor.untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride())


def buffer_identity(tensor: torch.Tensor) -> tuple:
    """Which memory a tensor object views: its storage, data pointer, offset, shape, strides and dtype."""
    return (
        tensor.untyped_storage().data_ptr(),
        tensor.data_ptr(),
        tensor.storage_offset(),
        tuple(tensor.shape),
        tuple(tensor.stride()),
        str(tensor.dtype),
    )


def repointed(before: tuple, tensor: torch.Tensor) -> str:
    """``""`` when ``tensor`` still views the memory ``before`` names, else what changed, in words."""
    after = buffer_identity(tensor)
    if after == before:
        return ""
    names = ("storage", "data pointer", "storage offset", "shape", "strides", "dtype")
    changed = [f"{name} {b!r} -> {a!r}" for name, b, a in zip(names, before, after) if a != b]
    return "out was repointed away from the caller's buffer (" + "; ".join(changed)[:240] + ")"


def _storage_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The whole storage under ``tensor`` as bytes: a view's gaps (other columns, page padding) included."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def gather_inputs(scenario: GatherScenario) -> dict[str, torch.Tensor]:
    """A gather's inputs by their names in vLLM's signature (``block_table``: with its whole backing table)."""
    tensors = {
        "k_cache": scenario.k_cache,
        "seq_lens": scenario.seq_lens,
        "gather_lens": scenario.gather_lens,
        "block_table": scenario.block_table,
    }
    return {name: t for name, t in tensors.items() if t is not None}


def input_snapshot(scenario: GatherScenario) -> dict[str, torch.Tensor]:
    """A copy of every input's storage, to compare after the call."""
    return {name: _storage_bytes(t).clone() for name, t in gather_inputs(scenario).items()}


def changed_inputs(scenario: GatherScenario, snapshot: dict[str, torch.Tensor]) -> list[str]:
    """The inputs whose storage differs from ``snapshot``, each put back as it was."""
    tensors = gather_inputs(scenario)
    changed = []
    for name, before in snapshot.items():
        now = _storage_bytes(tensors[name])
        if not torch.equal(now, before):
            changed.append(name)
            now.copy_(before)
    return changed


_warmed: set[tuple[str, bool]] = set()


def warm_up(device: str, checked: bool) -> None:
    """Run this repository's fixed gather once on a one-request scenario (once per process, device and
    checking), so that a case's time limit measures the case, not the first launch of Triton's interpreter,
    of its bounds checks or of the device."""
    if (device, checked) in _warmed:
        return
    _warmed.add((device, checked))
    from repro.core.kernels.gather import gather_fixed  # lazy: a kernel module, defined under the profile chosen first

    spec = ScenarioSpec(
        num_reqs=1, block_size=16, seq_len_max=16, seed=0, mode=SentinelMode.IN_RANGE, max_reqs=1, device=device
    )
    small = build_scenario(spec)
    out = small.fresh_out()
    if checked:
        with checked_interpreter() as report:
            gather_fixed(*small.args(out))
        flagged_lines(report)  # its first call imports pandas
    else:
        gather_fixed(*small.args(out))
    if out.is_cuda:
        torch.cuda.synchronize()


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
    """Run one implementation on one scenario; exceptions become a result with their status, never escape,
    and a call past ``timeout_s`` becomes a ``timeout`` result (:func:`~repro.core.evidence.watchdog.time_limit`).
    The limit covers the call, not the import or the scenario before it."""
    result = CaseResult(implementation=implementation, status=Outcome.OK)
    try:
        fn = kernel_of(implementation)
        scenario = scenario or build_scenario(spec)
        ref = reference if reference is not None else reference_output(scenario)
    except (Exception, SystemExit) as exc:  # recorded as a result row; the sweep goes on
        record_error(result, exc)
        return result
    with case_outcome(result, timeout_s, f"{implementation} ({spec.mode}, {spec.num_reqs} requests)"):
        observe_call(result, fn, scenario, ref, checked)
    return result


@contextmanager
def case_outcome(result: CaseResult, timeout_s: float | None, what: str) -> Iterator[None]:
    """The case's call as a result: an exception it raises becomes ``result``'s status, a call past ``timeout_s`` a
    ``timeout`` (a context, so that the call runs in its caller's frame: a sweep reaches the kernel in few frames)."""
    try:
        with time_limit(timeout_s, what):
            try:
                yield
            except (Exception, SystemExit) as exc:
                record_error(result, exc)
    except CaseTimeout as exc:
        result.status, result.error = Outcome.TIMEOUT, str(exc)[:500]


def observe_call(
    result: CaseResult, fn: Callable[..., None], scenario: GatherScenario, reference: torch.Tensor, checked: bool
) -> None:
    """Call ``fn`` once on a fresh poisoned output (under the bounds-checked interpreter when ``checked``)
    and record into ``result`` the tokens and stray rows that differ bitwise from ``reference``."""
    warm_up(scenario.spec.device, checked)
    result.total_tokens = scenario.total_tokens
    out = scenario.fresh_out()
    buffer, identity = alias_of(out), buffer_identity(out)  # the caller's buffer, as the caller holds it
    before = input_snapshot(scenario)
    case_started()
    try:
        if checked:
            with checked_interpreter() as report:
                fn(*scenario.args(out))
            result.out_of_view_lanes = report.out_of_view_lanes
            result.out_of_bounds_lanes = report.out_of_bounds_lanes
            result.checked_lines = flagged_lines(report)
        else:
            fn(*scenario.args(out))
        if out.is_cuda:
            torch.cuda.synchronize()
    finally:  # also when the call raised: the inputs are put back for the cases that follow
        try:
            result.changed_inputs = ", ".join(changed_inputs(scenario, before))
        except Exception:  # a device the call left faulted: the call's own error is the one to report
            pass
    result.out_repointed = repointed(identity, out)
    result.mismatched_tokens, result.stray_writes = compare_bitwise(buffer, reference, scenario)


def record_error(result: CaseResult, exc: BaseException) -> None:
    """An exception of a case becomes its status (a named device fault, out of memory, or ``error``); the
    sweep goes on. ``SystemExit`` is the implementation trying to end the process: an error like any other."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):
        text = f"SystemExit({exc.code!r}): the implementation tried to end the process"
    result.status = status_of_error(text)
    result.error = text[:500]
    result.extra["traceback"] = traceback.format_exc(limit=4)[-1500:]


def serve_case(argv: list[str], run: Callable[[dict, ScenarioSpec], CaseResult]) -> int:
    """Child-process entry for one case: ``run(payload, spec)`` on the JSON payload in ``argv[0]``, GPU faults
    surfaced here by a synchronize, the result sent through the process's channel (what
    :mod:`repro.core.evidence.isolate` reads; printed only when no parent listens, e.g. run by hand)."""
    channel = ChildChannel.open()  # before any code under test is imported
    set_parent_death_signal()  # under a wrapper (compute-sanitizer) our parent is the wrapper
    payload = json.loads(argv[0])
    spec = ScenarioSpec(**payload["spec"])
    t0 = time.perf_counter()
    result = run(payload, spec)
    if spec.device.startswith("cuda"):
        try:
            torch.cuda.synchronize()
        except Exception as exc:
            record_error(result, exc)
    result.extra["child_seconds"] = round(time.perf_counter() - t0, 3)
    if channel is None:
        print(json.dumps(result.to_dict()), flush=True)
    else:
        channel.send(result.to_dict())
    return 0 if result.status == Outcome.OK else 3


def _child_main(argv: list[str]) -> int:
    return serve_case(
        argv, lambda payload, spec: run_case(spec, payload["implementation"], payload.get("checked", False))
    )


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))

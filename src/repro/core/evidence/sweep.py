"""Notebook 02's sweep: every implementation on every case, as observations.

The cases (:func:`sweep_cases`) are the request counts in each sentinel mode at the default geometry, and beside
them the other geometries of :mod:`repro.coverage` (the narrowest and a wide backing table, an offset, gather
lengths, block ids past what 16 bits hold) at the sweep's two smallest request counts from 2. This module runs them
and reports what it saw (status, mismatched tokens, stray writes, flagged lanes) to a callback, one call per case
as it finishes; what each observation means is decided above, in :mod:`repro.core.analysis.gather`.

The repository's own kernels run in this process, on a scenario built once per case (those that can fault, on
sentinel ids on a GPU, each in a process of its own), also when one is the implementation under test. An
implementation from outside runs in a case process (:class:`~repro.core.evidence.worker.CaseWorker`) and is judged
here: nothing its process can import decides a case.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from repro.core.evidence.cases import CaseResult, case_outcome, observe_call, reference_output, warm_up
from repro.core.evidence.isolate import run_case_isolated
from repro.core.evidence.sanitizer import run_many
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario, narrowed_width
from repro.core.evidence.worker import CaseWorker
from repro.core.kernels.own import kernel_of
from repro.coverage import OFFSET, VARIED_COUNTS, WIDE_FACTOR, WINDOW_FRACTION, Geometry, SentinelMode
from repro.outcomes import Outcome
from repro.registry import Implementation, is_outside


@dataclass(frozen=True)
class SweepCase:
    """One case of the sweep: its geometry and the scenario that realises it (its mode and request count)."""

    geometry: Geometry
    spec: ScenarioSpec

    @property
    def mode(self) -> str:
        return self.spec.mode

    @property
    def num_reqs(self) -> int:
        return self.spec.num_reqs

    def columns(self) -> dict:
        """What a result row says about the case beside its mode and request count (the table's identity)."""
        s = self.spec
        width = narrowed_width(s)
        return {
            "geometry": str(self.geometry),
            "block_size": s.block_size,
            "table_width": width,
            "backing_width": width if s.contiguous else (s.backing_width or 2 * width),
            "offset": s.offset,
            "window": s.window,
            "first_block": s.first_block,
        }


#: ``sink(implementation, case, result)``, called once per case as it finishes.
CaseSink = Callable[[Implementation, SweepCase, CaseResult], None]


def sweep_cases(
    request_counts: Sequence[int],
    modes: Sequence[str],
    base: ScenarioSpec,
    high_block_id: int,
    geometries: Sequence[str] = tuple(Geometry),
) -> list[SweepCase]:
    """Every request count in every mode at the default geometry, then each other geometry at the two smallest
    request counts from 2 in every mode (none when the sweep has no count from 2: then no case decides); only the
    ``geometries`` named."""
    width = narrowed_width(base)
    cases = []
    if Geometry.DEFAULT in geometries:
        cases += [SweepCase(Geometry.DEFAULT, replace(base, num_reqs=n, mode=m)) for m in modes for n in request_counts]
    varied = sorted(n for n in set(request_counts) if n >= 2)[:VARIED_COUNTS]
    changes = {
        Geometry.NARROWEST: {"backing_width": width + 1},
        Geometry.WIDE: {"backing_width": WIDE_FACTOR * width + 1},
        Geometry.OFFSET: {"offset": OFFSET},
        Geometry.WINDOW: {"window": max(1, base.seq_len_max // WINDOW_FRACTION)},
        Geometry.HIGH_IDS: {"block_size": 1, "backing_width": 0, "first_block": high_block_id},
    }
    for geometry, change in changes.items():
        if geometry in geometries:
            cases += [SweepCase(geometry, replace(base, num_reqs=n, mode=m, **change)) for m in modes for n in varied]
    return cases


def runs_isolated(entry: Implementation, mode: str, *, on_gpu: bool, interpreted: bool) -> bool:
    """Does one of the repository's own kernels run a case in a process of its own? Those that may fault, on
    sentinel ids, except in the bounds-checked interpreter (it counts their far lanes instead of dereferencing them,
    so they cannot fault). They judge their own case there: it is this repository's code, not the code under test."""
    if mode != SentinelMode.POISON or not entry.may_fault:
        return False
    return on_gpu or not interpreted


class Workers:
    """One case process per implementation that needs one, started on its first case; :meth:`close` ends them."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.held: dict[str, CaseWorker] = {}

    def of(self, entry: Implementation) -> CaseWorker:
        if entry.label not in self.held:
            self.held[entry.label] = CaseWorker(self.timeout_s)
        return self.held[entry.label]

    def modules(self) -> dict[str, list[dict]]:
        """Every module record each implementation was loaded with, by target."""
        out: dict[str, list[dict]] = {}
        for worker in self.held.values():
            for target, records in worker.modules.items():
                out.setdefault(target, []).extend(r for r in records if r not in out.get(target, []))
        return out

    def close(self) -> None:
        for worker in self.held.values():
            worker.shut()
        self.held.clear()


def run_sweep(
    cases: Sequence[SweepCase],
    implementations: Sequence[Implementation],
    sink: CaseSink,
    workers: Workers,
    *,
    on_gpu: bool,
    interpreted: bool,
    timeout_s: float = 120.0,
    max_workers: int = 8,
) -> None:
    """Run every implementation on every case and hand each result to ``sink``; every case, in this process or a
    case process, ends within ``timeout_s``. The implementation under test runs in its case process and is judged
    here; the repository's kernels that may fault run isolated several at a time, after the rest."""
    isolated = []
    if cases:
        warm_up(cases[0].spec.device, interpreted)
    for case in cases:
        scenario = build_scenario(case.spec)
        ref = reference_output(scenario)
        for entry in implementations:
            if is_outside(entry):
                result = workers.of(entry).case(entry.target, scenario, ref, checked=interpreted)
            elif runs_isolated(entry, case.mode, on_gpu=on_gpu, interpreted=interpreted):
                isolated.append((entry, case))
                continue
            else:  # this repository's kernel, called from here (cell, sweep, run_sweep, observe_call: the kernel)
                result = CaseResult(implementation=entry.target, status=Outcome.OK)
                with case_outcome(result, timeout_s, f"{entry.target} ({case.mode}, {case.num_reqs} requests)"):
                    observe_call(result, kernel_of(entry.target), scenario, ref, interpreted)
            sink(entry, case, result)
        del scenario, ref
    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        futures = [
            pool.submit(run_case_isolated, case.spec, entry.target, timeout_s, None, None, interpreted)
            for entry, case in isolated
        ]
        for (entry, case), future in zip(isolated, futures):
            sink(entry, case, future.result()[0])


# --------------------------------------------------------------------------------------------
# compute-sanitizer memcheck over the same cases (GPU).


def default_workers() -> int:
    """Concurrent sanitizer processes: most of the host's cores, at most 12 (they share one GPU)."""
    return max(1, min(12, (os.cpu_count() or 2) - 2))


def run_sanitizer_sweep(
    cases: Sequence[SweepCase],
    implementations: Sequence[Implementation],
    log_dir: str | Path,
    sink: Callable[[Implementation, SweepCase, object], None],
    max_workers: int | None = None,
    timeout_s: float = 300.0,
) -> None:
    """Every implementation on every case of the sweep under memcheck, each in its own process, several at a time."""
    jobs, labels = [], []
    for case in cases:
        for entry in implementations:
            jobs.append((case.spec, entry.target))
            labels.append((entry, case))
    results = run_many(jobs, max_workers=max_workers or default_workers(), log_dir=log_dir, timeout_s=timeout_s)
    for (entry, case), r in zip(labels, results):
        sink(entry, case, r)

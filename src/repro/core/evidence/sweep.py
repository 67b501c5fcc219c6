"""The request-count sweep of notebook 02: every implementation, both sentinel modes, as observations.

This module runs cases and reports what it saw (status, mismatched tokens, stray writes, flagged
lanes, memcheck errors) to a callback, one call per case as it finishes; what each observation
means (the check's expectation and verdict) is decided above, in :mod:`repro.core.analysis.gather`.
Cases that can fault run in their own processes, several at a time; the rest run in this process
on a scenario built once per (mode, count).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from repro.core.evidence.cases import CaseResult, reference_output, run_case
from repro.core.evidence.isolate import run_case_isolated
from repro.core.evidence.sanitizer import run_many
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.registry import ORIGIN_REPO, Implementation

#: ``sink(implementation, mode, num_reqs, result)``, called once per case as it finishes.
CaseSink = Callable[[Implementation, str, int, CaseResult], None]


def runs_isolated(entry: Implementation, mode: str, *, on_gpu: bool, interpreted: bool) -> bool:
    """Poison cases of an implementation that may fault run in a child process.

    The library's own kernels in the CPU interpreter are the exception: the bounds-checked
    interpreter counts their far lanes instead of dereferencing them, so they cannot fault.
    """
    if mode != "poison" or not entry.may_fault:
        return False
    return on_gpu or not interpreted or entry.origin != ORIGIN_REPO


def run_sweep(
    request_counts: Sequence[int],
    modes: Sequence[str],
    base: ScenarioSpec,
    implementations: Sequence[Implementation],
    sink: CaseSink,
    *,
    on_gpu: bool,
    interpreted: bool,
    timeout_s: float = 120.0,
    max_workers: int = 8,
) -> None:
    """Run every (mode, count, implementation) case and hand each result to ``sink``; every case, in this
    process or its own, ends within ``timeout_s``."""
    for mode in modes:
        isolated = []
        for n in request_counts:
            spec = replace(base, num_reqs=n, mode=mode)
            scenario = build_scenario(spec)
            ref = reference_output(scenario)
            for entry in implementations:
                if runs_isolated(entry, mode, on_gpu=on_gpu, interpreted=interpreted):
                    isolated.append((entry, n, spec))
                else:
                    sink(
                        entry,
                        mode,
                        n,
                        run_case(
                            spec,
                            entry.target,
                            checked=interpreted,
                            scenario=scenario,
                            reference=ref,
                            timeout_s=timeout_s,
                        ),
                    )
            del scenario, ref
        with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
            futures = [
                pool.submit(run_case_isolated, spec, entry.target, timeout_s, None, None, interpreted)
                for entry, _, spec in isolated
            ]
            for (entry, n, _), future in zip(isolated, futures):
                sink(entry, mode, n, future.result()[0])


# --------------------------------------------------------------------------------------------
# compute-sanitizer memcheck over the same cases (GPU).


def default_workers() -> int:
    """Concurrent sanitizer processes: most of the host's cores, at most 12 (they share one GPU)."""
    return max(1, min(12, (os.cpu_count() or 2) - 2))


def run_sanitizer_sweep(
    request_counts: Sequence[int],
    modes: Sequence[str],
    base: ScenarioSpec,
    implementations: Sequence[Implementation],
    log_dir: str | Path,
    sink: Callable[[Implementation, str, int, object], None],
    max_workers: int | None = None,
    timeout_s: float = 300.0,
) -> None:
    """Every implementation x mode x count under memcheck, each in its own process, several at a time."""
    jobs, labels = [], []
    for mode in modes:
        for n in request_counts:
            for entry in implementations:
                jobs.append((replace(base, num_reqs=n, mode=mode), entry.target))
                labels.append((entry, mode, n))
    results = run_many(jobs, max_workers=max_workers or default_workers(), log_dir=log_dir, timeout_s=timeout_s)
    for (entry, mode, n), r in zip(labels, results):
        sink(entry, mode, n, r)

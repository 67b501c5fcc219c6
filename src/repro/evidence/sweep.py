"""The request-count sweep of notebook 02: every variant, both sentinel modes, as check rows.

Expected: ``fixed``, ``contiguous-copy`` and the implementation under test match the reference at
every count; ``buggy`` equals the reference at one request and differs (or faults) from two on.
A buggy result that stops differing is a failed check, like a fixed path that breaks.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pandas as pd

from repro.evidence.cases import CaseResult, reference_output, run_case
from repro.registry import BUILTIN
from repro.evidence.isolate import run_case_isolated
from repro.evidence.results import ResultTable
from repro.evidence.scenarios import ScenarioSpec, build_scenario

SWEEP_VARIANTS = ("buggy", "fixed", "contiguous-copy", "fast")
UNDER_TEST = "under-test"


def expected_for(variant: str, num_reqs: int) -> str:
    if variant == "buggy":
        return "matches reference" if num_reqs == 1 else "differs from reference or faults"
    return "matches reference"


def observed_text(r: CaseResult) -> str:
    if r.status != "ok":
        return f"{r.status}: {r.error}"[:200]
    text = f"{r.mismatched_tokens}/{r.total_tokens} tokens differ"
    if r.stray_writes:
        text += f", {r.stray_writes} stray rows written"
    return text


def verdict(variant: str, num_reqs: int, r: CaseResult) -> bool:
    clean = r.status == "ok" and r.mismatched_tokens == 0 and r.stray_writes == 0
    if variant == "buggy" and num_reqs > 1:
        return r.status == "crashed" or (r.status == "ok" and r.mismatched_tokens > 0)
    return clean


def check_name(variant: str) -> str:
    return "buggy kernel reproduces the bug" if variant == "buggy" else "gather matches the reference"


def memory_verdict(variant: str, mode: str, num_reqs: int, r: CaseResult) -> tuple[str, bool] | None:
    """Checked-interpreter expectation: buggy reads outside the view (in-range) or outside every
    argument (poison) from two requests on; every other variant, and one request, none."""
    if r.out_of_view_lanes is None:
        return None
    flagged = r.out_of_bounds_lanes if mode == "poison" else r.out_of_view_lanes
    if variant == "buggy" and num_reqs > 1:
        what = "lanes outside every argument" if mode == "poison" else "block-table lanes outside the view"
        return f"> 0 {what}", flagged > 0
    return "0 flagged lanes", (r.out_of_view_lanes + r.out_of_bounds_lanes) == 0


def run_sweep(request_counts, modes, base: ScenarioSpec, implementation: str, *, on_gpu: bool,
              interpreted: bool, cases: ResultTable, safety: ResultTable | None = None,
              timeout_s: float = 120.0, max_workers: int = 8, progress=None) -> pd.DataFrame:
    """Run every (mode, count, variant) case, appending one check row per case as it finishes.

    Cases that can fault run in their own processes, several at a time; the rest run in this
    process on a scenario built once per (mode, count). Every case has ``timeout_s``, enforced in
    either place.
    """
    variants = [(v, BUILTIN[v]) for v in SWEEP_VARIANTS] + [(UNDER_TEST, implementation)]

    def record(variant, mode, n, path, r: CaseResult) -> None:
        cases.append({
            "check": check_name(variant), "variant": variant, "mode": mode, "num_reqs": n,
            "expected": expected_for(variant, n), "observed": observed_text(r),
            "ok": verdict(variant, n, r), "implementation": path, "status": r.status,
            "mismatched_tokens": r.mismatched_tokens, "total_tokens": r.total_tokens,
            "stray_writes": r.stray_writes, "error": r.error,
        })
        mem = memory_verdict(variant, mode, n, r) if safety is not None else None
        if mem is not None:
            safety.append({
                "check": "checked interpreter flags exactly the buggy reads", "variant": variant,
                "mode": mode, "num_reqs": n, "expected": mem[0],
                "observed": f"{r.out_of_view_lanes} outside view, {r.out_of_bounds_lanes} outside all",
                "ok": mem[1], "out_of_view_lanes": r.out_of_view_lanes,
                "out_of_bounds_lanes": r.out_of_bounds_lanes, "lines": r.checked_lines,
            })
        if progress:
            progress(mode, n, variant, r)

    for mode in modes:
        isolated = []
        for n in request_counts:
            spec = replace(base, num_reqs=n, mode=mode)
            scenario = build_scenario(spec)
            ref = reference_output(scenario)
            for variant, path in variants:
                can_fault = mode == "poison" and (variant == "buggy" or path not in BUILTIN.values())
                if can_fault and (on_gpu or not interpreted or path not in BUILTIN.values()):
                    isolated.append((variant, n, path, spec))
                else:
                    record(variant, mode, n, path,
                           run_case(spec, path, checked=interpreted, scenario=scenario, reference=ref,
                                    timeout_s=timeout_s))
            del scenario, ref
        with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
            futures = [pool.submit(run_case_isolated, spec, path, timeout_s, None, None, interpreted)
                       for _, _, path, spec in isolated]
            for (variant, n, path, _), future in zip(isolated, futures):
                record(variant, mode, n, path, future.result()[0])
    return cases.frame()


def mismatch_pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """``mode x num_reqs`` rows, one column per variant: "mismatched/total" or the fault."""
    def cell(row):
        if row["status"] != "ok":
            return row["status"]
        return f"{int(row['mismatched_tokens'])}/{int(row['total_tokens'])}"

    f = frame.assign(result=frame.apply(cell, axis=1))
    return f.pivot_table(index=["mode", "num_reqs"], columns="variant", values="result", aggfunc="first")


# --------------------------------------------------------------------------------------------
# compute-sanitizer memcheck over the same cases (GPU).

MEMCHECK_BLIND_SPOT = ("memcheck checks accesses against allocations, not tensor views: in in-range mode every "
                       "misread id is a real block, so the wrong gather stays inside the cache allocation")


def memcheck_expectation(variant: str, mode: str, num_reqs: int) -> tuple[str, bool | None]:
    """(expected text, True if errors are expected / False if none / None for the blind spot)."""
    if variant == "buggy" and num_reqs > 1:
        if mode == "poison":
            return "> 0 errors (reads outside the K cache)", True
        return "0 errors although the output is wrong (" + MEMCHECK_BLIND_SPOT.split(":")[0] + ")", False
    return "0 errors", False


def default_workers() -> int:
    """Concurrent sanitizer processes: most of the host's cores, at most 12 (they share one GPU)."""
    import os

    return max(1, min(12, (os.cpu_count() or 2) - 2))


def run_sanitizer_sweep(request_counts, modes, base: ScenarioSpec, implementation: str, log_dir, table: ResultTable,
                        max_workers: int | None = None, timeout_s: float = 300.0) -> pd.DataFrame:
    """Every variant x mode x count under memcheck, each in its own process, several at a time."""
    from repro.evidence.sanitizer import run_many

    variants = [(v, BUILTIN[v]) for v in SWEEP_VARIANTS] + [(UNDER_TEST, implementation)]
    jobs, labels = [], []
    for mode in modes:
        for n in request_counts:
            for variant, path in variants:
                jobs.append((replace(base, num_reqs=n, mode=mode), path))
                labels.append((variant, mode, n, path))
    results = run_many(jobs, max_workers=max_workers or default_workers(), log_dir=log_dir, timeout_s=timeout_s)
    for (variant, mode, n, path), r in zip(labels, results):
        expected, want_errors = memcheck_expectation(variant, mode, n)
        if r.status in ("clean", "errors"):
            ok = (r.error_count > 0) if want_errors else (r.error_count == 0)
            observed = f"{r.error_count} errors" + (f"; first: {r.first_access}" if r.first_access else "")
        else:
            ok, observed = False, f"{r.status}: {r.error or r.stderr_tail[-200:]}"
        table.append({
            "check": "memcheck error count", "variant": variant, "mode": mode, "num_reqs": n,
            "expected": expected, "observed": observed[:300], "ok": ok, "implementation": path,
            "sanitizer_status": r.status, "error_count": r.error_count, "errors_not_printed": r.errors_not_printed,
            "case_status": r.case_status, "mismatched_tokens": r.mismatched_tokens,
            "first_access": r.first_access, "log": Path(r.log_path).name if r.log_path else "",
        })
    return table.frame()

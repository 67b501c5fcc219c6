"""What the gather evidence means: expectations, verdicts and pivots for notebook 02's tables.

Expectations come from the registry: an implementation expected to reproduce the bug must equal
the reference at one request and differ (or fault) from two on; every other one must equal it
everywhere. A buggy result that stops differing is a failed check, like a fixed path that breaks.
Observations arrive as plain dicts (``CaseResult.to_dict()``, ``SanitizerResult.to_dict()``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from repro.coverage import Geometry, SentinelMode
from repro.outcomes import Outcome
from repro.registry import Expectation

#: memcheck's blind spot: what it checks, and why an in-range misread escapes it (expected texts name the first).
MEMCHECK_CHECKS = "memcheck checks accesses against allocations, not tensor views"
MEMCHECK_IN_RANGE_MISREADS = (
    "in in-range mode every misread id is a real block, so the wrong gather stays inside the cache allocation"
)


def expected_text(expect: str, num_reqs: int) -> str:
    if expect == Expectation.BUG:
        return "matches reference" if num_reqs == 1 else "differs from reference or faults"
    return "matches reference"


def changed_inputs_text(changed: object) -> str:
    """``"changed its input(s) k_cache (a gather writes only out)"``, or "" when nothing changed."""
    names = str(changed or "").strip()
    return f"changed its input(s) {names} (a gather writes only out)" if names and names != "nan" else ""


def _text(value: object) -> str:
    """A text cell as written (a CSV's empty cell reads back as NaN)."""
    text = str(value or "").strip()
    return "" if text == "nan" else text


def observed_text(obs: Mapping[str, Any]) -> str:
    changed = "; ".join(
        t for t in (changed_inputs_text(obs.get("changed_inputs")), _text(obs.get("out_repointed"))) if t
    )
    if obs["status"] != Outcome.OK:
        return "; ".join(t for t in (f"{obs['status']}: {obs.get('error', '')}"[:200], changed) if t)
    text = f"{obs['mismatched_tokens']}/{obs['total_tokens']} tokens differ"
    if obs.get("stray_writes"):
        text += f", {obs['stray_writes']} stray rows written"
    return f"{changed}; {text}" if changed else text


def case_ok(expect: str, num_reqs: int, obs: Mapping[str, Any]) -> bool:
    """The verdict of one sweep case. A case that changed an input fails whatever its output; only a named
    fault (:data:`repro.outcomes.Outcome.FAULTED`) counts as the bug's fault, never another ending. An ``out`` repointed
    away from the caller's buffer fails too: the caller's buffer is the output."""
    if changed_inputs_text(obs.get("changed_inputs")) or _text(obs.get("out_repointed")):
        return False
    clean = obs["status"] == Outcome.OK and obs["mismatched_tokens"] == 0 and obs["stray_writes"] == 0
    if expect == Expectation.BUG and num_reqs > 1:
        return obs["status"] == Outcome.FAULTED or (obs["status"] == Outcome.OK and (obs["mismatched_tokens"] or 0) > 0)
    return clean


def check_name(expect: str) -> str:
    return "buggy kernel reproduces the bug" if expect == Expectation.BUG else "gather matches the reference"


def sweep_row(
    label: str, expect: str, mode: str, num_reqs: int, obs: Mapping[str, Any], where: Mapping[str, Any] | None = None
) -> dict:
    """The check row of one sweep case, with its measured columns; ``where``: the case's geometry columns
    (:meth:`repro.core.evidence.sweep.SweepCase.columns`)."""
    return {
        "check": check_name(expect),
        "variant": label,
        **({"geometry": where["geometry"]} if where else {}),
        "mode": mode,
        "num_reqs": num_reqs,
        "expected": expected_text(expect, num_reqs),
        "observed": observed_text(obs),
        "ok": case_ok(expect, num_reqs, obs),
        "implementation": obs["implementation"],
        "status": obs["status"],
        "mismatched_tokens": obs["mismatched_tokens"],
        "total_tokens": obs["total_tokens"],
        "stray_writes": obs["stray_writes"],
        "error": obs.get("error", ""),
        "changed_inputs": obs.get("changed_inputs", ""),
        "out_repointed": obs.get("out_repointed", ""),
        **{k: v for k, v in (where or {}).items() if k != "geometry"},
    }


def default_geometry(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the default geometry (every row of a run recorded before the sweep had others)."""
    if "geometry" not in frame:
        return frame
    return frame[frame["geometry"].fillna(Geometry.DEFAULT).astype(str) == Geometry.DEFAULT]


def memory_expectation(expect: str, mode: str, num_reqs: int, obs: Mapping[str, Any]) -> tuple[str, bool] | None:
    """Checked-interpreter expectation: a buggy kernel reads outside the view (in-range) or outside
    every argument (poison) from two requests on; every other case flags no lane."""
    if obs.get("out_of_view_lanes") is None:
        return None
    flagged = obs["out_of_bounds_lanes"] if mode == SentinelMode.POISON else obs["out_of_view_lanes"]
    if expect == Expectation.BUG and num_reqs > 1:
        what = "lanes outside every argument" if mode == SentinelMode.POISON else "block-table lanes outside the view"
        return f"> 0 {what}", flagged > 0
    return "0 flagged lanes", (obs["out_of_view_lanes"] + obs["out_of_bounds_lanes"]) == 0


def memory_row(
    label: str, expect: str, mode: str, num_reqs: int, obs: Mapping[str, Any], where: Mapping[str, Any] | None = None
) -> dict | None:
    mem = memory_expectation(expect, mode, num_reqs, obs)
    if mem is None:
        return None
    return {
        "check": "checked interpreter flags exactly the buggy reads",
        "variant": label,
        **({"geometry": where["geometry"]} if where else {}),
        "mode": mode,
        "num_reqs": num_reqs,
        "expected": mem[0],
        "observed": f"{obs['out_of_view_lanes']} outside view, {obs['out_of_bounds_lanes']} outside all",
        "ok": mem[1],
        "out_of_view_lanes": obs["out_of_view_lanes"],
        "out_of_bounds_lanes": obs["out_of_bounds_lanes"],
        "lines": obs.get("checked_lines", ""),
        "implementation": obs.get("implementation", ""),
    }


def memcheck_expectation(expect: str, mode: str, num_reqs: int) -> tuple[str, bool]:
    """(expected text, whether errors are expected). In-range misreads are memcheck's blind spot."""
    if expect == Expectation.BUG and num_reqs > 1:
        if mode == SentinelMode.POISON:
            return "> 0 errors (reads outside the K cache)", True
        return f"0 errors although the output is wrong ({MEMCHECK_CHECKS})", False
    return "0 errors", False


def memcheck_row(label: str, expect: str, mode: str, num_reqs: int, res: Mapping[str, Any], log_name: str) -> dict:
    """The check row of one case under compute-sanitizer memcheck."""
    expected, want_errors = memcheck_expectation(expect, mode, num_reqs)
    if res["status"] in ("clean", "errors"):
        ok = (res["error_count"] > 0) if want_errors else (res["error_count"] == 0)
        observed = f"{res['error_count']} errors" + (f"; first: {res['first_access']}" if res["first_access"] else "")
    else:
        ok, observed = False, f"{res['status']}: {res['error'] or res['stderr_tail'][-200:]}"
    return {
        "check": "memcheck error count",
        "variant": label,
        "mode": mode,
        "num_reqs": num_reqs,
        "expected": expected,
        "observed": observed[:300],
        "ok": ok,
        "implementation": res["implementation"],
        "sanitizer_status": res["status"],
        "error_count": res["error_count"],
        "errors_not_printed": res["errors_not_printed"],
        "case_status": res["case_status"],
        "mismatched_tokens": res["mismatched_tokens"],
        "first_access": res["first_access"],
        "log": log_name,
    }


def contiguous_case_row(
    label: str,
    case: str,
    num_reqs: int,
    mismatched: int,
    stray: int,
    whole_equal: bool,
    total_tokens: int,
    error: str = "",
    changed_inputs: str = "",
    out_repointed: str = "",
    implementation: str = "",
) -> dict:
    """vLLM's own cases on a contiguous table: the whole output buffer (the caller's) must be bitwise equal and
    every input unchanged; an implementation that raised or timed out (``error``) fails the check."""
    observed = f"error: {error}"[:200] if error else f"{mismatched}/{total_tokens} tokens differ, {stray} stray rows"
    changed = "; ".join(t for t in (changed_inputs_text(changed_inputs), _text(out_repointed)) if t)
    return {
        "check": "gather equals the reference on a contiguous table",
        "variant": label,
        "num_reqs": num_reqs,
        "case": case,
        "expected": "whole output buffer bitwise equal",
        "observed": f"{changed}; {observed}" if changed else observed,
        "ok": not error and not changed and whole_equal and mismatched == 0 and stray == 0,
        "mismatched_bytes": None,
        "total_bytes": None,
        "changed_inputs": changed_inputs,
        "out_repointed": out_repointed,
        "implementation": implementation,
    }


def writer_row(case: str, num_reqs: int, differ: int, total_bytes: int) -> dict:
    return {
        "check": "writer kernel equals the reference writer",
        "variant": "writer",
        "num_reqs": num_reqs,
        "case": case,
        "expected": "0 bytes differ",
        "observed": f"{differ}/{total_bytes} bytes differ",
        "ok": differ == 0,
        "mismatched_bytes": differ,
        "total_bytes": total_bytes,
        "changed_inputs": None,
        "out_repointed": None,
        "implementation": None,
    }


def mismatch_pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """``mode x num_reqs`` rows, one column per variant: "mismatched/total" or the fault."""

    def cell(row: pd.Series) -> str:
        if row["status"] != "ok":
            return str(row["status"])
        return f"{int(row['mismatched_tokens'])}/{int(row['total_tokens'])}"

    frame = default_geometry(frame)
    f = frame.assign(result=frame.apply(cell, axis=1))
    return f.pivot_table(index=["mode", "num_reqs"], columns="variant", values="result", aggfunc="first")


def geometry_pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per case of the other geometries (geometry, mode, requests and what it changes), one column per
    variant: "mismatched/total" or how the case ended."""
    if not len(frame):
        return pd.DataFrame()

    def cell(row: pd.Series) -> str:
        if row["status"] != "ok":
            return str(row["status"])
        return f"{int(row['mismatched_tokens'])}/{int(row['total_tokens'])}"

    index = [
        c for c in ("geometry", "mode", "num_reqs", "backing_width", "offset", "window", "first_block") if c in frame
    ]
    f = frame.assign(result=frame.apply(cell, axis=1))
    return f.pivot_table(index=index, columns="variant", values="result", aggfunc="first", sort=False)


def geometry_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per other geometry: what it changes and at which request counts, and per variant ``matches`` or how
    many of its cases did not (a table as narrow as a report's column)."""
    rows = []
    for geometry, cases in frame.groupby("geometry", sort=False):
        first = cases.iloc[0]
        what = {
            Geometry.NARROWEST: f"backing {first['backing_width']} columns, view {first['table_width']}",
            Geometry.WIDE: f"backing {first['backing_width']} columns, view {first['table_width']}",
            Geometry.OFFSET: f"offset {first['offset']}",
            Geometry.WINDOW: f"the last {first['window']} tokens",
            Geometry.HIGH_IDS: f"ids from {int(first['first_block']):,}, 1 token per block",
        }.get(str(geometry), str(geometry))
        counts = sorted({int(n) for n in cases["num_reqs"]})
        row = {"geometry": str(geometry), "case": what, "requests": ", ".join(map(str, counts))}
        for variant, mine in cases.groupby("variant", sort=False):
            ok = (
                (mine["status"] == Outcome.OK)
                & (mine["mismatched_tokens"].fillna(0) == 0)
                & (mine["stray_writes"].fillna(0) == 0)
            )
            row[str(variant)] = "matches" if ok.all() else f"{int((~ok).sum())} of {len(mine)} differ"
        rows.append(row)
    return pd.DataFrame(rows)


def memory_pivot(mem: pd.DataFrame) -> pd.DataFrame:
    """Lanes outside the view / outside every argument, per case of the default geometry, one column per variant."""
    mem = default_geometry(mem)
    cell = mem.assign(
        lanes=mem.out_of_view_lanes.astype(int).astype(str) + " / " + mem.out_of_bounds_lanes.astype(int).astype(str)
    )
    return cell.pivot_table(index=["mode", "num_reqs"], columns="variant", values="lanes", aggfunc="first")


def memcheck_pivot(san: pd.DataFrame) -> pd.DataFrame:
    """memcheck errors / tokens differing from the reference, per case of the default geometry, one column per
    variant."""
    san = default_geometry(san)
    cell = san.assign(
        result=san.error_count.map(lambda v: "-" if pd.isna(v) else str(int(v)))
        + " / "
        + san.mismatched_tokens.map(lambda v: "fault" if pd.isna(v) else str(int(v)))
    )
    return cell.pivot_table(index=["mode", "num_reqs"], columns="variant", values="result", aggfunc="first")


def first_memcheck_access(san: pd.DataFrame) -> dict | None:
    first = san[san.first_access.fillna("") != ""]
    if not len(first):
        return None
    row = first.iloc[0]
    return {
        "variant": row["variant"],
        "mode": row["mode"],
        "num_reqs": int(row["num_reqs"]),
        "first_access": row["first_access"],
    }


def buggy_reads(width: int, row_pitch: int, num_rows: int, seq_lens: Sequence[int], block_size: int) -> pd.DataFrame:
    """Which backing entry each (request, logical block) is read from with pitch ``shape[-1]``.

    A view ``backing[:n, :w]`` has ``shape[-1] = w`` and ``stride(0) = W``. Request b's block j is
    read at flat element ``b*w + j`` of the backing storage, i.e. backing row ``(b*w + j) // W``,
    column ``(b*w + j) % W``, instead of row b, column j.
    """
    rows = []
    for b, s in enumerate(seq_lens):
        for j in range(-(-int(s) // block_size)):
            r, c = divmod(b * width + j, row_pitch)
            rows.append(
                {
                    "request": b,
                    "logical_block": j,
                    "correct_entry": f"[{b}, {j}]",
                    "buggy_entry": f"[{r}, {c}]",
                    "inside_view": r < num_rows and c < width,
                    "correct": (r, c) == (b, j),
                }
            )
    return pd.DataFrame(rows)


def memcheck_by_variant(san: pd.DataFrame) -> dict[str, str]:
    """Per variant, memcheck's record in a phrase: ``0 errors in 18 cases`` or where the errors were."""
    out = {}
    for variant, g in san.groupby("variant", sort=False):
        errors = pd.to_numeric(g["error_count"], errors="coerce")
        ran = g["sanitizer_status"].astype(str).isin(("clean", "errors"))
        bad = g[ran & (errors > 0)]
        if bad.empty:
            text = f"0 errors in {int(ran.sum())} cases"
        else:
            e = pd.to_numeric(bad["error_count"])
            modes = ", ".join(dict.fromkeys(bad["mode"].astype(str)))
            text = (
                f"errors on {modes} ids from {int(pd.to_numeric(bad['num_reqs']).min())} requests "
                f"({int(e.min()):,}-{int(e.max()):,} per case), 0 in the other {int(ran.sum()) - len(bad)} cases"
            )
        if not ran.all():
            text += f"; {int((~ran).sum())} cases did not run under memcheck"
        out[str(variant)] = text
    return out

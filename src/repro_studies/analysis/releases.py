"""Verdicts of the release matrix: release x kernel x variant -> correct / wrong from N / faults / ...

Input: the rows :mod:`repro_studies.upstream.matrix` records (one per case, or one per arm that did not run).
Rules, per (release, kernel, variant):

* an arm-level row decides alone: ``not present``, ``could not load``, ``not run``, ``not applicable``,
  ``unknown release``, ``download failed``, ``bad wheel`` (:data:`~repro_studies.registry.VERDICT_ARM_LEVEL`;
  its reason is kept);
* a case *faults* when it ended in a named fault (an illegal address, SIGSEGV of the case, ...:
  :data:`repro.outcomes.Outcome.FAULTED`), or when the bounds-checked interpreter counted lanes outside every
  argument (an address that would fault); a timeout or any other ending is not a fault;
* a case is *wrong* when it ran and any gathered token differs bitwise from the reference, or a row
  outside the gather range was written;
* a case that raised, timed out or ended without a result any other way is ``could not run`` with the
  reason (a verdict of its own, not ``could not load``);
* otherwise the arm is ``correct``.

``faults`` wins over ``wrong``; ``first_fault`` / ``first_wrong`` are the smallest request counts with that
observation, over both sentinel modes. A verdict is its :class:`~repro_studies.registry.VerdictClass` (the table's
``verdict`` column) and those numbers; :mod:`repro_studies.analysis.release_verdict` writes its words. Pandas only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.core.analysis.verdict import Conclusion
from repro.outcomes import NO_OBSERVATION, Outcome
from repro_studies.analysis.release_verdict import Verdict
from repro_studies.registry import (
    VERDICT_ARM_LEVEL,
    VERDICT_MISREADS,
    VERDICT_RAN,
    VERDICT_UNTESTED,
    Form,
    PatchOutcome,
    VerdictClass,
)

ARM_STATUSES = tuple(str(c) for c in VERDICT_ARM_LEVEL)
KEY = ["release", "kernel", "variant"]
VERDICT_COLUMNS = [
    "release",
    "kernel",
    "variant",
    "verdict",  # the VerdictClass
    "first_wrong",
    "first_fault",
    "mismatch_fraction",
    "cases",
    "reason",
    "shared_from",
    "cutedsl_stack",
]


def _num(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def version_key(version: str) -> tuple:
    try:
        return tuple(int(p) for p in str(version).split("."))
    except ValueError:
        return (10**9, str(version))


def case_flags(frame: pd.DataFrame) -> pd.DataFrame:
    """Per case row: ``faults``, ``wrong``, ``raised`` booleans."""
    f = frame.copy()
    status = f["status"].astype(str)
    oob = _num(f.get("out_of_bounds_lanes", pd.Series(index=f.index, dtype=float))).fillna(0)
    mism = _num(f["mismatched_tokens"]).fillna(0)
    stray = _num(f["stray_writes"]).fillna(0)
    f["faults"] = (status == Outcome.FAULTED) | ((status == Outcome.OK) & (oob > 0))
    f["wrong"] = (status == Outcome.OK) & ((mism > 0) | (stray > 0))
    f["raised"] = status.isin(NO_OBSERVATION)
    return f


def verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (release, kernel, variant) with the verdict's class and its numbers."""
    out = []
    if frame is None or frame.empty:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    frame = frame.copy()
    frame["kernel"] = frame["kernel"].fillna("")
    frame["variant"] = frame["variant"].fillna("")
    for (release, kernel, variant), g in frame.groupby(KEY, sort=False, dropna=False):
        shared = next((s for s in g.get("shared_from", pd.Series(dtype=object)).map(_text) if s), "")
        stack = next((s for s in g.get("cutedsl_stack", pd.Series(dtype=object)).map(_text) if s), "")
        arm = g[g["status"].isin(ARM_STATUSES)]
        base = dict(release=str(release), kernel=kernel, variant=variant, shared_from=shared, cutedsl_stack=stack)
        if len(arm):
            first = arm.iloc[0]
            out.append(
                dict(
                    base,
                    verdict=VerdictClass(first["status"]),
                    first_wrong=None,
                    first_fault=None,
                    mismatch_fraction=None,
                    cases=0,
                    reason=_text(first.get("reason")),
                )
            )
            continue
        c = case_flags(g)
        n = _num(c["num_reqs"])
        ran = c[c["status"] == Outcome.OK]
        total = _num(ran["total_tokens"]).sum()
        fraction = float(_num(ran["mismatched_tokens"]).sum() / total) if total else None
        first_wrong = int(n[c["wrong"]].min()) if c["wrong"].any() else None
        first_fault = int(n[c["faults"]].min()) if c["faults"].any() else None
        if c["raised"].any():
            first = c[c["raised"]].iloc[0]
            verdict, reason = VerdictClass.COULD_NOT_RUN, f"{first['status']}: {_text(first.get('error'))}"
        elif first_fault is not None:
            verdict, reason = VerdictClass.FAULTS, ""
        elif first_wrong is not None:
            verdict, reason = VerdictClass.WRONG, ""
        else:
            verdict, reason = VerdictClass.CORRECT, ""
        out.append(
            dict(
                base,
                verdict=verdict,
                first_wrong=first_wrong,
                first_fault=first_fault,
                mismatch_fraction=fraction,
                cases=len(c),
                reason=reason,
            )
        )
    return sort_releases(_typed(pd.DataFrame(out, columns=VERDICT_COLUMNS)))


#: The verdict table's counts: integers, empty where there is none.
COUNT_COLUMNS = ("first_wrong", "first_fault", "cases")


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts as nullable integers (``2``, not ``2.0``, in the CSV)."""
    return frame.astype({c: "Int64" for c in COUNT_COLUMNS})


def sort_releases(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame
    order = frame["release"].map(version_key)
    by = ["_o"] + [c for c in ("kernel", "variant") if c in frame.columns]
    return frame.assign(_o=order).sort_values(by, kind="stable").drop(columns="_o").reset_index(drop=True)


def patch_effect(verdict_frame: pd.DataFrame, released: str = "released", patched: str = "patched") -> pd.DataFrame:
    """Per (release, kernel): the released and patched :class:`Verdict` (``None`` where the variant has no row) and
    the :class:`~repro_studies.registry.PatchOutcome` of the change."""
    rows = []
    for (release, kernel), g in verdict_frame.groupby(["release", "kernel"], sort=False):
        by = {row["variant"]: Verdict.of(row) for row in g.to_dict("records")}
        r, p = by.get(released), by.get(patched)
        rc = r.klass if r is not None else None
        pc = p.klass if p is not None else None
        untested = p is None or pc in VERDICT_UNTESTED
        if rc in VERDICT_MISREADS:
            effect = (
                PatchOutcome.FIXED
                if pc == VerdictClass.CORRECT
                else (PatchOutcome.NOT_TESTED if untested else PatchOutcome.NOT_FIXED)
            )
        elif rc == VerdictClass.CORRECT:
            if pc == VerdictClass.CORRECT:
                effect = PatchOutcome.NOT_NEEDED
            elif untested:  # e.g. the CuTe-DSL gather: no row-pitch argument for the PR to change
                effect = PatchOutcome.NOT_REACHED
            else:
                effect = PatchOutcome.BREAKS
        else:
            effect = PatchOutcome.NO_VERDICT
        rows.append(dict(release=release, kernel=kernel, released=r, patched=p, patch=effect))
    return sort_releases(pd.DataFrame(rows, columns=["release", "kernel", "released", "patched", "patch"]))


def classes(verdicts_column: pd.Series) -> pd.Series:
    """The classes of a column of :class:`Verdict` values (``NOT_PRESENT`` where there is none)."""
    return verdicts_column.map(lambda v: v.klass if v is not None else VerdictClass.NOT_PRESENT)


def matrix_table(verdict_frame: pd.DataFrame, variant: str = "released") -> pd.DataFrame:
    """release x kernel grid of one variant's verdict classes (``""`` where the release has no row)."""
    v = verdict_frame[verdict_frame["variant"] == variant]
    if v.empty:
        return pd.DataFrame()
    grid = v.pivot_table(index="release", columns="kernel", values="verdict", aggfunc="first")
    grid = grid.reindex(sorted(grid.index, key=version_key))
    return grid.fillna("")


def complete_matrix(verdict_frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``not present`` for every (release, kernel, variant) missing from a merged table.

    A run that tested one release cannot know which kernels other releases ship; after merging, each
    release that was read (no release-level miss) lacks the kernels it did not list.
    """
    v = verdict_frame
    if v.empty:
        return v
    kernels = sorted(k for k in v["kernel"].unique() if k)
    variants = sorted(x for x in v["variant"].unique() if x)
    have = set(zip(v["release"], v["kernel"], v["variant"]))
    read = [r for r, g in v.groupby("release") if (g["kernel"] != "").any()]
    extra = [
        dict(
            release=r,
            kernel=k,
            variant=x,
            verdict=VerdictClass.NOT_PRESENT,
            cases=0,
            reason=f"vLLM {r} ships no {k}",
            shared_from="",
        )
        for r in read
        for k in kernels
        for x in variants
        if (r, k, x) not in have
    ]
    if not extra:
        return v
    return sort_releases(_typed(pd.concat([v, pd.DataFrame(extra)], ignore_index=True)[VERDICT_COLUMNS]))


#: Arm statuses that say the run could not try the arm here (no GPU or no package, no registry), not what
#: the arm does: another run that did try it supersedes them when the runs are merged.
NOT_TRIED = ("not run", "download failed")


def stack_runs(tables: list[tuple[str, pd.DataFrame | None]]) -> pd.DataFrame:
    """One table of several runs' tables: each row gains ``run``, and a row an earlier run wrote the same in every
    observed column is kept once (from that run)."""
    frames = [f.assign(run=name) for name, f in tables if f is not None and len(f)]
    if not frames:
        return pd.DataFrame()
    stacked = pd.concat(frames, ignore_index=True)
    observed = [c for c in stacked.columns if c != "run"]
    return stacked.drop_duplicates(subset=observed, keep="first").reset_index(drop=True)


def merge_matrices(tables: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """The matrix rows of several runs (e.g. one CI job per release and runner) as one table.

    ``tables`` pairs each run's name with its matrix table; each row gains ``run``. Rows that agree in
    every observed column across runs are kept once. An arm (release, kernel, variant) that one run
    could not try (:data:`NOT_TRIED`) and another measured keeps the measured rows only; any other
    disagreement keeps every row, so a verdict over them shows it.
    """
    merged = stack_runs(tables)
    if not len(merged):
        return merged
    not_tried = merged["status"].astype(str).isin(NOT_TRIED)
    tried_arms = set(map(tuple, merged.loc[~not_tried, KEY].astype(str).to_numpy()))
    superseded = not_tried & merged[KEY].astype(str).apply(tuple, axis=1).isin(tried_arms)
    return merged[~superseded].reset_index(drop=True)


def merge_inputs(runs: list[tuple[str, str, pd.DataFrame | None]], merged: pd.DataFrame) -> pd.DataFrame:
    """Per merged run (name, manifest status, matrix table): its releases, its rows, and how many of them
    the merged table keeps (the others were the same as an earlier run's, or superseded)."""
    rows = []
    for name, status, table in runs:
        has = table is not None and len(table) > 0
        releases = sorted(table["release"].astype(str).unique(), key=version_key) if has else []
        kept = int((merged["run"] == name).sum()) if len(merged) else 0
        rows.append(
            {
                "run": name,
                "status": status,
                "releases": ", ".join(releases) if releases else "no matrix table",
                "rows": len(table) if has else 0,
                "rows kept": kept,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# What each arm is expected to do, and the check rows.

#: A kernel launched with a row pitch (discovery found the argument) misreads a narrowed view as
#: shipped; a kernel with none (the CuTe-DSL gather indexes ``block_table[req, j]`` through a layout
#: whose strides it takes from the tensor) has nothing for PR #55109 to change and must be correct.
EXPECT_MISREAD = "correct at 1 request, wrong or faulting from 2 (the shape[-1] row pitch)"
EXPECT_CORRECT = "correct at every request count"
EXPECT_OWN_LAYOUT = "correct at every request count (no row-pitch argument: indexes the table through its layout)"


def pitched_kernels(inventory: pd.DataFrame) -> set[tuple[str, str]]:
    """(release, kernel) of every kernel whose launch passes a row pitch, from the kernel inventory."""
    if inventory is None or inventory.empty or "pitch_parameter" not in inventory:
        return set()
    pitch = inventory["pitch_parameter"].fillna("").astype(str).str.strip()
    found = inventory[pitch != ""]
    return set(zip(found["release"].astype(str), found["kernel"].astype(str), strict=True))


def check_rows(verdict_frame: pd.DataFrame, pitched: set[tuple[str, str]], request_counts: list[int]) -> list[dict]:
    """One check row per (release, kernel, variant) of the matrix."""
    both = 1 in request_counts and 2 in request_counts
    rows = []
    for r in verdict_frame.to_dict("records"):
        verdict = Verdict.of(r)
        klass = verdict.klass
        firsts = [x for x in (verdict.first_wrong, verdict.first_fault) if x is not None]
        if not r["kernel"]:
            expected, ok = "the release's modules in the cache", False
        elif klass in (VerdictClass.NOT_PRESENT, VerdictClass.NOT_RUN, VerdictClass.NOT_APPLICABLE):
            expected, ok = "(not tested here)", True
        elif r["variant"] == Form.RELEASED and (str(r["release"]), str(r["kernel"])) in pitched:
            expected = EXPECT_MISREAD
            ok = klass in VERDICT_MISREADS and (not both or min(firsts) == 2)
        else:
            pitchless = r["variant"] == Form.RELEASED
            expected, ok = (EXPECT_OWN_LAYOUT if pitchless else EXPECT_CORRECT), klass == VerdictClass.CORRECT
        rows.append(
            {
                "check": "release kernel behaves as expected",
                "variant": r["variant"],
                "num_reqs": None,
                "expected": expected,
                "observed": verdict.text() + (f" ({r['reason']})" if r["reason"] else ""),
                "ok": bool(ok),
                "release": r["release"],
                "kernel": r["kernel"],
                "mismatch_fraction": r["mismatch_fraction"],
                "shared_from": r["shared_from"],
                "cutedsl_stack": r.get("cutedsl_stack") or None,  # which stack ran, which the release pins
            }
        )
    return rows


@dataclass(frozen=True)
class PatchEffect:
    """A release matrix's kernels, split the way its finding and its summary row count them (one frame each)."""

    shipped: pd.DataFrame  # every (release, kernel) present, with released and patched verdicts and the patch effect
    ran: pd.DataFrame  # of those, the ones that ran as released (wrong, faults or correct)
    bad: pd.DataFrame  # of those, wrong or faulting as released
    faulting: pd.DataFrame  # of the bad, those that fault
    tried: pd.DataFrame  # of the bad, those the row-pitch change ran on (a run may leave the patched variant out)
    fixed: pd.DataFrame  # of the bad, those the change makes correct
    releases: list[str]  # the releases that ship one, oldest first


def split_effect(matrix: pd.DataFrame) -> PatchEffect:
    """The release matrix's (release, kernel) rows split by what they did as released and with the change."""
    effect = patch_effect(complete_matrix(verdicts(matrix)))
    shipped = effect[classes(effect["released"]) != VerdictClass.NOT_PRESENT]
    klass = classes(shipped["released"])
    bad = shipped[klass.isin(VERDICT_MISREADS)]
    return PatchEffect(
        shipped=shipped,
        ran=shipped[klass.isin(VERDICT_RAN)],
        bad=bad,
        faulting=bad[classes(bad["released"]) == VerdictClass.FAULTS],
        tried=bad[bad["patch"] != PatchOutcome.NOT_TESTED],
        fixed=bad[bad["patch"] == PatchOutcome.FIXED],
        releases=sorted(shipped["release"].unique(), key=version_key),
    )


@dataclass(frozen=True)
class NotFixed:
    """A released gather that misreads and stays wrong with the row-pitch change: what it did with the change."""

    kernel: str
    release: str
    patched: Verdict


@dataclass(frozen=True)
class GatherInReleases:
    """The strided gather across vLLM's releases (notebook 04) as the verdict reads it: its outcomes (*reproduced*
    where a released gather that ran misreads, then whether the change fixed every one it ran on) and the gathers
    it did not fix (``phrases.md.j2`` words them, ``not_fixed``)."""

    outcomes: tuple[Conclusion, ...]
    not_fixed: tuple[NotFixed, ...]


def releases_finding(matrix: pd.DataFrame) -> GatherInReleases:
    """The strided gather across vLLM's releases, from the verdicts above (the counts: :func:`split_effect`)."""
    split = split_effect(matrix)
    outcomes = [Conclusion.REPRODUCED if len(split.bad) else Conclusion.NOT_REPRODUCED]
    if len(split.tried):
        outcomes.append(
            Conclusion.FIX_VERIFIED if len(split.fixed) == len(split.tried) else Conclusion.FIX_NOT_VERIFIED
        )
    not_fixed = (
        NotFixed(r.kernel, r.release, r.patched) for r in split.tried.itertuples() if r.patch != PatchOutcome.FIXED
    )
    return GatherInReleases(tuple(outcomes), tuple(not_fixed))

"""What a run showed, in the words a reviewer reads first: per bug, *reproduced* and *fix verified*
(or what stood in the way), derived from the check tables and the registry's expectations.

An implementation expected to reproduce a bug that does so is a reproduction, not a failure. An
implementation under test (``implementation=...``) that goes wrong exactly as the bug predicts
reproduces the bug in that implementation; one that matches the reference verifies a fix there. A
run whose manifest says it did not finish is *incomplete*, whatever its finished checks say.

The headline and the checks come from one rule (:func:`repro.core.analysis.gather.case_ok`, the rule every
sweep row's ``ok`` was written with): a case that raised, timed out, changed an input or ended any way
but a named fault is neither *matches* nor *the bug's signature*, and a headline claims success only when
every failed check is one the bug predicts. Pandas and the registry only: no torch, no evidence code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd

from repro import registry
from repro.bugs import Bug
from repro.core.analysis import written
from repro.core.analysis.checks import failed_checks, truthy
from repro.core.analysis.gather import case_ok, memcheck_expectation, memory_expectation
from repro.core.analysis.provenance import provenance_name
from repro.core.analysis.rundata import RunData
from repro.coverage import DECIDING_REQUESTS, Geometry, SentinelMode
from repro.outcomes import Outcome
from repro.registry import Expectation, ReshapeVariant, Role
from repro.tables import Table


class Conclusion(StrEnum):
    """What a finding shows about its bug: the words the report prints for it."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    FIX_VERIFIED = "fix verified"
    FIX_NOT_VERIFIED = "fix not verified"
    UNDECIDED = "undecided"  # no case ran that could tell the buggy from the fixed behaviour


# --------------------------------------------------------------------------------------------
# One gather implementation across the sweep.


#: A sweep case by what it is: (geometry, mode, request count).
Case = tuple[str, str, int]


@dataclass(frozen=True)
class Behaviour:
    """How one implementation fared across notebook 02's sweep."""

    variant: str
    counts: tuple[int, ...]
    modes: tuple[str, ...]
    wrong_from: int | None  # smallest request count whose output differed (any mode, any geometry)
    fault_from: int | None  # smallest request count whose process faulted (or would have: flagged lanes)
    fault_modes: tuple[str, ...]
    faults_observed: bool  # a process really faulted (GPU); False: the bounds-checked interpreter flagged it
    bug_signature: bool  # equal at one request, wrong or faulting in every case from two on
    mismatches: tuple[tuple[str, int, int], ...]  # (mode, num_reqs, mismatched tokens) of default-geometry cases
    no_result_from: int | None = None  # smallest request count of a case that observed nothing (raised, timeout, ...)
    no_result_status: str = ""  # that case's status (repro.outcomes) and error, as recorded
    no_result_error: str = ""
    changed_inputs: tuple[str, ...] = ()  # inputs some case changed
    repointed: bool = False  # some case repointed ``out`` away from the caller's buffer
    every_case_ok: bool = True  # every case passes the rule the checks use for a correct implementation
    ran: tuple[Case, ...] = ()  # every case, in the sweep's order
    wrong: tuple[Case, ...] = ()  # cases whose output differed
    faulted: tuple[Case, ...] = ()  # cases that faulted (or would have)
    silent: tuple[Case, ...] = ()  # cases that observed nothing (raised, timed out, exited, ...)

    @property
    def correct(self) -> bool:
        return self.every_case_ok and self.wrong_from is None and self.fault_from is None

    @property
    def cases(self) -> int:
        return len(self.ran) or len(self.counts) * len(self.modes)

    @property
    def every_case(self) -> tuple[Case, ...]:
        """The cases it ran (a record without them: every count in every mode, default geometry)."""
        return self.ran or tuple((Geometry.DEFAULT.value, m, k) for m in self.modes for k in self.counts)

    @property
    def wrong_spread(self) -> Spread | None:
        return spread(self.wrong, self.every_case)

    @property
    def silent_spread(self) -> Spread | None:
        return spread(self.silent, self.every_case)

    @property
    def faults_on_poison_only(self) -> bool:
        return self.fault_modes == (SentinelMode.POISON,)


def _num(value: Any) -> int:
    number = pd.to_numeric(value, errors="coerce")
    return 0 if pd.isna(number) else int(number)


def _cell(value: Any) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _obs(row: pd.Series) -> dict:
    return {
        "status": str(row["status"]),
        "mismatched_tokens": _num(row.get("mismatched_tokens")),
        "stray_writes": _num(row.get("stray_writes")),
        "changed_inputs": _cell(row.get("changed_inputs")),
        "out_repointed": _cell(row.get("out_repointed")),
    }


def _geometries(rows: pd.DataFrame) -> pd.Series:
    """Each row's geometry (the default for a run recorded before the sweep had others)."""
    if "geometry" not in rows:
        return pd.Series(Geometry.DEFAULT.value, index=rows.index)
    return rows["geometry"].map(lambda g: _cell(g) or Geometry.DEFAULT.value)


def behaviour(sweep: pd.DataFrame, variant: str, memory: pd.DataFrame | None = None) -> Behaviour:
    """One variant's record over the sweep; ``memory`` (CPU: flagged lanes per case) marks would-be faults."""
    rows = sweep[sweep["variant"] == variant]
    n = pd.to_numeric(rows["num_reqs"]).astype(int)
    geometry = _geometries(rows)
    mode = rows["mode"].astype(str)
    status = rows["status"].astype(str)
    mism = rows["mismatched_tokens"].map(_num)
    stray = rows["stray_writes"].map(_num)
    wrong = (status == Outcome.OK) & ((mism > 0) | (stray > 0))
    faulted = status == Outcome.FAULTED  # a named fault (an illegal address, SIGSEGV of the case, ...)
    flagged = pd.Series(False, index=rows.index)
    if memory is not None and len(memory) and "out_of_bounds_lanes" in memory:
        mem = memory[memory["variant"] == variant]
        far = mem[mem["out_of_bounds_lanes"].map(_num) > 0]
        keys = set(zip(_geometries(far), far["mode"].astype(str), pd.to_numeric(far["num_reqs"]).astype(int)))
        flagged = pd.Series([k in keys for k in zip(geometry, mode, n)], index=rows.index)
    bad_fault = faulted | flagged
    observed = [(int(k), _obs(r)) for k, (_, r) in zip(n, rows.iterrows())]
    signature = bool(len(rows)) and all(case_ok(Expectation.BUG, k, o) for k, o in observed)
    every_ok = all(case_ok(Expectation.CORRECT, k, o) for k, o in observed)
    nothing = ~status.isin((Outcome.OK, Outcome.FAULTED))
    first_nothing = rows[nothing].assign(_n=n[nothing]).sort_values("_n").head(1)
    changed = sorted({name.strip() for o in (o for _, o in observed) for name in o["changed_inputs"].split(",")} - {""})
    ran = (status == Outcome.OK) & (geometry == Geometry.DEFAULT)
    cases = list(zip(geometry, mode, n.astype(int)))

    def picked(mask: pd.Series) -> tuple[Case, ...]:
        return tuple((str(g), str(m), int(k)) for (g, m, k), keep in zip(cases, mask) if keep)

    return Behaviour(
        variant=variant,
        counts=tuple(sorted(set(n))),
        modes=tuple(dict.fromkeys(mode)),
        wrong_from=int(n[wrong].min()) if wrong.any() else None,
        fault_from=int(n[bad_fault].min()) if bad_fault.any() else None,
        fault_modes=tuple(dict.fromkeys(rows.loc[bad_fault, "mode"].astype(str))),
        faults_observed=bool(faulted.any()),
        bug_signature=signature,
        mismatches=tuple(
            (str(m), int(k), _num(v))
            for m, k, v in zip(mode[ran], pd.to_numeric(rows.loc[ran, "num_reqs"]), rows.loc[ran, "mismatched_tokens"])
        ),
        no_result_from=int(n[nothing].min()) if nothing.any() else None,
        no_result_status=next((str(r.status) for r in first_nothing.itertuples()), ""),
        no_result_error=next((str(r.error) for r in first_nothing.itertuples()), ""),
        changed_inputs=tuple(changed),
        repointed=any(o["out_repointed"] for _, o in observed),
        every_case_ok=every_ok,
        ran=tuple(cases),
        wrong=picked(wrong),
        faulted=picked(bad_fault),
        silent=picked(nothing),
    )


@dataclass(frozen=True)
class Span:
    """Some cases of one geometry: every case from ``counts[0]`` on (``onward``), or exactly these counts."""

    geometry: str
    counts: tuple[int, ...]
    onward: bool

    @property
    def default_geometry(self) -> bool:
        return self.geometry == Geometry.DEFAULT


@dataclass(frozen=True)
class Spread:
    """Where some cases lie among those that ran, exactly: every case (``every``), every case from a count on
    (``onward_from``), else per geometry (``spans``); ``modes``: the sentinel modes they lie in when not every mode
    that ran has them (``()``: every mode). Never a range that did not run."""

    every: bool
    onward_from: int | None
    spans: tuple[Span, ...]
    modes: tuple[str, ...]

    @property
    def poison_only(self) -> bool:
        return self.modes == (SentinelMode.POISON,)


def spread(cases: Sequence[Case], ran: Sequence[Case]) -> Spread | None:
    """Where ``cases`` (a subset of ``ran``) lie (``None``: no case)."""
    if not cases:
        return None
    modes = tuple(dict.fromkeys(m for _, m, _ in cases))
    every_mode = tuple(dict.fromkeys(m for _, m, _ in ran))
    ran = [c for c in ran if c[1] in modes]
    low = min(k for _, _, k in cases)
    shown_modes = () if modes == every_mode else modes
    if set(cases) == {c for c in ran if c[2] >= low}:
        first = low > min(k for _, _, k in ran)
        return Spread(every=not first, onward_from=int(low) if first else None, spans=(), modes=shown_modes)
    spans = []
    for geometry in dict.fromkeys(g for g, _, _ in cases):
        counts = sorted({int(k) for g, _, k in cases if g == geometry})
        here = {c for c in cases if c[0] == geometry}
        onward = here == {c for c in ran if c[0] == geometry and c[2] >= counts[0]} and len(counts) > 1
        spans.append(Span(str(geometry), tuple(counts), onward))
    return Spread(every=False, onward_from=None, spans=tuple(spans), modes=shown_modes)


# --------------------------------------------------------------------------------------------
# What the sweep covered.


@dataclass(frozen=True)
class Coverage:
    """The cases one implementation ran: their number, and exactly which counts, modes and geometry values."""

    cases: int
    counts: tuple[int, ...]
    modes: tuple[str, ...]
    geometries: tuple[str, ...]
    views: tuple[int, ...] = ()  # block-table columns of the narrowed views
    backings: tuple[int, ...] = ()  # columns of the tables behind them
    offsets: tuple[int, ...] = ()
    windows: tuple[int, ...] = ()  # gathered tokens per request (0: whole sequences)
    first_blocks: tuple[int, ...] = ()  # the smallest block id of a case
    deciding: int = 0  # cases with at least two requests on a narrowed table

    @property
    def decides(self) -> bool:
        """Did a case run where the buggy and the fixed pitch read different rows?"""
        return self.deciding > 0


def coverage(sweep: pd.DataFrame) -> Coverage:
    """What the sweep ran (its first variant's rows: every variant runs the same cases). A run recorded before the
    sweep named its geometry ran narrowed views only, at offset 0 over whole sequences, and its rows say no more."""
    rows = sweep[sweep["variant"] == sweep["variant"].iloc[0]] if len(sweep) else sweep
    n = pd.to_numeric(rows["num_reqs"]).astype(int)
    known = {"table_width", "backing_width", "offset", "window", "first_block"} <= set(rows)

    def values(column: str) -> tuple[int, ...]:
        return tuple(sorted({_num(v) for v in rows[column]})) if known else ()

    narrowed = (
        (rows["backing_width"].map(_num) > rows["table_width"].map(_num)) if known else pd.Series(True, rows.index)
    )
    return Coverage(
        cases=len(rows),
        counts=tuple(sorted(set(n))),
        modes=tuple(dict.fromkeys(rows["mode"].astype(str))),
        geometries=tuple(dict.fromkeys(_geometries(rows))),
        views=values("table_width"),
        backings=values("backing_width"),
        offsets=values("offset"),
        windows=values("window"),
        first_blocks=values("first_block"),
        deciding=int(((n >= DECIDING_REQUESTS) & narrowed).sum()),
    )


def same_mismatches(a: Behaviour, b: Behaviour) -> bool:
    """Token-for-token the same mismatch counts in every case both ran (the same misreads)."""
    common = {(m, n) for m, n, _ in a.mismatches} & {(m, n) for m, n, _ in b.mismatches}
    da = {(m, n): v for m, n, v in a.mismatches}
    db = {(m, n): v for m, n, v in b.mismatches}
    return bool(common) and all(da[k] == db[k] for k in common)


# --------------------------------------------------------------------------------------------
# Per bug.


@dataclass
class Finding:
    """One bug's verdict as the package that registers it words it (:data:`FindingOf`): the outcomes shown
    (``reproduced``, ``fix verified``, ...) and why. This package's own findings are values
    (:class:`GatherFinding`, :class:`ReshapeFinding`), worded by the report."""

    bug: Bug
    outcomes: list[Conclusion]
    problems: list[str] = field(default_factory=list)  # controls that did not behave as expected
    subject: str = ""  # the headline sentence when an implementation under test is the point of the run
    coverage: str = ""  # exactly which cases the outcomes rest on


@dataclass(frozen=True)
class Control:
    """A swept implementation of the registry and what it did: a bug control (``bug``: expected to show the bug's
    signature) or one expected to match the reference."""

    variant: str
    behaviour: Behaviour
    bug: bool

    @property
    def as_expected(self) -> bool:
        return self.behaviour.bug_signature if self.bug else self.behaviour.correct


@dataclass(frozen=True)
class UnderTest:
    """The implementation under test across the sweep: its name (as loaded; "" when none was recorded) and target,
    whether it is one of this repository's own, its failed checks outside the sweep (vLLM's contiguous cases, ...,
    each named as :func:`~repro.core.analysis.checks.failed_checks` names it) and the bug control it misreads exactly
    like (same mismatch counts in every case; "" when none)."""

    name: str
    target: str
    behaviour: Behaviour
    own: bool
    elsewhere: tuple[str, ...] = ()
    like: str = ""


@dataclass(frozen=True)
class GatherFinding:
    """The strided-gather verdict of notebook 02's sweep: the outcomes shown, the cases they rest on, the controls
    (the bug's, then those expected to match the reference, each in the sweep's order) and the implementation under
    test. ``decides``: False when no case ran that can tell the buggy from the fixed pitch (the outcome is then
    ``undecided``)."""

    outcomes: tuple[Conclusion, ...]
    coverage: Coverage
    controls: tuple[Control, ...] = ()
    under_test: UnderTest | None = None
    bug: Bug = Bug.GATHER

    @property
    def decides(self) -> bool:
        return self.coverage.decides

    @property
    def bug_control(self) -> Control | None:
        return next((c for c in self.controls if c.bug), None)


@dataclass(frozen=True)
class ReshapeFinding:
    """The reshape-overrun verdict of notebook 01: the outcomes shown, the buggy view's overrun per compressed cache
    group that does not fit, how many of the fixed view's groups fit, whether the split follow-up showed (``None``:
    not checked) and the failed checks of each view as (check, observed)."""

    outcomes: tuple[Conclusion, ...]
    overruns: tuple[tuple[str, float], ...] = ()
    fixed_fits: int = 0
    fixed_groups: int = 0
    error_as_reported: bool = False  # PyTorch rejected the buggy view with the PR's error, every number equal
    split_shown: bool | None = None
    failed: tuple[tuple[str, str], ...] = ()
    bug: Bug = Bug.RESHAPE


#: A finding of the verdict: one of this package's values, or one a registered package words itself.
AnyFinding = Finding | GatherFinding | ReshapeFinding


def implementation_names(run: RunData) -> dict[str, str]:
    """Reader-facing names of the implementations a run loaded from outside this repository, by
    parameter (``implementation``, ``reference_gather``), from the provenance the run recorded."""
    recorded = run.manifest.get("implementations") or {}
    params = run.manifest.get("parameters") or {}
    names = {}
    for param in ("implementation", "reference_gather"):
        info = recorded.get(param) or ({"target": params[param]} if params.get(param) else None)
        if info:
            names[param] = provenance_name(info)
    return names


def _under_test_target(sweep: pd.DataFrame) -> str:
    rows = sweep[sweep["variant"] == registry.UNDER_TEST_LABEL]
    return str(rows["implementation"].iloc[0]) if len(rows) and "implementation" in rows else ""


def is_own_implementation(sweep: pd.DataFrame, target: str) -> bool:
    """Is ``target`` one of this repository's implementations: the registry's, or the target another variant of
    the same sweep ran (a run records a function by the module path it had when the run was made)."""
    if target in registry.builtin_targets():
        return True
    others = sweep[sweep["variant"] != registry.UNDER_TEST_LABEL]
    return "implementation" in others and target in set(others["implementation"].astype(str))


def gather_finding(
    sweep: pd.DataFrame,
    memory: pd.DataFrame | None = None,
    under_test_name: str = "",
    under_test_elsewhere: list[str] | None = None,
) -> tuple[GatherFinding, dict[str, Behaviour]]:
    """The strided-gather verdict from notebook 02's sweep, and each variant's behaviour.
    ``under_test_elsewhere``: the implementation under test's failed checks in other tables (vLLM's
    contiguous cases, ...): with any, it neither verifies a fix nor shows the bug's signature."""
    elsewhere = tuple(under_test_elsewhere or ())
    variants = list(dict.fromkeys(sweep["variant"].astype(str)))
    seen = {v: behaviour(sweep, v, memory) for v in variants}
    ran = coverage(sweep)
    if not ran.decides:  # buggy and fixed cannot differ in any case that ran: nothing is shown either way
        return GatherFinding((Conclusion.UNDECIDED,), ran), seen
    expected = (Role.FIX, Role.ALTERNATIVE, Role.OWN)
    bug = [v for v in variants if registry.role(v) == Role.BUG]
    fix = [v for v in variants if registry.role(v) == Role.FIX]
    controls = [Control(v, seen[v], True) for v in bug]
    controls += [Control(v, seen[v], False) for v in variants if registry.role(v) in expected]
    outcomes = []
    if bug:
        outcomes.append(Conclusion.REPRODUCED if all(seen[v].bug_signature for v in bug) else Conclusion.NOT_REPRODUCED)
    if fix:
        outcomes.append(Conclusion.FIX_VERIFIED if all(seen[v].correct for v in fix) else Conclusion.FIX_NOT_VERIFIED)
    under = None
    if registry.UNDER_TEST_LABEL in seen:
        u = seen[registry.UNDER_TEST_LABEL]
        target = _under_test_target(sweep)
        own = is_own_implementation(sweep, target)
        like = next((v for v in bug if same_mismatches(u, seen[v])), "")
        under = UnderTest(under_test_name, target, u, own, () if own else elsewhere, like)
        if not own and not elsewhere and (u.bug_signature or u.correct):
            shown = Conclusion.REPRODUCED if u.bug_signature else Conclusion.FIX_VERIFIED
            outcomes = [shown, *[o for o in outcomes if o != shown]]
    return GatherFinding(tuple(outcomes), ran, tuple(controls), under), seen


def reshape_finding(checks: pd.DataFrame, groups: pd.DataFrame | None, split_check: str) -> ReshapeFinding:
    """The reshape-overrun verdict from notebook 01's checks and per-group table."""
    ok = checks["ok"].map(truthy)
    variant = checks["variant"].astype(str)
    split = checks["check"] == split_check
    bug_ok = bool(ok[(variant == ReshapeVariant.BUGGY) & ~split].all())
    fix_ok = bool(ok[(variant == ReshapeVariant.FIXED) & ~split].all())
    overruns, fits, of = (), 0, 0
    if groups is not None and len(groups):
        buggy = groups[(groups["variant"] == ReshapeVariant.BUGGY) & ~groups["fits"].map(truthy)]
        fixed = groups[groups["variant"] == ReshapeVariant.FIXED]
        overruns = tuple((str(g), float(o)) for g, o in zip(buggy["cache group"], buggy["overrun"]))
        fits, of = int(fixed["fits"].map(truthy).sum()), len(fixed)
    failed = tuple(
        (str(c), str(o))
        for who, shown in ((ReshapeVariant.BUGGY, bug_ok), (ReshapeVariant.FIXED, fix_ok))
        if not shown
        for c, o in zip(checks["check"][~ok & (variant == who)], checks["observed"][~ok & (variant == who)])
    )
    return ReshapeFinding(
        outcomes=(
            Conclusion.REPRODUCED if bug_ok else Conclusion.NOT_REPRODUCED,
            Conclusion.FIX_VERIFIED if fix_ok else Conclusion.FIX_NOT_VERIFIED,
        ),
        overruns=overruns,
        fixed_fits=fits,
        fixed_groups=of,
        error_as_reported=bug_ok and bool(overruns),
        split_shown=bool(ok[split].all()) if split.any() else None,
        failed=failed,
    )


# --------------------------------------------------------------------------------------------
# The run.


def not_finished(manifest: Mapping[str, Any]) -> list[str]:
    """Notebooks that did not run to their end: broke, still running or never started, each with its error's first
    line. A notebook that ended by naming failed checks finished."""
    out = []
    for name, st in (manifest.get("notebooks") or {}).items():
        if written.broke(st):
            error = str(st.get("error") or "")
            out.append(f"{name}: {error.splitlines()[0] if error else st.get('status', '')}")
    return out


def explained_failures(run: RunData) -> tuple[int, int]:
    """(failed checks, those an implementation under test fails exactly where the bug's expectation
    passes it): such failures are the reproduction, not a defect of the evidence."""
    failed = explained = 0
    for table in run.check_tables().values():
        bad = table[~table["ok"].map(truthy)]
        failed += len(bad)
        explained += sum(_explained(row) for _, row in bad.iterrows())
    return failed, explained


def _explained(row: pd.Series) -> bool:
    """A failed check row of the implementation under test that passes the bug's expectation."""
    if str(row.get("variant")) != registry.UNDER_TEST_LABEL or "mode" not in row:
        return False
    n, mode = _num(row.get("num_reqs")), str(row["mode"])
    if "error_count" in row and "sanitizer_status" in row:
        _, want = memcheck_expectation(Expectation.BUG, mode, n)
        return str(row["sanitizer_status"]) in ("clean", "errors") and (_num(row["error_count"]) > 0) == want
    if "status" in row and "mismatched_tokens" in row:
        return case_ok(Expectation.BUG, n, _obs(row))
    if "out_of_view_lanes" in row and "out_of_bounds_lanes" in row:
        lanes = {
            "out_of_view_lanes": _num(row["out_of_view_lanes"]),
            "out_of_bounds_lanes": _num(row["out_of_bounds_lanes"]),
        }
        expectation = memory_expectation(Expectation.BUG, mode, n, lanes)
        return expectation is not None and expectation[1]
    return False


def under_test_elsewhere(run: RunData) -> list[str]:
    """Failed checks of the implementation under test outside the sweep (and its memory-safety record), each
    named (without its notebook): vLLM's own cases on contiguous tables and the like, where the bug predicts no
    failure."""
    out = []
    for name, table in run.check_tables().items():
        if name == Table.SWEEP or "variant" not in table:
            continue
        rows = table[table["variant"].astype(str) == registry.UNDER_TEST_LABEL]
        bad = rows[~rows["ok"].map(truthy)]
        out += [
            line
            for (_, row), line in zip(bad.iterrows(), failed_checks(bad, with_notebook=False))
            if not _explained(row)
        ]
    return out


def unexplained_failures(run: RunData) -> list[str]:
    """Every failed check the bug does not predict, named (what keeps a headline from claiming success)."""
    out = []
    for table in run.check_tables().values():
        bad = table[~table["ok"].map(truthy)]
        out += [line for (_, row), line in zip(bad.iterrows(), failed_checks(bad)) if not _explained(row)]
    return out


@dataclass(frozen=True)
class RuleDisagreement:
    """A sweep row whose recorded ``ok`` is not what the checks' rule gives for what it observed: which case, the
    recorded ``ok`` and ``observed`` cells as written, and the rule's answer."""

    notebook: str
    check: str
    variant: str
    mode: str
    num_reqs: str
    recorded: str
    rule: bool
    observed: str


def rule_disagreements(run: RunData) -> list[RuleDisagreement]:
    """Sweep rows whose ``ok`` is not what the checks' rule gives for what the row observed: a table written
    by a process whose rule was changed under it (by the code it ran), or edited since. Each counts as a
    failed check, so the exit code, the checks and the headline cannot part."""
    sweep = run.table(Table.SWEEP)
    if sweep is None or not len(sweep) or not {"status", "mismatched_tokens", "variant", "num_reqs"} <= set(sweep):
        return []
    out = []
    expect = registry.expectations()
    for _, row in sweep.iterrows():
        rule = case_ok(expect.get(str(row["variant"]), Expectation.CORRECT), _num(row["num_reqs"]), _obs(row))
        if truthy(row["ok"]) != rule:
            out.append(
                RuleDisagreement(
                    notebook=str(row.get("notebook", "?")),
                    check=str(row["check"]),
                    variant=str(row["variant"]),
                    mode=str(row.get("mode", "")),
                    num_reqs=str(row["num_reqs"]),
                    recorded=str(row["ok"]),
                    rule=rule,
                    observed=str(row.get("observed", "")),
                )
            )
    return out


@dataclass(frozen=True)
class RecordedFailure:
    """A run its runner recorded as failed: how many failed checks and broken notebooks its manifest lists, and the
    first of them as listed ("" when none is)."""

    checks: int
    broke: int
    first: str


def recorded_failure(run: RunData) -> RecordedFailure | None:
    """A run its runner recorded as failed stays failed, whatever its tables say now: what the manifest records
    (``None`` for any other run)."""
    if run.status != "failed":
        return None
    checks = run.manifest.get("failed_checks") or []
    broke = not_finished(run.manifest)
    return RecordedFailure(len(checks), len(broke), next((str(line) for line in [*broke, *checks]), ""))


@dataclass(frozen=True)
class Undecided:
    """A sweep that ran no case where the buggy and the fixed pitch can differ: which notebook, and what it ran."""

    notebook: str
    coverage: Coverage


def undecided(run: RunData) -> Undecided | None:
    """A run whose sweep ran no case that can tell the buggy from the fixed pitch claims nothing about
    PR #55109, and fails: what it ran (``None`` for any other run)."""
    sweep = run.table(Table.SWEEP)
    if sweep is None or not len(sweep) or not {"variant", "num_reqs", "mode"} <= set(sweep):
        return None
    ran = coverage(sweep)
    if ran.decides:
        return None
    return Undecided(str(sweep["notebook"].iloc[0]) if "notebook" in sweep else "sweep", ran)


# --------------------------------------------------------------------------------------------
# A run judged once: what the report and the exit code read.


@dataclass(frozen=True)
class Judgement:
    """What a run's tables show, read once: the names of what it loaded by name, each swept implementation's
    behaviour, the findings per bug (this package's, then those registered), and its checks: how many passed, which
    failures the bug predicts, which it does not."""

    names: dict[str, str]  # parameter (implementation, reference_gather) -> loaded name
    behaviours: dict[str, Behaviour]  # notebook 02's sweep, by variant label
    findings: list[AnyFinding]
    not_finished: list[str]  # notebooks that broke or never ran to the end, with why
    complete: bool
    checks: int
    checks_ok: int
    failed_explained: int  # failed checks of an implementation under test that fail as the bug predicts
    disagreements: list[RuleDisagreement]  # sweep rows whose ``ok`` is not the rule's
    unexplained: list[str]  # every failed check the bugs do not predict: what the title names after the above
    undecided: Undecided | None = None  # a sweep that decides nothing: a failure too
    recorded: RecordedFailure | None = None  # the tables show no failure, the manifest records the run as failed


#: A finding another package draws from a run's tables (``None``: the run holds none of them).
FindingOf = Callable[[RunData], "AnyFinding | None"]


def judge(run: RunData, split_check: str = "", registered: Sequence[FindingOf] = ()) -> Judgement:
    """The run's findings per bug, its checks and completeness, and what several report sections read, each
    computed once."""
    names = implementation_names(run)
    findings: list[AnyFinding] = []
    checks = run.table(Table.RESHAPE_CHECKS)
    if checks is not None and len(checks):
        findings.append(reshape_finding(checks, run.table(Table.RESHAPE_GROUPS), split_check))
    sweep, behaviours = run.table(Table.SWEEP), {}
    if sweep is not None and len(sweep):
        finding, behaviours = gather_finding(
            sweep, run.table(Table.MEMORY_SAFETY), names.get("implementation", ""), under_test_elsewhere(run)
        )
        findings.append(finding)
    findings += [f for f in (finding_of(run) for finding_of in registered) if f is not None]
    total = ok = 0
    for table in run.check_tables().values():
        total += len(table)
        ok += int(table["ok"].map(truthy).sum())
    failed, explained = explained_failures(run)
    unfinished = not_finished(run.manifest)
    complete = run.finished and not unfinished
    disagreements = rule_disagreements(run)
    questions = undecided(run)  # no case could decide: a failure, named as such in the title
    recorded = None
    if complete and total == ok and not disagreements and questions is None:  # the tables show no failure: the record
        recorded = recorded_failure(run)
    return Judgement(
        names=names,
        behaviours=behaviours,
        findings=findings,
        not_finished=unfinished,
        complete=complete,
        checks=total,
        checks_ok=ok,
        failed_explained=explained if failed else 0,
        disagreements=disagreements,
        unexplained=unexplained_failures(run),
        undecided=questions,
        recorded=recorded,
    )

"""The run's verdict, the first line of its report and the exit code of ``repro run`` / ``repro report``: the run
judged once (:func:`repro.core.analysis.verdict.judge`: the findings of the two bugs, then those installed packages
register, :class:`Findings`), its completeness, and the one-line title composed from them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import UNDECIDED, Finding, Judgement, judge
from repro.plugins import Point, registered
from repro.tables import Table


@dataclass(frozen=True)
class Findings:
    """What a package built on this one adds to the verdict (entry point ``verdict`` of :mod:`repro.plugins`):
    findings drawn from its notebooks' tables (``None`` where the run holds none), after the two bugs' findings, and
    what each of its tables measures (the title of a run with no finding names them)."""

    findings: tuple[Callable[[RunData], Finding | None], ...] = ()
    measured: tuple[tuple[Table, str], ...] = ()


def _registered() -> tuple[Findings, ...]:
    return registered(Point.VERDICT, Findings)


def registered_findings() -> tuple[Callable[[RunData], Finding | None], ...]:
    """The findings installed packages draw from a run, in registration order."""
    return tuple(f for r in _registered() for f in r.findings)


@dataclass
class RunVerdict:
    title: str  # the claim, then the cases it rests on in parentheses (``scope``)
    complete: bool
    findings: list[Finding]
    not_finished: list[str]  # notebooks that broke or never ran to the end, with why
    checks: int
    checks_ok: int
    failed_explained: int  # failed checks of an implementation under test that fail as the bug predicts
    disagreements: list[str] = field(default_factory=list)  # sweep rows whose ``ok`` is not the rule's
    #: The title in two parts, ``claim`` and the cases it rests on (``scope``, "" when the title names none): where
    #: the first screen has room for the claim alone (a pull-request comment, whose verdict table must fit it), the
    #: scope follows the table.
    claim: str = ""
    scope: str = ""

    @property
    def failed(self) -> int:
        return self.checks - self.checks_ok + len(self.disagreements)


def verdict(run: RunData, judged: Judgement) -> RunVerdict:
    """The verdict of a judged run, with the one-line title the report leads with."""
    title = _title(run, judged.findings, judged.complete, judged.not_finished, judged.unexplained)
    return RunVerdict(
        title=title,
        complete=judged.complete,
        findings=judged.findings,
        not_finished=judged.not_finished,
        checks=judged.checks,
        checks_ok=judged.checks_ok,
        failed_explained=judged.failed_explained,
        disagreements=judged.disagreements,
        **_claim_and_scope(title, judged.findings),
    )


def run_verdict(run: RunData, split_check: str = "") -> RunVerdict:
    """Findings per bug, completeness, and the one-line title (``repro run`` and ``repro report`` exit with it)."""
    return verdict(run, judge(run, split_check, registered_findings()))


def _claim_and_scope(title: str, findings: list[Finding]) -> dict[str, str]:
    """The title's claim and the cases it ends with (in parentheses, or after "in" where an implementation under
    test matched the reference in them)."""
    for scope in (_scope(findings), *(f.coverage for f in findings if f.coverage)):
        for ending in (f" ({scope})", f" in {scope}"):
            if scope and title.endswith(ending):
                return {"claim": title.removesuffix(ending), "scope": scope}
    return {"claim": title, "scope": ""}


def _scope(findings: list[Finding]) -> str:
    """The cases each finding that names them rests on, as the title ends with them."""
    covered = [f for f in findings if f.coverage]
    return "; ".join((f"#{f.bug.pr} in " if len(findings) > 1 else "in ") + f.coverage for f in covered)


def _title(run: RunData, findings: list[Finding], complete: bool, unfinished: list[str], unexplained: list[str]) -> str:
    if not complete:
        why = (
            f"the run is {run.status!r}, not finished"
            if not run.finished
            else f"{len(unfinished)} notebook(s) did not finish"
        )
        return f"Incomplete: {why}; nothing here is a verdict on what did not run"
    problems = [p for f in findings if UNDECIDED not in f.outcomes for p in f.problems[:1]]
    if problems or unexplained:  # the same rule as the checks: a failure the bug does not predict is no success
        return "Unexpected results: " + (
            "; ".join(problems) or f"{len(unexplained)} check(s) failed, first {unexplained[0]}"
        )
    open_question = next((f.problems[0] for f in findings if UNDECIDED in f.outcomes), "")
    if open_question:
        return "Undecided: " + open_question.removeprefix(f"{UNDECIDED}: ")
    subject = next((f.subject for f in findings if f.subject), "")
    if subject:
        return subject[0].upper() + subject[1:]
    if not findings:
        measured = [
            what for r in _registered() for table, what in r.measured if table in run.tables and len(run.tables[table])
        ]
        if measured:
            return "Measurements, no reproduction in this run: " + ", ".join(measured)
        return "No verdict: this run holds no evidence of either bug"
    outcomes = list(dict.fromkeys(o for f in findings for o in f.outcomes))
    bugs = " and ".join(dict.fromkeys(f.bug for f in findings))
    scope = _scope(findings)
    return f"{' and '.join(outcomes).capitalize()}: {bugs}" + (f" ({scope})" if scope else "")

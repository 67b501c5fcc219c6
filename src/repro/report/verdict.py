"""The run's verdict, the first line of its report and the exit code of ``repro run`` / ``repro report``: the run
judged once (:func:`repro.core.analysis.verdict.judge`: the findings of the two bugs, then those installed packages
register, :class:`Findings`), its completeness, and the one-line title composed from them."""

from __future__ import annotations

from dataclasses import dataclass

from repro import registry
from repro.bugs import Bug
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import (
    AnyFinding,
    Conclusion,
    FindingOf,
    GatherFinding,
    Judgement,
    ReshapeFinding,
    judge,
)
from repro.plugins import Point, registered
from repro.report import phrases
from repro.report.phrases import PHRASES
from repro.report.run_verdict import RunVerdict
from repro.report.template import phrase
from repro.tables import Table


@dataclass(frozen=True)
class Findings:
    """What a package built on this one adds to the verdict (entry point ``verdict`` of :mod:`repro.plugins`):
    findings drawn from its notebooks' tables (``None`` where the run holds none), after the two bugs' findings, and
    what each of its tables measures (the title of a run with no finding names them)."""

    findings: tuple[FindingOf, ...] = ()
    measured: tuple[tuple[Table, str], ...] = ()


def _registered() -> tuple[Findings, ...]:
    return registered(Point.VERDICT, Findings)


def registered_findings() -> tuple[FindingOf, ...]:
    """The findings installed packages draw from a run, in registration order."""
    return tuple(f for r in _registered() for f in r.findings)


@dataclass(frozen=True)
class Worded:
    """A finding in the report's words: its bug and outcomes, what did not behave as expected (``problems``), and
    the headline it makes when an implementation under test is the point of the run: ``claim``, then the cases it
    rests on (``scope``), as `` (scope)`` or, where it matched the reference in them, `` in scope``."""

    bug: Bug
    outcomes: tuple[str, ...]
    problems: tuple[str, ...] = ()
    claim: str = ""
    scope: str = ""
    scope_in: bool = False
    coverage: str = ""  # the cases the outcomes rest on ("" when the finding names none)


def worded(f: AnyFinding) -> Worded:
    """A finding as the title reads it: this package's values through the phrases, a registered one as it came."""
    if isinstance(f, GatherFinding):
        return _gather(f)
    if isinstance(f, ReshapeFinding):
        return Worded(f.bug, f.outcomes, tuple(phrases.failed_check(c, o) for c, o in f.failed))
    return Worded(f.bug, tuple(f.outcomes), tuple(f.problems), claim=f.subject, coverage=f.coverage)


def _gather(f: GatherFinding) -> Worded:
    if not f.decides:
        return Worded(f.bug, f.outcomes, (phrases.undecided(f.coverage),))
    covered = phrases.coverage(f.coverage)
    problems = [phrases.control(registry.prose(c.variant), c) for c in f.controls if not c.as_expected]
    u = f.under_test
    if u is None or (u.own and u.behaviour.correct):
        return Worded(f.bug, f.outcomes, tuple(problems), coverage=covered)
    said = phrases.under_test(u)
    if u.own or u.elsewhere or not (u.behaviour.bug_signature or u.behaviour.correct):
        return Worded(f.bug, f.outcomes, (*problems, said), claim="" if u.own else said, coverage=covered)
    return Worded(
        f.bug, f.outcomes, tuple(problems), claim=said, scope=covered, scope_in=u.behaviour.correct, coverage=covered
    )


def verdict(run: RunData, judged: Judgement) -> RunVerdict:
    """The verdict of a judged run, with the one-line title the report leads with."""
    said = [worded(f) for f in judged.findings]
    failures = [phrases.rule_disagreement(d) for d in judged.disagreements]
    failures += [phrases.recorded_failure(judged.recorded)] if judged.recorded is not None else []
    unexplained = failures + judged.unexplained
    claim, scope, scope_in, rests_on = _title(run, said, judged.complete, judged.not_finished, unexplained)
    return RunVerdict(
        title=claim + ((f" in {scope}" if scope_in else f" ({scope})") if scope else ""),
        complete=judged.complete,
        findings=judged.findings,
        not_finished=judged.not_finished,
        checks=judged.checks,
        checks_ok=judged.checks_ok,
        failed_explained=judged.failed_explained,
        disagreements=failures,
        undecided=judged.undecided is not None,
        claim=claim,
        scope=scope,
        rests_on=rests_on,
    )


def run_verdict(run: RunData, split_check: str = "") -> RunVerdict:
    """Findings per bug, completeness, and the one-line title (``repro run`` and ``repro report`` exit with it)."""
    return verdict(run, judge(run, split_check, registered_findings()))


def _scope(findings: list[Worded]) -> str:
    """The cases each finding that names them rests on, each after its bug's number where there are several."""
    return "; ".join((f"#{f.bug.pr} in " if len(findings) > 1 else "") + f.coverage for f in findings if f.coverage)


def _title(
    run: RunData, findings: list[Worded], complete: bool, unfinished: list[str], unexplained: list[str]
) -> tuple[str, str, bool, str]:
    """The title as its claim, the cases it ends with ("" when it names none), whether they follow "in" (else in
    parentheses), and the cases as they read on their own."""
    if not complete:
        return phrase(PHRASES, "incomplete", run.status, run.finished, len(unfinished)), "", False, ""
    problems = [p for f in findings if Conclusion.UNDECIDED not in f.outcomes for p in f.problems[:1]]
    if problems or unexplained:  # the same rule as the checks: a failure the bug does not predict is no success
        return phrase(PHRASES, "unexpected", problems, unexplained), "", False, ""
    open_question = next((f.problems[0] for f in findings if Conclusion.UNDECIDED in f.outcomes), "")
    if open_question:
        return phrase(PHRASES, "undecided_title", open_question), "", False, ""
    subject = next((f for f in findings if f.claim), None)
    if subject is not None:
        return subject.claim[0].upper() + subject.claim[1:], subject.scope, subject.scope_in, subject.scope
    if not findings:
        measured = [
            what for r in _registered() for table, what in r.measured if table in run.tables and len(run.tables[table])
        ]
        return phrase(PHRASES, "measured", measured), "", False, ""
    outcomes = list(dict.fromkeys(o for f in findings for o in f.outcomes))
    scope = _scope(findings)
    shown = ("in " if len(findings) == 1 else "") + scope if scope else ""
    return phrase(PHRASES, "outcomes", outcomes, list(dict.fromkeys(f.bug for f in findings))), shown, False, scope

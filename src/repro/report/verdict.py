"""The run's verdict, the first line of its report and the exit code of ``repro run`` / ``repro report``: the
findings of the two bugs (:mod:`repro.core.analysis.verdict`) and of the release studies
(:mod:`repro.studies.analysis.releases`, :mod:`repro.studies.analysis.reshape_chain`), the run's completeness,
and the one-line title. It sits above both because it reads both."""

from __future__ import annotations

from dataclasses import dataclass, field

from repro.core.analysis.checks import truthy
from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import (
    UNDECIDED,
    Finding,
    explained_failures,
    gather_finding,
    implementation_names,
    not_finished,
    recorded_failure,
    reshape_finding,
    rule_disagreements,
    undecided,
    under_test_elsewhere,
    unexplained_failures,
)
from repro.studies.analysis import reshape_chain
from repro.studies.analysis.releases import releases_finding
from repro.tables import Table


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


def run_verdict(run: RunData, split_check: str = "") -> RunVerdict:
    """Findings per bug, completeness, and the one-line title the report leads with."""
    names = implementation_names(run)
    findings: list[Finding] = []
    checks = run.table(Table.RESHAPE_CHECKS)
    if checks is not None and len(checks):
        findings.append(reshape_finding(checks, run.table(Table.RESHAPE_GROUPS), split_check))
    sweep = run.table(Table.SWEEP)
    if sweep is not None and len(sweep):
        finding, _ = gather_finding(
            sweep,
            run.table(Table.MEMORY_SAFETY),
            names.get("implementation", ""),
            under_test_elsewhere(run),
        )
        findings.append(finding)
    matrix = run.table(Table.RELEASE_MATRIX)
    if matrix is not None and len(matrix):
        findings.append(releases_finding(matrix))
    runners = run.table(Table.BUG1_RUNNERS)
    if runners is not None and len(runners):
        answers = reshape_chain.answers(runners, run.table(Table.BUG1_RUNS), run.table(Table.BUG1_CELLS))
        findings.append(reshape_chain.releases_finding(answers, reshape_chain.reads_every_release(run.manifest)))
    total = ok = 0
    for table in run.check_tables().values():
        total += len(table)
        ok += int(table["ok"].map(truthy).sum())
    failed, explained = explained_failures(run)
    unfinished = not_finished(run.manifest)
    complete = run.finished and not unfinished
    disagreements = rule_disagreements(run)
    questions = undecided(run)  # no case could decide: a failure, named as such in the title
    if complete and total == ok and not disagreements + questions:  # the tables show no failure: the record decides
        disagreements = recorded_failure(run)
    title = _title(run, findings, complete, unfinished, disagreements + unexplained_failures(run))
    return RunVerdict(
        title=title,
        complete=complete,
        findings=findings,
        not_finished=unfinished,
        checks=total,
        checks_ok=ok,
        failed_explained=explained if failed else 0,
        disagreements=disagreements + questions,
        **_claim_and_scope(title, findings),
    )


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
    return "; ".join((f"#{f.bug.rsplit('#', 1)[-1]} in " if len(findings) > 1 else "in ") + f.coverage for f in covered)


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
            what
            for table, what in (
                (Table.PERF_MEDIANS, "the cost of the fix"),
                (Table.VLLM_RATIOS, "the fix's cost on vLLM's own kernel"),
                (Table.JIT_SUMMARY, "JIT compilations per block-table width"),
                (Table.GATHER_DISPATCH, "which gather each release launches per GPU, model and record"),
                (
                    Table.RUNNER_ANSWERS,
                    "whether each release's runner hands the gather of vllm-project/vllm#55109 a narrowed table",
                ),
            )
            if table in run.tables and len(run.tables[table])
        ]
        if measured:
            return "Measurements, no reproduction in this run: " + ", ".join(measured)
        return "No verdict: this run holds no evidence of either bug"
    outcomes = list(dict.fromkeys(o for f in findings for o in f.outcomes))
    bugs = " and ".join(dict.fromkeys(f.bug for f in findings))
    scope = _scope(findings)
    return f"{' and '.join(outcomes).capitalize()}: {bugs}" + (f" ({scope})" if scope else "")

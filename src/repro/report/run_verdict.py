"""The run's verdict as the report and the exit code read it (:func:`repro.report.verdict.verdict` words it): kept
apart from the wording so the report's model can name it without importing the phrases."""

from __future__ import annotations

from dataclasses import dataclass, field

from repro.core.analysis.verdict import AnyFinding


@dataclass
class RunVerdict:
    title: str  # the claim, then the cases it rests on in parentheses (``scope``)
    complete: bool
    findings: list[AnyFinding]
    not_finished: list[str]  # notebooks that broke or never ran to the end, with why
    checks: int
    checks_ok: int
    failed_explained: int  # failed checks of an implementation under test that fail as the bug predicts
    disagreements: list[str] = field(default_factory=list)  # sweep rows whose ``ok`` is not the rule's, a failed record
    undecided: bool = False  # the sweep ran no case that decides: a failure
    #: The title in two parts, ``claim`` and the cases it rests on (``scope``, "" when the title names none): where
    #: the first screen has room for the claim alone (a pull-request comment, whose verdict table must fit it), the
    #: scope follows the table.
    claim: str = ""
    scope: str = ""
    rests_on: str = ""  # the scope as it reads on its own ("in " left off)

    @property
    def failed(self) -> int:
        return self.checks - self.checks_ok + len(self.disagreements) + self.undecided

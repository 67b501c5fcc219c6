"""Short phrases notebooks 01 and 02's cells print, in the report's words: macros of ``templates/phrases.md.j2``,
callable from Python where a cell prints one."""

from __future__ import annotations

from typing import Any

from repro.core.analysis.verdict import (
    Behaviour,
    Control,
    Coverage,
    RecordedFailure,
    RuleDisagreement,
    Undecided,
    UnderTest,
)
from repro.report.model import TemplateFile
from repro.report.template import phrase

PHRASES = TemplateFile("repro.report", "phrases.md.j2")


def setup(setup: Any) -> str:
    """What a notebook runs on (a walkthrough's ``setup()``: profile, device, and its pool or implementation)."""
    return phrase(PHRASES, "setup", setup)


def behaviour(b: Behaviour, short: bool = False, bare: bool = False) -> str:
    """How one implementation fared across notebook 02's sweep (``short``: without the number of cases; ``bare``: a
    table cell's ``wrong from ...`` where the phrase starts ``is wrong``)."""
    return phrase(PHRASES, "behaviour", b, short, bare)


def coverage(c: Coverage) -> str:
    """Exactly which cases notebook 02's sweep ran."""
    return phrase(PHRASES, "coverage", c)


def control(name: str, c: Control) -> str:
    """A swept implementation that did not behave as its role expects, ``name`` as the registry names it."""
    return phrase(PHRASES, "control", name, c)


def under_test(u: UnderTest) -> str:
    """The implementation under test as the verdict's headline names it (without the cases it rests on)."""
    return phrase(PHRASES, "under_test", u)


def undecided(c: Coverage) -> str:
    """Why a sweep that ran ``c`` decides nothing about the strided gather."""
    return phrase(PHRASES, "undecided", c)


def undecided_run(u: Undecided) -> str:
    """The same, as a failure of the run (the manifest's failed checks)."""
    return phrase(PHRASES, "undecided_run", u)


def failed_check(check: str, observed: str) -> str:
    return phrase(PHRASES, "failed_check", check, observed)


def rule_disagreement(d: RuleDisagreement) -> str:
    """A sweep row whose recorded ``ok`` is not the checks' rule's, as a failure of the run."""
    return phrase(PHRASES, "rule_disagreement", d)


def recorded_failure(r: RecordedFailure) -> str:
    """A run its runner recorded as failed, as a failure of the run."""
    return phrase(PHRASES, "recorded_failure", r)

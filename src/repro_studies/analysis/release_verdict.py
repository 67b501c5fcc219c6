"""One release-matrix verdict as a value (its class and the first request counts it rests on) and the only place
its words are written: the sentence of a table or check row, and the short form of a figure's or table's cell.

The verdict table (``04-release-verdicts``) stores the class in ``verdict`` and the numbers in ``first_wrong`` and
``first_fault``; a reader's sentence is rendered from them here, never stored or parsed back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from repro_studies.registry import VerdictClass

#: The sentence of each class; ``{first}`` is the first request count of the class's observation.
TEXT = {
    VerdictClass.WRONG: "wrong from {first} requests",
    VerdictClass.FAULTS: "faults from {first} requests",
}
#: A cell of the release-matrix table (``wrong ≥2``); a class missing here is written as its sentence.
CELL = {
    VerdictClass.WRONG: "wrong ≥{first}",
    VerdictClass.FAULTS: "faults ≥{first}",
    VerdictClass.CORRECT: "ok",
    VerdictClass.NOT_PRESENT: "",
    VerdictClass.COULD_NOT_LOAD: "no load",
    VerdictClass.COULD_NOT_RUN: "no run",
    VerdictClass.NOT_APPLICABLE: "n/a",
}


def _count(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


@dataclass(frozen=True)
class Verdict:
    """What one (release, kernel, variant) did: its class, and the smallest request count that was wrong and that
    faulted (``None`` where none was)."""

    klass: VerdictClass
    first_wrong: int | None = None
    first_fault: int | None = None

    @classmethod
    def of(cls, row: Mapping) -> Verdict:
        """The verdict of a verdict-table row (a dict, a Series or a CSV row read back)."""
        return cls(VerdictClass(row["verdict"]), _count(row.get("first_wrong")), _count(row.get("first_fault")))

    @property
    def first(self) -> int | None:
        """The request count the class rests on: the first fault of ``faults``, the first mismatch of ``wrong``."""
        return {VerdictClass.FAULTS: self.first_fault, VerdictClass.WRONG: self.first_wrong}.get(self.klass)

    def stated(self) -> Verdict:
        """The verdict with only the count its words state: two verdicts that read the same are equal."""
        first = self.first
        return Verdict(
            self.klass,
            first if self.klass == VerdictClass.WRONG else None,
            first if self.klass == VerdictClass.FAULTS else None,
        )

    def text(self) -> str:
        """The verdict as a reader sees it: ``faults from 2 requests``, ``correct``, ``not present``."""
        return TEXT.get(self.klass, str(self.klass)).format(first=self.first)

    def cell(self) -> str:
        """The verdict in a cell of the release-matrix table: ``faults ≥2``, ``ok``, ``n/a``."""
        return CELL.get(self.klass, self.text()).format(first=self.first)

    def __str__(self) -> str:
        return self.text()

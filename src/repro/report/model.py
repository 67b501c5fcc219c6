"""What the report is made of: sections, each deriving its tables from a run once and reading them
through templates, and the analysed run every renderer draws from.

Rendering walks one way: :func:`repro.core.analysis.rundata.load_run` reads a run folder once,
:func:`repro.report.analyse.analyse` computes every section's tables once (an :class:`Analysis`), and
``report.md``, ``report.html``, ``pr-comment.md`` and the figures are drawn from that bundle; no renderer
reads the run's tables again.

A section is one small module under :mod:`repro.report.sections` that defines one :class:`Section`, plugged
into the report with one line in :data:`repro.report.sections.SECTIONS`. A package built on this one adds sections
and parts of these sections by registration (:class:`Registered`, entry point ``report`` of :mod:`repro.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from repro.core.analysis.rundata import RunData
from repro.core.analysis.verdict import Behaviour
from repro.report.run_verdict import RunVerdict

if TYPE_CHECKING:  # annotations only: matplotlib is imported where figures are drawn
    from matplotlib.figure import Figure


#: The folder of a package that holds its templates.
TEMPLATES = "templates"


@dataclass(frozen=True)
class TemplateFile:
    """A template a package ships: ``<package>/templates/<name>`` (``TemplateFile("repro.report", "plan.md.j2")``)."""

    package: str
    name: str

    @property
    def key(self) -> str:
        """The name the loader knows it by, and a template includes it by: ``package:name``."""
        return f"{self.package}:{self.name}"


#: A template: a file a package ships, or (for a test's own section) its text.
Source = TemplateFile | str


@dataclass(frozen=True)
class Common:
    """What several sections read: the run, its verdict and the names of what it loaded."""

    run: RunData
    verdict: RunVerdict
    names: dict[str, str]  # parameter (implementation, reference_gather) -> loaded name
    behaviours: dict[str, Behaviour]  # notebook 02's sweep: each implementation's record, by variant label


@dataclass(frozen=True)
class Drawn:
    """A figure a section drew, by the name of its PNG (``plots/<name>.png``) and its caption."""

    name: str
    caption: str
    figure: Figure


@dataclass(frozen=True)
class Section:
    """One part of the report.

    ``derive`` computes what the section shows from the run (once; ``None`` leaves the section out of
    this run's report). ``markdown`` is its Jinja2 template file (:class:`TemplateFile`) for ``report.md`` and
    ``report.html`` and ``comment`` the one for ``pr-comment.md`` (empty: not in the comment); both read the derived
    value as ``d`` and the shared facts as ``c`` (:class:`Common`), and ``helpers`` are further names the templates
    call. ``figures`` draws the section's figures from the derived value.
    """

    name: str
    derive: Callable[[Common], Any]
    markdown: Source
    comment: Source = ""
    figures: Callable[[Any, Common], list[Drawn]] | None = None
    helpers: Mapping[str, Any] = field(default_factory=dict)


class Slot(StrEnum):
    """Where a section of this package shows parts another package registers (``{{ slot("...") }}`` in its
    template, by value)."""

    SUMMARY_BUG1 = "summary: after bug 1's rows"
    SUMMARY_BUG2 = "summary: after bug 2's rows"
    TEST_PLAN_SUITE = "test plan: after vLLM's regression test"
    RESULT_GATHER_ROWS = "test result: PR #55109's figures, last rows"
    RESULT_GATHER_CODE = "test result: PR #55109's figures, the code the last rows ran"


@dataclass(frozen=True)
class Insert:
    """A part shown inside one of this package's sections at ``slot``: ``derive`` computes it from the run once
    (``None``: nothing to show for this run), ``template`` renders it (``d``: the derived value, ``c``: the shared
    facts), the same for every target."""

    slot: Slot
    derive: Callable[[Common], Any]
    template: Source


@dataclass(frozen=True)
class Placed:
    """A section shown after one of this package's sections (``after``), in registration order."""

    after: Section
    section: Section


@dataclass(frozen=True)
class Registered:
    """What a package built on this one adds to the report (entry point ``report`` of :mod:`repro.plugins`)."""

    sections: tuple[Placed, ...] = ()
    inserts: tuple[Insert, ...] = ()


@dataclass
class Analysis:
    """A run analysed once: the shared facts and each section's derived tables, in report order, and the registered
    parts of sections with what each derived."""

    common: Common
    parts: list[tuple[Section, Any]] = field(default_factory=list)
    inserts: list[tuple[Insert, Any]] = field(default_factory=list)

    @property
    def run(self) -> RunData:
        return self.common.run

    def __iter__(self) -> Iterator[tuple[Section, Any]]:
        return iter(self.parts)

    def data(self, name: str) -> Any:
        """The derived value of the section ``name`` (``None`` when the run has nothing for it)."""
        return next((d for s, d in self.parts if s.name == name), None)

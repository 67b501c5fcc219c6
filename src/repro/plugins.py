"""What other installed packages add to this one, found through Python entry points (group ``repro.plugins``).

``repro`` reproduces the two bugs on its own; a package built on it (``repro_studies``: vLLM's releases, who is
affected, the fast gathers and their timing) declares in its ``pyproject.toml`` one entry point per
:class:`Point` it adds to, each naming a registration object of the type that point reads. ``repro`` finds them
when that package is installed and runs without them when it is not; it never imports such a package by name.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from importlib import metadata
from typing import TypeVar

#: The entry-point group every registration is declared in.
GROUP = "repro.plugins"

T = TypeVar("T")


class Point(StrEnum):
    """Where a package adds to ``repro``: the name of its entry point, and the consumer that reads it."""

    TABLES = "tables"  # repro.tables.Names: the run-folder names of the notebooks a package adds
    REGISTRY = "registry"  # repro.registry.Registered: implementations beside this package's gathers
    RECORDS = "records"  # repro.core.geometry.records.Records: K-cache records beside DeepSeek-V4's
    NOTEBOOKS = "notebooks"  # repro.parameters.Notebooks: notebooks a run executes, with their parameters
    VERDICT = "verdict"  # repro.report.verdict.Findings: findings of the run's verdict
    REPORT = "report"  # repro.report.model.Registered: report sections and parts of this package's sections
    COMMANDS = "commands"  # repro.cli.main.Merge: what ``repro report OUT --merge RUN...`` merges


class RegistrationError(TypeError):
    """An entry point names an object of another type than its point reads."""


@cache
def _loaded(point: Point) -> tuple[object, ...]:
    return tuple(ep.load() for ep in metadata.entry_points(group=GROUP, name=point.value))


def registered(point: Point, kind: type[T]) -> tuple[T, ...]:
    """Every installed package's registration at ``point``, loaded once, in the order of the installed
    distributions; each must be a ``kind``."""
    found = _loaded(point)
    for entry in found:
        if not isinstance(entry, kind):
            raise RegistrationError(
                f"entry point {point.value!r} of group {GROUP!r} names a {type(entry).__name__}; "
                f"accepted: a {kind.__module__}.{kind.__qualname__}"
            )
    return found  # type: ignore[return-value]

"""The names of a run folder's files, defined once: notebooks, result tables (``results/<name>.csv``),
facts files (``results/<name>.json``) and figures (``plots/<name>.png``).

The notebooks' walkthroughs write these tables and the report reads them; both import the names from
here (torch-free, so the report never loads the evidence machinery). Each table also declares its
identity columns: the columns that say which case a row is (release, kernel, record, arm, mode, case,
sequence length, request count, ...), so two runs are compared row by row on what the rows are, never
on their position.

The members are :class:`enum.StrEnum` values: a member *is* its file stem, so ``run.tables[Table.SWEEP]``
and ``results/02-gather-sweep.csv`` name the same thing. This module names notebooks 01 and 02's files; a package
built on this one names its notebooks' files in enums of its own (subclasses of :class:`TableName`) and registers
them (:class:`Names`, entry point ``tables`` of :mod:`repro.plugins`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from repro.plugins import Point, registered


class Notebook(StrEnum):
    """A notebook of ``notebooks/``, by file stem (also the ``notebook`` column of its rows)."""

    RESHAPE = "01-reshape-overrun"
    GATHER = "02-strided-block-table-gather"
    REPORT = "90-report"


class TableName(StrEnum):
    """A result table, ``results/<value>.csv``; ``keys`` are its identity columns (besides ``notebook``). Subclassed
    with members: :class:`Table` here, a registered package's own."""

    keys: tuple[str, ...]

    def __new__(cls, stem: str, keys: tuple[str, ...] = ()) -> TableName:
        member = str.__new__(cls, stem)
        member._value_ = stem
        member.keys = keys
        return member

    @property
    def notebook(self) -> StrEnum:
        """The notebook that writes the table (its number prefix)."""
        return next(n for n in notebooks() if n.value[:3] == self.value[:3])


class Table(TableName):
    """Notebooks 01 and 02's result tables."""

    # notebook 01
    RESHAPE_CHECKS = "01-reshape-checks", ("check", "variant")
    RESHAPE_GROUPS = "01-reshape-groups", ("variant", "cache group")
    RESHAPE_SPLIT = "01-reshape-split", ("variant", "cache group", "split_ratio")
    # notebook 02
    CONTIGUOUS_CHECKS = "02-contiguous-checks", ("check", "variant", "case", "num_reqs")
    SWEEP = "02-gather-sweep", ("check", "variant", "geometry", "mode", "num_reqs")
    MEMORY_SAFETY = "02-interpreter-memory-safety", ("check", "variant", "geometry", "mode", "num_reqs")
    SANITIZER = "02-sanitizer", ("check", "variant", "geometry", "mode", "num_reqs")


class Facts(StrEnum):
    """A facts file, ``results/<value>.json``: what a notebook measured that is not a table."""

    RESHAPE = "01-reshape"
    SANITIZER = "02-sanitizer"
    #: The module the implementation under test was loaded from, as the process that ran it read it.
    IMPLEMENTATION = "02-implementation"


class Plot(StrEnum):
    """A figure of the report, ``plots/<value>.png``."""

    RESHAPE = "01-reshape-overrun"
    MISMATCHES = "02-gather-mismatches"
    MEMCHECK = "02-sanitizer-errors"


@dataclass(frozen=True)
class Names:
    """A package's own run-folder names (entry point ``tables`` of :mod:`repro.plugins`): its notebooks, tables and
    facts files, and the tables that make a run one about PR #55109's gather (the report's test plan)."""

    notebooks: type[StrEnum]
    tables: type[TableName]
    facts: type[StrEnum]
    gather_tables: tuple[TableName, ...] = ()


def _registered() -> tuple[Names, ...]:
    return registered(Point.TABLES, Names)


def notebooks() -> tuple[StrEnum, ...]:
    """Every notebook's stem: this package's, then those installed packages register."""
    return (*Notebook, *(n for r in _registered() for n in r.notebooks))


def tables() -> tuple[TableName, ...]:
    """Every result table: this package's, then those installed packages register."""
    return (*Table, *(t for r in _registered() for t in r.tables))


def facts() -> tuple[StrEnum, ...]:
    return (*Facts, *(f for r in _registered() for f in r.facts))


def gather_tables() -> tuple[TableName, ...]:
    """Tables that make a run one about PR #55109's gather: notebook 02's sweep and the registered ones."""
    return (Table.SWEEP, *(t for r in _registered() for t in r.gather_tables))


#: Identity columns every table may carry, in the order a comparison shows them.
IDENTITY_ORDER = (
    "notebook",
    "run",
    "check",
    "release",
    "releases",
    "runner",
    "block size asked",
    "layer",
    "config",
    "gpu_family",
    "model",
    "topology",
    "group",
    "stage",
    "site",
    "instance",
    "code",
    "kernel",
    "record",
    "kind",
    "layout",
    "shape",
    "cache group",
    "split_ratio",
    "kbs input",
    "module",
    "function",
    "line",
    "arm",
    "variant",
    "form",
    "test",
    "table",
    "geometry",
    "pitch",
    "requests",
    "launch",
    "mode",
    "case",
    "step",
    "phase",
    "call",
    "seq_len",
    "num_reqs",
)


def table_keys(stem: str) -> tuple[str, ...]:
    """Identity columns of the table ``results/<stem>.csv``; ``()`` for a table no installed package names."""
    return next((t.keys for t in tables() if t.value == stem), ())

"""Notebook 04: every vLLM release's DeepSeek gathers, as released and with PR #55109's row pitch."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report.model import Common, Drawn, Section, TemplateFile
from repro_studies.analysis.releases import complete_matrix, verdicts
from repro_studies.report import releases
from repro_studies.tables import Plot, Table

FIGURE = Plot.RELEASE_MATRIX
#: A comment shows this many rows of the table unfolded.
COMMENT_ROWS = 8


@dataclass(frozen=True)
class Affected:
    grid: releases.ReleaseGrid  # what the figure draws
    table: pd.DataFrame  # one row per kernel and run of releases with the same outcome
    counts: dict[str, int]  # (release, kernel) pairs per patch effect


def derive(c: Common) -> Affected | None:
    matrix = c.run.table(Table.RELEASE_MATRIX)
    if matrix is None or not len(matrix):
        return None
    v = complete_matrix(verdicts(matrix))
    table, counts = releases.affected_table(v)
    return Affected(releases.release_grid(v), table, counts)


def figures(d: Affected, c: Common) -> list[Drawn]:
    caption = "vLLM releases x kernels: as released (left half) and with the row-pitch change (right half)"
    return [Drawn(FIGURE, caption, releases.draw_release_grid(d.grid))]


MARKDOWN = TemplateFile("repro_studies.report", "affected-releases.md.j2")

COMMENT = TemplateFile("repro_studies.report", "affected-releases-comment.md.j2")

SECTION = Section(
    "affected releases",
    derive,
    MARKDOWN,
    COMMENT,
    figures=figures,
    helpers={"figure": FIGURE, "note": releases.GRID_NOTE, "COMMENT_ROWS": COMMENT_ROWS},
)

"""*Test Result*, first part: every figure the two pull requests quote beside this run's, so a reviewer
checks the reproduction number by number (the PRs' figures are the seeds in ``data/seeds/``); a package built on
this one adds rows of its own to PR #55109's table (:attr:`repro.report.model.Slot.RESULT_GATHER_ROWS`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro import registry, seeds
from repro.outcomes import Outcome
from repro.registry import CodeRan
from repro.report.model import Common, Section, TemplateFile
from repro.report.sections.reshape import reported_group
from repro.tables import Facts, Table


@dataclass(frozen=True)
class ReshapeFigures:
    """PR #43988's figures (``pr``) and this run's at the cache group its error identifies."""

    pr: dict
    error: str  # the PR's error line
    same_pool: bool  # this run's pool is the PR's: the figures can be equal
    group: str
    sizes: str
    strides: str
    required: int
    pool: int
    blocks: int
    fixed_blocks: int
    fixed_required: int
    raised: str  # PyTorch's error as captured ("" when not raised)
    code: CodeRan  # whose reshape produced these figures


@dataclass(frozen=True)
class GatherFigures:
    pr: dict
    error: str
    correct_at: tuple[int, ...]  # request counts where the kernel as before the fix matched the reference
    wrong_at: tuple[int, ...]
    fixed_correct_at: tuple[int, ...]
    both_ran: tuple[int, ...]  # the request counts of the PR's figures this run ran too (its sweep may differ)
    fixed_cases: int
    fault: str  # the first line of a faulted case's error ("" when none faulted)
    memcheck_bug: tuple[int, int, int] | None  # (total errors, cases with errors, cases) of the buggy kernel
    memcheck_fix: tuple[int, int] | None  # (total errors, cases) of the fixed kernel
    bug_code: CodeRan  # the kernel the before-the-fix rows ran
    fix_code: CodeRan  # the kernel the fixed rows ran


@dataclass(frozen=True)
class Figures:
    reshape: ReshapeFigures | None
    gather: GatherFigures | None


def _reshape(c: Common) -> ReshapeFigures | None:
    reported = reported_group(c)
    if reported is None:
        return None
    seed = seeds.load(43988)
    b, f, group = reported.buggy, reported.fixed, reported.name
    facts = c.run.facts.get(Facts.RESHAPE, {})
    return ReshapeFigures(
        pr=seed["reported"],
        error=seed["reported_error"],
        same_pool=int(b["available_bytes"]) == seed["reported"]["available_bytes"],
        group=group,
        sizes=str(b["shape"]),
        strides=str(b["strides"]),
        required=int(b["required_bytes"]),
        pool=int(b["available_bytes"]),
        blocks=int(b["blocks_per_kv_block"]),
        fixed_blocks=int(f["blocks_per_kv_block"]),
        fixed_required=int(f["required_bytes"]),
        raised=str(facts.get("error_text") or ""),
        code=registry.RESHAPE_REPLICA,
    )


def _counts(rows: pd.DataFrame) -> pd.Series:
    """Per request count: every case of it matched the reference."""
    mism = pd.to_numeric(rows["mismatched_tokens"], errors="coerce").fillna(0)
    stray = pd.to_numeric(rows["stray_writes"], errors="coerce").fillna(0)
    ok = (rows["status"].astype(str) == Outcome.OK) & (mism == 0) & (stray == 0)
    return ok.groupby(pd.to_numeric(rows["num_reqs"]).astype(int)).all()


def _gather(c: Common) -> GatherFigures | None:
    sweep = c.run.table(Table.SWEEP)
    if sweep is None or not len(sweep):
        return None
    seed = seeds.load(55109)
    bug = sweep[sweep["variant"] == registry.BUGGY.label]
    fix = sweep[sweep["variant"] == registry.FIXED.label]
    by_count = _counts(bug) if len(bug) else pd.Series(dtype=bool)
    fixed_by_count = _counts(fix) if len(fix) else pd.Series(dtype=bool)
    faulted = bug[bug["status"].astype(str) == Outcome.FAULTED]
    fault = str(faulted["error"].iloc[0]).splitlines()[0] if len(faulted) and "error" in faulted else ""
    san = c.run.table(Table.SANITIZER)
    memcheck_bug = memcheck_fix = None
    if san is not None and len(san):
        ran = san[san["sanitizer_status"].astype(str).isin(("clean", "errors"))]
        errors = pd.to_numeric(ran["error_count"], errors="coerce").fillna(0)
        mine = ran["variant"] == registry.BUGGY.label
        memcheck_bug = (int(errors[mine].sum()), int((errors[mine] > 0).sum()), int(mine.sum()))
        theirs = ran["variant"] == registry.FIXED.label
        memcheck_fix = (int(errors[theirs].sum()), int(theirs.sum()))
    return GatherFigures(
        pr=seed["reported"],
        error=seed["reported_error"],
        correct_at=tuple(int(n) for n, ok in by_count.items() if ok),
        wrong_at=tuple(int(n) for n, ok in by_count.items() if not ok),
        fixed_correct_at=tuple(int(n) for n, ok in fixed_by_count.items() if ok),
        both_ran=tuple(
            sorted(
                {int(n) for n in by_count.index}
                & {*seed["reported"]["buggy_passes_at"], *seed["reported"]["buggy_fails_at"]}
            )
        ),
        fixed_cases=len(fixed_by_count),
        fault=fault,
        memcheck_bug=memcheck_bug,
        memcheck_fix=memcheck_fix,
        bug_code=registry.code_of(registry.BUGGY.label),
        fix_code=registry.code_of(registry.FIXED.label),
    )


def derive(c: Common) -> Figures:
    """The PRs' figures beside this run's; both parts ``None`` for a run of neither notebook 01 nor 02 (the
    section then holds only the heading the checks sit under)."""
    return Figures(_reshape(c), _gather(c))


MARKDOWN = TemplateFile("repro.report", "results.md.j2")

SECTION = Section("test result", derive, MARKDOWN, MARKDOWN)

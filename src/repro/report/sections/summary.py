"""The first screen (the PR template's *Purpose*): which bug, which code, on what hardware and the verdict, as one
table; a package built on this one adds its rows (vLLM's releases, the fix's cost) by registration
(:class:`repro.report.model.Insert` at the summary's slots)."""

from __future__ import annotations

from dataclasses import dataclass

from repro import registry
from repro.bugs import Bug
from repro.core.analysis.checks import truthy
from repro.core.analysis.reshape import split_overruns, split_overruns_recorded_before_the_table
from repro.core.analysis.verdict import GatherFinding, ReshapeFinding, is_own_implementation
from repro.registry import CodeRan, Role
from repro.report import phrases
from repro.report.model import Common, Section, TemplateFile
from repro.report.sections.reshape import reported_group
from repro.tables import Facts, Table

#: This package's findings; any other in the verdict is one a package built on it registers.
OWN_FINDINGS = (GatherFinding, ReshapeFinding)


@dataclass(frozen=True)
class Reshape:
    """Bug 1 at the cache group the PR's error identifies."""

    outcomes: str
    group: str
    required: int
    pool: int
    blocks: int  # the buggy view's kernel blocks per logical block
    fixed_required: int
    fits: int
    groups: int
    error_captured: bool  # PyTorch's own error, captured in this run, names these numbers
    split: tuple[float, ...]  # the fixed view's overrun (required / pool) at each split ratio above 1 (vLLM #54877)


@dataclass(frozen=True)
class Gather:
    """What each kernel did over the sweep, in the report's words (:func:`repro.report.phrases.behaviour`)."""

    outcomes: str
    bug: str
    fix: str
    under_test: tuple[str, str] | None  # (loaded name, what it did)
    bug_code: CodeRan  # whose kernel "bug" and "fix" describe: this repository's replicas
    fix_code: CodeRan


@dataclass(frozen=True)
class Summary:
    run_line: RunLine
    device: str
    profile: str
    reshape: Reshape | None
    gather: Gather | None


def outcomes(common: Common, bug: str, releases: bool = False) -> str:
    """The verdict's outcomes for one bug: this package's finding, or (``releases``) those a package built on it
    registers (notebook 04's about vLLM's releases)."""
    found = [f for f in common.verdict.findings if f.bug == bug and isinstance(f, OWN_FINDINGS) != releases]
    return ", ".join(dict.fromkeys(o for f in found for o in f.outcomes))


def _reshape(c: Common) -> Reshape | None:
    reported, checks = reported_group(c), c.run.table(Table.RESHAPE_CHECKS)
    if reported is None or checks is None:
        return None
    b, f = reported.buggy, reported.fixed
    error = str(c.run.facts.get(Facts.RESHAPE, {}).get("error_text") or "")
    split = c.run.table(Table.RESHAPE_SPLIT)
    overruns = split_overruns(split) if split is not None else split_overruns_recorded_before_the_table(checks)
    return Reshape(
        outcomes=outcomes(c, Bug.RESHAPE),
        group=reported.name,
        required=int(b["required_bytes"]),
        pool=int(b["available_bytes"]),
        blocks=int(b["blocks_per_kv_block"]),
        fixed_required=int(f["required_bytes"]),
        fits=int(reported.all_fixed["fits"].map(truthy).sum()),
        groups=len(reported.all_fixed),
        error_captured=bool(error)
        and str(int(b["required_bytes"])) in error
        and str(int(b["available_bytes"])) in error,
        split=overruns,
    )


def _gather(c: Common) -> Gather | None:
    if not c.behaviours:
        return None
    roles = {registry.role(v): b for v, b in c.behaviours.items()}
    under = c.behaviours.get(registry.UNDER_TEST_LABEL)
    sweep = c.run.table(Table.SWEEP)
    target = str(sweep[sweep["variant"] == registry.UNDER_TEST_LABEL]["implementation"].iloc[0]) if under else ""
    name = c.names.get("implementation", f"`{target}`")
    outside = under is not None and not is_own_implementation(sweep, target)
    bug, fix = roles.get(Role.BUG), roles.get(Role.FIX)
    return Gather(
        outcomes=outcomes(c, Bug.GATHER),
        bug=phrases.behaviour(bug) if bug else "",
        fix=phrases.behaviour(fix) if fix else "",
        under_test=(name, phrases.behaviour(under)) if outside and under else None,
        bug_code=registry.code_of(registry.BUGGY.label),
        fix_code=registry.code_of(registry.FIXED.label),
    )


def derive(c: Common) -> Summary:
    m = c.run.manifest
    return Summary(
        run_line=run_line(c),
        device=str(c.run.environment.get("device") or "?"),
        profile=str(m.get("profile") or "?"),
        reshape=_reshape(c),
        gather=_gather(c),
    )


@dataclass(frozen=True)
class RunLine:
    """The report's first line: which run, where and when, at which commit."""

    name: str
    profile: str
    device: str
    when: str  # "2026-05-01 10:00-10:42" (UTC; "" when not recorded)
    commit: str  # the first 10 characters of the commit ("" when not recorded)
    dirty: bool  # the checkout had local changes


def run_line(c: Common) -> RunLine:
    run, m, env = c.run, c.run.manifest, c.run.environment
    started, finished = str(m.get("started") or ""), str(m.get("finished") or "")
    when = started[:16].replace("T", " ")
    if finished[:10] == started[:10] and finished:
        when += f"-{finished[11:16]}"
    return RunLine(
        name=run.name,
        profile=str(m.get("profile", "?")),
        device=str(env.get("device", "?")),
        when=when,
        commit=str(env.get("git_sha") or "")[:10],
        dirty=env.get("git_dirty") is True,
    )


MARKDOWN = TemplateFile("repro.report", "summary.md.j2")
COMMENT = TemplateFile("repro.report", "summary-comment.md.j2")

SECTION = Section("summary", derive, MARKDOWN, COMMENT)

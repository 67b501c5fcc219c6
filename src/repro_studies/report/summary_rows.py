"""The studies' rows of the report's first table (:mod:`repro.report.sections.summary`), registered at its slots:
bug 1 in vLLM's releases (notebook 06) after bug 1's rows; PR #55109's gather in vLLM's releases (notebook 04) and
the fix's cost on each timed kernel (notebook 03) after bug 2's."""

from __future__ import annotations

from dataclasses import dataclass

from repro.bugs import Bug
from repro.report.model import Common, Insert, Slot, TemplateFile
from repro.report.sections.summary import outcomes
from repro_studies.analysis import upstream_cost
from repro_studies.analysis.performance import NO_COST_BAND, NotTimed, not_timed
from repro_studies.analysis.releases import split_effect, version_key
from repro_studies.registry import Bug1Answer
from repro_studies.report.sections import reshape_releases
from repro_studies.tables import Facts, Table


@dataclass(frozen=True)
class Releases:
    outcomes: str
    first: str
    last: str
    releases: int
    kernels: int
    ran: int
    bad: int
    faulting: int
    fixed: int
    tried: int  # the wrong or faulting ones the row-pitch change ran on (a run may leave the patched variant out)


@dataclass(frozen=True)
class Reached:
    """A runner whose releases reach bug 1 (one group of notebook 06's answers), and what a user types."""

    runner: str
    stock: str  # reshape_releases.Group.stock: "stock", "not stock" or "stock in ... only"
    releases: str
    environment: str  # the setting that picks the runner, said beside the shared --block-size ("" none)
    everywhere: bool  # every configuration of the group sets it (else only where the runner is not the stock one)
    configurations: tuple[str, ...] = ()  # the group's configurations, where no --block-size is shared


@dataclass(frozen=True)
class Bug1Releases:
    """Bug 1 in vLLM's releases (notebook 06): each answer's runner, releases and configuration, in one cell
    (``summary-bug1-releases.md.j2`` words it)."""

    outcomes: str
    first: str
    last: str
    block_size: str  # the --block-size every reaching configuration passes ("" when they differ)
    reached: tuple[Reached, ...]
    others: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...]  # answer -> (releases, runners)
    pr_block_size: str
    failing: tuple[tuple[str, str], ...]  # (release, runner) whose reshape fails at the PR's --block-size
    modelled: bool  # the run holds the repository's model of the PR's crash


@dataclass(frozen=True)
class Cost:
    """The fix's cost on one kernel: graph-replay ratio spread, points outside the no-cost band, the copy's
    median overhead; or why nothing was timed."""

    kernel: str
    low: float = 0.0
    high: float = 0.0
    points: int = 0
    outside: int = 0
    copy: float = 0.0
    skipped: NotTimed | None = None


def releases(c: Common) -> Releases | None:
    matrix = c.run.table(Table.RELEASE_MATRIX)
    if matrix is None or not len(matrix):
        return None
    split = split_effect(matrix)
    if not split.releases:
        return None
    return Releases(
        outcomes=outcomes(c, Bug.GATHER, releases=True),
        first=split.releases[0],
        last=split.releases[-1],
        releases=len(split.releases),
        kernels=split.shipped["kernel"].nunique(),
        ran=len(split.ran),
        bad=len(split.bad),
        faulting=len(split.faulting),
        fixed=len(split.fixed),
        tried=len(split.tried),
    )


def bug1_releases(c: Common) -> Bug1Releases | None:
    d = reshape_releases.derive(c)
    if d is None:
        return None
    releases = sorted(c.run.table(Table.BUG1_RUNNERS).release.astype(str).unique(), key=version_key)
    reached = [g for g in d.groups if g.answer == Bug1Answer.REACHED]
    configs = {g.runner: list(g.configurations) for g in reached}
    flags = {x[x.index("--block-size") :] for cs in configs.values() for x in cs if "--block-size" in x}
    shared = flags.pop() if len(flags) == 1 else ""  # every configuration passes one --block-size: said once
    said = []
    for g in reached:
        envs = [x.replace(shared, "").strip() for x in configs[g.runner]] if shared else []
        named = [e for e in envs if e]
        said.append(
            Reached(
                g.runner,
                g.stock,
                g.releases,
                named[0] if named else "",
                len(named) == len(envs),
                () if shared else tuple(configs[g.runner]),
            )
        )
    # a runner a release does not ship is left out where the release's other runner has a row of its own
    ran = {r for g in d.groups if g.answer != Bug1Answer.NOT_SHIPPED for r in g.listed}
    others: dict[str, dict[str, list[str]]] = {}  # answer -> releases -> runners
    for g in d.groups:
        if g.answer == Bug1Answer.REACHED or (g.answer == Bug1Answer.NOT_SHIPPED and set(g.listed) <= ran):
            continue
        others.setdefault(g.answer, {}).setdefault(g.releases, []).append(g.runner)
    return Bug1Releases(
        outcomes(c, Bug.RESHAPE, releases=True),
        releases[0],
        releases[-1],
        shared,
        tuple(said),
        tuple((answer, tuple((w, tuple(r)) for w, r in by.items())) for answer, by in others.items()),
        reshape_releases.PR_BLOCK_SIZE,
        tuple(d.at_pr_block_size),
        d.model is not None and len(d.model) > 0,
    )


def _costs(c: Common) -> tuple[Cost, ...]:
    out = []
    ratios = c.run.table(Table.PERF_RATIOS)
    if ratios is not None and len(ratios) and "fixed narrowed/contiguous_ratio" in ratios:
        graph = ratios[ratios["launch"] == "graph"]
        r = graph["fixed narrowed/contiguous_ratio"]
        lo, hi = upstream_cost.NO_COST_BAND
        out.append(
            Cost(
                "the fixed kernel of this repository",
                float(r.min()),
                float(r.max()),
                len(r),
                int(((r < lo) | (r > hi)).sum()),
                float(graph["contiguous-copy overhead_ratio"].median()),
            )
        )
    else:
        skipped = not_timed(c.run.facts.get(Facts.PERFORMANCE))
        if skipped and c.run.table(Table.PERF_MEDIANS) is None:
            out.append(Cost("the fixed kernel of this repository", skipped=skipped))
    vllm = c.run.table(Table.VLLM_RATIOS)
    if vllm is not None and len(vllm):
        facts = upstream_cost.cost_facts(vllm)
        for origin, per in facts["releases"].items():
            if "graph" not in per:
                continue
            cost = per["graph"][upstream_cost.BAND_RATIOS[0]]
            copy = per["graph"][upstream_cost.COPY_RATIOS[0]]
            out.append(
                Cost(
                    f"{origin}'s own kernel",
                    cost["min"],
                    cost["max"],
                    cost["points"],
                    cost["outside_band"],
                    copy["median"],
                )
            )
    return tuple(out)


@dataclass(frozen=True)
class Costs:
    """The fix's cost on each kernel notebook 03 timed, on this run's device."""

    device: str
    band: tuple[float, float]
    costs: tuple[Cost, ...]


def costs(c: Common) -> Costs | None:
    found = _costs(c)
    return Costs(str(c.run.environment.get("device") or "?"), NO_COST_BAND, found) if found else None


BUG1_RELEASES = Insert(
    Slot.SUMMARY_BUG1,
    bug1_releases,
    TemplateFile("repro_studies.report", "summary-bug1-releases.md.j2"),
)
GATHER_RELEASES = Insert(
    Slot.SUMMARY_BUG2,
    releases,
    TemplateFile("repro_studies.report", "summary-gather-releases.md.j2"),
)
COSTS = Insert(
    Slot.SUMMARY_BUG2,
    costs,
    TemplateFile("repro_studies.report", "summary-costs.md.j2"),
)

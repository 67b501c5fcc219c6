"""The first screen (the PR template's *Purpose*): which bug, which code, on what hardware, the verdict and
the fix's cost, as one table."""

from __future__ import annotations

from dataclasses import dataclass

from repro import registry
from repro.core.analysis.checks import truthy
from repro.core.analysis.reshape import SPLIT_CHECK
from repro.core.analysis.verdict import BUG_GATHER, BUG_RESHAPE, BUG_SPLIT, describe, is_own_implementation
from repro.registry import Bug1Answer, CodeRan
from repro.report.model import Common, Section
from repro.report.sections import reshape_releases
from repro.report.sections.reshape import reported_group
from repro.studies.analysis import upstream_cost
from repro.studies.analysis.releases import complete_matrix, patch_effect, verdict_class, verdicts, version_key
from repro.tables import Facts, Table


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
    split: tuple[str, ...]  # the fixed view's overrun at each split ratio above 1 (vLLM #54877)


@dataclass(frozen=True)
class Gather:
    """What each kernel did over the sweep, in :func:`repro.core.analysis.verdict.describe`'s words."""

    outcomes: str
    bug: str
    fix: str
    under_test: tuple[str, str] | None  # (loaded name, what it did)
    bug_code: CodeRan  # whose kernel "bug" and "fix" describe: this repository's replicas
    fix_code: CodeRan


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
class Bug1Releases:
    """Bug 1 in vLLM's releases (notebook 06): each answer's runner, releases and configuration, in one cell."""

    outcomes: str
    first: str
    last: str
    answers: str  # "reached: V1 (stock in 0.20.0 – 0.27.1 only) 0.20.0 – 0.28.0, `--block-size 512`; ..."
    at_pr_block_size: str


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
    skipped: str = ""


@dataclass(frozen=True)
class Summary:
    run_line: str
    device: str
    profile: str
    reshape: Reshape | None
    gather: Gather | None
    releases: Releases | None
    bug1_releases: Bug1Releases | None
    costs: tuple[Cost, ...]
    band: tuple[float, float]


def _outcomes(common: Common, bug: str, releases: bool = False) -> str:
    """The verdict's outcomes for one bug (notebook 04's finding about vLLM's releases apart)."""
    found = [f for f in common.verdict.findings if f.bug == bug and ("releases" in f.title) == releases]
    return ", ".join(dict.fromkeys(o for f in found for o in f.outcomes))


def _reshape(c: Common) -> Reshape | None:
    reported, checks = reported_group(c), c.run.table(Table.RESHAPE_CHECKS)
    if reported is None or checks is None:
        return None
    b, f = reported.buggy, reported.fixed
    error = str(c.run.facts.get(Facts.RESHAPE, {}).get("error_text") or "")
    split = checks[checks["check"] == SPLIT_CHECK]
    overruns = [obs.split("x")[0] for obs, ok in zip(split["observed"], split["ok"]) if truthy(ok)]
    return Reshape(
        outcomes=_outcomes(c, BUG_RESHAPE),
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
        split=tuple(f"{float(o):g}x" for o in overruns if float(o) > 1.05),
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
    bug, fix = roles.get(registry.ROLE_BUG), roles.get(registry.ROLE_FIX)
    return Gather(
        outcomes=_outcomes(c, BUG_GATHER),
        bug=describe(bug) if bug else "",
        fix=describe(fix) if fix else "",
        under_test=(name, describe(under)) if outside and under else None,
        bug_code=registry.code_of(registry.BUGGY.label),
        fix_code=registry.code_of(registry.FIXED.label),
    )


def _releases(c: Common) -> Releases | None:
    matrix = c.run.table(Table.RELEASE_MATRIX)
    if matrix is None or not len(matrix):
        return None
    effect = patch_effect(complete_matrix(verdicts(matrix)))
    shipped = effect[effect["released"].map(verdict_class) != "not present"]
    klass = shipped["released"].map(verdict_class)
    bad = shipped[klass.isin(("wrong", "faults"))]
    releases = sorted(shipped["release"].unique(), key=version_key)
    if not releases:
        return None
    return Releases(
        outcomes=_outcomes(c, BUG_GATHER, releases=True),
        first=releases[0],
        last=releases[-1],
        releases=len(releases),
        kernels=shipped["kernel"].nunique(),
        ran=int(klass.isin(("wrong", "faults", "correct")).sum()),
        bad=len(bad),
        faulting=int((bad["released"].map(verdict_class) == "faults").sum()),
        fixed=int((bad["patch"] == "fixed").sum()),
        tried=int((bad["patch"] != "not tested").sum()),
    )


def _bug1_releases(c: Common) -> Bug1Releases | None:
    d = reshape_releases.derive(c)
    if d is None:
        return None
    releases = sorted(c.run.table(Table.BUG1_RUNNERS).release.astype(str).unique(), key=version_key)
    reached = [g for g in d.groups if g.answer == Bug1Answer.REACHED]
    configs = {g.runner: [x.strip("`") for x in g.configuration.split("; ") if x] for g in reached}
    flags = {x[x.index("--block-size") :] for cs in configs.values() for x in cs if "--block-size" in x}
    shared = flags.pop() if len(flags) == 1 else ""  # every configuration passes one --block-size: said once
    said = []
    for g in reached:
        stock = f" ({g.stock})" if g.stock != "not stock" else ""
        if shared:
            envs = [x.replace(shared, "").strip() for x in configs[g.runner]]
            named = [e for e in envs if e]
            how = (
                ""
                if not named
                else f" with `{named[0]}`"
                if len(named) == len(envs)
                else f" (`{named[0]}` where not stock)"
            )
        else:
            how = f" with {g.configuration.replace('; ', ' or ')}" if g.configuration else ""
        said.append(f"{g.runner}{stock} in {g.releases}{how}")
    text = (f"reached at `{shared}`: " if shared else "reached: ") + "; ".join(said) if said else ""
    # a runner a release does not ship is left out where the release's other runner has a row of its own
    ran = {r for g in d.groups if g.answer != Bug1Answer.NOT_SHIPPED for r in g.listed}
    others: dict[str, dict[str, list[str]]] = {}  # answer -> releases -> runners
    for g in d.groups:
        if g.answer == Bug1Answer.REACHED or (g.answer == Bug1Answer.NOT_SHIPPED and set(g.listed) <= ran):
            continue
        others.setdefault(g.answer, {}).setdefault(g.releases, []).append(g.runner)
    for answer, by_releases in others.items():
        text += (
            ("; " if text else "")
            + f"{answer}: "
            + "; ".join(f"{', '.join(runners)} in {where}" for where, runners in by_releases.items())
        )
    pr = (
        f"all fit at the PR's {reshape_releases.PR_BLOCK_SIZE}"
        if not d.at_pr_block_size
        else f"at the PR's {reshape_releases.PR_BLOCK_SIZE} "
        + ", ".join(f"{r} {runner}" for r, runner in d.at_pr_block_size)
        + " fail"
    )
    if d.model is not None and len(d.model):
        pr += " (its crash: unreleased code)"
    return Bug1Releases(_outcomes(c, BUG_RESHAPE, releases=True), releases[0], releases[-1], text, pr)


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
        skipped = (c.run.facts.get(Facts.PERFORMANCE) or {}).get("headline", "")
        if skipped and c.run.table(Table.PERF_MEDIANS) is None:
            out.append(Cost("the fixed kernel of this repository", skipped=skipped))
    vllm = c.run.table(Table.VLLM_RATIOS)
    if vllm is not None and len(vllm):
        facts = upstream_cost.headline(vllm)
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


def derive(c: Common) -> Summary:
    m = c.run.manifest
    return Summary(
        run_line=run_line(c),
        device=str(c.run.environment.get("device") or "?"),
        profile=str(m.get("profile") or "?"),
        reshape=_reshape(c),
        gather=_gather(c),
        releases=_releases(c),
        bug1_releases=_bug1_releases(c),
        costs=_costs(c),
        band=upstream_cost.NO_COST_BAND,
    )


TABLE = (
    """
{% call grid("bug", "what this run shows", "verdict") %}
{% if d.reshape %}{% set r = d.reshape %}
{{ row }}BUG_RESHAPE reshape overrun (`_reshape_kv_cache`), model of unreleased code |
the buggy view of the {{ r.group }} cache counts
{{ r.blocks }} kernel blocks per block and asks for
{{ r.required | thousands }} bytes of a {{ r.pool | thousands }}-byte pool
{%- if r.error_captured %}: PyTorch's own error, every number the PR quotes{% endif %};
the fixed view asks for {{ r.fixed_required | thousands }} bytes and fits ({{ r.fits }} of {{ r.groups }} cache
groups fit) | {{ r.outcomes }}
{% if r.split %}
{{ row }}BUG_SPLIT (open) | the fixed code still over-asks {{ r.split | join(", ") }} for a padded uncompressed group
split into smaller kernel blocks | shown
{% endif %}
{% endif %}
{% if d.bug1_releases %}{% set b = d.bug1_releases %}
{{ row }}BUG_RESHAPE in vLLM {{ b.first }} .. {{ b.last }} | {{ b.answers }}; {{ b.at_pr_block_size }} |
{{ b.outcomes }}
{% endif %}
{% if d.gather %}{% set g = d.gather %}
{{ row }}BUG_GATHER strided block-table gather (`_dequantize_and_gather_k_kernel`) |
{% if g.under_test %}{{ g.under_test[0] }} {{ g.under_test[1] }}; {% endif %}
{% if g.bug %}this repository's {{ g.bug_code | ran }} (row pitch `shape[-1]`, as before the fix) {{ g.bug }}{% endif %}
{% if g.fix %}; its {{ g.fix_code | ran }} (`stride(0)`, the fix) {{ g.fix }}{% endif %} | {{ g.outcomes }}
{% endif %}
{% if d.releases %}{% set s = d.releases %}
{{ row }}BUG_GATHER in vLLM {{ s.first }} .. {{ s.last }} |
{{ s.bad }} of the {{ s.ran }} released gathers that ran ({{ s.kernels }} kernels in {{ s.releases }} releases)
are wrong or fault ({{ s.faulting }} fault);
{% if s.tried == s.bad %}with the PR's row pitch {{ s.fixed }} of those {{ s.bad }} are correct
{%- elif s.tried %}with the PR's row pitch {{ s.fixed }} of the {{ s.tried }} of those it ran on are correct
{%- else %}the PR's row pitch did not run in this run{% endif %} | {{ s.outcomes }}
{% endif %}
{% for k in d.costs %}
{{ row }}cost of the fix (BUG_GATHER) on {{ k.kernel }} |
{% if k.skipped %}{{ k.skipped }} | not measured{% else %}
CUDA-graph replays on {{ d.device }}: {{ "%.3f" % k.low }}-{{ "%.3f" % k.high }}x its time on a contiguous table at
{{ k.points }} shapes; `.contiguous()` before the launch instead adds a median {{ "%.1f" % (100 * (k.copy - 1)) }}% |
{% if k.outside == 0 %}none measurable{% else %}{{ k.outside }} of {{ k.points }} shapes outside
{{ d.band[0] }}-{{ d.band[1] }}{% endif %}
{% endif %}
{% endfor %}
{% if c.verdict.checks %}
{{ row }}checks | {{ c.verdict.checks_ok }} of {{ c.verdict.checks }} as expected
{%- if c.verdict.failed and c.verdict.failed_explained == c.verdict.failed %}; the other {{ c.verdict.failed }} are
the implementation under test's, failing exactly where the bug's expectation passes it{% endif %} |
{% if not c.verdict.complete %}incomplete{% elif c.verdict.failed == c.verdict.failed_explained %}as expected
{%- else %}{{ c.verdict.failed - c.verdict.failed_explained }} unexpected{% endif %}
{% else %}
{{ row }}checks | none: this run's notebooks record what vLLM's code does, with no expectation to check | —
{% endif %}

{% endcall %}
""".replace("BUG_RESHAPE", BUG_RESHAPE)
    .replace("BUG_SPLIT", BUG_SPLIT)
    .replace("BUG_GATHER", BUG_GATHER)
)

MARKDOWN = (
    """
# {{ c.verdict.title | link }}

{{ d.run_line }}

## Purpose

{% if not c.verdict.complete %}
**Incomplete**: manifest status `{{ c.run.status }}`{% for n in c.verdict.not_finished %}; did not finish: {{ n }}
{%- endfor %}.
{% endif %}
What this run shows, per bug, with its verdict; the evidence follows the test plan and result.
"""
    + TABLE
)

COMMENT = (
    """
## Purpose

{% if not c.verdict.complete %}
**Incomplete**: manifest status `{{ c.run.status }}`; nothing here is a verdict on what did not run.
{% endif %}
**{{ c.verdict.claim | link }}.** Profile {{ d.profile }} on **{{ d.device }}**; run `{{ c.run.name }}` of the
DeepSeek-V4 KV-cache reproduction.
"""
    + TABLE
    + """{% if c.verdict.scope %}
The verdict rests on {{ c.verdict.scope.removeprefix("in ") | link }}.
{% endif %}
"""
)


def run_line(c: Common) -> str:
    run, m, env = c.run, c.run.manifest, c.run.environment
    started, finished = str(m.get("started") or ""), str(m.get("finished") or "")
    when = started[:16].replace("T", " ")
    if finished[:10] == started[:10] and finished:
        when += f"-{finished[11:16]}"
    sha = str(env.get("git_sha") or "")[:10]
    parts = [f"Run `{run.name}`", f"profile {m.get('profile', '?')} on {env.get('device', '?')}"]
    if when:
        parts.append(f"{when} UTC")
    if sha:
        parts.append(f"commit `{sha}`" + (" with local changes" if env.get("git_dirty") is True else ""))
    return ", ".join(parts) + "."


SECTION = Section("summary", derive, MARKDOWN, COMMENT)

"""Bug 1 in vLLM's releases (notebook 06): per release and runner, reached (with the configuration a user types),
latent, absent or not shipped; how the releases' own checks refuse block sizes; and PR #43988's crash as the
repository's model of unreleased code (the pull-request comment carries this as one row of its first table:
:mod:`repro.report.sections.summary`). Every figure is recomputed from notebook 06's tables with
:mod:`repro_studies.analysis.reshape_chain`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.registry import ReshapeVariant
from repro.report.model import Common, Section, TemplateFile
from repro_studies.analysis import reshape_chain as rules
from repro_studies.analysis.releases import version_key
from repro_studies.registry import BUG1_VIEWS_ANSWERS, CODE_UNRELEASED_MODEL, Bug1Answer
from repro_studies.tables import Table

#: A table cell of PyTorch's error keeps this many characters (the run folder keeps the whole text).
ERROR_CHARS = 110
#: The --block-size of PR #43988's report.
PR_BLOCK_SIZE = "256"


@dataclass(frozen=True)
class Group:
    """Releases of one runner with one answer (for the sentences)."""

    answer: str
    runner: str
    releases: str  # "0.20.0 – 0.27.1, 0.28.0"
    stock: str  # "stock", "not stock", or "stock in 0.28.0 only" (a mixed range)
    configurations: tuple[str, ...]  # what a user types to reach the answer, one per configuration
    first_error: str
    listed: tuple[str, ...] = ()  # the releases, each named


@dataclass(frozen=True)
class ModelCrash:
    """PR #43988's crash as the repository's model of unreleased code raises it: PyTorch's sizes, the bytes it
    asks for and the bytes the pool holds."""

    sizes: str
    required: int
    available: int


@dataclass(frozen=True)
class Bug1Releases:
    groups: list[Group]
    table: pd.DataFrame  # compact answers
    refusals: pd.DataFrame
    model: pd.DataFrame  # the model of unreleased code (labelled)
    read: str  # the releases read
    at_pr_block_size: list[tuple[str, str]]  # (release, runner) whose reshape fails at the PR's --block-size 256
    crash: ModelCrash | None = None  # the model's crash (None without the model's rows)


def _short(text: str) -> str:
    text = str(text or "")
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def groups(answers: pd.DataFrame, whole: bool = True) -> list[Group]:
    out = []
    refused = answers.get("block sizes the view refuses", pd.Series("", index=answers.index)).fillna("").astype(str)
    # the rewritten path's answers also split by the block sizes its view code refuses (each bullet's configuration
    # and message are then those of its own releases)
    split = refused.where(answers["answer"].isin(BUG1_VIEWS_ANSWERS), "")
    keyed = answers.assign(_split=split)
    for (answer, runner, _), g in keyed.groupby(["answer", "runner", "_split"], sort=False):
        releases = sorted(g.release.astype(str), key=version_key)
        stock = g.stock.map(rules._true)
        stocked = sorted(g[stock].release.astype(str), key=version_key)
        words = (
            "stock"
            if stock.all()
            else "not stock"
            if not stock.any()
            else f"stock in {rules.release_ranges(stocked, whole)} only"
        )
        configs = list(dict.fromkeys(str(c) for c in g.configuration if str(c)))
        out.append(
            Group(
                str(answer),
                str(runner),
                rules.release_ranges(releases, whole),
                words,
                tuple(configs),
                _short(next((str(e) for e in g["first error"] if str(e)), "")),
                tuple(releases),
            )
        )
    order = [a.value for a in Bug1Answer]
    return sorted(out, key=lambda x: (order.index(x.answer) if x.answer in order else 99, x.runner))


#: The compact table's columns as shown (the run folder's answers table holds every column).
SHOWN = {
    "releases": "releases",
    "runner": "runner",
    "answer": "answer",
    "configuration": "configuration",
    "block sizes that fail": "fails at",
    "block sizes that fit": "fits at",
    "block sizes rejected": "refused at",
}


def shown_answers(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """The compact answers a report page has room for: the runner marked when it is DeepSeek-V4's stock one,
    block sizes next to each other in the run's sweep (``order``) as one span; the count and the error are in the
    bullets above and the run folder's tables. The block sizes the rewritten view code refuses join those refused
    before any view (``view: ...``)."""
    runner = [f"{r} (stock)" if rules._true(s) else str(r) for r, s in zip(table["runner"], table["stock"])]
    spans = {c: [rules.block_spans(str(v), order) for v in table[c]] for c in list(SHOWN)[-3:]}
    view = [rules.block_spans(str(v), order) for v in table.get("block sizes the view refuses", [""] * len(table))]
    refused = ["; ".join(p for p in (r, f"view: {v}" if v else "") if p) for r, v in zip(spans[REFUSED], view)]
    return table.assign(runner=runner, **{**spans, REFUSED: refused})[list(SHOWN)].rename(columns=SHOWN)


REFUSED = "block sizes rejected"


def derive(c: Common) -> Bug1Releases | None:
    runners, runs, cells = (c.run.table(t) for t in (Table.BUG1_RUNNERS, Table.BUG1_RUNS, Table.BUG1_CELLS))
    if runners is None or not len(runners):
        return None
    empty = pd.DataFrame()
    answers = rules.answers(runners, runs if runs is not None else empty, cells if cells is not None else empty)
    order = rules.block_order(runs) if runs is not None and len(runs) else []
    whole = rules.reads_every_release(c.run.manifest)
    table = shown_answers(rules.compact_answers(answers, whole), order)
    model = c.run.table(Table.BUG1_MODEL)
    shown_model = (
        model[["code", "variant", "cache group", "sizes", "required bytes", "available bytes", "fits"]]
        if model is not None and len(model)
        else pd.DataFrame()
    )
    read = rules.release_ranges(sorted(runners.release.astype(str).unique(), key=version_key), whole)
    refusals = rules.refusal_summary(runs, whole) if runs is not None and len(runs) else pd.DataFrame()
    if len(refusals):  # as much as a page column has room for (the run folder's runs table keeps the whole text)
        refusals = pd.DataFrame(
            {
                "refused by": [f"{link}, {where}" for link, where in zip(refusals["link"], refusals["where"])],
                "message": [_short(m) for m in refusals["message"]],
                "block sizes": [rules.block_spans(str(b), order) for b in refusals["block sizes"]],
                "releases": refusals["releases"],
            }
        )
    failing = rules.failing_at(
        runs if runs is not None else empty, cells if cells is not None else empty, PR_BLOCK_SIZE
    )
    return Bug1Releases(groups(answers, whole), table, refusals, shown_model, read, failing, model_crash(model))


def model_crash(model: pd.DataFrame | None) -> ModelCrash | None:
    """PR #43988's crash in the repository's model of unreleased code (the buggy variant's row), or None."""
    buggy = model[model["variant"] == ReshapeVariant.BUGGY] if model is not None and len(model) else ()
    if not len(buggy):
        return None
    row = buggy.iloc[0]
    return ModelCrash(str(row["sizes"]), int(row["required bytes"]), int(row["available bytes"]))


MARKDOWN = TemplateFile("repro_studies.report", "reshape-releases.md.j2")

SECTION = Section(
    "reshape-releases",
    derive,
    MARKDOWN,
    helpers={"PR_BLOCK_SIZE": PR_BLOCK_SIZE, "CODE_UNRELEASED_MODEL": CODE_UNRELEASED_MODEL},
)

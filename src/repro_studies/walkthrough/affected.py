"""Notebook 05 (who is affected): each function is one cell's work, returning a table.

The evidence comes from :mod:`repro_studies.upstream.dispatch` (which gather each release runs per GPU family,
model and record), :mod:`repro_studies.upstream.warmups` (which gathers it warms up) and
:mod:`repro_studies.upstream.blocktables` (whether its runners hand a gather a column-narrowed table); the answer
from :mod:`repro_studies.analysis.affected`. It is CPU work: nothing launches, every launch is observed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.parameters import ParameterError
from repro.walkthrough.session import Session
from repro_studies.analysis import affected as analysis
from repro_studies.analysis.releases import verdicts
from repro_studies.registry import TABLE_AFFECTED, TABLE_ANSWERS, TABLE_DISPATCH, TABLE_RUNNER, TABLE_WARMUPS
from repro_studies.tables import Notebook, Table
from repro_studies.upstream import blocktables as bt
from repro_studies.upstream import dispatch as dp
from repro_studies.upstream import fetch, members
from repro_studies.upstream import releases as idx
from repro_studies.upstream.platforms import FAMILIES
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release
from repro_studies.walkthrough import session as study_session

NOTEBOOK = Notebook.AFFECTED
DISPATCH, WARMUPS, TABLES, ANSWERS, AFFECTED = (
    TABLE_DISPATCH,
    TABLE_WARMUPS,
    TABLE_RUNNER,
    TABLE_ANSWERS,
    TABLE_AFFECTED,
)
#: Notebook 04's matrix, whose verdicts say which kernels have the bug.
MATRIX = Table.RELEASE_MATRIX
#: The runner sweep per profile (``runner_sweep='default'``): every configuration on a GPU host, three on a CPU.
SWEEPS = {"cpu": bt.SHORT_SWEEP, "gpu": bt.SWEEP}
SWEEP_CHOICES = {"short": bt.SHORT_SWEEP, "full": bt.SWEEP}


@dataclass
class Context:
    session: Session
    releases: list[str]
    download: bool
    sweep: tuple = field(default_factory=tuple)

    @property
    def profile(self) -> str:
        return self.session.profile.name

    @classmethod
    def start(cls, profile: str = "auto", run_dir: str = "", **params: Any) -> Context:
        """Validate the parameters (one line naming a bad one), then resolve the release list."""
        session = study_session.start(NOTEBOOK, profile, run_dir, **params)
        p, name = session.params, session.profile.name
        try:
            chosen = idx.resolve_releases(
                p.releases,
                name,
                _index_versions() if p.releases == "all" else None,
                gpu_default=lambda: fetch.gpu_default_releases(download=p.download),
            )
        except idx.ReleaseListError as exc:
            raise ParameterError(str(exc)) from None
        sweep = SWEEPS[name] if p.runner_sweep == "default" else SWEEP_CHOICES[p.runner_sweep]
        return cls(session, chosen, p.download, sweep)


def _index_versions() -> list[str] | None:
    """Every indexed release from the first that ships a DeepSeek gather (None: no registry)."""
    try:
        return fetch.derive_releases().releases
    except OSError:
        return None


def plan(ctx: Context) -> pd.DataFrame:
    """What this run covers: the releases and the GPU families (the facts each gives vLLM's code)."""
    rows = [{"what": "releases", "value": ", ".join(ctx.releases)}]
    rows += [{"what": f"GPU family {f.key}", "value": f"{f.display}: {f.facts}"} for f in FAMILIES]
    return pd.DataFrame(rows)


def sweep(ctx: Context) -> pd.DataFrame:
    """The runner configurations of the sweep, one row each: its numbers (``kernel block`` is the block size where
    the configuration leaves it unset)."""
    return pd.DataFrame(
        [
            {
                "configuration": c.name,
                "block": c.block_size,
                "kernel block": c.kernel,
                "max_model_len": c.max_model_len,
                "max_num_seqs": c.max_num_seqs,
                "speculative tokens": c.num_spec_tokens,
                "micro-batches": c.ubatches,
                "DCP": c.dcp,
            }
            for c in ctx.sweep
        ]
    )


def gather_dispatch(ctx: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The dispatch table and the warm-up registrations of every release (recorded in the run)."""
    warm: list[dict] = []
    rows = dp.study(ctx.releases, download=ctx.download, warmup_rows=warm)
    return ctx.session.record(DISPATCH, rows), ctx.session.record(WARMUPS, warm)


def runner_tables(ctx: Context) -> pd.DataFrame:
    """Every table the releases' runner code built on its way to a gather (recorded in the run)."""
    return ctx.session.record(TABLES, bt.study(ctx.releases, download=ctx.download, sweep=ctx.sweep))


def runner_answers(ctx: Context, tables: pd.DataFrame) -> pd.DataFrame:
    return ctx.session.record(ANSWERS, analysis.runner_answers(tables).to_dict("records"))


def not_served(dispatch: pd.DataFrame) -> pd.DataFrame:
    """Per GPU family and model, the releases whose code cannot serve the model there, with the release's error."""
    return analysis.not_served(dispatch)[["releases", "gpu_family", "model", "refused_by"]]


def who_is_affected(ctx: Context, dispatch: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The answer, joined with the verdicts of the release matrix notebook 04 recorded in this run folder
    (without them the ``bug`` column says ``not measured``)."""
    table = analysis.who_is_affected(dispatch, answers, _matrix_verdicts(ctx.session.run_dir))
    return ctx.session.record(AFFECTED, table.to_dict("records"))


def _matrix_verdicts(run_dir: str) -> pd.DataFrame | None:

    path = Path(run_dir) / "results" / f"{MATRIX}.csv" if run_dir else None
    if path is None or not path.exists():
        return None
    return verdicts(pd.read_csv(path, keep_default_na=False, na_values=[""]))


def shown(frame: pd.DataFrame, columns: list[str], **where: Any) -> pd.DataFrame:
    """A readable slice of a recorded table: the rows matching ``where``, the columns a reader needs."""
    out = frame
    for col, value in where.items():
        out = out[out[col].isin(value if isinstance(value, (list, tuple)) else [value])]
    return out[columns].reset_index(drop=True)


def released_lines(release: str, member: str, function: str, contains: str, context: int = 3) -> str:
    """Lines of a release's own function around the first line containing ``contains``, numbered as in the
    wheel: the code the tables above ran, shown where it decides."""

    entry = ensure_release(release, sets=(members.DISPATCH, members.BLOCK_TABLES))
    if isinstance(entry, CacheMiss) or not entry.has(member):
        return f"vLLM {release} has no {member} in the cache"
    text = entry.read(member)
    lines = text.splitlines()
    tree = ast.parse(text)
    name = function.rpartition(".")[2]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            hit = next((i for i in range(node.lineno - 1, node.end_lineno) if contains in lines[i]), None)
            if hit is None:
                continue
            lo, hi = max(node.lineno - 1, hit - context), min(node.end_lineno, hit + context + 1)
            body = "\n".join(f"{i + 1:5d}  {lines[i]}" for i in range(lo, hi))
            return f"# vLLM {release}, {member}:{function}\n{body}"
    return f"vLLM {release}: no line containing {contains!r} in {member}:{function}"

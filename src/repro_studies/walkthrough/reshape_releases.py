"""Notebook 06 (bug 1 in releases): each function is one cell's work, returning a table or what the cell shows.

The evidence comes from :mod:`repro_studies.upstream.reshape_chain` (each release's own chain from DeepSeek-V4's
layers to the runner's reshape, per runner and block size); what it means from
:mod:`repro_studies.analysis.reshape_chain`. The repository's model of PR #43988's unreleased code state comes from
:mod:`repro.core.reshape.plan` and is recorded apart, labelled, never as a release.
"""

from __future__ import annotations

import difflib
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import HTML
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from repro import seeds
from repro.core.geometry.specs import dsv4_catalogue, group_kernel_block_size
from repro.core.reshape.plan import plan_reshape
from repro.parameters import ParameterError
from repro.registry import ReshapeVariant
from repro.walkthrough.session import Progress, Session
from repro_studies.analysis import reshape_chain as analysis
from repro_studies.notebooks import ReshapeReleasesParameters
from repro_studies.registry import CELL_FAILURES, CODE_UNRELEASED_MODEL, CellOutcome, KVViewPath, Runner
from repro_studies.tables import Notebook, Table
from repro_studies.upstream import fetch
from repro_studies.upstream import releases as idx
from repro_studies.upstream import reshape_chain as chain_lib
from repro_studies.upstream.members import RESHAPE_CHAIN
from repro_studies.upstream.wheelcache import CacheMiss
from repro_studies.walkthrough.downloads import fetch_missing

NOTEBOOK = Notebook.RESHAPE_RELEASES
RUNNERS, RUNS, CELLS, ANSWERS, CHECKS, MODEL = (
    Table.BUG1_RUNNERS,
    Table.BUG1_RUNS,
    Table.BUG1_CELLS,
    Table.BUG1_ANSWERS,
    Table.BUG1_CHECKS,
    Table.BUG1_MODEL,
)
#: The CPU profile's releases: one whose runners both count ``block_size // kernel_block_size``, the one that
#: fixed V2 (PR #43988), and one that ships neither reshape (0.22.0 and 0.34.0 are notebooks 04-05's CPU releases
#: too, so a CPU run fetches one wheel for this notebook alone).
CPU_RELEASES = ("0.22.0", "0.23.0", "0.34.0")
#: The CPU profile's block sizes: none (the default path), the default's value, one the selection refuses, one the
#: grouping refuses, and one a release accepts that is not its default.
CPU_BLOCK_SIZES = (None, 128, 256, 384, 512)
#: The cache PR #43988's numbers identify, and the figures its report quotes (the model's row is checked on them).
REPORTED_CACHE = "C128A KV"
#: Outcomes of a configuration the chain did not carry to the reshape.
STOPPED = (CellOutcome.REJECTED, CellOutcome.NOT_RUN)


@dataclass
class Context:
    session: Session
    releases: list[str]
    block_sizes: list[chain_lib.BlockSizeChoice]
    download: bool
    chains: dict[str, chain_lib.ReleaseChain] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # release -> why the cache could not provide it

    @property
    def profile(self) -> str:
        return self.session.profile.name

    @classmethod
    def start(cls, profile: str = "auto", run_dir: str = "", **params: Any) -> Context:
        """Validate the parameters (one line naming a bad one), then resolve the releases and block sizes."""
        session = Session.start(NOTEBOOK, profile, run_dir, ReshapeReleasesParameters(**params))
        p, name = session.params, session.profile.name
        return cls(
            session,
            resolve_releases(p.releases, name, p.download),
            resolve_block_sizes(p.block_sizes, name),
            p.download,
        )


def resolve_releases(selection: str, profile: str, download: bool) -> list[str]:
    """``releases``: 'default' (the short list on a CPU, every release on a GPU), 'all' (every release from the
    first with DeepSeek-V4, from the registry), or release numbers."""
    if selection == "default" and profile != "gpu":
        return list(CPU_RELEASES)
    if selection in ("default", "all"):
        try:
            return fetch.gpu_default_releases(download=download)
        except (OSError, idx.ReleaseListError) as exc:
            raise ParameterError(f"releases: {selection!r} needs the release list ({exc}); accepted: a list") from None
    try:
        return idx.resolve_releases(selection, profile)
    except idx.ReleaseListError as exc:
        raise ParameterError(str(exc)) from None


def resolve_block_sizes(selection: str, profile: str) -> list[chain_lib.BlockSizeChoice]:
    """``block_sizes``: 'default' (the short list on a CPU, the whole sweep on a GPU), 'all' (no flag, then
    16 ... 1,024), or comma-separated values (``default`` for no flag)."""
    if selection == "default" and profile != "gpu":
        values: list[int | None] = list(CPU_BLOCK_SIZES)
    elif selection in ("default", "all"):
        values = [None, *chain_lib.BLOCK_SIZES]
    else:
        values = [None if x.strip() == "default" else int(x) for x in selection.split(",") if x.strip()]
    return [chain_lib.BlockSizeChoice(v) for v in dict.fromkeys(values)]


def plan(ctx: Context) -> pd.DataFrame:
    """What this run covers."""
    rows = [
        {"what": "releases", "value": ", ".join(ctx.releases)},
        {"what": "block sizes", "value": ", ".join(b.label for b in ctx.block_sizes)},
        {
            "what": "runners",
            "value": "V1 (GPUModelRunner._reshape_kv_cache_tensors), V2 (_reshape_kv_cache); from vLLM 0.29.0 each "
            "runner's allocate_kv_cache and its create_kv_cache_views",
        },
        {"what": "model", "value": "DeepSeek-V4, --kv-cache-dtype fp8, one decoder layer per compress ratio 0, 4, 128"},
        {"what": "platform", "value": "SM90 (the release's own Platform with the device's facts)"},
        {
            "what": "pools",
            "value": f"--num-gpu-blocks-override {chain_lib.NUM_BLOCKS}: every byte of every view checked",
        },
    ]
    return pd.DataFrame(rows)


def load(ctx: Context) -> pd.DataFrame:
    """Fetch (once) each release's chain modules; who ships which runner's reshape and which a stock user gets."""
    fetch_missing(ctx.releases, None, ctx.download, sets=(RESHAPE_CHAIN,))
    rows = []
    for version in ctx.releases:
        got = chain_lib.load_chain(version, download=ctx.download)
        if isinstance(got, CacheMiss):
            ctx.missing[version] = f"{got.status}: {got.reason}"
            continue
        ctx.chains[version] = got
        rows += chain_lib.runner_rows(got, chain_lib.runner_choices(got))
    frame = ctx.session.record(RUNNERS, rows)
    return frame


def missing(ctx: Context) -> list[str]:
    return [f"vLLM {v}: {why}" for v, why in ctx.missing.items()]


# ---- the lines that carry the bug --------------------------------------------------------------------------------
def first_with(ctx: Context, runner: str, kind: str) -> chain_lib.ReleaseChain | None:
    """The first release of this run whose ``runner`` reshape counts kernel blocks by ``kind``."""
    for chain in ctx.chains.values():
        if chain.has(runner) and any(
            analysis.count_kind(e) == kind for e in chain_lib.count_expressions(chain.source(runner))
        ):
            return chain
    return None


def _excerpt(chain: chain_lib.ReleaseChain, runner: str, qualname: str, marks: tuple[str, ...]) -> str:
    """HTML of one definition's lines around those containing ``marks``, highlighted, numbered as in the file."""
    member, _ = chain_lib.RESHAPES[runner]
    return _lines(chain, member, qualname, chain.source(runner, qualname), marks, runner)


def _lines(
    chain: chain_lib.ReleaseChain, member: str, qualname: str, text: str, marks: tuple[str, ...], who: str
) -> str:
    lines = text.splitlines()
    marked = [i + 1 for i, line in enumerate(lines) if any(m in line for m in marks)]
    if not marked:
        return ""
    first = chain_lib.definition_line(chain.code(), member, qualname)
    start, end = max(1, marked[0] - 3), min(len(lines), marked[-1] + 4)
    formatter = HtmlFormatter(
        linenos="inline", linenostart=first + start - 1, hl_lines=[n - start + 1 for n in marked], noclasses=True
    )
    title = f"<p><b>vLLM {chain.version}</b>, {who}: <code>{member}:{qualname}</code></p>"
    return title + highlight("\n".join(lines[start - 1 : end]), PythonLexer(), formatter)


#: The lines a reader needs: the count of kernel blocks per logical block, V2's override of the kernel block size
#: to the storage rows (PR #43988), and the padded page's ``as_strided`` view.
COUNT_MARKS = ("// kernel_block_size", "kernel_block_size = kv_cache_spec.storage_block_size")
VIEW_MARKS = ("torch.as_strided(",)


def source_excerpt(chain: chain_lib.ReleaseChain, runner: str) -> HTML:
    """The runner's reshape: its count of kernel blocks per logical block and its ``as_strided`` call (in the
    helper it delegates attention views to, where it has one), highlighted."""
    _, main = chain_lib.RESHAPES[runner]
    parts = [_excerpt(chain, runner, main, COUNT_MARKS)]
    helper = chain.helper(runner)
    view = _excerpt(chain, runner, helper, VIEW_MARKS) if helper else ""
    if not view:  # the view in the main definition: its first as_strided after the count (later ones are Mamba's)
        text = chain.source(runner)
        count_line = next((i for i, line in enumerate(text.splitlines()) if "// kernel_block_size" in line), 0)
        rest = text.splitlines()[count_line:]
        first_view = next((line.strip() for line in rest if "torch.as_strided(" in line), "")
        view = _excerpt(chain, runner, main, (first_view,)) if first_view else ""
    return HTML("".join(p for p in (*parts, view) if p))


def sources(ctx: Context) -> list[HTML]:
    """Each runner's reshape of the first release that counts ``block_size // kernel_block_size``, then V2's of the
    first release that counts ``storage_block_size // kernel_block_size`` (PR #43988)."""
    shown = []
    for runner, kind in ((Runner.V1, "block_size"), (Runner.V2, "block_size"), (Runner.V2, "storage_block_size")):
        chain = first_with(ctx, runner, kind)
        if chain is not None:
            shown.append(source_excerpt(chain, runner))
    return shown


#: The rewritten path's lines: how many kernel blocks a page is split into and how many rows each holds (one
#: kernel block size for both), the check that a split page is dense, and the ``as_strided`` view.
SHAPE_MARKS = ("blocks_per_page = ", "get_num_kernel_states(bs)")
GUARD_MARKS = (
    "ratio = shape_bytes[0] // num_blocks",
    "if block_stride != dense_page_size",
    "raise ValueError(",
    "torch.as_strided(",
)


def view_sources(ctx: Context) -> list[HTML]:
    """The rewritten path of the first release of this run that ships it (vLLM 0.29.0 on: no reshape, the runner
    calls ``allocate_kv_cache``): ``compute_layer_kv_cache_shape_bytes``'s count and rows, then
    ``create_kv_cache_views``' dense-page check and ``as_strided`` view."""
    chain = next((c for c in ctx.chains.values() if any(c.path(r) == KVViewPath.VIEWS for r in RUNNERS_SHOWN)), None)
    if chain is None:
        return []
    member = chain_lib.KV_CACHE_INTERFACE
    who = "both runners" if all(chain.path(r) == KVViewPath.VIEWS for r in RUNNERS_SHOWN) else "V2"
    parts = [
        _lines(chain, member, q, chain.view_source(q), marks, who)
        for q, marks in ((SHAPE_FUNCTION, SHAPE_MARKS), (chain_lib.VIEW_FUNCTION, GUARD_MARKS))
    ]
    return [HTML("".join(p for p in parts if p))]


RUNNERS_SHOWN = (Runner.V1, Runner.V2)
SHAPE_FUNCTION = "compute_layer_kv_cache_shape_bytes"


def expression_diff(ctx: Context) -> str:
    """V2's count in the first release dividing ``block_size`` against the first dividing ``storage_block_size``,
    as a diff, with the statements they sit in (the whole functions' diff goes to the run folder)."""
    old, new = first_with(ctx, Runner.V2, "block_size"), first_with(ctx, Runner.V2, "storage_block_size")
    if old is None or new is None:
        return "(the releases of this run do not include one of each count)"
    a = chain_lib.count_expressions(old.source(Runner.V2))
    b = chain_lib.count_expressions(new.source(Runner.V2))
    diff = difflib.unified_diff(a, b, f"vLLM {old.version}", f"vLLM {new.version}", lineterm="")
    if ctx.session.run_dir:
        folder = Path(ctx.session.run_dir) / "reshape"
        folder.mkdir(parents=True, exist_ok=True)
        whole = difflib.unified_diff(
            old.source(Runner.V2).splitlines(keepends=True),
            new.source(Runner.V2).splitlines(keepends=True),
            f"vLLM {old.version}/{chain_lib.RESHAPE_FUNCTION_MEMBER}",
            f"vLLM {new.version}/{chain_lib.RESHAPE_FUNCTION_MEMBER}",
        )
        (folder / f"_reshape_kv_cache-{old.version}-vs-{new.version}.diff").write_text("".join(whole))
    statements = [f"vLLM {old.version}: {s}" for s in chain_lib.count_statements(old.source(Runner.V2))]
    statements += [f"vLLM {new.version}: {s}" for s in chain_lib.count_statements(new.source(Runner.V2))]
    return "\n".join([*diff, "", *statements])


# ---- the chain --------------------------------------------------------------------------------------------------
def run_chains(ctx: Context) -> pd.DataFrame:
    """Every release x runner x block size through the release's own chain; the engine runs (one per row)."""
    bar = Progress(len(ctx.chains), "releases", unit="release")
    provenance = {}
    for version, chain in ctx.chains.items():
        study = chain_lib.study_release(chain, ctx.block_sizes)
        ctx.session.record(RUNS, study.runs)
        ctx.session.record(CELLS, study.cells)
        provenance[version] = study.provenance
        bar.advance(1)
    if ctx.session.run_dir:
        folder = Path(ctx.session.run_dir) / "reshape"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "provenance.json").write_text(json.dumps(provenance, indent=2, default=str) + "\n")
    runs, cells = _frame(ctx, RUNS), _frame(ctx, CELLS)
    return analysis.with_run_outcomes(runs, cells)


def _frame(ctx: Context, table: str) -> pd.DataFrame:
    return ctx.session.table(table).frame() if table in ctx.session.tables else pd.DataFrame()


def block_sizes(ctx: Context, runs: pd.DataFrame, runner: str) -> pd.DataFrame:
    """Release x block size for one runner: the outcome, or the link that refused the block size."""
    if not len(runs):
        return pd.DataFrame()
    mine = runs[runs.runner == runner]
    named = (*STOPPED, CellOutcome.REFUSES)
    cell = [f"{r.outcome} ({r.link})" if r.outcome in named else str(r.outcome) for _, r in mine.iterrows()]
    table = mine.assign(cell=cell).pivot(index="release", columns="block size asked", values="cell")
    order = [b.label for b in ctx.block_sizes if b.label in table.columns]
    return table[order].fillna("")


def refusals(runs: pd.DataFrame) -> pd.DataFrame:
    """Each distinct way a release refused a block size: the link, the release's line and its message (a link
    before the runner, or the rewritten view code's own check); and what the study could not run."""
    if not len(runs):
        return pd.DataFrame()
    stopped = runs[runs.outcome.isin((*STOPPED, CellOutcome.REFUSES))]
    cols = ["link", "stop", "where", "message"]
    grouped = stopped.fillna("").groupby(cols, sort=False)
    rows = [
        {
            **dict(zip(cols, key)),
            "releases": ", ".join(dict.fromkeys(str(x) for x in g.release)),
            "block sizes": ", ".join(dict.fromkeys(str(x) for x in g["block size asked"])),
        }
        for key, g in grouped
    ]
    return pd.DataFrame(rows)


def failures(runs: pd.DataFrame) -> pd.DataFrame:
    """The engine runs whose reshape failed: the first error a user sees, verbatim, and where it was raised."""
    if not len(runs):
        return pd.DataFrame()
    failing = runs[runs.outcome.isin(CELL_FAILURES)]
    return failing[["release", "runner", "block size asked", "environment", "where", "message"]].reset_index(drop=True)


def cells_of(ctx: Context, release: str, runner: str, block: str) -> pd.DataFrame:
    """Every cache layer of one configuration: its kernel block size, storage rows, view or error."""
    cells = analysis.with_outcomes(_frame(ctx, CELLS))
    if not len(cells):
        return cells
    mine = cells[
        (cells.release.astype(str) == release)
        & (cells.runner == runner)
        & (cells["block size asked"].astype(str) == block)
    ]
    shown = ["cache group", "layer", "kernel block size", "storage rows", "pages", "kernel blocks", "outcome", "sizes"]
    return mine[[*shown, "error"]].reset_index(drop=True)


def answers(ctx: Context) -> pd.DataFrame:
    """Bug 1 per release and runner, from the rows above (recorded)."""
    frame = analysis.answers(_frame(ctx, RUNNERS), _frame(ctx, RUNS), _frame(ctx, CELLS))
    return ctx.session.record(ANSWERS, frame.to_dict("records"))


# ---- the model of unreleased code ---------------------------------------------------------------------------------
def unreleased_model(ctx: Context) -> pd.DataFrame:
    """PR #43988's code state (main between PR #38831 and PR #43988: the compressed group's kernel block size
    overridden to its storage rows, the count ``block_size // kernel_block_size``) as the repository models it, at
    the PR's geometry. No release shipped it; it decides no release's answer."""
    seed = seeds.load(43988)
    spec = next(s for s in dsv4_catalogue(256) if s.name == REPORTED_CACHE)
    rows = []
    for variant in ReshapeVariant:
        p = plan_reshape(spec, seed["reported"]["available_bytes"], group_kernel_block_size(spec), variant)
        rows.append(
            {
                "code": CODE_UNRELEASED_MODEL,
                "variant": variant,
                "cache group": spec.name,
                "kernel block size": p.kernel_block_size,
                "kernel blocks per logical block": p.blocks_per_logical_block,
                "sizes": json.dumps(list(p.shape)),
                "strides": json.dumps(list(p.strides)),
                "required bytes": p.required_bytes,
                "available bytes": p.pool_bytes,
                "fits": p.fits,
            }
        )
    return ctx.session.record(MODEL, rows)


def checks(ctx: Context) -> pd.DataFrame:
    """The checks of every row (recorded); the notebook's last cell fails naming any that did not pass."""
    frame = ctx.session.record(CHECKS, analysis.checks(_frame(ctx, RUNS), _frame(ctx, CELLS)))
    return frame


def source_text(chain: chain_lib.ReleaseChain, runner: str) -> str:
    return textwrap.dedent(chain.source(runner))

"""What bug 1 means in each release: an outcome per cell, an answer per release and runner, and the checks.

Reads the rows :mod:`repro_studies.upstream.reshape_chain` writes (as recorded, or read back from a run folder's
CSV files). A cell (release x runner x block size x cache layer) **fits** when its view addresses exactly each
logical block's page payload, **raises** when the runner's reshape raised, and is wrong silently when it fits the
pool but a block's kernel blocks address bytes outside the block's page (or miss or add bytes within the pages).
The answer per release and runner is **reached** when a block size the release accepts makes a view wrong and the
failing view counts ``block_size // kernel_block_size`` kernel blocks per logical block (the configuration a user
types is given); **latent** when the function counts that way but every block size the release accepts fits;
**absent** when it counts ``storage_block_size // kernel_block_size`` (or has no count) and everything fits.

From vLLM 0.29.0 neither reshape exists: the runner calls ``allocate_kv_cache``, whose ``create_kv_cache_views``
views one backing buffer per layer with no count of bug 1's kind (:class:`~repro.registry.KVViewPath`). Its
cells are judged the same way, with one more outcome: the view code's own ``raise``/``assert`` refusing a block size
(:attr:`~repro.registry.CellOutcome.REFUSES`, with its message); its answers say which of those happened
(``VIEWS_*`` of :class:`~repro.registry.Bug1Answer`), never reached or latent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from repro.core.analysis.verdict import Conclusion
from repro_studies.analysis.releases import version_key
from repro_studies.registry import (
    CELL_FAILURES,
    Bug1Answer,
    CellOutcome,
    ChainLink,
    ChainStop,
    KVViewPath,
    RaisedBy,
)

#: PyTorch's two ways of refusing a view: ``as_strided``'s bound (padded pages) and ``view``'s element count.
_SET_STORAGE = re.compile(
    r"setStorage: sizes \[(?P<sizes>[\d, ]*)\], strides \[(?P<strides>[\d, ]*)\].*?"
    r"requiring a storage size of (?P<required>\d+) are out of bounds for storage of size (?P<available>\d+)",
    re.S,
)
_VIEW_SHAPE = re.compile(r"shape '\[(?P<sizes>[\d, ]*)\]' is invalid for input of size (?P<available>\d+)")
#: The count of kernel blocks per logical block that is bug 1.
BUGGY_COUNT = re.compile(r"(?<![.\w])\w+\.block_size // kernel_block_size")
FIXED_COUNT = re.compile(r"\w+\.storage_block_size // kernel_block_size")
#: A check row: ``variant`` is the runner and ``mode`` names the release and block size (how a failure is named).
CHECK_COLUMNS = (
    "check",
    "variant",
    "mode",
    "release",
    "runner",
    "block size asked",
    "cache group",
    "layer",
    "expected",
    "observed",
    "ok",
)


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and pd.isna(value))


def _int(value: Any) -> int | None:
    return None if _empty(value) else int(float(value))


def pytorch_refusal(error: str) -> dict[str, Any] | None:
    """The figures of PyTorch's refusal of a view (``setStorage`` out of bounds, or ``view``'s shape is invalid for
    the input size); None for any other error."""
    m = _SET_STORAGE.search(error or "")
    if m is not None:
        return {
            "kind": "setStorage",
            "sizes": [int(x) for x in m["sizes"].replace(" ", "").split(",") if x],
            "required_bytes": int(m["required"]),
            "available_bytes": int(m["available"]),
        }
    m = _VIEW_SHAPE.search(error or "")
    if m is not None:
        return {
            "kind": "view",
            "sizes": [int(x) for x in m["sizes"].replace(" ", "").split(",") if x],
            "available_bytes": int(m["available"]),
        }
    return None


def count_kind(expression: str) -> str:
    """``"block_size"`` (bug 1's count), ``"storage_block_size"`` (PR #43988's), or ``""`` (no count)."""
    if BUGGY_COUNT.search(expression or ""):
        return "block_size"
    if FIXED_COUNT.search(expression or ""):
        return "storage_block_size"
    return ""


# ---- cells -----------------------------------------------------------------------------------------------------
def cell_outcome(row: Mapping[str, Any]) -> CellOutcome:
    """One cache layer's outcome from its row."""
    if not _empty(row.get("error type")):
        stops = {s.value: s for s in ChainStop}
        if row["error type"] in stops:
            return CellOutcome.REJECTED if stops[row["error type"]] == ChainStop.REJECTED else CellOutcome.NOT_RUN
        return CellOutcome.REFUSES if row.get("raised by") == RaisedBy.RELEASE else CellOutcome.RAISES
    if _int(row.get("kernel blocks per page")) is None or (_int(row.get("blocks outside page")) or 0) > 0:
        return CellOutcome.OUTSIDE_PAGE
    if (_int(row.get("payload bytes missed")) or 0) or (_int(row.get("padding bytes addressed")) or 0):
        return CellOutcome.WRONG_BYTES
    return CellOutcome.FITS


def kernel_blocks_of(row: Mapping[str, Any]) -> int | None:
    """The view's kernel blocks (its first dimension): from the view, or from PyTorch's refusal."""
    if not _empty(row.get("sizes")):
        return json.loads(row["sizes"])[0]
    refusal = pytorch_refusal(str(row.get("error") or ""))
    return refusal["sizes"][0] if refusal else None


def with_outcomes(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with their ``outcome`` and the number of kernel blocks the view asked for."""
    if not len(cells):
        return cells.assign(outcome=[], **{"kernel blocks": []})
    return cells.assign(
        outcome=[cell_outcome(r) for _, r in cells.iterrows()],
        **{"kernel blocks": [kernel_blocks_of(r) for _, r in cells.iterrows()]},
    )


# ---- engine runs ---------------------------------------------------------------------------------------------
def run_outcome(run: Mapping[str, Any], cells: pd.DataFrame) -> CellOutcome:
    """One engine configuration's outcome: where it stopped, or the worst of its cells."""
    if not _empty(run.get("stop")):
        return CellOutcome.REJECTED if run["stop"] == ChainStop.REJECTED else CellOutcome.NOT_RUN
    if run.get("link") in (ChainLink.RESHAPE, ChainLink.VIEWS) and not _empty(run.get("message")):
        return CellOutcome.REFUSES if run.get("raised by") == RaisedBy.RELEASE else CellOutcome.RAISES
    outcomes = set(cells["outcome"]) if len(cells) else set()
    worse = (CellOutcome.OUTSIDE_PAGE, CellOutcome.WRONG_BYTES, CellOutcome.RAISES, CellOutcome.REFUSES)
    for worst in (*worse, CellOutcome.NOT_RUN):
        if worst in outcomes:
            return worst
    return CellOutcome.FITS if outcomes else CellOutcome.NOT_RUN


def _key(frame: pd.DataFrame) -> pd.Series:
    return (
        frame["release"].astype(str) + "|" + frame["runner"].astype(str) + "|" + frame["block size asked"].astype(str)
    )


def with_run_outcomes(runs: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    cells = with_outcomes(cells)
    by = {k: g for k, g in cells.groupby(_key(cells))} if len(cells) else {}
    keys = _key(runs) if len(runs) else []
    empty = cells.iloc[:0]
    return runs.assign(outcome=[run_outcome(r, by.get(k, empty)) for (_, r), k in zip(runs.iterrows(), keys)])


def _block_order(label: str) -> tuple[int, int]:
    return (0, 0) if label == "default" else (1, int(label))


def block_order(runs: pd.DataFrame) -> list[str]:
    """The block sizes a run swept, in order (no flag first)."""
    return sorted({str(b) for b in runs["block size asked"]}, key=_block_order)


def block_spans(listed: str, order: list[str]) -> str:
    """``default, 16–192, 384``: a comma-separated list of block sizes with runs of neighbours in ``order`` (the
    sweep) written as one span."""
    items = [x.strip() for x in listed.split(",") if x.strip()]
    if not items or any(x not in order for x in items):
        return listed
    groups: list[list[str]] = []
    for x in sorted(items, key=order.index):
        if groups and order.index(x) == order.index(groups[-1][-1]) + 1 and groups[-1][-1] != "default":
            groups[-1].append(x)
        else:
            groups.append([x])
    return ", ".join(", ".join(g) if len(g) < 3 else f"{g[0]}–{g[-1]}" for g in groups)


def flag(label: str) -> str:
    return "" if label == "default" else f"--block-size {label}"


def configuration(environment: str, label: str) -> str:
    """What a user types to reach the configuration: the runner's environment variable and the block size."""
    parts = [environment, flag(label)]
    text = " ".join(p for p in parts if p)
    return text or "(no flag: the release's defaults)"


# ---- answers ----------------------------------------------------------------------------------------------------
ANSWER_COLUMNS = (
    "release",
    "runner",
    "stock",
    "reached with",
    "answer",
    "configuration",
    "block sizes that fail",
    "block sizes that fit",
    "block sizes rejected",
    "block sizes the view refuses",
    "default block size",
    "path",
    "definition",
    "count expression",
    "first error",
)


def answers(runners: pd.DataFrame, runs: pd.DataFrame | None, cells: pd.DataFrame | None) -> pd.DataFrame:
    """One row per release and runner: bug 1 reached (with the configuration), latent, absent, not shipped."""
    runs = _with_columns(runs, ("release", "runner", "block size asked", "block size", "stop", "link", "message"))
    cells = _with_columns(cells, ("release", "runner", "block size asked", "error type", "error", "sizes"))
    runs = with_run_outcomes(runs, cells)
    cells = with_outcomes(cells)
    rows = []
    for _, r in runners.iterrows():
        mine = runs[(runs.release.astype(str) == str(r.release)) & (runs.runner == r.runner)]
        mine = mine.assign(_order=[_block_order(str(x)) for x in mine["block size asked"]]).sort_values("_order")
        row = dict.fromkeys(ANSWER_COLUMNS, "")
        row.update(
            release=str(r.release),
            runner=r.runner,
            stock=_true(r.stock),
            **{"reached with": "" if _empty(r["reached with"]) else r["reached with"]},
            **{"count expression": "" if _empty(r["count expression"]) else r["count expression"]},
            path=_path(r.get("path")),
            definition="" if _empty(r.get("definition")) else str(r.get("definition")),
        )
        views = row["path"] == KVViewPath.VIEWS
        if not views and not _true(r.shipped):
            rows.append({**row, "answer": Bug1Answer.NOT_SHIPPED, "definition": ""})
            continue
        failing = mine[mine.outcome.isin(CELL_FAILURES)]
        fitting = mine[mine.outcome == CellOutcome.FITS]
        rejected = mine[mine.outcome == CellOutcome.REJECTED]
        refused = mine[mine.outcome == CellOutcome.REFUSES]
        not_run = mine[mine.outcome == CellOutcome.NOT_RUN]
        default = mine[mine["block size asked"].astype(str) == "default"]
        row.update(
            {
                "block sizes that fail": ", ".join(str(x) for x in failing["block size asked"]),
                "block sizes that fit": ", ".join(str(x) for x in fitting["block size asked"]),
                "block sizes rejected": ", ".join(str(x) for x in rejected["block size asked"]),
                "block sizes the view refuses": ", ".join(str(x) for x in refused["block size asked"]),
                "default block size": "" if not len(default) else str(default["block size"].iloc[0]),
            }
        )
        kind = count_kind(row["count expression"])
        if views:
            rows.append({**row, **_views_answer(row, failing, refused, not_run)})
            continue
        if len(failing):
            first = failing.iloc[0]
            mine_cells = cells[_key(cells) == _key(failing.iloc[:1]).iloc[0]] if len(cells) else cells
            counted = _failure_is_the_count(mine_cells)
            answer = Bug1Answer.REACHED if kind == "block_size" and counted else Bug1Answer.OTHER_FAILURE
            row.update(
                answer=answer,
                configuration=configuration(row["reached with"], str(first["block size asked"])),
                **{"first error": str(first["message"])},
            )
        elif len(not_run):
            row["answer"] = Bug1Answer.UNDECIDED
        else:
            row["answer"] = Bug1Answer.LATENT if kind == "block_size" else Bug1Answer.ABSENT
        rows.append(row)
    return pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))


def _path(value: Any) -> str:
    """The runner's :class:`KVViewPath` (a table written before the column existed: the reshape, or none)."""
    paths = {p.value: p for p in KVViewPath}
    return "" if _empty(value) else paths.get(str(value), str(value))


def _views_answer(row: Mapping[str, Any], failing: pd.DataFrame, refused: pd.DataFrame, not_run: pd.DataFrame) -> dict:
    """The rewritten path's answer (no count of bug 1's kind): a wrong view, its own check's refusal, undecided,
    or every view fits; the configuration and message of the first block size that failed or was refused."""
    for frame, answer in ((failing, Bug1Answer.VIEWS_WRONG), (refused, Bug1Answer.VIEWS_REFUSE)):
        if len(frame):
            first = frame.iloc[0]
            return {
                "answer": answer,
                "configuration": configuration(str(row["reached with"]), str(first["block size asked"])),
                "first error": str(first["message"]),
            }
    return {"answer": Bug1Answer.UNDECIDED if len(not_run) else Bug1Answer.VIEWS_FIT}


def reads_every_release(manifest: Mapping[str, Any]) -> bool:
    """Whether a run read every release in its span (``releases=all``, or ``default`` on a GPU): only then does a
    range ``a – b`` stand for every release from a to b (a list such as 0.22.0, 0.23.0 leaves 0.22.1 out)."""
    selection = str((manifest.get("parameters") or {}).get("releases", "default")).strip()
    return selection == "all" or (selection == "default" and manifest.get("profile") == "gpu")


def release_ranges(releases: list[str], whole: bool = True) -> str:
    """``0.20.0 – 0.22.1, 0.28.0``: runs of consecutive releases (in the order given, all of them read) merged;
    with ``whole`` false (a run that read a list) every release named."""
    if not whole:
        return ", ".join(releases)
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} – {r[-1]}" for r in _runs(releases))


def _runs(releases: list[str]) -> list[list[str]]:
    """Split releases (sorted) where a minor version is skipped: 0.20.x-0.22.x run on, 0.24 after 0.22 breaks."""
    out: list[list[str]] = []
    for r in releases:
        if out and _next_to(out[-1][-1], r):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _next_to(a: str, b: str) -> bool:
    ka, kb = version_key(a), version_key(b)
    return len(ka) >= 2 and len(kb) >= 2 and ka[0] == kb[0] and kb[1] - ka[1] in (0, 1)


def _with_columns(frame: pd.DataFrame | None, columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame``, or an empty frame with ``columns`` (a run that recorded no rows of a table)."""
    if frame is None or not len(frame.columns):
        return pd.DataFrame(columns=list(columns))
    return frame


def _true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def counted_kernel_blocks(row: Mapping[str, Any]) -> int | None:
    """Kernel blocks bug 1's count asks for: pages x (spec block size // kernel block size)."""
    pages = _int(row.get("pages")) or _int(row.get("num blocks"))
    block, kernel = _int(row.get("spec block size")), _int(row.get("kernel block size"))
    if pages is None or block is None or not kernel:
        return None
    return pages * (block // kernel)


def _failure_is_the_count(cells: pd.DataFrame) -> bool:
    """Does a failing view of the configuration ask for exactly the kernel blocks bug 1's count gives, and more
    than one per page?"""
    for _, c in cells[cells.outcome.isin(CELL_FAILURES)].iterrows():
        asked, counted = c["kernel blocks"], counted_kernel_blocks(c)
        pages = _int(c.get("pages"))
        if asked is not None and counted is not None and asked == counted and (pages is None or asked > pages):
            return True
    return False


# ---- checks -----------------------------------------------------------------------------------------------------
class ChainCheck(StrEnum):
    """The checks :func:`checks` holds the chain's rows to; the value is the check's name in the run's table."""

    RAN = "the release's chain ran to a finding"
    PYTORCH_REFUSAL = "a raise is PyTorch's refusal of the view, in the runner's reshape"
    RELEASE_REFUSAL = "a refusal is the release's own raise or assert, with its line and message"
    FITS_EXACTLY = "a view that fits addresses exactly each block's page payload (written through it)"
    VIEWS_SPLIT = "a create_kv_cache_views view splits each page into block_size // kernel_block_size blocks"
    KERNEL_BLOCKS = "a view has one kernel block per page (fits), or bug 1's count of them (raises)"


def _check(check: ChainCheck, row: Mapping[str, Any], expected: str, observed: str, ok: bool, group: str = "") -> dict:
    return {
        "check": check,
        "variant": row.get("runner", ""),
        "mode": f"vLLM {row.get('release', '')}, block size {row.get('block size asked', '')}",
        "release": str(row.get("release", "")),
        "runner": row.get("runner", ""),
        "block size asked": str(row.get("block size asked", "")),
        "cache group": group,
        "layer": str(row.get("layer", "")) if group else "",
        "expected": expected,
        "observed": observed,
        "ok": bool(ok),
    }


def checks(runs: pd.DataFrame, cells: pd.DataFrame) -> list[dict]:
    """Every configuration ran to a finding; every raise is PyTorch's refusal of the view, in the runner's reshape;
    every refusal is the release's own raise or assert, with its line; every view that fits addresses exactly its
    pages' payloads; a view that counts by ``block_size`` asks for the kernel blocks that count gives (the rewritten
    path: the kernel blocks it split each page into)."""
    out = []
    runs = _with_columns(runs, ("release", "runner", "block size asked", "stop", "link", "message"))
    cells = with_outcomes(
        _with_columns(cells, ("release", "runner", "block size asked", "error type", "error", "sizes"))
    )
    for _, r in with_run_outcomes(runs, cells).iterrows():
        out.append(
            _check(
                ChainCheck.RAN,
                r,
                "fits, raises, a silent wrong view, or the release's own refusal",
                f"{r.outcome}" + (f" ({r.get('link')})" if not _empty(r.get("link")) else ""),
                r.outcome != CellOutcome.NOT_RUN,
            )
        )
    for _, c in cells.iterrows():
        group = str(c["cache group"])
        views = _path(c.get("path")) == KVViewPath.VIEWS
        if c.outcome == CellOutcome.RAISES:
            refusal = pytorch_refusal(str(c["error"]))
            out.append(
                _check(
                    ChainCheck.PYTORCH_REFUSAL,
                    c,
                    "RuntimeError: setStorage out of bounds, or view's shape invalid for the input size",
                    f"{c['error type']}: {str(c['error'])[:160]} (at {c['where']})",
                    refusal is not None and c["error type"] == "RuntimeError",
                    group,
                )
            )
        elif c.outcome == CellOutcome.REFUSES:
            out.append(
                _check(
                    ChainCheck.RELEASE_REFUSAL,
                    c,
                    f"{RaisedBy.RELEASE} (file:line), a message",
                    f"{c['raised by']}: {c['error type']}: {str(c['error'])[:160]} (at {c['where']})",
                    c["raised by"] == RaisedBy.RELEASE and not _empty(c["where"]) and not _empty(c["error"]),
                    group,
                )
            )
        elif c.outcome == CellOutcome.FITS:
            per_page = _split(c) if views else 1
            out.append(
                _check(
                    ChainCheck.FITS_EXACTLY,
                    c,
                    f"{per_page} kernel block{'s' if per_page != 1 else ''} per page, 0 outside, "
                    "0 payload bytes missed, 0 padding bytes written",
                    f"{c['kernel blocks per page']} per page, {c['blocks outside page']} outside, "
                    f"{c['payload bytes missed']} missed, {c['padding bytes addressed']} padding",
                    per_page is not None and _int(c["kernel blocks per page"]) == per_page,
                    group,
                )
            )
        counted = counted_kernel_blocks(c)
        if views and c.outcome == CellOutcome.FITS and counted is not None and c["kernel blocks"] is not None:
            out.append(
                _check(
                    ChainCheck.VIEWS_SPLIT,
                    c,
                    f"{counted} kernel blocks",
                    f"{c['kernel blocks']} kernel blocks",
                    c["kernel blocks"] == counted,
                    group,
                )
            )
        elif (
            not views
            and c.outcome in (CellOutcome.RAISES, CellOutcome.FITS)
            and counted is not None
            and c["kernel blocks"] is not None
        ):
            expected_blocks = _int(c["pages"]) if c.outcome == CellOutcome.FITS else counted
            out.append(
                _check(
                    ChainCheck.KERNEL_BLOCKS,
                    c,
                    f"{expected_blocks} kernel blocks",
                    f"{c['kernel blocks']} kernel blocks",
                    c["kernel blocks"] == expected_blocks,
                    group,
                )
            )
    return out


def _split(cell: Mapping[str, Any]) -> int | None:
    """Kernel blocks per page the rewritten path was asked for: spec block size // kernel block size."""
    block, kernel = _int(cell.get("spec block size")), _int(cell.get("kernel block size"))
    return block // kernel if block and kernel else None


# ---- what a reader is shown -----------------------------------------------------------------------------------
#: The answer columns a compact table keeps (consecutive releases with the same values merge into one range).
COMPACT_COLUMNS = (
    "runner",
    "stock",
    "answer",
    "configuration",
    "block sizes that fail",
    "block sizes that fit",
    "block sizes rejected",
    "block sizes the view refuses",
    "default block size",
    "count expression",
)


def compact_answers(frame: pd.DataFrame, whole: bool = True) -> pd.DataFrame:
    """The answers with consecutive releases of one runner and identical outcome merged into a range
    (``releases``: ``0.20.0 – 0.22.1``), in release order; ``first error`` is the first release's. With ``whole``
    false (:func:`reads_every_release`) nothing is merged."""
    if frame is None or not len(frame):
        return pd.DataFrame(columns=["releases", *COMPACT_COLUMNS, "first error"])
    frame = frame.fillna("").astype({"release": str})
    order = sorted(frame.release.unique(), key=version_key)
    out = []
    for runner in sorted(frame.runner.unique()):
        mine = (
            frame[frame.runner == runner]
            .set_index("release")
            .reindex([v for v in order if v in set(frame[frame.runner == runner].release)])
        )
        run: list[tuple[str, pd.Series]] = []
        for release, row in mine.iterrows():
            same = whole and run and all(str(run[-1][1][c]) == str(row[c]) for c in COMPACT_COLUMNS if c != "runner")
            if run and not same:
                out.append(_merged(run))
                run = []
            run.append((release, row))
        if run:
            out.append(_merged(run))
    return pd.DataFrame(out, columns=["releases", *COMPACT_COLUMNS, "first error"])


def _merged(run: list[tuple[str, pd.Series]]) -> dict:
    first, last = run[0][0], run[-1][0]
    row = {c: run[0][1][c] for c in COMPACT_COLUMNS if c != "runner"}
    row["runner"] = run[0][1]["runner"]
    row["releases"] = first if first == last else f"{first} – {last}"
    row["first error"] = run[0][1]["first error"]
    return row


def refusal_summary(runs: pd.DataFrame, whole: bool = True) -> pd.DataFrame:
    """Each way the releases refused a block size: the link, the refusing line of the release (its file; the line
    number moves between releases), one of its messages (they differ only by the block size), the block sizes and
    the releases. A link before the runner's views, or the rewritten view code's own raise (its link is
    ``allocate_kv_cache``)."""
    if runs is None or not len(runs):
        return pd.DataFrame(columns=["link", "where", "message", "block sizes", "releases"])
    own = runs["raised by"].astype(str) == RaisedBy.RELEASE if "raised by" in runs else False
    views = (runs["link"].astype(str) == ChainLink.VIEWS) & own
    stopped = runs[(runs["stop"].astype(str) == ChainStop.REJECTED) | views]
    stopped = stopped.assign(_file=[str(w).rsplit(":", 1)[0] for w in stopped["where"]])
    rows = []
    for (link_name, where), g in stopped.groupby(["link", "_file"], sort=False):
        by_block = {
            str(b): release_ranges(sorted({str(r) for r in h["release"]}, key=version_key), whole)
            for b, h in g.groupby("block size asked", sort=False)
        }
        for releases in dict.fromkeys(by_block.values()):
            blocks = sorted((b for b, r in by_block.items() if r == releases), key=_block_order)
            first = g[g["block size asked"].astype(str) == blocks[0]]
            rows.append(
                {
                    "link": link_name,
                    "where": where,
                    "message": str(first["message"].iloc[0]),
                    "block sizes": ", ".join(blocks),
                    "releases": releases,
                }
            )
    return pd.DataFrame(rows)


def failing_at(runs: pd.DataFrame, cells: pd.DataFrame, block: str) -> list[tuple[str, str]]:
    """``(release, runner)`` whose reshape fails at ``--block-size block``."""
    runs = with_run_outcomes(
        _with_columns(runs, ("release", "runner", "block size asked", "stop", "link", "message")),
        _with_columns(cells, ("release", "runner", "block size asked", "error type", "error", "sizes")),
    )
    bad = runs[(runs["block size asked"].astype(str) == block) & runs.outcome.isin(CELL_FAILURES)]
    return [(str(r.release), str(r.runner)) for _, r in bad.iterrows()]


# ---- bug 1 per runner, for a deployer ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RunnerReach:
    """One answer of bug 1 in one model runner over the releases that give it (the runners together where no
    release ships either): what a user types to get the runner, the block sizes whose view is wrong and what they
    did, and the reshape's count."""

    answer: Bug1Answer
    runners: tuple[str, ...]
    releases: tuple[str, ...]
    stock: tuple[str, ...]  # of ``releases``, those where the runner is DeepSeek-V4's default
    switches: tuple[tuple[str, tuple[str, ...]], ...]  # (the environment a user sets to get the runner, releases)
    failing: tuple[str, ...]  # block sizes asked whose view is wrong (the sweep's order)
    outcomes: tuple[CellOutcome, ...]  # what those views did
    errors: tuple[str, ...]  # the error types they raised
    definitions: tuple[str, ...]  # the reshape function (``file:qualified name``), or the rewritten view's
    counts: tuple[str, ...]  # its counts of kernel blocks per logical block, as released ("": no count)
    positions: tuple[int, ...]  # rows of the answers frame behind it
    # the rewritten view code's own refusals: (block sizes asked it refuses, the releases that refuse them)
    refusals: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Bug1Reach:
    """Bug 1 over the releases read, per runner and answer; the block size a release picks when the user passes
    none, the (release, runner) pairs whose reshape fails at it, and the block sizes the run asked for."""

    releases: tuple[str, ...]
    groups: tuple[RunnerReach, ...]
    default_block_sizes: tuple[int, ...]
    default_fails: tuple[tuple[str, str], ...]
    sweep: tuple[str, ...]  # the block sizes asked, in order (``default``: no flag)

    def answered(self, *answers: Bug1Answer) -> tuple[RunnerReach, ...]:
        return tuple(g for g in self.groups if g.answer in answers)

    def view_refusals(self) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
        """Every runner's rewritten-view refusals together: (block sizes, the releases refusing them in any
        runner), by first release."""
        merged: dict[tuple[str, ...], set[str]] = {}
        for g in self.groups:
            for sizes, releases in g.refusals:
                merged.setdefault(sizes, set()).update(releases)
        order = list(self.releases)
        ranked = sorted(merged.items(), key=lambda kv: min(order.index(r) for r in kv[1]))
        return tuple((sizes, tuple(sorted(rs, key=order.index))) for sizes, rs in ranked)


def reach(runners: pd.DataFrame, runs: pd.DataFrame | None, cells: pd.DataFrame | None) -> Bug1Reach:
    """:func:`answers` grouped per answer and runner, with what each group needs and does (from the rows)."""
    frame = answers(runners, runs, cells).fillna("").astype({"release": str})
    runs = with_run_outcomes(
        _with_columns(runs, ("release", "runner", "block size asked", "block size", "stop", "link", "message")),
        _with_columns(cells, ("release", "runner", "block size asked", "error type", "error", "sizes")),
    )
    cells = with_outcomes(
        _with_columns(cells, ("release", "runner", "block size asked", "error type", "error", "sizes"))
    )
    order = sorted(frame.release.unique(), key=version_key)
    sweep = block_order(runs) if len(runs) else []
    definitions = {
        (str(r.release), r.runner): str(r.definition)
        for _, r in runners.iterrows()
        if (_true(r.get("shipped")) or _path(r.get("path")) == KVViewPath.VIEWS) and not _empty(r.get("definition"))
    }
    keyed: dict[tuple, list[int]] = {}
    for i, r in frame.iterrows():
        answer = Bug1Answer(r.answer)
        keyed.setdefault((answer, "" if answer == Bug1Answer.NOT_SHIPPED else r.runner), []).append(i)
    groups = []
    for (answer, _), rows in keyed.items():
        mine = frame.loc[rows]
        if answer == Bug1Answer.NOT_SHIPPED:  # one group per runner set that ships nothing in the same releases
            by_release = mine.groupby("release", sort=False)["runner"].apply(lambda r: tuple(sorted(r)))
            for runner_set in dict.fromkeys(by_release):
                chosen = mine[mine.release.map(by_release) == runner_set]
                groups.append(_group(answer, runner_set, chosen, runs, cells, order, sweep, definitions))
            continue
        groups.append(_group(answer, (mine.runner.iloc[0],), mine, runs, cells, order, sweep, definitions))
    ranked = list(Bug1Answer)
    groups.sort(key=lambda g: (ranked.index(g.answer), g.runners, order.index(g.releases[0])))
    default = runs[runs["block size asked"].astype(str) == "default"]
    sizes = sorted({int(float(b)) for b in default["block size"] if not _empty(b)})
    fails = default[default.outcome.isin(CELL_FAILURES)]
    return Bug1Reach(
        tuple(order),
        tuple(groups),
        tuple(sizes),
        tuple((str(r.release), str(r.runner)) for _, r in fails.iterrows()),
        tuple(sweep),
    )


def _failures(frame: pd.DataFrame, key: set[tuple[str, str]]) -> pd.DataFrame:
    """Rows of ``frame`` (with outcomes) of the (release, runner) pairs in ``key`` whose view is wrong."""
    if not len(frame):
        return frame
    mine = pd.Series([(str(a), b) in key for a, b in zip(frame.release, frame.runner)], index=frame.index)
    return frame[mine & frame.outcome.isin(CELL_FAILURES)]


def _group(
    answer: Bug1Answer,
    runners: tuple[str, ...],
    mine: pd.DataFrame,
    runs: pd.DataFrame,
    cells: pd.DataFrame,
    order: list[str],
    sweep: list[str],
    definitions: dict[tuple[str, str], str],
) -> RunnerReach:
    releases = sorted(dict.fromkeys(mine.release), key=order.index)
    stock = [r for r in releases if mine[(mine.release == r) & mine.stock.map(_true)].shape[0]]
    switches: dict[str, list[str]] = {}
    for _, r in mine.iterrows():
        if not _true(r.stock) and str(r["reached with"]):
            switches.setdefault(str(r["reached with"]), []).append(str(r.release))
    key = set(zip(mine.release.astype(str), mine.runner))
    failed = _failures(runs, key)
    bad_cells = _failures(cells, key)
    failing = sorted({str(b) for b in failed["block size asked"]}, key=lambda b: sweep.index(b) if b in sweep else 0)
    ranked = list(CellOutcome)
    return RunnerReach(
        answer=answer,
        runners=runners,
        releases=tuple(releases),
        stock=tuple(sorted(dict.fromkeys(stock), key=order.index)),
        switches=tuple((env, tuple(sorted(dict.fromkeys(rs), key=order.index))) for env, rs in switches.items()),
        failing=tuple(failing),
        outcomes=tuple(sorted({CellOutcome(o) for o in failed.outcome}, key=ranked.index)),
        errors=tuple(sorted({str(e) for e in bad_cells.get("error type", []) if not _empty(e)})),
        definitions=tuple(
            dict.fromkeys(definitions[k] for k in sorted(key, key=lambda k: order.index(k[0])) if k in definitions)
        ),
        counts=tuple(dict.fromkeys(str(c) for c in mine["count expression"])),
        positions=tuple(int(i) for i in mine.index),
        refusals=_refusals(mine, order, sweep),
    )


def _refusals(
    mine: pd.DataFrame, order: list[str], sweep: list[str]
) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """``((block sizes the view code refuses, releases), ...)`` of a group's answers, by first release."""
    by_sizes: dict[tuple[str, ...], list[str]] = {}
    for _, r in mine.iterrows():
        sizes = [b.strip() for b in str(r.get("block sizes the view refuses", "")).split(",") if b.strip()]
        if sizes:
            key = tuple(sorted(sizes, key=lambda b: sweep.index(b) if b in sweep else 0))
            by_sizes.setdefault(key, []).append(str(r.release))
    ranked = sorted(by_sizes.items(), key=lambda kv: min(order.index(x) for x in kv[1]))
    return tuple((sizes, tuple(sorted(set(rs), key=order.index))) for sizes, rs in ranked)


# ---- the verdict ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unexplained:
    """A release's runner whose view fails otherwise than by bug 1's count (or a rewritten path's view that is
    wrong): what it answered."""

    release: str
    runner: str
    answer: Bug1Answer


@dataclass(frozen=True)
class ReshapeInReleases:
    """Bug 1 across vLLM's releases (notebook 06) as the verdict reads it: its outcome and the runners no rule
    explains (``phrases.md.j2`` words them, ``unexplained``)."""

    outcomes: tuple[Conclusion, ...]
    unexplained: tuple[Unexplained, ...]


def releases_finding(answers: pd.DataFrame) -> ReshapeInReleases:
    """Bug 1 across vLLM's releases, from the answers per release and runner: *reproduced* when a configuration a
    release accepts makes a runner's reshape fail by bug 1's count, *not reproduced* otherwise. A failing view whose
    count is not bug 1's (the rewritten path's included) is unexplained: the headline claims nothing then. PR
    #43988's own crash is the repository's model of unreleased code and takes no part."""
    frame = answers.fillna("").astype({"release": str})
    outcome = Conclusion.REPRODUCED if (frame.answer == Bug1Answer.REACHED).any() else Conclusion.NOT_REPRODUCED
    failed = frame[frame.answer.isin((Bug1Answer.OTHER_FAILURE, Bug1Answer.VIEWS_WRONG))]
    return ReshapeInReleases(
        (outcome,), tuple(Unexplained(r.release, r.runner, Bug1Answer(r.answer)) for r in failed.itertuples())
    )

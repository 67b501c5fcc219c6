"""Who is affected: per release range and path (GPU family, model, record), which kernel runs, whether it
has the bug, and whether stock vLLM hands it a column-narrowed table. Pandas only.

Inputs, all tables a run folder holds:

* the dispatch table (one row per release x GPU family x model x record: the backend the release
  selects, the gather it launches, which caches store that record by default);
* the runner sweep (one row per table the release's runner code built on its way to a gather);
* the release matrix verdicts (release x kernel x variant: a class such as ``faults`` and its first request
  counts).

:func:`runner_answers` reads the sweep: a release and runner *reach* the bug when some call-site table
has ``stride(0) != shape[-1]``, are *latent* when every configuration ran and none has, and are
*undecided* otherwise. :func:`who_is_affected` keeps the default paths (a record some cache stores by
default), joins the kernel's released verdict and the runners' answer, and merges consecutive releases
with the same outcome into ranges; each cell keeps the keys of the rows behind it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pandas as pd

from repro_studies.analysis.release_verdict import Verdict
from repro_studies.analysis.releases import version_key
from repro_studies.kernel_id import KernelId, KernelKind, from_launch_label
from repro_studies.registry import (
    GPU_FAMILY_SETTINGS,
    VERDICT_MISREADS,
    Bug2Answer,
    Cutlass,
    DispatchStatus,
    Form,
    KernelBugClass,
    TableStage,
    TableStatus,
    VerdictClass,
    WarmUpRegistered,
    names_tp_sizes,
)

ANSWER_COLUMNS = [
    "release",
    "runner",
    "answer",
    "configs",
    "configs_run",
    "call_site_tables",
    "narrowed_tables",
    "reached_by",
    "reason",
]
AFFECTED_COLUMNS = [
    "releases",
    "first",
    "last",
    "gpu_family",
    "model",
    "record",
    "topology",
    "stored_in",
    "backend",
    "kernel",
    "bug",
    "stock_vllm",
    "dispatch_rows",
    "matrix_rows",
    "runner_rows",
]
#: What ``bug`` says when the matrix has no verdict for the kernel at that release.
NOT_MEASURED = KernelBugClass.NOT_MEASURED


class NoGather(StrEnum):
    """A ``kernel`` cell of a default path that launches no gather."""

    NOT_GATHERED = "none (the backend does not gather)"
    RAISED = "the dispatcher raises"


def kernel_cell(row: pd.Series) -> KernelId | NoGather | str:
    """A dispatch row's ``kernel`` cell: the :class:`~repro_studies.kernel_id.KernelId` that launched (its label
    identified exactly), why none did, or the row's text where no kernel writes it."""
    if row["status"] == DispatchStatus.NOT_GATHERED:
        return NoGather.NOT_GATHERED
    if row["status"] == DispatchStatus.RAISED:
        return NoGather.RAISED
    label = "" if pd.isna(row["gather_kernel"]) else str(row["gather_kernel"])
    return from_launch_label(label) or label


def runner_answers(tables: pd.DataFrame) -> pd.DataFrame:
    """One row per (release, runner): reached / latent / undecided, with the numbers behind it."""
    if tables is None or tables.empty:
        return pd.DataFrame(columns=ANSWER_COLUMNS)
    out = []
    for (release, runner), g in tables.groupby(["release", "runner"], sort=False):
        if (g["status"] == TableStatus.NOT_SHIPPED).all():
            continue  # the release has no such runner: it answers nothing
        configs = list(dict.fromkeys(g["config"]))
        ran_configs = [c for c in configs if not (g[g["config"] == c]["status"] != TableStatus.RAN).any()]
        calls = g[(g["stage"] == TableStage.CALL) & (g["status"] == TableStatus.RAN)]
        narrowed = calls[calls["narrowed"].astype(bool)]
        failed = g[g["status"] != TableStatus.RAN]
        if not narrowed.empty:
            answer = Bug2Answer.REACHED
        elif failed.empty and not calls.empty:
            answer = Bug2Answer.LATENT
        else:
            answer = Bug2Answer.UNDECIDED
        first = narrowed.iloc[0] if not narrowed.empty else None
        reached_by = ""
        if first is not None:
            reached_by = f"{first['config']}: {first['group']} at {first['site']}, shape {first['shape']}"
            reached_by += f", stride(0) {first['stride0']}"
        reason = "; ".join(dict.fromkeys(f"{r['config']}: {r['how']}" for _, r in failed.iterrows()))
        out.append(
            {
                "release": release,
                "runner": runner,
                "answer": answer,
                "configs": len(configs),
                "configs_run": len(ran_configs),
                "call_site_tables": len(calls),
                "narrowed_tables": len(narrowed),
                "reached_by": reached_by,
                "reason": reason,
            }
        )
    frame = pd.DataFrame(out, columns=ANSWER_COLUMNS)
    return frame.sort_values(["release", "runner"], key=_release_sort, kind="stable").reset_index(drop=True)


def _release_sort(col: pd.Series) -> pd.Series:
    if col.name == "release":
        return col.map(version_key)
    return col


def stock_answer(answers: pd.DataFrame, release: str) -> str:
    """Both runners together: reached if either reaches, latent if both are latent, else undecided."""
    mine = answers[answers["release"] == release]["answer"].tolist() if answers is not None else []
    if Bug2Answer.REACHED in mine:
        return Bug2Answer.REACHED
    if mine and all(a == Bug2Answer.LATENT for a in mine):
        return Bug2Answer.LATENT
    return Bug2Answer.UNDECIDED


@dataclass(frozen=True)
class KernelBug:
    """A ``bug`` cell: whether the path's gather has the bug, and the released verdict that says so (``None`` where
    the matrix has none; as :meth:`~repro_studies.analysis.release_verdict.Verdict.stated`, so that paths whose cells
    read the same merge). Written ``present (faults from 2 requests)``, ``not measured``, ``—``."""

    klass: KernelBugClass
    verdict: Verdict | None = None

    def __str__(self) -> str:
        return f"{self.klass} ({self.verdict})" if self.verdict is not None else str(self.klass)


#: The cell of a path that runs no gather.
NO_KERNEL = KernelBug(KernelBugClass.NO_KERNEL)


def kernel_bug(verdicts: pd.DataFrame, release: str, kernel: str) -> tuple[KernelBug, int | None]:
    """The released kernel's matrix verdict as a :class:`KernelBug` and the verdict row's position."""
    if verdicts is None or verdicts.empty or not kernel:
        return KernelBug(NOT_MEASURED), None
    hit = verdicts[
        (verdicts["release"] == release) & (verdicts["kernel"] == kernel) & (verdicts["variant"] == Form.RELEASED)
    ]
    if hit.empty:
        return KernelBug(NOT_MEASURED), None
    verdict = Verdict.of(hit.iloc[0])
    if verdict.klass in VERDICT_MISREADS:
        klass = KernelBugClass.PRESENT
    elif verdict.klass == VerdictClass.CORRECT:
        klass = KernelBugClass.ABSENT
    else:
        klass = NOT_MEASURED
    return KernelBug(klass, verdict.stated()), int(hit.index[0])


def bug_classes(frame: pd.DataFrame) -> pd.Series:
    """The :class:`~repro_studies.registry.KernelBugClass` of each row's ``bug`` cell."""
    return frame["bug"].map(lambda bug: bug.klass)


def default_paths(dispatch: pd.DataFrame) -> pd.DataFrame:
    """The dispatch rows a default deployment runs: a record some cache stores by default, or a path whose
    link could not run or raised (those stay visible)."""
    stored = dispatch["default_record_for"].fillna("").astype(str) != ""
    broken = dispatch["status"].isin([DispatchStatus.RAISED]) & stored
    return dispatch[(stored & dispatch["status"].isin([DispatchStatus.RAN, DispatchStatus.NOT_GATHERED])) | broken]


def who_is_affected(dispatch: pd.DataFrame, answers: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """The compact table: consecutive releases with the same outcome on one path merged into a range."""
    if dispatch is None or dispatch.empty:
        return pd.DataFrame(columns=AFFECTED_COLUMNS)
    if "topology" not in dispatch:  # a table written before the selection was run per topology
        dispatch = dispatch.assign(topology="")
    rows = default_paths(dispatch).copy()
    rows["topology"] = rows["topology"].fillna("").astype(str)
    order = sorted(dict.fromkeys(dispatch["release"]), key=version_key)
    rows["kernel"] = [kernel_cell(r) for _, r in rows.iterrows()]
    bugs = [
        kernel_bug(verdicts, r["release"], str(r.get("matrix_kernel", "") or ""))
        if r["status"] == DispatchStatus.RAN
        else (NO_KERNEL, None)
        for _, r in rows.iterrows()
    ]
    rows["bug"] = [b[0] for b in bugs]
    rows["_matrix_row"] = [b[1] for b in bugs]
    rows["stock_vllm"] = [stock_answer(answers, r) for r in rows["release"]]
    rows["_runner_rows"] = [
        [int(i) for i in answers.index[answers["release"] == r]] if answers is not None and len(answers) else []
        for r in rows["release"]
    ]
    out = []
    path_cols = ["gpu_family", "model", "record", "topology"]
    outcome_cols = ["stored_in", "backend", "kernel", "bug", "stock_vllm"]
    rows["stored_in"] = rows["default_record_for"]
    for key, g in rows.groupby(path_cols, sort=False):
        g = g.assign(_pos=g["release"].map(order.index)).sort_values("_pos")
        run: list[pd.Series] = []
        for _, r in g.iterrows():
            if run and (r["_pos"] == run[-1]["_pos"] + 1 and all(r[c] == run[-1][c] for c in outcome_cols)):
                run.append(r)
                continue
            if run:
                out.append(_range(run, key, path_cols, outcome_cols))
            run = [r]
        if run:
            out.append(_range(run, key, path_cols, outcome_cols))
    families = list(dict.fromkeys(dispatch["gpu_family"]))
    frame = merge_families(pd.DataFrame(out, columns=AFFECTED_COLUMNS), families)
    frame["_first"] = frame["first"].map(version_key)
    frame["_family"] = frame["gpu_family"].map(lambda f: families.index(f.split(FAMILY_JOIN)[0]))
    frame["_model"] = frame["model"].map(list(dict.fromkeys(dispatch["model"])).index)
    frame = frame.sort_values(["_first", "_model", "_family", "record"], ascending=[True, True, True, False])
    return frame.drop(columns=["_first", "_family", "_model"]).reset_index(drop=True)


#: Joins GPU families that share one outcome in one cell.
FAMILY_JOIN = "+"


def merge_families(frame: pd.DataFrame, families: list[str]) -> pd.DataFrame:
    """Rows that differ only in the GPU family become one row naming every family (in ``families`` order)."""
    if frame.empty:
        return frame
    same = [
        "first",
        "last",
        "releases",
        "model",
        "record",
        "topology",
        "stored_in",
        "backend",
        "kernel",
        "bug",
        "stock_vllm",
    ]
    out = []
    for _, g in frame.groupby(same, sort=False):
        g = g.assign(_order=g["gpu_family"].map(families.index)).sort_values("_order")
        row = g.iloc[0].drop(labels="_order").to_dict()
        row["gpu_family"] = FAMILY_JOIN.join(g["gpu_family"])
        for col in ("dispatch_rows", "matrix_rows", "runner_rows"):
            row[col] = sorted({i for cell in g[col] for i in cell})
        out.append(row)
    return pd.DataFrame(out, columns=frame.columns)


def _range(run: list[pd.Series], key: tuple, path_cols: list[str], outcome_cols: list[str]) -> dict:
    first, last = run[0]["release"], run[-1]["release"]
    releases = [r["release"] for r in run]
    row = dict(zip(path_cols, key, strict=True))
    row.update({c: run[0][c] for c in outcome_cols})
    row["first"], row["last"] = first, last
    row["releases"] = first if first == last else f"{first} – {last}"
    # Positions of the rows behind the cell in the dispatch, verdict and runner-answer tables.
    row["dispatch_rows"] = [int(r.name) for r in run]
    row["matrix_rows"] = [int(r["_matrix_row"]) for r in run if pd.notna(r["_matrix_row"])]
    row["runner_rows"] = sorted({i for r in run for i in r["_runner_rows"]})
    del releases
    return row


# ---- the compact table ---------------------------------------------------------------------------------
#: At most this many rows in the compact table (the README's first screen).
COMPACT_LIMIT = 10
#: A bug cell in one word: its class.
PRESENT, ABSENT, NO_VERDICT = KernelBugClass.PRESENT, KernelBugClass.ABSENT, KernelBugClass.NOT_MEASURED
#: Outcome keys tried in turn, finest first, until the compact table fits :data:`COMPACT_LIMIT` rows; every key
#: starts with the bug and the stock answer, so rows that merge never mix outcomes a deployer acts on.
COMPACT_TIERS = (("model", "kernel"), ("kernel",), ("kernel_kind",), ())
COMPACT_COLUMNS = ["bug", "stock_vllm", "kernels", "models", "records", "where", "first", "last", "rows"]


def kernel_kind(kernel: KernelId | NoGather | str) -> KernelKind | NoGather | str:
    """The kind of gather a ``kernel`` cell (:func:`kernel_cell`) names, or the cell itself."""
    return kernel.kind if isinstance(kernel, KernelId) else kernel


def compact(frame: pd.DataFrame, releases: list[str] | None = None, limit: int = COMPACT_LIMIT) -> pd.DataFrame:
    """The who-is-affected table (:func:`who_is_affected`) in at most ``limit`` rows: rows with the same outcome
    (bug class, stock answer, and the finest key of :data:`COMPACT_TIERS` that fits) become one row naming every
    model, kernel and record, and per model the GPU families with the releases each runs it in (``releases``: every
    release read, in order, so that ranges join across rows); ``rows`` are the positions behind it."""
    if frame is None or not len(frame):
        return pd.DataFrame(columns=COMPACT_COLUMNS)
    f = frame.assign(_bug=bug_classes(frame), kernel_kind=frame["kernel"].map(kernel_kind))
    order = sorted(set(releases or []) | set(frame["first"]) | set(frame["last"]), key=version_key)
    for tier in COMPACT_TIERS:
        keys = ["_bug", "stock_vllm", *tier]
        if f.groupby(keys, sort=False).ngroups <= limit:
            break
    out = []
    for _, g in f.groupby(keys, sort=False):
        out.append(
            {
                "bug": g["_bug"].iloc[0],
                "stock_vllm": g["stock_vllm"].iloc[0],
                "kernels": list(dict.fromkeys(g["kernel"])),
                "models": list(dict.fromkeys(g["model"])),
                "records": sorted(dict.fromkeys(int(r) for r in g["record"]), reverse=True),
                "where": _where(g, order),
                "first": min(g["first"], key=version_key),
                "last": max(g["last"], key=version_key),
                "rows": [int(i) for i in g.index],
            }
        )
    order = [PRESENT, NO_VERDICT, ABSENT]
    table = pd.DataFrame(out, columns=COMPACT_COLUMNS)
    table["_order"] = table["bug"].map(lambda b: order.index(b) if b in order else len(order))
    table["_first"] = table["first"].map(version_key)
    table = table.sort_values(["_order", "_first"], kind="stable")
    return table.drop(columns=["_order", "_first"]).reset_index(drop=True)


def _where(group: pd.DataFrame, order: list[str]) -> list[tuple[str, list[str], str]]:
    """(model, families, releases) of a compact row: per model, the GPU families (a topology other than "any"
    kept with its family) that run the row's outcome in the same releases, with those releases as ranges of
    ``order``."""
    spans: dict[tuple[str, str], set[int]] = {}
    for _, r in group.iterrows():
        topology = r.get("topology", "")
        suffix = f" at {topology}" if names_tp_sizes(topology) else ""
        lo, hi = order.index(r["first"]), order.index(r["last"])
        for family in str(r["gpu_family"]).split(FAMILY_JOIN):
            spans.setdefault((r["model"], family + suffix), set()).update(range(lo, hi + 1))
    found: dict[tuple[str, str], list[str]] = {}
    for (model, family), positions in spans.items():
        found.setdefault((model, release_span([order[p] for p in positions], order)), []).append(family)
    out = [(model, families, releases) for (model, releases), families in found.items()]
    first = {key: min(p) for key, p in spans.items()}
    return sorted(out, key=lambda w: min(first[(w[0], f)] for f in w[1]))


# ---- where a deployer meets a bug class (the README's sentence) ----------------------------------------
@dataclass(frozen=True)
class Setting:
    """Releases that run the gather only under a setting: cutlass's states (several when they share the releases;
    none when the platform has one state) and the tensor-parallel sizes (none: every size the release tells apart)."""

    cutlass: tuple[Cutlass, ...]
    topologies: tuple[str, ...]
    releases: tuple[str, ...]


@dataclass(frozen=True)
class Exposure:
    """Platforms (``SM90``, ``ROCm``) on which one model runs a gather of one bug class: in ``always`` whatever
    cutlass's state and the tensor-parallel size, in each of ``settings`` only under that setting."""

    model: str
    platforms: tuple[str, ...]
    always: tuple[str, ...]
    settings: tuple[Setting, ...]

    @property
    def releases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.always, *(r for s in self.settings for r in s.releases)]))


def exposure(frame: pd.DataFrame, dispatch: pd.DataFrame, bug: str = PRESENT) -> list[Exposure]:
    """Where the who-is-affected rows (:func:`who_is_affected`) of bug class ``bug`` run, per model and platform:
    the releases that run it on every family of the platform (every cutlass state) at every tensor-parallel size
    the dispatch table holds for it, and the releases that run it only with some cutlass state or size. Platforms
    with the same answer share one :class:`Exposure`; models, platforms and releases keep the dispatch's order."""
    if frame is None or not len(frame) or dispatch is None or not len(dispatch):
        return []
    order = sorted(dict.fromkeys(dispatch["release"]), key=version_key)
    families = list(dict.fromkeys(dispatch["gpu_family"]))
    held: dict[tuple[str, str, str], set[str]] = {}  # (model, family, release) -> every topology of the dispatch
    for _, r in dispatch.iterrows():
        held.setdefault((r["model"], r["gpu_family"], r["release"]), set()).add(str(r.get("topology", "") or ""))
    runs: dict[tuple[str, str, str], set[str]] = {}  # (model, family, release) -> topologies that run the class
    for _, r in frame[bug_classes(frame) == bug].iterrows():
        lo, hi = order.index(r["first"]), order.index(r["last"])
        for family in str(r["gpu_family"]).split(FAMILY_JOIN):
            for release in order[lo : hi + 1]:
                runs.setdefault((r["model"], family, release), set()).add(str(r.get("topology", "") or ""))
    platforms: dict[str, list[str]] = {}
    for family in families:
        platforms.setdefault(GPU_FAMILY_SETTINGS[family].platform, []).append(family)
    out: list[Exposure] = []
    for model in dict.fromkeys(k[0] for k in runs):
        answers: dict[tuple, list[str]] = {}
        for platform, members in platforms.items():
            found = _platform_exposure(model, members, order, held, runs)
            if found is not None:
                answers.setdefault(found, []).append(platform)
        out += [Exposure(model, tuple(names), always, settings) for (always, settings), names in answers.items()]
    return out


def _platform_exposure(
    model: str,
    members: list[str],
    order: list[str],
    held: dict[tuple[str, str, str], set[str]],
    runs: dict[tuple[str, str, str], set[str]],
) -> tuple[tuple[str, ...], tuple[Setting, ...]] | None:
    """(always, settings) of one platform's families for ``model``; None where none of them runs the class."""
    states = {GPU_FAMILY_SETTINGS[f].cutlass for f in members}
    always: list[str] = []
    needs: dict[tuple[Cutlass | None, tuple[str, ...]], list[str]] = {}
    for release in order:
        full = {f: runs.get((model, f, release), set()) >= held.get((model, f, release), set()) for f in members}
        if all(full.values()) and any((model, f, release) in runs for f in members):
            always.append(release)
            continue
        for f in members:
            hit = runs.get((model, f, release))
            if not hit:
                continue
            state = GPU_FAMILY_SETTINGS[f].cutlass if len(states) > 1 else None
            sizes = () if full[f] else tuple(sorted(hit))
            needs.setdefault((state, sizes), []).append(release)
    if not always and not needs:
        return None
    merged: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Cutlass]] = {}
    for (state, sizes), releases in needs.items():
        merged.setdefault((sizes, tuple(releases)), []).extend([state] if state is not None else [])
    ranked = [Cutlass.IMPORTS, Cutlass.ABSENT, Cutlass.IMPORT_FAILS]
    settings = sorted(
        (Setting(tuple(sorted(s, key=ranked.index)), sizes, releases) for (sizes, releases), s in merged.items()),
        key=lambda s: (order.index(s.releases[0]), [ranked.index(c) for c in s.cutlass]),
    )
    return tuple(always), tuple(settings)


def stock_answers(answers: pd.DataFrame, releases: list[str]) -> dict[str, list[str]]:
    """The releases per stock answer (:func:`stock_answer`: reached, latent, undecided), in ``releases`` order."""
    out: dict[str, list[str]] = {}
    for release in releases:
        out.setdefault(stock_answer(answers, release), []).append(release)
    return out


def not_served(dispatch: pd.DataFrame) -> pd.DataFrame:
    """Per (GPU family, model), the consecutive releases whose code cannot serve the model there, with the
    release's refusal and the first dispatch row."""
    columns = ["releases", "gpu_family", "model", "refused_by", "first", "last", "dispatch_rows"]
    if dispatch is None or not len(dispatch):
        return pd.DataFrame(columns=columns)
    order = sorted(dict.fromkeys(dispatch["release"]), key=version_key)
    rows = dispatch[dispatch["status"] == DispatchStatus.NOT_SERVED]
    rows = rows.drop_duplicates(["release", "gpu_family", "model"])
    refused = rows["refused_by"] if "refused_by" in rows else pd.Series("", index=rows.index)
    rows = rows.assign(refused_by=refused.fillna("").astype(str), _pos=rows["release"].map(order.index))
    out = []
    for (family, model), g in rows.groupby(["gpu_family", "model"], sort=False):
        run: list[pd.Series] = []
        for _, r in g.sort_values("_pos").iterrows():
            if run and r["_pos"] == run[-1]["_pos"] + 1 and r["refused_by"] == run[-1]["refused_by"]:
                run.append(r)
                continue
            if run:
                out.append(_served_range(run, family, model))
            run = [r]
        if run:
            out.append(_served_range(run, family, model))
    table = pd.DataFrame(out, columns=columns)
    table["_first"] = table["first"].map(version_key)
    return table.sort_values(["_first", "model"], kind="stable").drop(columns="_first").reset_index(drop=True)


def _served_range(run: list[pd.Series], family: str, model: str) -> dict:
    first, last = run[0]["release"], run[-1]["release"]
    return {
        "releases": first if first == last else f"{first} – {last}",
        "gpu_family": family,
        "model": model,
        "refused_by": run[0]["refused_by"],
        "first": first,
        "last": last,
        "dispatch_rows": [int(r.name) for r in run],
    }


# ---- warm-ups ------------------------------------------------------------------------------------------
TRITON = KernelKind.TRITON  # a warm-up row's ``kind``


def release_span(releases: list[str], order: list[str]) -> str:
    """``0.20.0 – 0.21.0, 0.23.0``: runs of three or more releases consecutive in ``order`` (every release read,
    in order) as one span, the others named."""
    return _ranges(releases, order, " – ")


def _ranges(releases: list[str], order: list[str], dash: str = "-") -> str:
    """``0.30.0-0.33.0`` style runs of releases consecutive in ``order`` (the releases read, in order)."""
    pos = sorted(order.index(r) for r in set(releases))
    runs: list[list[int]] = []
    for p in pos:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    words = []
    for r in runs:
        words += [f"{order[r[0]]}{dash}{order[r[-1]]}"] if len(r) > 2 else [order[i] for i in r]
    return ", ".join(words)


@dataclass(frozen=True)
class ModelWarmups:
    """Where one model's Triton gather registers a warm-up (notebook 05's warm-up table): the GPU families and the
    releases (``warmed``), the families read where it never does (``never``); with no warm-up anywhere, ``read``:
    the releases read for the model."""

    model: str
    warmed: tuple[tuple[str, str], ...] = ()  # (GPU family's name, releases as ranges)
    never: tuple[str, ...] = ()
    read: str = ""


@dataclass(frozen=True)
class Warmups:
    """Which releases warm their Triton gather up, on which GPU families and for which model (the report's
    ``phrases.md.j2`` words it: ``warmups``)."""

    read: str  # every release notebook 05 read, as ranges
    models: tuple[ModelWarmups, ...]


def warmups(table: pd.DataFrame | None, family_names: dict[str, str] | None = None) -> Warmups | None:
    """Which releases warm their Triton gather up, on which GPU families and for which model, from the warm-up
    table of notebook 05 (None without one)."""
    if table is None or not len(table):
        return None
    names = family_names or {}
    order = sorted(dict.fromkeys(table["release"]), key=version_key)
    triton = table[(table["kind"] == TRITON) & (table["registered"] == WarmUpRegistered.YES)]
    models = []
    for model in dict.fromkeys(table["model"]):
        mine = triton[triton["model"] == model]
        if mine.empty:
            read = sorted(set(table[table["model"] == model]["release"]), key=version_key)
            models.append(ModelWarmups(str(model), read=_ranges(read, order)))
            continue
        by_family = mine.groupby("gpu_family", sort=False)["release"].apply(list)
        families = set(table[table["model"] == model]["gpu_family"])
        never = sorted(families - set(by_family.index), key=list(dict.fromkeys(table["gpu_family"])).index)
        warmed = tuple((names.get(f, f), _ranges(r, order)) for f, r in by_family.items())
        models.append(ModelWarmups(str(model), warmed, tuple(names.get(f, f) for f in never)))
    return Warmups(_ranges(order, order), tuple(models))

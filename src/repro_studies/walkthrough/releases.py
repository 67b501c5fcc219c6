"""Notebook 04 (vLLM releases): each function is one cell's work, returning a table or a figure.

The evidence comes from :mod:`repro_studies.upstream`; verdicts from :mod:`repro_studies.analysis.releases`; the
check rows (expected vs observed per release, kernel and variant) are appended here.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from repro.parameters import ParameterError
from repro.walkthrough.session import Progress, Session
from repro_studies.analysis import releases as verdicts_lib
from repro_studies.analysis import vllm_suite as suite_lib
from repro_studies.analysis.release_verdict import Verdict
from repro_studies.registry import Form, SuiteOutcome, VerdictClass, reads_interleaved, record_gather
from repro_studies.tables import Notebook, Table
from repro_studies.upstream import fetch, regression
from repro_studies.upstream import matrix as mx
from repro_studies.upstream import patches as patch_lib
from repro_studies.upstream import releases as idx
from repro_studies.upstream.discovery import DISPATCHER
from repro_studies.upstream.members import GATHER
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release, load_entry
from repro_studies.walkthrough import session as study_session
from repro_studies.walkthrough.downloads import fetch_missing

NOTEBOOK = Notebook.RELEASES
MATRIX, INDEX, INVENTORY, CHECKS, WRITERS = (
    Table.RELEASE_MATRIX,
    Table.RELEASE_INDEX,
    Table.KERNEL_INVENTORY,
    Table.RELEASE_CHECKS,
    Table.WRITER_CHECKS,
)
#: The repository's V4.1 gathers on each release's records: the rows, and one check per (release, gather, record).
RECORD_GATHER_ROWS, RECORD_GATHER_CHECKS = Table.RECORD_GATHERS, Table.RECORD_GATHER_CHECKS
PATCHES, SUITE, SUITE_SUMMARY = suite_lib.PATCH_TABLE, suite_lib.TEST_TABLE, suite_lib.SUMMARY_TABLE
PATCH_CHECK = "the release's diff applies with patch -p1 and gives the matrix's patched source"
#: The regression test's cases per profile: a few in the interpreter, every one on a GPU.
SUITE_SELECTIONS = regression.SELECTIONS
#: Sweep sizes per profile: the interpreter runs vLLM's (num_reqs, 128) grid at ~1.5 ms a program,
#: so the CPU sweep is short; the GPU runs the full request range of PR #55109's test.
SIZES = {
    "cpu": {"request_counts": [1, 2, 3], "block_size": 16, "seq_len_max": 48},
    "gpu": {"request_counts": [1, 2, 4, 8, 16, 32, 64, 128, 256], "block_size": 64, "seq_len_max": 1024},
}


@dataclass
class Context:
    """Notebook 04's session, the resolved release list and the matrix configuration."""

    session: Session
    releases: list[str]
    cfg: mx.MatrixConfig
    plans: list = field(default_factory=list)
    patches: dict = field(default_factory=dict)  # release -> ReleasePatch
    workdir: tempfile.TemporaryDirectory = field(
        default_factory=lambda: tempfile.TemporaryDirectory(prefix="repro-04-")
    )  # patched copies of the releases' files (nothing of vLLM in the run folder but the diffs)

    @property
    def profile(self) -> str:
        return self.session.profile.name

    @property
    def device(self) -> str:
        return self.session.profile.device

    @property
    def interpreted(self) -> bool:
        return self.session.profile.interpret

    @classmethod
    def start(cls, profile: str = "auto", run_dir: str = "", **params: Any) -> Context:
        """Validate the parameters (one line naming a bad one), then size the matrix for the profile."""
        session = study_session.start(NOTEBOOK, profile, run_dir, **params)
        p, prof = session.params, session.profile
        sizes = SIZES[prof.name]
        try:
            chosen = idx.resolve_releases(
                p.releases,
                prof.name,
                _index_versions() if p.releases == "all" else None,
                gpu_default=lambda: fetch.gpu_default_releases(download=p.download),
            )
        except idx.ReleaseListError as exc:
            raise ParameterError(str(exc)) from None
        cfg = mx.MatrixConfig(
            request_counts=list(p.matrix_request_counts or sizes["request_counts"]),
            modes=list(p.sentinel_modes),
            block_size=p.matrix_block_size or sizes["block_size"],
            seq_len_max=p.seq_len_max or sizes["seq_len_max"],
            seed=p.seed,
            device=prof.device,
            interpreted=prof.interpret,
            variants=tuple(p.variants),
            timeout_s=p.case_timeout_s or 300.0,
            max_workers=2 if prof.interpret else 8,
            share_identical=p.share_identical,
            download=p.download,
        )
        return cls(session, chosen, cfg)


def _index_versions() -> list[str] | None:
    """Every indexed release from the first that ships a DeepSeek gather (None: no registry)."""
    try:
        return fetch.derive_releases().releases
    except OSError:
        return None


def sizes_table(ctx: Context) -> pd.DataFrame:
    c = ctx.cfg
    return pd.DataFrame(
        [
            {
                "profile": ctx.profile,
                "device": ctx.device,
                "releases": ", ".join(ctx.releases),
                "request counts": ", ".join(map(str, c.request_counts)),
                "cache block size": c.block_size,
                "longest sequence": c.seq_len_max,
                "sentinel modes": ", ".join(c.modes),
                "variants": ", ".join(c.variants),
                "note": "interpreter: a short sweep (vLLM's grid costs ~1.5 ms per program on a CPU)"
                if ctx.interpreted
                else "compiled on the GPU: PR #55109's request range",
            }
        ]
    )


def release_index(ctx: Context) -> pd.DataFrame:
    """The asked releases: on the registry (when reachable), in the cache, with the wheel's hash."""
    listed, source = {}, "the parameter or the carried cache's record (downloads off: registry not asked)"
    if ctx.cfg.download:
        try:
            listed = {r.version: r for r in idx.releases_from_index(idx.fetch_index(timeout_s=20))}
            source = "registry index"
        except OSError as exc:
            source = f"registry not reachable ({type(exc).__name__}); the parameter or the cache's record"
    fetched = fetch_missing(ctx.releases, ctx.cfg.cache_root, ctx.cfg.download, listed)
    rows = []
    for v in ctx.releases:
        got = fetched.get(v) or ensure_release(v, ctx.cfg.cache_root, download=ctx.cfg.download)
        r = listed.get(v)
        miss = isinstance(got, CacheMiss)
        rows.append(
            {
                "release": v,
                "on registry": (v in listed) if listed else None,
                "uploaded": r.uploaded if r else "",
                "wheel": "" if miss else got.provenance["wheel"],
                "wheel sha256": "" if miss else got.provenance["sha256"][:16],
                "cached modules": 0 if miss else len(got.members()),
                "status": f"{got.status}: {got.reason}" if miss else "cached",
                "list from": source,
            }
        )
    ctx.session.record(INDEX, [{k.replace(" ", "_"): v for k, v in r.items()} for r in rows])
    return pd.DataFrame(rows)


def kernel_inventory(ctx: Context) -> pd.DataFrame:
    """Every gather kernel each release ships: module, row-pitch parameter, what the launch passes."""
    ctx.plans = [mx.plan_release(v, ctx.cfg) for v in ctx.releases]
    rows = []
    for p in ctx.plans:
        if p.discovery is None:
            rows.append({"release": p.version, "kernel": "", "status": p.miss.status if p.miss else ""})
            continue
        for k in p.discovery.kernels:
            rows.append(
                {
                    "release": p.version,
                    "kernel": k.label,
                    "record": k.record,
                    "layout": mx._layout_word(k.record, k.interleaved),
                    "module": k.module,
                    "pitch parameter": f"{k.pitch_param}{': tl.constexpr' if k.pitch_is_constexpr else ''}",
                    "launch passes": "; ".join(k.launch_pitch),
                    "wrapper": k.wrapper,
                    "kernel sha256": k.source_sha256[:12],
                    "status": "found",
                }
            )
        for c in p.discovery.cute:
            rows.append(
                {
                    "release": p.version,
                    "kernel": c.label,
                    "module": c.module,
                    "wrapper": "; ".join(f"{DISPATCHER} in {PurePosixPath(m).parts[2]}" for m in c.dispatchers),
                    "kernel sha256": c.source_sha256[:12],
                    "status": "found",
                }
            )
    frame = pd.DataFrame(rows)
    ctx.session.record(
        INVENTORY,
        [{k.replace(" ", "_"): ("" if pd.isna(v) else v) for k, v in r.items()} for r in frame.to_dict("records")],
    )
    return frame


def run(ctx: Context, progress: Callable[[str], None] = print) -> pd.DataFrame:
    """The matrix: every arm's sweep, rows into ``results/04-release-matrix.csv`` as they finish; a progress
    bar over the arms and one line per release when its last arm is done."""
    table = ctx.session.table(MATRIX)
    if not ctx.session.params.matrix:
        progress("release matrix skipped (matrix=false)")
        return table.frame()
    t0 = time.perf_counter()
    plans = ctx.plans or [mx.plan_release(v, ctx.cfg) for v in ctx.releases]
    left = Counter(a.release for p in plans for a in p.arms)
    for p in plans:
        if p.miss is not None:
            progress(f"{p.version}: {p.miss.status}: {p.miss.reason}")
        elif not left[p.version]:
            progress(f"{p.version}: no Triton gather to run")
    bar = Progress(sum(left.values()), "release matrix", unit="arm")
    started = {v: t0 for v in left}

    def arm_done(arm: mx.Arm) -> None:
        bar()
        left[arm.release] -= 1
        if not left[arm.release]:
            rows = sum(1 for r in table.rows if r["release"] == arm.release)
            progress(f"{arm.release}: {rows} rows in {time.perf_counter() - started[arm.release]:.0f} s")
            later = [v for v in left if left[v]]
            if later:
                started[later[0]] = time.perf_counter()

    ctx.plans = mx.run_matrix(ctx.releases, ctx.cfg, table.append, arm_done=arm_done)
    if ctx.session.run_dir:
        mx.write_rewrites(ctx.plans, Path(ctx.session.run_dir) / "rewrites")
    progress(f"matrix: {len(table.rows)} rows in {time.perf_counter() - t0:.0f} s")
    return table.frame()


def rewrites_table(ctx: Context) -> pd.DataFrame:
    """The exact rewrites applied (also written as unified diffs under ``rewrites/``)."""
    rows = []
    for p in ctx.plans:
        for (member, variant), rw in p.rewrites.items():
            rows.append(
                {
                    "release": p.version,
                    "variant": variant,
                    "module": member,
                    "edits": rw if isinstance(rw, str) else "\n".join(rw.edits),
                }
            )
    return pd.DataFrame(rows)


def checks(ctx: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Verdicts per (release, kernel, variant) and the check rows; returns (verdicts, patch effect)."""
    matrix = ctx.session.table(MATRIX)
    v = verdicts_lib.verdicts(matrix.frame() if matrix.rows else pd.DataFrame())
    inventory = ctx.session.table(INVENTORY)
    pitched = verdicts_lib.pitched_kernels(inventory.frame() if inventory.rows else pd.DataFrame())
    ctx.session.record(CHECKS, verdicts_lib.check_rows(v, pitched, ctx.cfg.request_counts))
    return v, verdicts_lib.patch_effect(v)


def record_gathers(ctx: Context) -> pd.DataFrame:
    """Each gather named by ``record_gathers`` (registry labels) over the matrix's sweep on the V4.1 pages of
    every release whose own gathers read that layout; one verdict and check per (release, gather, record)."""

    table = ctx.session.table(RECORD_GATHER_ROWS)
    entries = [record_gather(label) for label in ctx.session.params.record_gathers]
    for p in ctx.plans:
        for record, interleaved in mx.record_layouts(p):
            for entry in entries:
                if reads_interleaved(entry) != interleaved:
                    continue
                for r in mx.run_record_gather(p.version, entry.label, entry.target, record, interleaved, ctx.cfg):
                    table.append(r)
    frame = table.frame() if table.rows else pd.DataFrame(columns=mx.ROW_COLUMNS)
    per_record = [
        verdicts_lib.verdicts(g.drop(columns=["notebook"], errors="ignore")).assign(record=record)
        for record, g in frame.groupby("record", sort=True)
    ]
    found = pd.concat(per_record, ignore_index=True) if per_record else verdicts_lib.verdicts(None)
    for r in found.to_dict("records"):
        ctx.session.table(RECORD_GATHER_CHECKS).append(
            {
                "check": "the repository's V4.1 gather is correct on the release's records",
                "variant": r["kernel"],
                "num_reqs": None,
                "expected": "correct",
                "observed": Verdict.of(r).text() + (f" ({r['reason']})" if r["reason"] else ""),
                "ok": r["verdict"] == VerdictClass.CORRECT,
                "release": r["release"],
                "record": r.get("record", ""),
            }
        )
    return found


def writer_checks(ctx: Context) -> pd.DataFrame:
    """The MXFP8 insert kernel of each release that ships one, against the reference writer."""
    from repro_studies.upstream.writer_check import (  # lazy: defines a kernel, under the profile
        WriterReference,
        mxfp8_writer_rows,
    )

    table = ctx.session.table(WRITERS)
    for p in ctx.plans:
        if p.entry is None:
            continue
        mx_kernels = [k for k in p.discovery.kernels if k.record == "mxfp8"]
        if not mx_kernels:
            continue
        for r in mxfp8_writer_rows(p.entry, mx_kernels[0].interleaved, ctx.device, ctx.interpreted):
            exact = r.get("reference") == WriterReference.INTERPRETER or not ctx.interpreted
            if r["status"] != "ok":
                ok, expected, observed = False, "the writer runs", f"{r['status']}: {r['reason']}"
            elif exact:
                ok, expected = r["differing_bytes"] == 0, "0 bytes differ"
                observed = f"{r['differing_bytes']}/{r['bytes']} bytes differ"
            else:
                ok, expected = (
                    r["differing_scale_bytes"] == 0,
                    "0 scale bytes differ (value bytes may differ: the interpreter's fp8 cast is not RTNE)",
                )
                observed = (
                    f"{r['differing_scale_bytes']} scale bytes, {r['differing_value_bytes']} value bytes "
                    f"differ of {r['bytes']}"
                )
            table.append(
                {
                    "check": r["check"],
                    "variant": r.get("reference", "-"),
                    "num_reqs": None,
                    "expected": expected,
                    "observed": observed,
                    "ok": bool(ok),
                    "release": r["release"],
                    "layout": r.get("layout", ""),
                    "differing_bytes": r.get("differing_bytes"),
                    "bytes": r.get("bytes"),
                }
            )
    return table.frame()


def patches(ctx: Context) -> pd.DataFrame:
    """Each release's patch: written to ``patches/vllm-<version>.diff``, applied with ``patch -p1`` to a copy of
    the release's files, the patched files compared with the rewrite the matrix ran; one check row each."""
    folder = Path(ctx.session.run_dir or ctx.workdir.name) / "patches"
    rows = []
    for v in ctx.releases:
        got = patch_lib.prepare(
            v,
            folder,
            Path(ctx.workdir.name) / "patched",
            ctx.cfg.cache_root,
            ctx.cfg.download,
            expected=_matrix_rewrites(ctx, v),
        )
        ctx.patches[v] = got
        rows.append(got.row())
    ctx.session.record(PATCHES, rows)
    ctx.session.record(
        CHECKS,
        [
            {
                "check": PATCH_CHECK,
                "variant": Form.PATCHED,
                "num_reqs": None,
                "expected": f"{patch_lib.PatchStatus.APPLIED}",
                "observed": f"{r['status']}, launch sites: {r['launch_sites']}"
                + (f"; {r['reason']}" if r["reason"] else ""),
                "ok": r["status"] == patch_lib.PatchStatus.APPLIED,
                "release": r["release"],
            }
            for r in rows
        ],
    )
    return pd.DataFrame(rows)


def _matrix_rewrites(ctx: Context, version: str) -> dict[str, str] | None:
    """The patched source the matrix ran for ``version`` (member -> text), None when it ran no patched arm."""
    for p in ctx.plans:
        if p.version == version:
            found = {m: rw.rewritten for (m, variant), rw in p.rewrites.items() if variant == Form.PATCHED}
            return {m: t for m, t in found.items() if isinstance(t, str)} or None
    return None


def _files_key(version: str, cache_root: Path | None) -> tuple | None:
    """Identity of everything the test can import from a release: the hash of every file of the gather set."""
    entry = load_entry(version, cache_root)
    if entry is None:
        return None
    files = entry.provenance.get("files", {})
    return tuple(sorted((m, files[m]["sha256"]) for m in entry.members_of(GATHER)))


def upstream_test(ctx: Context, progress: Callable[[str], None] = print) -> pd.DataFrame:
    """``upstream-tests/``'s regression test, run as it is against each release: on its own files, and on the
    copy ``patch -p1`` patched, each run a pytest process (two at a time in the interpreter, four on a GPU).
    Releases whose cached files are all identical share one run. Returns the summary per (release, form);
    every test's row is in ``results/04-upstream-test.csv``, one line per release says how it went."""
    selection = SUITE_SELECTIONS[ctx.profile]
    table = ctx.session.table(SUITE)
    forms = (Form.RELEASED, Form.PATCHED)
    fixed: dict[tuple[str, str], list[dict]] = {}  # (release, form) -> rows that need no run
    owner: dict[tuple[str, str], tuple] = {}  # (release, form) -> the run it takes its rows from
    jobs: dict[tuple, tuple[str, str, Path | None]] = {}  # run key -> (release, form, patched files)
    for v in ctx.releases:
        key, patch = _files_key(v, ctx.cfg.cache_root), ctx.patches.get(v)
        for form in forms:
            if key is None:
                fixed[(v, form)] = [_not_run(f"vLLM {v} is not in the module cache")]
            elif form == Form.PATCHED and (patch is None or not patch.ok):
                why = "no patch was prepared" if patch is None else f"patch {patch.status}: {patch.reason}"
                fixed[(v, form)] = [_not_run(why)]
            else:
                owner[(v, form)] = (key, form)
                jobs.setdefault((key, form), (v, form, patch.patched_files if form == Form.PATCHED else None))
    bar = Progress(max(1, len(jobs)), "regression test", unit="run")

    def run(job: tuple[str, str, Path | None]) -> list[dict]:
        v, form, files = job
        got = regression.run_suite(v, form, files, ctx.cfg.cache_root, selection, ctx.interpreted, say=progress)
        bar()
        return [
            {**r, "processes": got.processes, "note": got.note, "params": json.dumps(got.params.get(r["test"], {}))}
            for r in got.rows
        ]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2 if ctx.interpreted else 4) as pool:
        ran = dict(zip(jobs, pool.map(run, jobs.values())))
    for v in ctx.releases:
        said = []
        for form in forms:
            if (v, form) in fixed:
                rows = fixed[(v, form)]
            else:
                origin = jobs[owner[(v, form)]][0]
                rows = [{**r, "shared_from": origin if origin != v else None} for r in ran[owner[(v, form)]]]
            rows = [{"release": v, "form": form, **{c: r.get(c) for c in suite_lib.TEST_COLUMNS}} for r in rows]
            for r in rows:
                table.append(r)
            said.append(f"{form} {suite_lib.summary(pd.DataFrame(rows)).iloc[0]['outcome']}")
        progress(f"{v}: {', '.join(said)}")
    progress(f"regression test: {len(jobs)} pytest runs in {time.perf_counter() - t0:.0f} s")
    summary = suite_lib.summary(table.frame())
    ctx.session.record(SUITE_SUMMARY, summary.to_dict("records"))
    ctx.session.record(CHECKS, suite_lib.check_rows(summary))
    return summary


def _not_run(reason: str) -> dict:
    return {"test": regression.TEST_FILE, "outcome": SuiteOutcome.NOT_RUN.value, "message": reason}


def unexpected_tests(ctx: Context) -> pd.DataFrame:
    """The regression test's tests that did not do what they had to (an empty table when every one did)."""
    table = ctx.session.table(SUITE)
    columns = ["release", "form", "test", "outcome", "expected", "message"]
    if not table.rows:
        return pd.DataFrame(columns=columns)
    tests = suite_lib.with_expectations(table.frame())
    return tests.loc[~tests["ok"], columns].reset_index(drop=True)


def patch_text(ctx: Context, version: str) -> str:
    """The diff written for ``version`` (or why there is none)."""
    got = ctx.patches.get(version)
    if got is None:
        return f"no patch was prepared for vLLM {version}"
    if got.diff_path is None:
        return f"vLLM {version}: {got.status}: {got.reason}"
    return got.diff_path.read_text()

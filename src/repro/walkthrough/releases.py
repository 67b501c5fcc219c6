"""Notebook 04 (vLLM releases): each function is one cell's work, returning a table or a figure.

The evidence comes from :mod:`repro.upstream`; verdicts from :mod:`repro.analysis.releases`; the
check rows (expected vs observed per release, kernel and variant) are appended here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro.analysis import releases as verdicts_lib
from repro.parameters import ParameterError
from repro.upstream import matrix as mx
from repro.upstream import releases as idx
from repro.upstream.patcher import PATCHED, PATCHED_CONSTEXPR, RELEASED
from repro.upstream.wheelcache import CacheMiss, ensure_release
from repro.walkthrough.session import Session

NOTEBOOK = "04-upstream-releases"
MATRIX, INDEX, INVENTORY, CHECKS, WRITERS = (
    f"04-{n}" for n in ("release-matrix", "release-index", "kernel-inventory", "release-checks", "writer-checks")
)
#: Sweep sizes per profile: the interpreter runs vLLM's (num_reqs, 128) grid at ~1.5 ms a program,
#: so the CPU sweep is short; the GPU runs the full request range of PR #55109's test.
SIZES = {
    "cpu": {"request_counts": [1, 2, 3], "block_size": 16, "seq_len_max": 48},
    "gpu": {"request_counts": [1, 2, 4, 8, 16, 32, 64, 128, 256], "block_size": 64, "seq_len_max": 1024},
}
VARIANTS = (RELEASED, PATCHED, PATCHED_CONSTEXPR)


@dataclass
class Context:
    """Notebook 04's session, the resolved release list and the matrix configuration."""

    session: Session
    releases: list[str]
    cfg: mx.MatrixConfig
    plans: list = field(default_factory=list)

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
        session = Session.start(NOTEBOOK, profile, run_dir, **params)
        p, prof = session.params, session.profile
        sizes = SIZES[prof.name]
        try:
            chosen = idx.resolve_releases(
                p["releases"], prof.name, _index_versions() if p["releases"] == "all" else None
            )
        except idx.ReleaseListError as exc:
            raise ParameterError(str(exc)) from None
        cfg = mx.MatrixConfig(
            request_counts=list(p["matrix_request_counts"] or sizes["request_counts"]),
            modes=list(p["sentinel_modes"]),
            block_size=p["matrix_block_size"] or sizes["block_size"],
            seq_len_max=p["seq_len_max"] or sizes["seq_len_max"],
            seed=p["seed"],
            device=prof.device,
            interpreted=prof.interpret,
            variants=tuple(p["variants"]),
            timeout_s=p["case_timeout_s"] or 300.0,
            max_workers=2 if prof.interpret else 8,
            share_identical=p["share_identical"],
            download=p["download"],
        )
        return cls(session, chosen, cfg)


def _index_versions() -> list[str] | None:
    try:
        return [r.version for r in idx.releases_from_index(idx.fetch_index(timeout_s=20))]
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
    listed, source = {}, "committed default list (downloads off: registry not asked)"
    if ctx.cfg.download:
        try:
            listed = {r.version: r for r in idx.releases_from_index(idx.fetch_index(timeout_s=20))}
            source = "registry index"
        except OSError as exc:
            source = f"registry not reachable ({type(exc).__name__}); committed default list"
    rows = []
    for v in ctx.releases:
        got = ensure_release(v, ctx.cfg.cache_root, download=ctx.cfg.download)
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
                    "kernel": "cutedsl:" + ",".join(c.classes),
                    "module": c.module,
                    "wrapper": "; ".join(d.split(":")[1] + " in " + d.split("/")[2] for d in c.dispatchers),
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
    """The matrix: every arm's sweep, rows into ``results/04-release-matrix.csv`` as they finish."""
    table = ctx.session.table(MATRIX)
    t0 = time.perf_counter()
    ctx.plans = mx.run_matrix(ctx.releases, ctx.cfg, table.append, progress=progress)
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


def writer_checks(ctx: Context) -> pd.DataFrame:
    """The MXFP8 insert kernel of each release that ships one, against the reference writer."""
    from repro.upstream.writer_check import mxfp8_writer_rows  # lazy: defines a kernel, under the profile

    table = ctx.session.table(WRITERS)
    for p in ctx.plans:
        if p.entry is None:
            continue
        mx_kernels = [k for k in p.discovery.kernels if k.record == "mxfp8"]
        if not mx_kernels:
            continue
        for r in mxfp8_writer_rows(p.entry, mx_kernels[0].interleaved, ctx.device, ctx.interpreted):
            exact = r.get("reference", "").startswith("the interpreter") or not ctx.interpreted
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

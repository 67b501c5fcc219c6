"""What notebook 01's evidence means: check rows for the reshape overrun (vLLM #43988) and its
sibling (vLLM #54877), from plain numbers and the tables the reshape evidence produces.

The seed (``data/seeds/pr-43988.json``) holds the PR's figures; they appear here only as the
expected side of a comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from repro.bugs import Bug
from repro.core.analysis.checks import truthy
from repro.registry import ReshapeVariant

#: The check of the sibling overrun (vLLM #54877) among notebook 01's checks.
SPLIT_CHECK = f"fixed reshape over-asks by the split ratio ({Bug.SPLIT})"
#: Check names runs recorded before they were written as today's, by today's: the reader renames them.
RECORDED_CHECKS = {"fixed reshape over-asks by the split ratio (vLLM #54877)": SPLIT_CHECK}


def at_reported_geometry(seed: Mapping[str, Any], block_size: int, pool_bytes: int) -> bool:
    return block_size == seed["configuration"]["block_size"] and pool_bytes == seed["reported"]["available_bytes"]


def expected_figures(
    seed: Mapping[str, Any],
    block_size: int,
    pool_bytes: int,
    *,
    compress_ratio: int,
    page_bytes: int,
    storage_rows: int,
    row_elems: int,
) -> Mapping[str, Any]:
    """What the checks expect, shaped like the seed: at the PR's geometry (its block size and pool) the
    PR's own figures; at any other geometry the same figures from the spec arithmetic the PR states
    (kernel blocks per logical block = compress_ratio, buggy view = pages x compress_ratio blocks of one
    padded page each), so an edited parameters cell still gets meaningful checks. Byte-sized elements."""
    if at_reported_geometry(seed, block_size, pool_bytes):
        return seed
    pages = pool_bytes // page_bytes
    blocks = pages * compress_ratio
    strides = [page_bytes, row_elems, 1]
    return {
        "source": "spec arithmetic",
        "reported": {
            "sizes": [blocks, storage_rows, row_elems],
            "strides": strides,
            "required_bytes": (blocks - 1) * page_bytes + (storage_rows - 1) * row_elems + row_elems,
            "available_bytes": pool_bytes,
            "fixed_required_bytes": (pages - 1) * page_bytes + storage_rows * row_elems,
            "buggy_blocks_per_kv_block": compress_ratio,
            "fixed_blocks_per_kv_block": 1,
        },
    }


def blocks_per_kv_block_checks(observed: Mapping[str, int], seed: Mapping[str, Any]) -> list[dict]:
    """Kernel blocks per logical block, per variant, against the PR's (128 buggy, 1 fixed)."""
    rows = []
    for variant, value in observed.items():
        want = seed["reported"][f"{variant}_blocks_per_kv_block"]
        rows.append(
            {
                "check": "kernel blocks per logical block",
                "variant": variant,
                "expected": str(want),
                "observed": str(value),
                "ok": value == want,
            }
        )
    return rows


def reported_error_checks(error: Mapping[str, Any] | None, seed: Mapping[str, Any]) -> list[dict]:
    """Every number of the captured PyTorch error against the PR's quoted error.

    ``error`` holds ``sizes``, ``strides``, ``required_bytes`` and ``available_bytes`` (None: the
    reshape did not raise, which fails every row).
    """
    rep = seed["reported"]
    pairs = [
        ("sizes", list(error["sizes"]) if error else None, rep["sizes"]),
        ("strides", list(error["strides"]) if error else None, rep["strides"]),
        ("required bytes", error["required_bytes"] if error else None, rep["required_bytes"]),
        ("available bytes", error["available_bytes"] if error else None, rep["available_bytes"]),
    ]
    return [
        {
            "check": f"buggy reshape raises the reported error: {what}",
            "variant": ReshapeVariant.BUGGY,
            "expected": str(want),
            "observed": str(got),
            "ok": got == want,
        }
        for what, got, want in pairs
    ]


def identification_check(matches: Sequence[str]) -> dict:
    """The reported sizes and strides must identify exactly one cache group."""
    return {
        "check": "the reported error identifies one cache group",
        "variant": ReshapeVariant.BUGGY,
        "expected": "exactly one group",
        "observed": ", ".join(matches) or "none",
        "ok": len(matches) == 1,
    }


def fixed_fit_checks(
    view_built: bool, required_bytes: int, unused_tail_bytes: int, page_tail_bytes: int, seed: Mapping[str, Any]
) -> list[dict]:
    """The fixed view is built, needs the PR's byte count, and leaves only the last page's padding."""
    want = seed["reported"]["fixed_required_bytes"]
    return [
        {
            "check": "fixed reshape required bytes",
            "variant": ReshapeVariant.FIXED,
            "expected": str(want),
            "observed": str(required_bytes),
            "ok": view_built and required_bytes == want,
        },
        {
            "check": "unused tail is the last page's padding",
            "variant": ReshapeVariant.FIXED,
            "expected": str(page_tail_bytes),
            "observed": str(unused_tail_bytes),
            "ok": unused_tail_bytes == page_tail_bytes,
        },
    ]


def aliasing_check(payload_mismatches: int, padding_bytes_changed: int) -> dict:
    return {
        "check": "fixed view aliases exactly the right bytes",
        "variant": ReshapeVariant.FIXED,
        "expected": "0 payload mismatches, 0 padding bytes changed",
        "observed": f"{payload_mismatches} mismatches, {padding_bytes_changed} padding changed",
        "ok": payload_mismatches == 0 and padding_bytes_changed == 0,
    }


def group_checks(frame: pd.DataFrame) -> list[dict]:
    """Fixed fits everywhere; buggy asks for compress_ratio x the fixed view's blocks for compressed
    padded specs (so it does not fit) and is identical to fixed for uncompressed specs."""
    checks = []
    for group, g in frame.groupby("cache group", sort=False):
        buggy = g[g.variant == ReshapeVariant.BUGGY].iloc[0]
        fixed = g[g.variant == ReshapeVariant.FIXED].iloc[0]
        checks.append(
            {
                "check": f"fixed reshape fits: {group}",
                "variant": ReshapeVariant.FIXED,
                "expected": "fits",
                "observed": f"{fixed.required_bytes} of {fixed.available_bytes} bytes",
                "ok": bool(fixed.fits),
            }
        )
        if buggy.compress_ratio > 1:
            ratio = buggy["shape"][0] / fixed["shape"][0]
            checks.append(
                {
                    "check": f"buggy overrun equals the compress ratio: {group}",
                    "variant": ReshapeVariant.BUGGY,
                    "expected": f"{buggy.compress_ratio}x the fixed view's blocks, does not fit",
                    "observed": f"{ratio:g}x the blocks ({buggy.overrun:.6f}x the pool), fits={bool(buggy.fits)}",
                    "ok": (not buggy.fits) and buggy["shape"][0] == buggy.compress_ratio * fixed["shape"][0],
                }
            )
        else:
            same = buggy["shape"] == fixed["shape"] and buggy["strides"] == fixed["strides"]
            checks.append(
                {
                    "check": f"uncompressed spec unchanged by the fix: {group}",
                    "variant": ReshapeVariant.BUGGY,
                    "expected": f"fixed's shape {fixed['shape']} and strides {fixed['strides']}",
                    "observed": f"{buggy['shape']} {buggy['strides']}",
                    "ok": bool(same),
                }
            )
    return checks


def split_ratio_shown(split_ratio: int, overrun: float, fits: bool) -> bool:
    """vLLM #54877 at one split ratio: the fixed reshape fits at ratio 1 and over-asks by the ratio above it."""
    return bool(fits) if split_ratio == 1 else (not fits and round(overrun) == split_ratio)


def split_ratio_checks(split: pd.DataFrame) -> list[dict]:
    """vLLM #54877: the fixed reshape fits at split ratio 1 and over-asks by the ratio above it (the numbers are
    the rows of the split table, ``01-reshape-split``)."""
    rows = []
    for _, r in split.iterrows():
        rows.append(
            {
                "check": SPLIT_CHECK,
                "variant": ReshapeVariant.FIXED,
                "expected": "fits" if r.split_ratio == 1 else f"does not fit, about {r.split_ratio}x",
                "observed": f"{r.overrun:.4f}x, fits={bool(r.fits)}",
                "ok": split_ratio_shown(r.split_ratio, r.overrun, r.fits),
            }
        )
    return rows


def split_overruns(split: pd.DataFrame) -> tuple[float, ...]:
    """The fixed view's overrun (required / pool, to the checks' four places) at each split ratio above 1 where
    vLLM #54877 shows, from the split table."""
    fits = split["fits"].map(truthy)
    ratios, overruns = pd.to_numeric(split["split_ratio"]), pd.to_numeric(split["overrun"])
    return tuple(
        round(float(o), 4)
        for k, o, f in zip(ratios, overruns, fits)
        if k > 1 and split_ratio_shown(int(k), float(o), bool(f))
    )


def split_overruns_recorded_before_the_table(checks: pd.DataFrame) -> tuple[float, ...]:
    """:func:`split_overruns` of a run recorded before notebook 01 wrote the split table: such a run holds the
    numbers only in its split checks' ``observed`` text (``2.0000x, fits=False``), written by
    :func:`split_ratio_checks`; this is the one place that reads that text back."""
    split = checks[checks["check"] == SPLIT_CHECK]
    overruns = [float(str(obs).split("x")[0]) for obs, ok in zip(split["observed"], split["ok"]) if truthy(ok)]
    return tuple(o for o in overruns if o > 1.05)


def required_bytes_formula(
    shape: Sequence[int], strides: Sequence[int], required: int, pool_bytes: int, compress_ratio: int
) -> str:
    """as_strided's bound spelled out for the reader, with the numbers of one plan."""
    return (
        f"as_strided needs `(sizes - 1) . strides + 1` = ({shape[0]:,} - 1) x {strides[0]} + ({shape[1]} - 1) x "
        f"{strides[1]} + ({shape[2]} - 1) x {strides[2]} + 1 = **{required:,} bytes** against a pool of "
        f"**{pool_bytes:,}**: {required / pool_bytes:.5f}x, i.e. the compress ratio {compress_ratio} less the "
        f"unused tail of the last page."
    )


def group_summary(groups: pd.DataFrame) -> pd.DataFrame:
    """One row per cache group: compress ratio, the buggy view's kernel blocks per logical block and its
    extent over the pool, the fixed view's extent and whether it fits (the per-variant table, pivoted)."""
    rows = []
    for group, g in groups.groupby("cache group", sort=False):
        buggy = g[g["variant"] == ReshapeVariant.BUGGY].iloc[0]
        fixed = g[g["variant"] == ReshapeVariant.FIXED].iloc[0]
        rows.append(
            {
                "cache group": group,
                "compress ratio": int(buggy["compress_ratio"]),
                "buggy: blocks per block": int(buggy["blocks_per_kv_block"]),
                "buggy: required / pool": float(buggy["required_bytes"]) / float(buggy["available_bytes"]),
                "fixed: required / pool": float(fixed["required_bytes"]) / float(fixed["available_bytes"]),
                "fixed fits": str(fixed["fits"]).lower() == "true",
            }
        )
    return pd.DataFrame(rows)

"""The evidence notebook 01 shows: the real error, the fitting fix, and every cache group's figures.

Each function returns plain data or check rows (``check, variant, expected, observed, ok``), so the
notebook only narrates and plots, and the tests exercise the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from repro.reshape.plan import VARIANTS, ReshapePlan, StorageError, parse_storage_error, plan_reshape, reshape_kv_cache
from repro.geometry.specs import KVCacheSpec, group_kernel_block_size


@dataclass
class Attempt:
    plan: ReshapePlan
    error_text: str | None
    error: StorageError | None
    view: torch.Tensor | None


def attempt_reshape(spec: KVCacheSpec, pool: torch.Tensor, variant: str, kernel_block_size: int | None = None) -> Attempt:
    """Run the variant's reshape over a real pool and keep PyTorch's error text if it raises."""
    kbs = group_kernel_block_size(spec) if kernel_block_size is None else kernel_block_size
    plan = plan_reshape(spec, pool.numel(), kbs, variant)
    try:
        view = reshape_kv_cache(pool, spec, kbs, variant)
    except RuntimeError as exc:
        text = str(exc)
        try:
            parsed = parse_storage_error(text)
        except ValueError:
            parsed = None
        return Attempt(plan, text, parsed, None)
    return Attempt(plan, None, None, view)


def compare_with_seed(error: StorageError | None, seed: dict) -> list[dict]:
    """Check rows: every number of the captured error against the PR's quoted error."""
    rep = seed["reported"]
    pairs = [
        ("sizes", list(error.sizes) if error else None, rep["sizes"]),
        ("strides", list(error.strides) if error else None, rep["strides"]),
        ("required bytes", error.required_bytes if error else None, rep["required_bytes"]),
        ("available bytes", error.available_bytes if error else None, rep["available_bytes"]),
    ]
    return [{"check": f"buggy reshape raises the reported error: {what}", "variant": "buggy",
             "expected": str(want), "observed": str(got), "ok": got == want} for what, got, want in pairs]


def group_rows(specs: list[KVCacheSpec], num_blocks: int) -> pd.DataFrame:
    """Every cache group x variant over a pool of ``num_blocks`` pages: required vs available."""
    rows = []
    for spec in specs:
        pool_bytes = num_blocks * spec.page_size_bytes
        for variant in VARIANTS:
            plan = plan_reshape(spec, pool_bytes, group_kernel_block_size(spec), variant)
            rows.append({
                "cache group": spec.name, "variant": variant, "compress_ratio": spec.compress_ratio,
                "padded": plan.padded, "kernel_block_size": plan.kernel_block_size,
                "blocks_per_kv_block": plan.blocks_per_logical_block, "shape": list(plan.shape),
                "strides": list(plan.strides), "required_bytes": plan.required_bytes,
                "available_bytes": pool_bytes, "fits": plan.fits, "overrun": round(plan.overrun_factor, 6),
            })
    return pd.DataFrame(rows)


def group_checks(frame: pd.DataFrame) -> list[dict]:
    """Fixed fits everywhere; buggy over-asks by the compress ratio for compressed padded specs
    (to within the last page's padding) and is identical to fixed for uncompressed specs."""
    checks = []
    for group, g in frame.groupby("cache group", sort=False):
        buggy = g[g.variant == "buggy"].iloc[0]
        fixed = g[g.variant == "fixed"].iloc[0]
        checks.append({"check": f"fixed reshape fits: {group}", "variant": "fixed", "expected": "fits",
                       "observed": f"{fixed.required_bytes} of {fixed.available_bytes} bytes",
                       "ok": bool(fixed.fits)})
        if buggy.compress_ratio > 1:
            ratio = buggy["shape"][0] / fixed["shape"][0]
            checks.append({"check": f"buggy overrun equals the compress ratio: {group}", "variant": "buggy",
                           "expected": f"{buggy.compress_ratio}x the fixed view's blocks, does not fit",
                           "observed": f"{ratio:g}x the blocks ({buggy.overrun:.6f}x the pool), fits={bool(buggy.fits)}",
                           "ok": (not buggy.fits) and _extent_ratio_ok(g, buggy.compress_ratio)})
        else:
            same = buggy["shape"] == fixed["shape"] and buggy["strides"] == fixed["strides"]
            checks.append({"check": f"uncompressed spec unchanged by the fix: {group}", "variant": "buggy",
                           "expected": f"fixed's shape {fixed['shape']} and strides {fixed['strides']}",
                           "observed": f"{buggy['shape']} {buggy['strides']}", "ok": bool(same)})
    return checks


def _extent_ratio_ok(g: pd.DataFrame, ratio: int) -> bool:
    """buggy blocks = ratio x fixed blocks exactly (the byte ratio differs only by the last tail)."""
    buggy = g[g.variant == "buggy"].iloc[0]
    fixed = g[g.variant == "fixed"].iloc[0]
    return buggy["shape"][0] == ratio * fixed["shape"][0]


def split_ratio_rows(spec: KVCacheSpec, kernel_block_sizes: list[int], num_blocks: int) -> pd.DataFrame:
    """vLLM issue #54877: a padded uncompressed spec split into smaller kernel blocks.

    The padded branch strides one whole page per kernel block, so even the fixed reshape asks for
    the split ratio times the pool.
    """
    rows = []
    pool_bytes = num_blocks * spec.page_size_bytes
    for kbs in kernel_block_sizes:
        plan = plan_reshape(spec, pool_bytes, kbs, "fixed")
        rows.append({"cache group": spec.name, "kernel_block_size": kbs, "split_ratio": spec.block_size // kbs,
                     "shape": list(plan.shape), "strides": list(plan.strides),
                     "required_bytes": plan.required_bytes, "available_bytes": pool_bytes,
                     "fits": plan.fits, "overrun": round(plan.overrun_factor, 6)})
    return pd.DataFrame(rows)


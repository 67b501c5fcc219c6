"""The evidence notebook 01 shows: the real error, the fitting fix, and every cache group's figures.

Each function returns plain data or tables; what they mean (the check rows) is decided in
:mod:`repro.core.analysis.reshape`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from repro.core.geometry.specs import KVCacheSpec, group_kernel_block_size
from repro.core.reshape.plan import (
    ReshapePlan,
    StorageError,
    parse_storage_error,
    plan_reshape,
    reshape_kv_cache,
)
from repro.registry import ReshapeVariant


@dataclass
class Attempt:
    plan: ReshapePlan
    error_text: str | None
    error: StorageError | None
    view: torch.Tensor | None


def attempt_reshape(
    spec: KVCacheSpec, pool: torch.Tensor, variant: str, kernel_block_size: int | None = None
) -> Attempt:
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


def group_rows(specs: list[KVCacheSpec], num_blocks: int) -> pd.DataFrame:
    """Every cache group x variant over a pool of ``num_blocks`` pages: required vs available."""
    rows = []
    for spec in specs:
        pool_bytes = num_blocks * spec.page_size_bytes
        for variant in ReshapeVariant:
            plan = plan_reshape(spec, pool_bytes, group_kernel_block_size(spec), variant)
            rows.append(
                {
                    "cache group": spec.name,
                    "variant": variant,
                    "compress_ratio": spec.compress_ratio,
                    "padded": plan.padded,
                    "kernel_block_size": plan.kernel_block_size,
                    "blocks_per_kv_block": plan.blocks_per_logical_block,
                    "shape": list(plan.shape),
                    "strides": list(plan.strides),
                    "required_bytes": plan.required_bytes,
                    "available_bytes": pool_bytes,
                    "fits": plan.fits,
                    "overrun": round(plan.overrun_factor, 6),
                }
            )
    return pd.DataFrame(rows)


def split_ratio_rows(spec: KVCacheSpec, kernel_block_sizes: list[int], num_blocks: int) -> pd.DataFrame:
    """vLLM issue #54877: a padded uncompressed spec split into smaller kernel blocks.

    The padded branch strides one whole page per kernel block, so even the fixed reshape asks for
    the split ratio times the pool.
    """
    rows = []
    pool_bytes = num_blocks * spec.page_size_bytes
    for kbs in kernel_block_sizes:
        plan = plan_reshape(spec, pool_bytes, kbs, "fixed")
        rows.append(
            {
                "cache group": spec.name,
                "kernel_block_size": kbs,
                "split_ratio": spec.block_size // kbs,
                "shape": list(plan.shape),
                "strides": list(plan.strides),
                "required_bytes": plan.required_bytes,
                "available_bytes": pool_bytes,
                "fits": plan.fits,
                "overrun": round(plan.overrun_factor, 6),
            }
        )
    return pd.DataFrame(rows)

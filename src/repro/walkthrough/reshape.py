"""Notebook 01, step by step: the reshape overrun of vLLM PR #43988 and the sibling issue #54877.

Each method is what one notebook cell calls; it runs the repository's model (:mod:`repro.core.reshape`: PR
#43988's code state, which no vLLM release shipped, and its fix), turns it into check rows with
:mod:`repro.core.analysis.reshape`, records them (every row says ``code`` = ``model``) and returns what the cell
shows. It runs offline on the repository's own code; what each release's own code does is notebook 06's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from repro import seeds
from repro.core.analysis import reshape as rules
from repro.core.geometry.specs import KVCacheSpec, catalogue_table, dsv4_catalogue, group_kernel_block_size
from repro.core.reshape import plan as model
from repro.core.reshape.evidence import Attempt, attempt_reshape, group_rows, split_ratio_rows
from repro.core.reshape.plan import ReshapePlan, check_aliasing, identify_groups, plan_reshape
from repro.parameters import ReshapeParameters
from repro.registry import CODE_MODEL, ReshapeVariant
from repro.tables import Facts, Notebook, Table
from repro.walkthrough.session import Session, Setup
from repro.walkthrough.source import Source, source_of

NOTEBOOK = Notebook.RESHAPE
CHECKS = Table.RESHAPE_CHECKS
GROUPS = Table.RESHAPE_GROUPS
SPLIT = Table.RESHAPE_SPLIT
#: The cache whose numbers the PR reports and the uncompressed cache the sibling issue splits.
REPORTED_CACHE = "C128A KV"
SPLIT_CACHE = "SWA KV"
SPLIT_RATIOS = (1, 2, 4)


@dataclass
class ReshapeWalkthrough:
    session: Session
    specs: dict[str, KVCacheSpec]
    pool_bytes: int
    seed: dict[str, Any] = field(default_factory=lambda: seeds.load(43988))
    #: The figures the checks compare with: the PR's at its geometry, the spec arithmetic elsewhere.
    expected: Mapping[str, Any] = field(default_factory=dict)
    plans: dict[str, ReshapePlan] = field(default_factory=dict)
    buggy: Attempt | None = None
    fixed: Attempt | None = None
    matches: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls, profile: str = "auto", run_dir: str = "", params: ReshapeParameters | None = None
    ) -> ReshapeWalkthrough:
        """Check the parameters (one line naming a bad one, before any work), then set up the catalogue."""
        params = params or ReshapeParameters()
        session = Session.start(NOTEBOOK, profile, run_dir, params)
        block_size, pool_bytes = params.block_size, params.pool_bytes
        specs = {s.name: s for s in dsv4_catalogue(block_size)}
        walk = cls(session, specs, 0)
        walk.pool_bytes = pool_bytes or walk.seed["reported"]["available_bytes"]
        c = walk.cache
        walk.expected = rules.expected_figures(
            walk.seed,
            block_size,
            walk.pool_bytes,
            compress_ratio=c.compress_ratio,
            page_bytes=c.page_size_bytes,
            storage_rows=c.storage_block_size,
            row_elems=c.row_elems,
        )
        return walk

    @property
    def cache(self) -> KVCacheSpec:
        return self.specs[REPORTED_CACHE]

    def setup(self) -> Setup:
        """The profile, its device and the pool (``phrases.setup`` words it)."""
        return Setup(self.session.profile.name, str(self.session.profile.device), pool_bytes=self.pool_bytes)

    def record_model(self, name: str, rows: list[dict]) -> None:
        """Rows of the repository's model, marked as such (``code`` = ``model``)."""
        self.session.record(name, [{"code": CODE_MODEL, **row} for row in rows])

    def catalogue(self) -> pd.DataFrame:
        """DeepSeek-V4's cache groups, every figure computed from the spec formulas."""
        return catalogue_table(list(self.specs.values()))

    @staticmethod
    def model_lines() -> list[Source]:
        """The repository's model of PR #43988's code state: the count it changed and the padded page's view."""
        return [
            source_of(model.kernel_blocks_per_logical_block, mark="// kernel_block_size"),
            source_of(model.effective_kernel_block_size, mark="storage_block_size"),
            source_of(model.reshape_kv_cache, mark="torch.as_strided"),
        ]

    def arithmetic(self) -> tuple[pd.DataFrame, str]:
        """Both variants' plans for the reported cache over the pool, and as_strided's bound spelled out."""
        self.session.cell("arithmetic")
        c = self.cache
        self.plans = {v: plan_reshape(c, self.pool_bytes, group_kernel_block_size(c), v) for v in ReshapeVariant}
        table = pd.DataFrame(
            [
                {
                    "variant": v,
                    "num_blocks (pages)": p.num_blocks,
                    "kernel_block_size": p.kernel_block_size,
                    "blocks_per_kv_block": p.blocks_per_logical_block,
                    "shape": list(p.shape),
                    "strides": list(p.strides),
                    "required_bytes": p.required_bytes,
                    "available_bytes": p.pool_bytes,
                    "fits": p.fits,
                }
                for v, p in self.plans.items()
            ]
        )
        self.record_model(
            CHECKS,
            rules.blocks_per_kv_block_checks(
                {v: p.blocks_per_logical_block for v, p in self.plans.items()}, self.expected
            ),
        )
        b = self.plans["buggy"]
        return table, rules.required_bytes_formula(
            b.shape, b.strides, b.required_bytes, self.pool_bytes, c.compress_ratio
        )

    def buggy_reshape(self) -> str:
        """The buggy reshape over a real pool on the profile's device; PyTorch's own error text."""
        self.session.cell("buggy_reshape")
        pool = torch.empty(self.pool_bytes, dtype=torch.uint8, device=self.session.profile.device)
        self.buggy = attempt_reshape(self.cache, pool, "buggy")
        err = self.buggy.error
        parsed = (
            None
            if err is None
            else {
                "sizes": err.sizes,
                "strides": err.strides,
                "required_bytes": err.required_bytes,
                "available_bytes": err.available_bytes,
            }
        )
        self.record_model(CHECKS, rules.reported_error_checks(parsed, self.expected))
        return self.buggy.error_text or "(the buggy reshape did not raise)"

    def identify(self) -> list[str]:
        """Cache groups whose buggy view over the reported pool has exactly the reported numbers."""
        self.session.cell("identify")
        kbs = {name: group_kernel_block_size(s) for name, s in self.specs.items()}
        self.matches = identify_groups(self.buggy.error, list(self.specs.values()), kbs) if self.buggy.error else []
        self.record_model(CHECKS, [rules.identification_check(self.matches)])
        return self.matches

    def fixed_reshape(self) -> tuple[str, pd.DataFrame]:
        """The fixed view over the same pool, its unused tail, and a write-through aliasing check."""
        self.session.cell("fixed_reshape")
        c = self.cache
        pool = torch.empty(self.pool_bytes, dtype=torch.uint8, device=self.session.profile.device)
        self.fixed = fixed = attempt_reshape(c, pool, "fixed")
        fp = fixed.plan
        tail = c.page_size_bytes - c.real_page_size_bytes
        self.record_model(
            CHECKS,
            rules.fixed_fit_checks(
                fixed.view is not None, fp.required_bytes, fp.unused_tail_bytes, tail, self.expected
            ),
        )
        alias = check_aliasing(pool, fixed.view, c) if fixed.view is not None else None
        if alias is not None:
            self.record_model(CHECKS, [rules.aliasing_check(alias.payload_mismatches, alias.padding_bytes_changed)])
        text = (
            f"fixed view {tuple(fp.shape)} strides {fp.strides}: requires {fp.required_bytes:,} of "
            f"{self.pool_bytes:,} bytes; unused tail {fp.unused_tail_bytes} = page {c.page_size_bytes} - payload "
            f"{c.real_page_size_bytes}"
        )
        return text, pd.DataFrame([alias.__dict__] if alias is not None else [])

    def every_group(self) -> pd.DataFrame:
        """Every cache group x variant over pools of the same number of logical blocks."""
        self.session.cell("every_group")
        groups = group_rows(list(self.specs.values()), self.plans["fixed"].num_blocks)
        self.record_model(
            GROUPS,
            [{k: str(v) if isinstance(v, list) else v for k, v in row.items()} for row in groups.to_dict("records")],
        )
        self.record_model(CHECKS, rules.group_checks(groups))
        return groups

    def split_ratio(self) -> pd.DataFrame:
        """vLLM #54877: the padded uncompressed cache split into smaller kernel blocks, fixed code."""
        self.session.cell("split_ratio")
        spec = self.specs[SPLIT_CACHE]
        split = split_ratio_rows(spec, [spec.block_size // r for r in SPLIT_RATIOS], self.plans["fixed"].num_blocks)
        self.record_model(
            SPLIT,
            [
                {"variant": ReshapeVariant.FIXED, **{k: str(v) if isinstance(v, list) else v for k, v in row.items()}}
                for row in split.to_dict("records")
            ],
        )
        self.record_model(CHECKS, rules.split_ratio_checks(split))
        return split

    def finish(self) -> pd.DataFrame:
        """The notebook's facts for the report (PyTorch's error as raised, the cache groups it names); the checks
        table to show (model and releases)."""
        # numbers, never sentences: the report words the per-group table (01-reshape-groups.csv) through its templates
        self.session.write_facts(
            Facts.RESHAPE, {"error_text": self.buggy.error_text, "identified_groups": self.matches}
        )
        return self.session.table(CHECKS).frame()

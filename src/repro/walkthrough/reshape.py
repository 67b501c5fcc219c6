"""Notebook 01, step by step: the reshape overrun of vLLM PR #43988 and the sibling issue #54877.

Each method is what one notebook cell calls; it runs the evidence (:mod:`repro.reshape` for the
repository's model, :mod:`repro.upstream.reshape` for each release's own ``_reshape_kv_cache``), turns it
into check rows with :mod:`repro.analysis.reshape` and :mod:`repro.analysis.reshape_releases`, records
them (every row says which code ran: ``model`` or ``vLLM <version>``), and returns what the cell shows.
"""

from __future__ import annotations

import difflib
import inspect
import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from IPython.display import HTML
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from repro import seeds
from repro.analysis import reshape as rules
from repro.analysis import reshape_releases as release_rules
from repro.geometry.specs import KVCacheSpec, catalogue_table, dsv4_catalogue, group_kernel_block_size
from repro.parameters import ParameterError
from repro.registry import CODE_MODEL
from repro.reshape.evidence import Attempt, attempt_reshape, group_rows, split_ratio_rows
from repro.reshape.plan import VARIANTS, ReshapePlan, check_aliasing, identify_groups, plan_reshape
from repro.tables import Facts, Notebook, Table
from repro.upstream import kernel_blocks
from repro.upstream import reshape as vllm_reshape
from repro.upstream.releases import ReleaseListError
from repro.walkthrough.session import Session

NOTEBOOK = Notebook.RESHAPE
CHECKS = Table.RESHAPE_CHECKS
GROUPS = Table.RESHAPE_GROUPS
#: One row per release x cache group x kernel block size handed in: vLLM's own function on real pools.
RELEASES = Table.RESHAPE_RELEASES
RELEASE_CHECKS = Table.RESHAPE_RELEASE_CHECKS
#: Pages of the pool every cache group but the reported one gets (real memory, written through the view).
OTHER_GROUP_PAGES = 64
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
    #: vLLM releases whose own ``_reshape_kv_cache`` runs (notebook parameter ``reshape_releases``)
    releases: list[str] = field(default_factory=list)
    download: bool = True
    loaded: dict[str, vllm_reshape.ReleaseReshape] = field(default_factory=dict)
    #: Each release's own kernel block size selection (releases whose function takes kernel_block_sizes).
    selections: dict[str, kernel_blocks.Selection] = field(default_factory=dict)
    verdicts: pd.DataFrame | None = None

    @classmethod
    def start(
        cls,
        profile: str = "auto",
        run_dir: str = "",
        block_size: int = 256,
        pool_bytes: int = 0,
        reshape_releases: str = "default",
        download: bool = True,
    ) -> ReshapeWalkthrough:
        """Validate the parameters (one line naming a bad one, before any work), then set up the catalogue."""
        session = Session.start(
            NOTEBOOK,
            profile,
            run_dir,
            block_size=block_size,
            pool_bytes=pool_bytes,
            reshape_releases=reshape_releases,
            download=download,
        )
        specs = {s.name: s for s in dsv4_catalogue(block_size)}
        walk = cls(session, specs, 0, download=download)
        walk.releases = resolve_reshape_releases(reshape_releases, session.profile.name, download)
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

    def describe(self) -> str:
        releases = ", ".join(self.releases) or "none"
        return (
            f"profile {self.session.profile.name}, device {self.session.profile.device}, pool {self.pool_bytes:,} "
            f"bytes; vLLM's own _reshape_kv_cache from releases: {releases}"
        )

    def record_model(self, name: str, rows: list[dict]) -> None:
        """Rows of the repository's model, marked as such (``code`` = ``model``)."""
        self.session.record(name, [{"code": CODE_MODEL, **row} for row in rows])

    def catalogue(self) -> pd.DataFrame:
        """DeepSeek-V4's cache groups, every figure computed from the spec formulas."""
        return catalogue_table(list(self.specs.values()))

    def arithmetic(self) -> tuple[pd.DataFrame, str]:
        """Both variants' plans for the reported cache over the pool, and as_strided's bound spelled out."""
        c = self.cache
        self.plans = {v: plan_reshape(c, self.pool_bytes, group_kernel_block_size(c), v) for v in VARIANTS}
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
        kbs = {name: group_kernel_block_size(s) for name, s in self.specs.items()}
        self.matches = identify_groups(self.buggy.error, list(self.specs.values()), kbs) if self.buggy.error else []
        self.record_model(CHECKS, [rules.identification_check(self.matches)])
        return self.matches

    def fixed_reshape(self) -> tuple[str, pd.DataFrame]:
        """The fixed view over the same pool, its unused tail, and a write-through aliasing check."""
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
        groups = group_rows(list(self.specs.values()), self.plans["fixed"].num_blocks)
        self.record_model(
            GROUPS,
            [{k: str(v) if isinstance(v, list) else v for k, v in row.items()} for row in groups.to_dict("records")],
        )
        self.record_model(CHECKS, rules.group_checks(groups))
        return groups

    def split_ratio(self) -> pd.DataFrame:
        """vLLM #54877: the padded uncompressed cache split into smaller kernel blocks, fixed code."""
        spec = self.specs[SPLIT_CACHE]
        split = split_ratio_rows(spec, [spec.block_size // r for r in SPLIT_RATIOS], self.plans["fixed"].num_blocks)
        self.record_model(CHECKS, rules.split_ratio_checks(split))
        return split

    # -----------------------------------------------------------------------------------------
    # vLLM's own function, release by release.

    def vllm_releases(self) -> pd.DataFrame:
        """Fetch (once) and load each release's ``_reshape_kv_cache`` and spec classes, and run its runner's own
        kernel block size selection where the function takes ``kernel_block_sizes``; what was found."""
        rows = []
        specs = list(self.specs.values())
        for version in self.releases:
            got = self.loaded[version] = vllm_reshape.load_release(version, download=self.download)
            selection = None
            if got.status == vllm_reshape.RAN and kernel_blocks.PARAMETER in got.parameters:
                selection = kernel_blocks.select_for_release(
                    version, specs, vllm_reshape.build_spec, download=self.download
                )
                self.selections[version] = selection
            rows.append(
                {
                    "code": got.code,
                    "status": got.status,
                    "parameters": ", ".join(got.parameters),
                    "kernel blocks per logical block": "; ".join(vllm_reshape.blocks_per_kv_block_lines(got.source())),
                    "reads storage_block_size": bool(got.function) and not got.compressed_path(),
                    "kernel block sizes chosen by": kernel_blocks.chosen_by(got, selection),
                    "selection ran": ", ".join(selection.calls) if selection else "",
                    "placeholder modules": len(selection.placeholders) if selection else None,
                    "reason": got.reason,
                }
            )
            if selection is not None:
                self.record_selection(selection)
        return pd.DataFrame(rows)

    def record_selection(self, selection: kernel_blocks.Selection) -> None:
        """What stood in for vLLM during a release's selection, for the run folder."""
        if self.session.run_dir:
            folder = Path(self.session.run_dir) / "reshape"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"kernel-block-selection-{selection.version}.json").write_text(
                json.dumps(kernel_blocks.provenance(selection), indent=2) + "\n"
            )

    def _first_with(self, attribute: str) -> vllm_reshape.ReleaseReshape | None:
        """The first loaded release whose count of kernel blocks divides ``<spec>.<attribute>``."""
        for got in self.loaded.values():
            lines = vllm_reshape.blocks_per_kv_block_lines(got.source()) if got.function else []
            if any(f".{attribute} //" in line for line in lines):
                return got
        return None

    def vllm_sources(self) -> list[Any]:
        """For the first loaded release of each count (``block_size // kernel_block_size``, then
        ``storage_block_size // kernel_block_size``): its function from that count to its ``torch.as_strided``
        call, highlighted."""
        found = [self._first_with(a) for a in ("block_size", "storage_block_size")]
        return [source_excerpt(got) for got in found if got is not None]

    def vllm_expression_diff(self) -> str:
        """The count expression of the first release dividing ``block_size`` against the first dividing
        ``storage_block_size``, as a diff (the rest of the two functions differs too: see the run folder)."""
        old, new = self._first_with("block_size"), self._first_with("storage_block_size")
        if old is None or new is None:
            return "(the releases asked for do not include one of each count expression)"
        diff = expression_diff(old, new)
        if self.session.run_dir:
            folder = Path(self.session.run_dir) / "reshape"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"_reshape_kv_cache-{old.version}-vs-{new.version}.diff").write_text(function_diff(old, new))
        return diff

    def vllm_on_the_pool(self) -> pd.DataFrame:
        """Every loaded release x cache group x kernel block size handed in, over real pools: the reported
        cache over the reported pool, every other group over a pool of its own pages. Returns the verdicts."""
        at_pr = rules.at_reported_geometry(self.seed, self.cache.block_size, self.pool_bytes)
        pools = {
            name: torch.empty(
                self.pool_bytes if name == REPORTED_CACHE else OTHER_GROUP_PAGES * spec.page_size_bytes,
                dtype=torch.uint8,
                device=self.session.profile.device,
            )
            for name, spec in self.specs.items()
        }
        table = self.session.table(RELEASES)
        aliasing: dict = {}
        for got in self.loaded.values():
            for name, spec in self.specs.items():
                selection = self.selections.get(got.version)
                for kbs in vllm_reshape.kernel_block_inputs(got, spec, selection):
                    table.append(
                        vllm_reshape.observe(got, spec, pools[name], kbs, at_pr and name == REPORTED_CACHE, aliasing)
                    )
        frame = table.frame()
        if len(frame):
            self.session.record(RELEASE_CHECKS, release_rules.release_checks(frame, self.seed, REPORTED_CACHE))
            self.verdicts = release_rules.release_verdicts(frame)
        else:
            self.verdicts = pd.DataFrame()
        return self.verdicts

    def vllm_reported_rows(self) -> pd.DataFrame:
        """The reported cache's rows: per release and kernel block size, the view or PyTorch's error."""
        frame = self.session.table(RELEASES).frame()
        if not len(frame):
            return frame
        rows = frame[frame["cache group"] == REPORTED_CACHE]
        shown = ["code", "kbs input", "kbs chosen by", "kernel_block_size", "status", "outcome", "sizes", "strides"]
        return rows[[*shown, "error"]]

    def finish(self) -> pd.DataFrame:
        """The notebook's facts for the report; the checks table to show (model and releases)."""
        b, f = self.plans["buggy"], self.fixed.plan
        self.session.write_facts(
            Facts.RESHAPE,
            {
                "error_text": self.buggy.error_text,
                "identified_groups": self.matches,
                "headline": rules.reshape_headline(self.pool_bytes, b.required_bytes, f.required_bytes),
                "releases": release_rules.verdict_sentence(self.verdicts) if self.verdicts is not None else "",
            },
        )
        checks = [self.session.table(CHECKS).frame()]
        if RELEASE_CHECKS in self.session.tables:
            checks.append(self.session.table(RELEASE_CHECKS).frame())
        return pd.concat(checks, ignore_index=True)


def resolve_reshape_releases(selection: str, profile: str, download: bool) -> list[str]:
    """The ``reshape_releases`` parameter as release numbers (one line naming it when it cannot be used)."""
    if selection == "none":
        return []
    if selection == "default":
        return list(vllm_reshape.CPU_RELEASES) if profile == "cpu" else []
    if selection == "all":
        if not download:
            raise ParameterError("reshape_releases: 'all' needs the registry and download is false; accepted: a list")
        try:
            return vllm_reshape.releases_with_function()
        except (OSError, ReleaseListError) as exc:
            raise ParameterError(f"reshape_releases: 'all' needs the registry ({exc}); accepted: a list") from None
    return list(dict.fromkeys(x.strip() for x in selection.split(",") if x.strip()))


def source_excerpt(got: vllm_reshape.ReleaseReshape) -> Any:
    """The release's function from its count of kernel blocks to its ``as_strided`` call, with those two
    highlighted and the cached file's line numbers (an HTML object a notebook displays)."""

    lines, first = inspect.getsourcelines(got.function)
    text = textwrap.dedent("".join(lines))
    counts = vllm_reshape.count_sites(text)
    marked = [range(c.first_line, c.last_line + 1) for c in counts]
    # the padded branch's view: the first as_strided call after the count (later ones are Mamba's state views)
    after = [(a, b) for a, b in vllm_reshape.as_strided_sites(text) if a > counts[0].last_line]
    marked += [range(a, b + 1) for a, b in after[:1]]
    numbers = sorted({n for r in marked for n in r})
    start, end = max(1, numbers[0] - 2), numbers[-1] + 1
    formatter = HtmlFormatter(
        linenos="inline", linenostart=first + start - 1, hl_lines=[n - start + 1 for n in numbers], noclasses=True
    )
    excerpt = "".join(text.splitlines(keepends=True)[start - 1 : end])
    title = f"<p><b>vLLM {got.version}</b>, <code>{vllm_reshape.RESHAPE_FUNCTION_MEMBER}</code></p>"
    return HTML(title + highlight(excerpt, PythonLexer(), formatter))


def expression_diff(old: vllm_reshape.ReleaseReshape, new: vllm_reshape.ReleaseReshape) -> str:
    """The two releases' counts of kernel blocks per logical block (the expression), as a unified diff,
    with the statement each sits in."""
    a, b = vllm_reshape.count_sites(old.source()), vllm_reshape.count_sites(new.source())
    diff = difflib.unified_diff(
        [c.expression for c in a], [c.expression for c in b], f"vLLM {old.version}", f"vLLM {new.version}", lineterm=""
    )
    context = [f"vLLM {old.version}: {c.statement}" for c in a] + [f"vLLM {new.version}: {c.statement}" for c in b]
    return "\n".join([*diff, "", *context])


def function_diff(old: vllm_reshape.ReleaseReshape, new: vllm_reshape.ReleaseReshape) -> str:
    """The whole ``_reshape_kv_cache`` of two releases, as a unified diff."""
    return "".join(
        difflib.unified_diff(
            old.source().splitlines(keepends=True),
            new.source().splitlines(keepends=True),
            f"vLLM {old.version}/{vllm_reshape.RESHAPE_FUNCTION_MEMBER}",
            f"vLLM {new.version}/{vllm_reshape.RESHAPE_FUNCTION_MEMBER}",
        )
    )

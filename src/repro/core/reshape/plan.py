"""The repository's model of the V2 model runner's ``_reshape_kv_cache`` for one layer: PR #43988's two states.

``buggy`` is vLLM's main branch between PR #38831 and PR #43988 (a code state notebook 06 finds in no release):
the compressed spec's kernel block size is overridden to its storage block size while kernel blocks per logical
block are still counted as ``block_size // kernel_block_size``. ``fixed`` is PR #43988: the same override, counted as
``storage_block_size // kernel_block_size``. The two variants differ in one expression,
:func:`kernel_blocks_per_logical_block`. Everything else follows vLLM: ``num_blocks`` is the pool's page count, and a
padded spec gets an ``as_strided`` view whose block dimension steps one padded page while an unpadded one gets a
plain ``view``. What each release's own code does is notebook 06's to find.

vLLM obtains the contiguous strides by allocating an empty float32 tensor of the full shape
(about 18.4 GB for the buggy C128A shape); here they are computed arithmetically, so planning is
O(1) in memory for any pool size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from repro.core.geometry.specs import KVCacheSpec
from repro.registry import ReshapeVariant


def kernel_blocks_per_logical_block(spec: KVCacheSpec, kernel_block_size: int, variant: str) -> int:
    """THE line PR #43988 changed: kernel blocks that make up one logical (scheduler) block."""
    if variant == ReshapeVariant.BUGGY:
        return spec.block_size // kernel_block_size  # vLLM after #38831, before #43988
    if variant == ReshapeVariant.FIXED:
        return spec.storage_block_size // kernel_block_size  # vLLM #43988
    raise ValueError(f"variant must be one of {tuple(v.value for v in ReshapeVariant)}, got {variant!r}")


def effective_kernel_block_size(spec: KVCacheSpec, group_kernel_block_size: int) -> int:
    """PR #43988's code state (both variants): compressed specs are overridden to their storage block size; others
    keep the group's."""
    return spec.storage_block_size if spec.compressed else group_kernel_block_size


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


def as_strided_required_elems(shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> int:
    """What ``torch.as_strided`` checks: ``offset + sum((size - 1) * stride) + 1`` elements."""
    if any(s == 0 for s in shape):
        return 0
    return offset + sum((n - 1) * st for n, st in zip(shape, strides)) + 1


@dataclass(frozen=True)
class ReshapePlan:
    """The view one variant would build over a pool, and whether it fits."""

    spec: KVCacheSpec
    variant: str
    pool_bytes: int
    num_blocks: int
    kernel_block_size: int
    blocks_per_logical_block: int
    shape: tuple[int, int, int]
    strides: tuple[int, int, int]
    padded: bool

    @property
    def itemsize(self) -> int:
        return self.spec.itemsize

    @property
    def required_bytes(self) -> int:
        """Bytes of storage the view needs (as_strided's bound, or ``view``'s exact numel)."""
        if self.padded:
            return as_strided_required_elems(self.shape, self.strides) * self.itemsize
        return math.prod(self.shape) * self.itemsize

    @property
    def fits(self) -> bool:
        if self.padded:
            return self.required_bytes <= self.pool_bytes
        return self.required_bytes == self.pool_bytes

    @property
    def overrun_factor(self) -> float:
        return self.required_bytes / self.pool_bytes

    @property
    def unused_tail_bytes(self) -> int:
        """Bytes of the pool past the last element the view can address (the last page's padding)."""
        return self.pool_bytes - self.required_bytes


def plan_reshape(spec: KVCacheSpec, pool_bytes: int, group_kernel_block_size: int, variant: str) -> ReshapePlan:
    """Shape, strides and branch of the view, without touching any memory."""
    if pool_bytes % spec.page_size_bytes:
        raise ValueError(f"pool_bytes {pool_bytes} is not a whole number of {spec.page_size_bytes}-byte pages")
    num_blocks = pool_bytes // spec.page_size_bytes
    kbs = effective_kernel_block_size(spec, group_kernel_block_size)
    per_logical = kernel_blocks_per_logical_block(spec, kbs, variant)
    shape = spec.kv_cache_shape(num_blocks * per_logical, kbs)
    strides = contiguous_strides(shape)
    padded = spec.page_size_padded is not None
    if padded:
        strides = (spec.page_size_bytes // spec.itemsize,) + strides[1:]
    return ReshapePlan(spec, variant, pool_bytes, num_blocks, kbs, per_logical, shape, strides, padded)


def reshape_kv_cache(raw: torch.Tensor, spec: KVCacheSpec, group_kernel_block_size: int, variant: str) -> torch.Tensor:
    """Reinterpret a raw byte pool as the backend's typed view, as PR #43988's V2 runner code does.

    Raises PyTorch's own ``RuntimeError`` when the view does not fit (the bug).
    """
    if raw.dtype not in (torch.int8, torch.uint8) or raw.dim() != 1:
        raise ValueError(f"raw must be a 1-D byte tensor, got {raw.dtype} with shape {tuple(raw.shape)}")
    plan = plan_reshape(spec, raw.numel(), group_kernel_block_size, variant)
    typed = raw.view(spec.torch_dtype)
    if plan.padded:
        return torch.as_strided(typed, size=plan.shape, stride=plan.strides)
    return typed.view(plan.shape)


# --------------------------------------------------------------------------------------------
# PyTorch's out-of-bounds message, parsed.

_STORAGE_ERROR = re.compile(
    r"setStorage: sizes \[(?P<sizes>[\d, ]*)\], strides \[(?P<strides>[\d, ]*)\].*?"
    r"requiring a storage size of (?P<required>\d+) are out of bounds for storage of size (?P<available>\d+)",
    re.S,
)


@dataclass(frozen=True)
class StorageError:
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    required_bytes: int
    available_bytes: int


def parse_storage_error(message: str) -> StorageError:
    """Numbers of a ``setStorage ... out of bounds`` error (PyTorch's text or the PR's quote)."""
    m = _STORAGE_ERROR.search(message)
    if m is None:
        raise ValueError(f"not a setStorage out-of-bounds error: {message[:200]!r}")

    def ints(s: str) -> tuple[int, ...]:
        return tuple(int(x) for x in s.replace(" ", "").split(",") if x)

    return StorageError(ints(m["sizes"]), ints(m["strides"]), int(m["required"]), int(m["available"]))


def identify_groups(
    error: StorageError, specs: list[KVCacheSpec], group_kernel_block_sizes: dict[str, int]
) -> list[str]:
    """Cache groups whose buggy view over the reported pool has exactly the reported sizes and strides."""
    matches = []
    for spec in specs:
        try:
            plan = plan_reshape(spec, error.available_bytes, group_kernel_block_sizes[spec.name], "buggy")
        except ValueError:
            continue  # the pool is not a whole number of this group's pages
        if plan.shape == error.sizes and plan.strides == error.strides and plan.required_bytes == error.required_bytes:
            matches.append(spec.name)
    return matches


# --------------------------------------------------------------------------------------------
# Evidence that a view that fits aliases exactly the right bytes.


@dataclass(frozen=True)
class AliasingReport:
    pages: int
    payload_bytes_checked: int
    payload_mismatches: int
    padding_bytes_checked: int
    padding_bytes_changed: int

    @property
    def ok(self) -> bool:
        return self.payload_mismatches == 0 and self.padding_bytes_changed == 0


def check_aliasing(raw: torch.Tensor, view: torch.Tensor, spec: KVCacheSpec, sentinel: int = 0xA5) -> AliasingReport:
    """Write a pattern through ``view`` into a sentinel-filled ``raw`` pool and read the raw pages back.

    Page i must hold logical block i's stored rows in its first ``real_page_size_bytes`` bytes,
    and its padding tail must still hold the sentinel.
    """
    raw.fill_(sentinel)
    # the payload pattern 1, 2, ..., 251, 1, 2, ...: tiled, not computed per element
    cycle = torch.arange(1, 252, device=view.device, dtype=torch.int16).to(view.dtype)
    pattern = cycle.repeat(-(-view.numel() // cycle.numel()))[: view.numel()]
    view.copy_(pattern.view(view.shape))
    pages = raw.numel() // spec.page_size_bytes
    page_view = raw.view(pages, spec.page_size_bytes)
    payload = page_view[:, : spec.real_page_size_bytes].reshape(-1).view(spec.torch_dtype)
    expected = pattern.view(-1)
    padding = page_view[:, spec.real_page_size_bytes :]
    if payload.numel() != expected.numel():
        raise ValueError(f"view holds {expected.numel()} elements but the pages hold {payload.numel()}")
    return AliasingReport(
        pages=pages,
        payload_bytes_checked=payload.numel() * spec.itemsize,
        payload_mismatches=int((payload.view(-1) != expected).sum()),
        padding_bytes_checked=padding.numel(),
        padding_bytes_changed=int((padding != sentinel).sum()),
    )

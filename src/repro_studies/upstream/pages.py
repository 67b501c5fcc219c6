"""Whether a block-first view keeps every logical block's kernel blocks inside that block's own page: notebook 06
reads each release's reshaped views through this check (:mod:`repro_studies.upstream.reshape_chain`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PageCheck:
    """How a block-first view of a pool maps onto its pages.

    Logical block ``b``'s page is ``page_bytes`` bytes at ``page_offset + b * page_stride`` of the pool (one page
    after another, or one slot of a packed row of several layers' pages); its first ``payload_bytes`` hold the
    block's rows, the rest is padding. The runner splits the block into kernel blocks ``b * m ... b * m + m - 1``
    (``m`` kernel blocks per logical block: the view's first dimension over the page count); each must address
    bytes of page ``b`` only, and together the view must address exactly the pages' payloads.
    """

    pages: int
    kernel_blocks: int
    kernel_blocks_per_page: int | None  # None: the view's blocks are not a whole multiple of the pages
    blocks_outside_page: int  # logical blocks one of whose kernel blocks addresses bytes outside its page
    first_outside: tuple[int, int] | None  # (logical block, kernel block) of the first such address
    bytes_addressed: int  # bytes of the pool the view addresses (written through it)
    payload_bytes_total: int  # bytes the pages' payloads hold
    payload_bytes_missed: int  # payload bytes the view does not address
    padding_bytes_addressed: int  # bytes outside every payload the view addresses

    @property
    def inside_pages(self) -> bool:
        return self.kernel_blocks_per_page is not None and self.blocks_outside_page == 0

    @property
    def exact(self) -> bool:
        """Every block inside its page, and exactly the payload bytes addressed."""
        return self.inside_pages and self.payload_bytes_missed == 0 and self.padding_bytes_addressed == 0


def kernel_block_span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements from a kernel block's first addressed element to its last, plus one (dimension 0 excluded)."""
    if any(s == 0 for s in shape[1:]):
        return 0
    return sum((n - 1) * st for n, st in zip(shape[1:], strides[1:])) + 1


def page_check(
    view: torch.Tensor,
    pool: torch.Tensor,
    pages: int,
    page_bytes: int,
    payload_bytes: int,
    page_offset: int = 0,
    page_stride: int | None = None,
) -> PageCheck:
    """Check a block-first view of ``pool`` against its pages: arithmetic per kernel block (where its bytes lie)
    and written through the view (which bytes of the real pool it reaches).

    The pool is filled with a sentinel, the view is zeroed, and the bytes that changed are compared with the
    pages' payloads; the pool's contents are destroyed.
    """
    stride = page_stride or page_bytes
    itemsize = view.element_size()
    shape, strides, offset = tuple(view.shape), tuple(view.stride()), view.storage_offset()
    kernel_blocks = shape[0] if shape else 0
    per_page = kernel_blocks // pages if pages and kernel_blocks % pages == 0 else None
    span = kernel_block_span(shape, strides) * itemsize
    outside, first = 0, None
    for b in range(pages if per_page is not None else 0):
        lo = page_offset + b * stride
        for k in range(b * per_page, (b + 1) * per_page):
            start = (offset + k * strides[0]) * itemsize
            if span and (start < lo or start + span > lo + page_bytes):
                outside += 1
                first = first or (b, k)
                break
    raw = pool.view(torch.uint8)
    raw.fill_(0xA5)
    view.zero_()
    written = raw == 0
    expected = torch.zeros(raw.numel(), dtype=torch.bool, device=raw.device)
    for b in range(pages):
        lo = page_offset + b * stride
        expected[lo : lo + payload_bytes] = True
    addressed, payload = int(torch.count_nonzero(written)), int(torch.count_nonzero(expected))
    hit = int(torch.count_nonzero(written & expected))
    return PageCheck(
        pages=pages,
        kernel_blocks=kernel_blocks,
        kernel_blocks_per_page=per_page,
        blocks_outside_page=outside,
        first_outside=first,
        bytes_addressed=addressed,
        payload_bytes_total=payload,
        payload_bytes_missed=payload - hit,
        padding_bytes_addressed=addressed - hit,
    )

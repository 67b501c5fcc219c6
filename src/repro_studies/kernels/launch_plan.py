"""What the fast gathers (``gather_fast`` and the V4.1 gathers) share about planning a launch: the GPU's size and
the early table entry.

A fast gather's program handles ``TILES_PER_PROGRAM`` tiles of ``BLOCK_T`` consecutive gather indices of one
request. Without ``gather_lens`` a request's first gathered position is 0, so a program starting at index ``i0``
starts at position ``i0``; when its span ``BLOCK_T * TILES_PER_PROGRAM`` divides the block size, the whole program
lies in block column ``i0 // block_size`` and needs one block-table entry. :func:`early_entry` loads that entry
beside the request's length instead of after it (masked only by the row's width, ``block_table.shape[1]``), so the
data loads wait for one load rather than two in a row, and a program of several tiles loads it once;
:func:`loads_early` says when a launch may do so.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl


@functools.cache
def sm_count(device_index: int) -> int:
    """Streaming multiprocessors of a CUDA device (the launch plans fill ``waves`` of them)."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def programs_target(device: torch.device, waves: int) -> int:
    """Programs a launch on ``device`` should have at least: ``waves`` per streaming multiprocessor."""
    return waves * sm_count(device.index if device.index is not None else torch.cuda.current_device())


def loads_early(asked: bool, has_gather_lens: bool, block_size: int, block_t: int, tiles_per_program: int) -> bool:
    """Whether a launch loads each program's table entry early: ``asked`` for, no ``gather_lens`` (each program
    starts at its own index), and the program's span dividing the block size (a program never straddles two
    blocks)."""
    return asked and not has_gather_lens and block_size % (block_t * tiles_per_program) == 0


@triton.jit
def early_entry(table_row, block_table_width, i0, EARLY: tl.constexpr, CACHE_BLOCK_SIZE: tl.constexpr):
    """The table entry of the program starting at gather index ``i0`` when ``EARLY`` (see :func:`loads_early`),
    loaded without waiting for the request's length; 0 otherwise (the tokens then read their own)."""
    if EARLY:
        column = i0 // CACHE_BLOCK_SIZE
        entry = tl.load(table_row + column, mask=column < block_table_width, other=0)
    else:
        entry = 0
    return entry

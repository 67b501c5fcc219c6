"""What notebook 02's sweep covers beside request counts: the sentinel modes, and the table and call geometries a
gather must get right, named once. The default geometry is the narrowed view ``backing[:n, :w]`` of a table twice
as wide (or ``backing_width``), gathering whole sequences at offset 0; each other geometry changes one thing, and
runs at the sweep's two smallest request counts from 2 in both modes (:func:`repro.core.evidence.sweep.sweep_cases`).
A case decides PR #55109 when it has at least two requests on a narrowed table: there the buggy and the fixed
pitch read different rows. Standard library only: the analysis reads these names from the sweep's rows.
"""

from __future__ import annotations

from enum import StrEnum


class SentinelMode(StrEnum):
    """What the unused block-table entries hold (the ``mode`` column of notebook 02's sweep)."""

    IN_RANGE = "in-range"  # ids of decoy blocks that exist in the cache but belong to no request
    POISON = "poison"  # ids far outside the cache, so a read through them leaves every allocation


class Geometry(StrEnum):
    """One kind of sweep case (the ``geometry`` column of notebook 02's sweep)."""

    DEFAULT = "default"
    NARROWEST = "narrowest"  # the backing one column wider than the view
    WIDE = "wide"  # the backing 8 views wide, plus one column
    OFFSET = "offset"  # rows written from OFFSET on
    WINDOW = "gather_lens"  # the last seq_len_max // WINDOW_FRACTION tokens of each request
    HIGH_IDS = "high-ids"  # one token per block, every id from the profile's high_block_id on


#: vLLM's own test writes its second case from row 5.
OFFSET = 5
#: The window the gather_lens cases gather: a quarter of the longest sequence.
WINDOW_FRACTION = 4
#: How many views wide the wide backing is (plus one column, so no pitch is a multiple of the view's).
WIDE_FACTOR = 8
#: Request counts each other geometry runs at: the sweep's smallest ones from 2 on.
VARIED_COUNTS = 2
#: Fewest requests on a narrowed table for the buggy and the fixed pitch to read different rows.
DECIDING_REQUESTS = 2

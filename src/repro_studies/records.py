"""DeepSeek V4.1's K-cache records, registered with ``repro`` (:class:`repro.core.geometry.records.Records`, entry
point ``records`` of :mod:`repro.plugins`), as vLLM 0.30-0.34's wheels define them in
``vllm/models/deepseek_v41/common/ops/cache_utils.py``:

* ``mxfp8`` (528 B): all 512 dims as fp8 e4m3, then 16 UE8M0 scales of 32 dims.
* ``nvfp4`` (288 B): 512 e2m1 values packed two per byte (even element in the low nibble, odd in the high), then
  32 e4m3 scales of 16 dims.

Where the scales sit changed between releases: in 0.30.0-0.32.0 the kernels read a page as the whole data region
followed by the whole scale region (``interleaved=False``); from 0.33.0 each token's scales follow its own data
(``interleaved=True``).
"""

from __future__ import annotations

from typing import Any

from repro.core.geometry.records import RecordLayout, Records

MXFP8_PAGE_SPLIT = RecordLayout("mxfp8", data_bytes=512, scale_bytes=16, n_scales=16, quant_block=32)
MXFP8 = RecordLayout("mxfp8", data_bytes=512, scale_bytes=16, n_scales=16, quant_block=32, interleaved=True)
NVFP4_PAGE_SPLIT = RecordLayout("nvfp4", data_bytes=256, scale_bytes=32, n_scales=32, quant_block=16)
NVFP4 = RecordLayout("nvfp4", data_bytes=256, scale_bytes=32, n_scales=32, quant_block=16, interleaved=True)
#: Each kind's layout by scale placement (True: each token's scales after its data).
LAYOUTS = {"mxfp8": {False: MXFP8_PAGE_SPLIT, True: MXFP8}, "nvfp4": {False: NVFP4_PAGE_SPLIT, True: NVFP4}}


def layout(kind: str, interleaved: bool) -> RecordLayout:
    return LAYOUTS[kind][interleaved]


def fill(*args: Any) -> None:
    """Valid random records at a scenario's slots (:func:`repro_studies.kernels.records_reference.fill_records`)."""
    from repro_studies.kernels.records_reference import fill_records  # lazy: torch; registering reads no tensor

    fill_records(*args)


RECORDS = Records(kinds=tuple(LAYOUTS), layout=layout, fill=fill)

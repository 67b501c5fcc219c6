"""The report's section on bug 1 run on vLLM's own ``_reshape_kv_cache``: one verdict per release and the
reported cache's rows, every figure recomputed from notebook 01's release table with
:mod:`repro.analysis.reshape_releases` (``[]`` when the run has no release rows)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from repro.analysis import reshape_releases as rules
from repro.analysis.rundata import RunData

RELEASES = "01-reshape-releases"
REPORTED_CACHE = "C128A KV"


def reported_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The reported cache per release and kernel block size: the view returned or PyTorch's error."""
    rows = frame[frame["cache group"] == REPORTED_CACHE]
    shown = rows.assign(
        result=[
            (f"view {r['sizes']} strides {r['strides']}" if r["outcome"] == "view" else str(r["error"]))
            if r["status"] == "ran"
            else f"{r['status']}: {r['reason']}"
            for _, r in rows.iterrows()
        ]
    )
    return shown[["code", "kbs input", "kernel_block_size", "result"]].astype(str)


def section(r: Any) -> list[Any]:
    """``## Bug 1 on vLLM's own code``: the verdicts, the sentence they make, the reported cache's rows.

    ``r`` is :class:`repro.report.blocks.Report`; the blocks are its ``Block``s (imported here, since
    ``blocks`` lists this section)."""
    from repro.report.blocks import Block

    run: RunData = r.run
    frame = run.tables.get(RELEASES)
    if frame is None or not len(frame):
        return []
    verdicts = rules.release_verdicts(frame)
    columns = [c for c in ("code", "verdict", "overruns with", "fits with", "groups that overrun") if c in verdicts]
    return [
        Block(
            "md",
            "\n".join(
                [
                    "## Bug 1 on vLLM's own code",
                    "",
                    "The section above runs the repository's model (`code` = `model` in its tables). Here each "
                    "release's own `_reshape_kv_cache` (`vllm/v1/worker/gpu/attn_utils.py`) runs, loaded from its "
                    "wheel with its own spec classes and a stand-in attention backend, over real pools (notebook 01, "
                    "section 5). " + rules.verdict_sentence(verdicts),
                ]
            ),
        ),
        Block("table", verdicts[columns].fillna("").astype(str)),
        Block("md", f"The reported cache ({REPORTED_CACHE}) per release and kernel block size handed in:"),
        Block("table", reported_rows(frame)),
    ]

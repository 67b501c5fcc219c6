"""Bug 1 on vLLM's own ``_reshape_kv_cache``: one verdict per release and the reported cache's rows, every figure
recomputed from notebook 01's release table with :mod:`repro.analysis.reshape_releases`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.analysis import reshape_releases as rules
from repro.report.model import Common, Section
from repro.tables import Table

#: The cache group PR #43988's error identifies.
REPORTED_CACHE = "C128A KV"
VERDICT_COLUMNS = ("code", "verdict", "stock runner's selection", "overruns with", "fits with", "groups that overrun")


@dataclass(frozen=True)
class ReshapeReleases:
    sentence: str
    verdicts: pd.DataFrame  # one row per release
    reported: pd.DataFrame  # the reported cache per release and kernel block size handed in


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
    shown = shown.assign(kernel_block_size=[rules.kernel_block_cell(v) for v in shown["kernel_block_size"]])
    columns = ["code", "kbs chosen by", "kernel_block_size", "result"]
    return shown[[c for c in columns if c in shown]].fillna("").astype(str)


def derive(c: Common) -> ReshapeReleases | None:
    frame = c.run.table(Table.RESHAPE_RELEASES)
    if frame is None or not len(frame):
        return None
    verdicts = rules.release_verdicts(frame)
    columns = [col for col in VERDICT_COLUMNS if col in verdicts]
    return ReshapeReleases(
        rules.verdict_sentence(verdicts), verdicts[columns].fillna("").astype(str), reported_rows(frame)
    )


MARKDOWN = """
## Bug 1 on vLLM's own code

The section above runs the repository's model (`code` = `model` in its tables). Here each release's own
`_reshape_kv_cache` (`vllm/v1/worker/gpu/attn_utils.py`) runs, loaded from its wheel with its own spec classes and a
stand-in attention backend, over real pools (notebook 01, section 5). Where the function takes `kernel_block_sizes`,
they come from the release's own runner selection (the function its `init_attn_backend` calls, run with the
release's own DeepSeek-V4 backend classes; `kbs chosen by` names it), and, for the compressed groups, from their
storage rows, the input that reproduces PR #43988's report. The repository's one-expression model is never the
source of a kernel block size here (its value is the `model kernel_block_size` column of the run's table).
{{ d.sentence }}

{{ table(d.verdicts) }}

The reported cache ({{ reported_cache }}) per release and kernel block size handed in:

{{ table(d.reported) }}
"""

SECTION = Section("reshape-releases", derive, MARKDOWN, helpers={"reported_cache": REPORTED_CACHE})

"""The report's section on what a vLLM reviewer can take away: each release's patch (the run folder's
``patches/vllm-<version>.diff``) and the outcome of the regression test written for vLLM's suite
(``upstream-tests/``), run against the release as released and patched (notebook 04)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from repro.analysis import vllm_suite as suite
from repro.report.tables import formatted

if TYPE_CHECKING:  # blocks imports this module to list the section
    from repro.report.blocks import Block, Report


def upstream_test_section(r: Report) -> list[Block]:
    from repro.report.blocks import Block, fold

    summary, patches = r.tables.get(suite.SUMMARY_TABLE), r.tables.get(suite.PATCH_TABLE)
    if (summary is None or not len(summary)) and (patches is None or not len(patches)):
        return []
    out = [
        Block(
            "md",
            "## vLLM's regression test and one patch per release\n\n"
            "`upstream-tests/test_dequantize_and_gather_strided_block_table.py` is written for vLLM's "
            "`tests/kernels/` (see `upstream-tests/README.md`); it ran unchanged against each release's own "
            "modules, as released and with the release's patch applied by `patch -p1`. As released it must fail "
            "on its own assertion from two requests on and pass at one; patched, every test must pass.",
        )
    ]
    outcomes = suite.release_outcomes(summary, patches)
    if len(outcomes):
        out.append(Block("table", formatted(outcomes)))
    if patches is not None and len(patches):
        links = [f"[{p}](patches/{p})" for p in patches["diff"].dropna().astype(str) if p]
        if links:
            out.append(Block("md", "Patches (unified diffs against each release's files): " + ", ".join(links)))
    tests = r.tables.get(suite.TEST_TABLE)
    if tests is not None and len(tests):
        odd = suite.with_expectations(tests)
        odd = odd[~odd["ok"]]
        if len(odd):
            cols = [c for c in ("release", "form", "test", "outcome", "expected", "message") if c in odd]
            out.append(
                fold(f"Tests that did not do what they had to ({len(odd)})", Block("table", formatted(odd[cols])))
            )
    return out

"""What a vLLM reviewer can take away: each release's patch (the run folder's ``patches/vllm-<version>.diff``) and
the outcome of the regression test written for vLLM's suite (``upstream-tests/``), run against the release as
released and patched (notebook 04)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.report.model import Common, Section
from repro_studies.analysis import vllm_suite as suite

ODD_COLUMNS = ("release", "form", "test", "outcome", "expected", "message")


@dataclass(frozen=True)
class VllmSuite:
    outcomes: pd.DataFrame  # one row per release: the patch and the test's outcome as released and patched
    diffs: list[str]  # patches/<file> of every diff written
    odd: pd.DataFrame  # tests that did not do what they had to


def derive(c: Common) -> VllmSuite | None:
    summary, patches = c.run.table(suite.SUMMARY_TABLE), c.run.table(suite.PATCH_TABLE)
    if (summary is None or not len(summary)) and (patches is None or not len(patches)):
        return None
    diffs = [p for p in patches["diff"].dropna().astype(str) if p] if patches is not None and len(patches) else []
    tests = c.run.table(suite.TEST_TABLE)
    odd = pd.DataFrame()
    if tests is not None and len(tests):
        checked = suite.with_expectations(tests)
        odd = checked[~checked["ok"]]
        odd = odd[[col for col in ODD_COLUMNS if col in odd]]
    return VllmSuite(suite.release_outcomes(summary, patches), diffs, odd)


MARKDOWN = """
## vLLM's regression test and one patch per release

`upstream-tests/test_dequantize_and_gather_strided_block_table.py` is written for vLLM's `tests/kernels/` (see
`upstream-tests/README.md`); it ran unchanged against each release's own modules, as released and with the
release's patch applied by `patch -p1`. As released it must fail on its own assertion from two requests on and
pass at one; patched, every test must pass.
{% if d.outcomes | length %}

{{ table(d.outcomes) }}
{% endif %}
{% if d.diffs %}

Patches (unified diffs against each release's files):
{% for p in d.diffs %}[{{ p }}](patches/{{ p }}){{ ", " if not loop.last }}{% endfor %}
{% endif %}
{% if d.odd | length %}

{% call fold("Tests that did not do what they had to (%d)" % (d.odd | length)) %}
{{ table(d.odd) }}
{% endcall %}
{% endif %}
"""

SECTION = Section("vllm-suite", derive, MARKDOWN)

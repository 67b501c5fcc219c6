"""The caller's buffer is what is checked: an implementation that computes into a tensor of its own and repoints
``out`` at it (``out.data = new``, ``out.set_(new)``) never wrote the caller's buffer, and the check reads that
buffer through an alias the implementation never sees; the pointer, storage and strides of ``out`` before and
after the call are compared too. In this process (the repository's kernels) and in a case process (an
implementation under test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from repro.core.analysis.gather import case_ok, contiguous_case_row
from repro.core.evidence.cases import run_case
from repro.core.evidence.scenarios import ScenarioSpec
from repro.core.evidence.vllm_cases import run_vllm_cases
from repro.registry import Expectation, under_test

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "implementations"))

SPEC = ScenarioSpec(num_reqs=3, block_size=16, seq_len_max=48, seed=0, mode="in-range", max_reqs=3, device="cpu")
REPOINTING = ["mutants:repoint_data", "mutants:repoint_set"]


@pytest.mark.parametrize("target", REPOINTING)
def test_an_output_repointed_at_a_new_tensor_is_every_token_wrong(target):
    result = run_case(SPEC, target)
    assert result.status == "ok", result.error
    assert result.mismatched_tokens == result.total_tokens > 0
    assert result.out_repointed.startswith("out was repointed"), result
    assert not case_ok(Expectation.CORRECT, SPEC.num_reqs, result.to_dict())


@pytest.mark.parametrize("target", REPOINTING)
def test_vllms_own_cases_read_the_callers_buffer_too(target):
    rows = []
    run_vllm_cases(
        "cpu",
        [under_test(target)],
        lambda *writer: None,
        lambda entry, o: rows.append(
            contiguous_case_row(
                entry.label,
                o.case,
                o.num_reqs,
                o.mismatched_tokens,
                o.stray_writes,
                o.whole_equal,
                o.total_tokens,
                out_repointed=o.out_repointed,
            )
        ),
    )
    assert len(rows) == 4 and not any(r["ok"] for r in rows), rows
    assert all("out was repointed" in r["observed"] for r in rows)


def test_in_a_case_process_the_caller_reads_its_own_mapping_of_the_buffer():
    """The implementation under test runs in a case process; this process reads the caller's buffer through its
    own mapping of it, which the implementation never sees."""
    import os

    from repro.core.evidence.cases import reference_output
    from repro.core.evidence.scenarios import build_scenario
    from repro.core.evidence.worker import CaseWorker

    folder = str(Path(__file__).resolve().parent / "fixtures" / "implementations")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")]))
    scenario = build_scenario(SPEC)
    reference = reference_output(scenario)
    with CaseWorker(timeout_s=60) as worker:
        results = [worker.case(target, scenario, reference) for target in REPOINTING]
    for result in results:
        assert result.status == "ok", result.error
        assert result.mismatched_tokens == result.total_tokens > 0
        assert result.out_repointed.startswith("out was repointed")

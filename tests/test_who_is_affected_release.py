"""Notebook 05's studies on one real release, on the CPU: vLLM 0.33.0's own selection and dispatch code per
GPU family, its warm-up registrations, and its runners' tables on the way to a gather."""

from __future__ import annotations

import pandas as pd
import pytest

from repro.registry import DISPATCH_NO_KERNEL, DISPATCH_RAN, LATENT, STAGE_CALL, TABLE_RAN
from repro.studies.analysis import affected as rules

pytestmark = pytest.mark.integration
RELEASE = "0.33.0"


@pytest.fixture(scope="module")
def reachable():
    from repro.studies.upstream.releases import fetch_index

    try:
        fetch_index(timeout_s=20)
    except OSError as exc:
        pytest.skip(f"the registry is not reachable here ({type(exc).__name__})")


@pytest.fixture(scope="module")
def dispatch_rows(reachable):
    from repro.studies.upstream import dispatch

    warm: list[dict] = []
    rows = pd.DataFrame(dispatch.study([RELEASE], warmup_rows=warm))
    return rows.set_index(["gpu_family", "model", "record"]), pd.DataFrame(warm)


def test_every_path_ran_and_the_model_gather_modules_decide_the_records(dispatch_rows):
    rows, _ = dispatch_rows
    assert set(rows["status"]) <= {DISPATCH_RAN, DISPATCH_NO_KERNEL}
    assert set(
        rows.xs("DeepSeek-V4", level="model").query("status == @DISPATCH_NO_KERNEL").index.get_level_values(1)
    ) == {
        528,
        288,
    }


def test_the_release_picks_its_gather_per_family_model_and_record(dispatch_rows):
    rows, _ = dispatch_rows
    kernel = rows["gather_kernel"]
    assert kernel["sm90", "DeepSeek-V4", 584].startswith("CuTe-DSL")
    assert kernel["sm100", "DeepSeek-V4.1", 288] == "triton:_dequantize_and_gather_k_nvfp4_kernel"
    assert rows.loc[("sm100", "DeepSeek-V4.1", 288), "backend"] == "DeepseekV4MegaAttnAttention"
    assert rows.loc[("sm100", "DeepSeek-V4.1", 288), "default_record_for"] == "compressed"
    assert kernel["rocm", "DeepSeek-V4.1", 584] == "triton:_dequantize_and_gather_k_one_pass_kernel"
    assert kernel["cuda-cutlass-fails", "DeepSeek-V4", 584] == kernel["cuda-no-cutlass", "DeepSeek-V4", 584]
    assert kernel["cuda-no-cutlass", "DeepSeek-V4", 584].startswith("triton:")
    assert rows.loc[("sm90", "DeepSeek-V4", 584), "matrix_kernel"] == "cutedsl:v4:v4"


def test_the_triton_gather_is_warmed_up_only_where_cutlass_does_not_import(dispatch_rows):
    _, warm = dispatch_rows
    triton = warm[(warm["kind"] == "Triton") & (warm["registered"] == "yes")]
    assert set(triton["gpu_family"]) == {"cuda-no-cutlass", "cuda-cutlass-fails"}
    assert set(triton["model"]) == {"DeepSeek-V4"}


def test_the_runners_hand_gathers_row_slices_of_full_width_tables(reachable):
    from repro.studies.upstream import blocktables

    tables = pd.DataFrame(blocktables.study([RELEASE], sweep=blocktables.SHORT_SWEEP))
    assert (tables["status"] == TABLE_RAN).all(), tables[tables["status"] != TABLE_RAN]["how"].tolist()
    calls = tables[tables["stage"] == STAGE_CALL]
    assert len(calls) and not calls["narrowed"].any()
    assert (calls["stride0"] == calls["shape"].map(lambda s: s[-1])).all()
    answers = rules.runner_answers(tables)
    assert set(answers["answer"]) == {LATENT} and set(answers["runner"]) == {"V1", "V2"}

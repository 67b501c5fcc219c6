"""Notebook 05's studies on one real release, on the CPU: vLLM 0.33.0's own selection and dispatch code per
GPU family, its warm-up registrations, and its runners' tables on the way to a gather."""

from __future__ import annotations

import pandas as pd
import pytest

from repro_studies.analysis import affected as rules
from repro_studies.kernel_id import KernelKind, from_launch_label
from repro_studies.registry import ANY_TOPOLOGY, Bug2Answer, DispatchStatus, TableStage, TableStatus

#: The tensor-parallel sizes at which SM100's mega attention accepts the 64-head model.
MEGA = "TP 1, 2, 4, 8"

pytestmark = pytest.mark.integration
RELEASE = "0.33.0"


@pytest.fixture(scope="module")
def reachable():
    from repro_studies.upstream.releases import fetch_index

    try:
        fetch_index(timeout_s=20)
    except OSError as exc:
        pytest.skip(f"the registry is not reachable here ({type(exc).__name__})")


@pytest.fixture(scope="module")
def dispatch_rows(reachable):
    from repro_studies.upstream import dispatch

    warm: list[dict] = []
    rows = pd.DataFrame(dispatch.study([RELEASE], warmup_rows=warm))
    return rows.set_index(["gpu_family", "model", "record", "topology"]), pd.DataFrame(warm)


def test_every_path_ran_and_the_model_gather_modules_decide_the_records(dispatch_rows):
    rows, _ = dispatch_rows
    served = rows.drop(index="xpu", level="gpu_family")
    assert set(served["status"]) <= {DispatchStatus.RAN, DispatchStatus.NO_KERNEL}
    assert set(
        rows.xs("DeepSeek-V4", level="model").query("status == @DispatchStatus.NO_KERNEL").index.get_level_values(1)
    ) == {
        528,
        288,
    }


def test_the_release_picks_its_gather_per_family_model_and_record(dispatch_rows):
    rows, _ = dispatch_rows
    kernel = rows["gather_kernel"]
    anywhere = ANY_TOPOLOGY
    assert from_launch_label(kernel["sm90", "DeepSeek-V4", 584, anywhere]).kind == KernelKind.CUTEDSL
    assert kernel["sm100", "DeepSeek-V4.1", 288, MEGA] == "triton:_dequantize_and_gather_k_nvfp4_kernel"
    assert rows.loc[("sm100", "DeepSeek-V4.1", 288, MEGA), "backend"] == "DeepseekV4MegaAttnAttention"
    assert rows.loc[("sm100", "DeepSeek-V4.1", 288, MEGA), "default_record_for"] == "compressed"
    assert kernel["rocm", "DeepSeek-V4.1", 584, anywhere] == "triton:_dequantize_and_gather_k_one_pass_kernel"
    for capability in ("sm90", "sm100"):
        fails, absent = f"{capability}-cutlass-fails", f"{capability}-no-cutlass"
        assert kernel[fails, "DeepSeek-V4", 584, anywhere] == kernel[absent, "DeepSeek-V4", 584, anywhere]
        assert from_launch_label(kernel[absent, "DeepSeek-V4", 584, anywhere]).kind == KernelKind.TRITON
    assert rows.loc[("sm90", "DeepSeek-V4", 584, anywhere), "matrix_kernel"] == "cutedsl:v4:v4"


def test_sm100_v41_rows_name_the_mega_attention_check_and_cover_both_answers(dispatch_rows):
    rows, _ = dispatch_rows
    sm100 = rows.xs(("sm100", "DeepSeek-V4.1"), level=("gpu_family", "model"))
    assert set(sm100.index.get_level_values("topology")) == {MEGA, "TP 16"}
    mega, flashmla = sm100.xs(MEGA, level="topology"), sm100.xs("TP 16", level="topology")
    assert mega.loc[288, "default_record_for"] == "compressed" and mega.loc[528, "default_record_for"] == "SWA"
    assert (
        flashmla.loc[528, "default_record_for"] == "compressed + SWA" and flashmla.loc[288, "default_record_for"] == ""
    )
    assert set(flashmla["backend"]) == {"DeepseekV4FlashMLAAttention"}
    check = "DeepseekV4MegaAttnAttention.is_available_for (vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py)"
    assert (
        mega.loc[288, "condition"]
        == f"{check}: num_attention_heads 64, o_groups 8, tensor_parallel_size 1, 2, 4, 8 -> True"
    )
    assert (
        flashmla.loc[528, "condition"]
        == f"{check}: num_attention_heads 64, o_groups 8, tensor_parallel_size 16 -> False"
    )


def test_the_flashmla_attention_is_not_served_where_its_ops_raise(dispatch_rows):
    rows, _ = dispatch_rows
    xpu = rows.xs(("xpu", "DeepSeek-V4.1"), level=("gpu_family", "model"))
    assert set(xpu["status"]) == {DispatchStatus.NOT_SERVED} and set(xpu["gather_kernel"]) == {""}
    assert set(xpu["refused_by"]) == {
        "flash_mla_with_kvcache: RuntimeError: vllm._flashmla_C is not available, likely was not compiled due to "
        "insufficient nvcc version or a supported arch was not in the list of target arches to compile for."
    }
    assert "_raise_flashmla_unavailable" in xpu["how"].iloc[0]
    v4 = rows.loc[("xpu", "DeepSeek-V4", 584, ANY_TOPOLOGY)]
    assert v4["status"] == DispatchStatus.RAN and v4["backend"] == "DeepseekV4XPUAttention"  # its own XPU code


def test_the_triton_gather_is_warmed_up_only_where_cutlass_does_not_import(dispatch_rows):
    _, warm = dispatch_rows
    triton = warm[(warm["kind"] == "Triton") & (warm["registered"] == "yes")]
    assert set(triton["gpu_family"]) == {
        "sm90-no-cutlass",
        "sm100-no-cutlass",
        "sm90-cutlass-fails",
        "sm100-cutlass-fails",
    }
    assert set(triton["model"]) == {"DeepSeek-V4"}


def test_the_runners_hand_gathers_row_slices_of_full_width_tables(reachable):
    from repro_studies.upstream import blocktables

    tables = pd.DataFrame(blocktables.study([RELEASE], sweep=blocktables.SHORT_SWEEP))
    assert (tables["status"] == TableStatus.RAN).all(), tables[tables["status"] != TableStatus.RAN]["how"].tolist()
    calls = tables[tables["stage"] == TableStage.CALL]
    assert len(calls) and not calls["narrowed"].any()
    assert (calls["stride0"] == calls["shape"].map(lambda s: s[-1])).all()
    answers = rules.runner_answers(tables)
    assert set(answers["answer"]) == {Bug2Answer.LATENT} and set(answers["runner"]) == {"V1", "V2"}


def test_before_their_own_branches_rocm_and_xpu_cannot_serve_deepseek_v4(reachable):
    from repro_studies.upstream import dispatch
    from repro_studies.upstream.platforms import ROCM, XPU

    rows = pd.DataFrame(dispatch.study(["0.20.0", "0.21.0", "0.22.0", "0.23.0"], families=(ROCM, XPU)))
    v4 = rows[(rows.model == "DeepSeek-V4") & (rows.record == 584)].set_index(["release", "gpu_family"])["status"]
    assert v4.to_dict() == {
        ("0.20.0", "rocm"): DispatchStatus.NOT_SERVED,  # one attention layer for every platform, FlashMLA's ops
        ("0.20.0", "xpu"): DispatchStatus.NOT_SERVED,
        ("0.21.0", "rocm"): DispatchStatus.RAN,  # the layer's ROCm branches return before FlashMLA's ops
        ("0.21.0", "xpu"): DispatchStatus.NOT_SERVED,
        ("0.22.0", "rocm"): DispatchStatus.RAN,
        ("0.22.0", "xpu"): DispatchStatus.NOT_SERVED,  # the package's CUDA implementation
        ("0.23.0", "rocm"): DispatchStatus.RAN,
        ("0.23.0", "xpu"): DispatchStatus.RAN,  # its own XPU implementation
    }


def test_034_ships_the_v2_runner_only_and_it_never_narrows_a_table(reachable):
    from repro_studies.upstream import blocktables

    tables = pd.DataFrame(blocktables.study(["0.34.0"], sweep=blocktables.SHORT_SWEEP))
    v1 = tables[tables["runner"] == "V1"]
    assert v1["status"].tolist() == [TableStatus.NOT_SHIPPED]
    assert (tables[tables["runner"] == "V2"]["status"] == TableStatus.RAN).all()
    answers = rules.runner_answers(tables)
    assert answers[["runner", "answer"]].values.tolist() == [["V2", Bug2Answer.LATENT]]

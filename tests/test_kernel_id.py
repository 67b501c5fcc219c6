"""Kernel identities: the labels tables write come from one KernelId, and reading a label back finds the identity
that writes exactly that text (or none), for every label the committed tables hold."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro_studies.kernel_id import (
    KernelFamily,
    KernelId,
    KernelKind,
    family_of,
    from_launch_label,
    from_matrix_label,
    inventory_label,
)

ROOT = Path(__file__).resolve().parents[1]
V4_MEMBER = "vllm/v1/attention/ops/deepseek_v4_ops/cache_utils.py"
V41_MEMBER = "vllm/models/deepseek_v41/common/ops/cache_utils.py"


def test_a_triton_kernel_is_named_by_its_module_family_and_qualified_name():
    k = KernelId.triton(V41_MEMBER, "_dequantize_and_gather_k_mxfp8_kernel", "mxfp8")
    assert (k.kind, k.family, k.name, k.record) == (KernelKind.TRITON, KernelFamily.V41, k.name, "mxfp8")
    assert k.matrix_label == "v41:_dequantize_and_gather_k_mxfp8_kernel"
    assert k.launch_label == "triton:_dequantize_and_gather_k_mxfp8_kernel" == str(k)
    assert family_of(V4_MEMBER) == KernelFamily.V4


def test_a_cutedsl_gather_is_named_by_family_and_record_in_the_matrix_and_by_its_entry_where_it_launched():
    arm = KernelId.cutedsl(KernelFamily.V41, "mxfp8")
    assert arm.matrix_label == "cutedsl:v41:mxfp8"
    launched = KernelId.cutedsl(KernelFamily.V4, "v4", "dequantize_and_gather_k_cache_cutedsl")
    assert launched.launch_label == "CuTe-DSL dequantize_and_gather_k_cache_cutedsl"
    assert launched.matrix_label == "cutedsl:v4:v4"


@pytest.mark.parametrize(
    "kernel",
    [
        KernelId.triton(V4_MEMBER, "_dequantize_and_gather_k_kernel"),
        KernelId.triton(V41_MEMBER, "_dequantize_and_gather_k_nvfp4_kernel"),
        KernelId.triton(V4_MEMBER, "DequantizeAndGatherKCacheKernel.kernel"),
        *(KernelId.cutedsl(f, r) for f in KernelFamily for r in ("v4", "mxfp8", "nvfp4")),
    ],
)
def test_a_matrix_label_reads_back_as_the_identity_that_wrote_it(kernel):
    assert from_matrix_label(kernel.matrix_label) == kernel


def test_a_launch_label_reads_back_as_what_it_names_kind_and_name():
    for kernel in (
        KernelId.triton(V41_MEMBER, "_dequantize_and_gather_k_one_pass_kernel"),
        KernelId.cutedsl(KernelFamily.V4, "v4", "_DEQUANT_GATHER_K_CACHE_CUTEDSL_KERNEL"),
    ):
        got = from_launch_label(kernel.launch_label)
        assert (got.kind, got.name, got.family) == (kernel.kind, kernel.name, None)
        assert got.launch_label == kernel.launch_label


@pytest.mark.parametrize("text", ["", "the dispatcher raises", "none (the backend does not gather)", "triton:", "v5:k"])
def test_text_no_kernel_writes_is_no_kernel(text):
    assert from_launch_label(text) is None and from_matrix_label(text) is None


def test_a_given_pool_is_searched_by_exact_label_only():
    mine = KernelId.triton(V4_MEMBER, "k")
    assert from_matrix_label("v4:k", [mine]) is mine
    assert from_matrix_label("v4:k2", [mine]) is None and from_launch_label("triton:k", [mine]) is mine


@pytest.mark.audit
def test_every_kernel_label_in_the_committed_tables_is_an_identity_that_writes_it():
    """The release matrix's and verdict tables' ``kernel``, the dispatch table's ``matrix_kernel`` and
    ``gather_kernel``: each non-empty cell is read back to an identity whose label is that cell."""
    matrix, launch = set(), set()
    for path in ROOT.glob("data/**/results/*.csv"):
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if path.stem in ("04-release-matrix", "04-release-verdicts"):
            matrix |= set(frame["kernel"])
        if path.stem == "05-gather-dispatch":
            matrix |= set(frame["matrix_kernel"])
            launch |= set(frame["gather_kernel"])
    matrix.discard("")
    launch.discard("")
    assert len(matrix) >= 9 and len(launch) >= 7
    assert {label: from_matrix_label(label).matrix_label for label in matrix} == {m: m for m in matrix}
    assert {label: from_launch_label(label).launch_label for label in launch} == {g: g for g in launch}
    kinds = {from_matrix_label(label).kind for label in matrix} | {from_launch_label(label).kind for label in launch}
    assert kinds == set(KernelKind)


def test_a_found_kernel_and_an_arm_carry_the_identity_their_table_label_is_written_from():
    from repro_studies.upstream.arms import Arm
    from repro_studies.upstream.discovery import discover

    source = (
        "import triton\n\n\n@triton.jit\n"
        "def _dequantize_and_gather_k_mxfp8_kernel(out_ptr, block_table_ptr, max_blocks_per_seq):\n"
        "    x = block_table_ptr + 1 * max_blocks_per_seq\n"
    )
    (found,) = discover({V41_MEMBER: source}).kernels
    assert found.id == KernelId.triton(V41_MEMBER, "_dequantize_and_gather_k_mxfp8_kernel", "mxfp8")
    assert found.label == found.id.matrix_label == "v41:_dequantize_and_gather_k_mxfp8_kernel"
    triton = Arm("1.0.0", "", "released", V4_MEMBER, "w", "v4", False, kernel_name="kernel", class_name="K")
    assert triton.id == KernelId.triton(V4_MEMBER, "K.kernel", "v4")
    cute = Arm("1.0.0", "", "released", V41_MEMBER, "w", "mxfp8", True, cutedsl=True)
    assert cute.id == KernelId.cutedsl(KernelFamily.V41, "mxfp8") and cute.id.kind == KernelKind.CUTEDSL


def test_a_cutedsl_module_is_named_in_the_inventory_by_its_classes():
    from repro_studies.upstream.discovery import CuteInfo

    module = CuteInfo("vllm/x/dequant_gather_k_cutedsl.py", ["DequantGatherKCacheKernel", "Other"], "0" * 64)
    assert module.label == inventory_label(module.classes) == "cutedsl:DequantGatherKCacheKernel,Other"
    assert from_matrix_label(module.label) is None  # no matrix row is named so: the inventory's label is its own

"""Whether a selected attention class can serve the model on a platform (the ops it binds, called as a synthetic
release binds them), and which released check read the topology: on hand-written releases, so every branch is
known."""

from __future__ import annotations

import textwrap
import types

import pytest

from repro_studies.upstream import serving
from repro_studies.upstream import topology as tp
from repro_studies.upstream.released_code import ReleasedCode

SOURCES = {
    "vllm/v1/attention/ops/flashmla.py": """
        from vllm.platforms import current_platform

        AVAILABLE = current_platform.is_cuda()


        def _raise_unavailable(*_args, **_kwargs):
            raise RuntimeError("the flash ops are not compiled for this platform")


        if AVAILABLE:
            from vllm.third_party.flash import sparse_fwd, metadata
        else:
            sparse_fwd = _raise_unavailable
            metadata = _raise_unavailable


        def with_arguments(q, k):
            return q
    """,
    "vllm/models/toy/attention.py": """
        from vllm.heavy.layers import Module
        from vllm.platforms import current_platform
        from vllm.v1.attention.ops.flashmla import metadata, sparse_fwd, with_arguments
        from vllm.v1.attention.ops.rocm_ops import rocm_fwd


        class Base(Module):
            def forward(self, q):
                if current_platform.is_rocm():
                    rocm_fwd(q)
                    return
                for chunk in q:
                    sparse_fwd(chunk)

            def plan(self):
                return metadata()


        class Attention(Base):
            def plan(self):
                return with_arguments(1, 2)


        class MegaAttention(Base):
            @classmethod
            def is_available_for(cls, config):
                if not current_platform.is_cuda():
                    return False
                heads = config.model_config.hf_config.num_attention_heads
                tp = config.parallel_config.tensor_parallel_size
                return heads // tp >= 8


        def _select_attn_cls(config):
            if config.parallel_config.prefill_context_parallel_size > 1:
                return Attention
            if MegaAttention.is_available_for(config):
                return MegaAttention
            return Attention
    """,
}


def release(platform: str) -> ReleasedCode:
    sources = {m: textwrap.dedent(s) for m, s in SOURCES.items()}
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    code.standins["vllm.platforms.current_platform"] = types.SimpleNamespace(
        is_cuda=lambda: platform == "cuda", is_rocm=lambda: platform == "rocm"
    )
    return code


def probes_of(platform: str, cls: str = "Attention") -> dict[str, serving.Probe]:
    code = release(platform)
    found = serving.probes(code, code.class_ref("vllm/models/toy/attention.py", cls))
    return {p.op.name: p for p in found}


def test_an_op_bound_to_the_platforms_refusal_makes_the_class_unservable():
    found = probes_of("xpu")
    assert found["sparse_fwd"].refuses
    assert found["sparse_fwd"].error == "RuntimeError: the flash ops are not compiled for this platform"
    assert found["sparse_fwd"].bound_to == "vllm/v1/attention/ops/flashmla.py:_raise_unavailable"
    assert found["sparse_fwd"].op.method == "Base.forward"  # inherited, read inside the loop


def test_on_the_platform_the_ops_were_built_for_nothing_refuses():
    found = probes_of("cuda")
    assert not any(p.refuses for p in found.values())
    assert "vllm.third_party.flash.sparse_fwd" in found["sparse_fwd"].bound_to  # the kernel's interface
    assert "takes its arguments" in found["with_arguments"].bound_to  # never called without its tensors


def test_a_taken_platform_branch_that_returns_hides_the_ops_after_it():
    found = probes_of("rocm")
    assert set(found) == {"rocm_fwd", "with_arguments"}  # sparse_fwd is after the ROCm branch's return
    assert not any(p.refuses for p in found.values())


def test_an_overridden_method_is_not_probed():
    assert "metadata" not in probes_of("xpu", "Attention")  # Attention.plan replaces Base.plan
    assert probes_of("xpu", "MegaAttention")["metadata"].refuses


def selector_runs(platform: str) -> list[tuple[tp.Topology, tp.Traced]]:
    code = release(platform)
    fn = code.function("vllm/models/toy/attention.py", "_select_attn_cls")
    return code, [(t, tp.traced(code, fn, True, "auto", t)) for t in tp.TOPOLOGIES]


def test_the_check_that_read_the_topology_is_named_with_its_values_and_answer():
    code, runs = selector_runs("cuda")
    chosen = {t.tensor_parallel_size: run.chosen.__name__ for t, run in runs}
    assert chosen == {1: "MegaAttention", 2: "MegaAttention", 4: "MegaAttention", 8: "MegaAttention", 16: "Attention"}
    assert all(run.read_topology() for _, run in runs)
    mega = [run for t, run in runs if t.tensor_parallel_size < 16]
    assert tp.checks(code, mega) == (
        "MegaAttention.is_available_for (vllm/models/toy/attention.py): num_attention_heads 64, "
        "tensor_parallel_size 1, 2, 4, 8 -> True"
    )
    assert tp.checks(code, [runs[-1][1]]).endswith("tensor_parallel_size 16 -> False")


def test_a_selection_that_never_reads_the_topology_says_so():
    _, runs = selector_runs("xpu")
    assert not runs[0][1].read_topology()  # the check returns before reading the heads and the TP size
    assert runs[0][1].chosen.__name__ == "Attention"


@pytest.mark.parametrize("topology", tp.TOPOLOGIES)
def test_the_configuration_records_every_field_read_with_its_reader(topology):
    reads: list[tp.Read] = []
    config = tp.default_config("auto", topology, reads)
    assert config.parallel_config.tensor_parallel_size == topology.tensor_parallel_size
    assert getattr(config.model_config.hf_config, "text_config", None) is None  # absent fields stay absent
    assert [r.path for r in reads] == ["parallel_config.tensor_parallel_size"]
    assert reads[0].reader.co_name == "test_the_configuration_records_every_field_read_with_its_reader"

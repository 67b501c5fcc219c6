"""Discovery, patcher, loader and the matrix runner, on the synthetic fixture module in fake wheels."""

import sys
from dataclasses import replace

import pandas as pd
import pytest
from upstream_fakes import V4_MEMBER, cached_release, fixture_source

from repro_studies.upstream import discovery, matrix, patcher
from repro_studies.upstream.arms import Arm, WrongKernel, make_callable
from repro_studies.upstream.loader import LoadedRelease, LoadError
from repro_studies.upstream.matrix import MatrixConfig, run_matrix, write_rewrites


def test_discovery_finds_the_kernel_its_pitch_the_launch_and_the_wrapper():
    kernels, cute = discovery.scan_module(V4_MEMBER, fixture_source())
    assert cute is None and len(kernels) == 1
    k = kernels[0]
    assert (k.label, k.record, k.pitch_param, k.pitch_is_constexpr) == (
        "v4:_dequantize_and_gather_k_kernel",
        "v4",
        "max_blocks_per_seq",
        True,
    )
    assert len(k.launch_pitch) == 1 and k.launch_pitch[0].endswith("block_table.shape[-1]")
    assert k.wrapper == "dequantize_and_gather_k_cache_triton" and not k.interleaved


def test_discovery_reads_class_kernels_and_interleaved_records():
    src = """
import triton
import triton.language as tl

class DequantizeAndGatherKCacheKernel:
    @staticmethod
    @triton.jit
    def kernel(block_table_ptr, k_ptr, max_blocks_per_seq: tl.constexpr, head_dim: tl.constexpr,
               scale_dim: tl.constexpr):
        p = tl.load(block_table_ptr + tl.program_id(0) * max_blocks_per_seq)
        tl.load(k_ptr + p * (head_dim + scale_dim))

    def __call__(self, block_table):
        return dict(max_blocks_per_seq=block_table.shape[-1])

@triton.jit
def _dequantize_and_gather_k_mxfp8_kernel(block_table_ptr, k_ptr, stride, head_dim: tl.constexpr,
                                         scale_dim: tl.constexpr):
    p = tl.load(block_table_ptr + tl.program_id(0) * stride)
    tl.load(k_ptr + p * (head_dim + scale_dim))

@triton.jit
def _copy_kernel(block_table_ptr, stride):
    pass
"""
    kernels, _ = discovery.scan_module("vllm/models/deepseek_v41/common/ops/cache_utils.py", src)
    by = {k.qualname: k for k in kernels}
    assert set(by) == {"DequantizeAndGatherKCacheKernel.kernel", "_dequantize_and_gather_k_mxfp8_kernel"}
    cls = by["DequantizeAndGatherKCacheKernel.kernel"]
    assert cls.launch_pitch == ["line 14: block_table.shape[-1]"] and cls.record == "v4" and not cls.interleaved
    mx = by["_dequantize_and_gather_k_mxfp8_kernel"]
    assert (mx.record, mx.interleaved, mx.pitch_param, mx.pitch_is_constexpr) == ("mxfp8", True, "stride", False)


def test_patch_rewrites_exactly_the_pitch_and_records_the_diff():
    src = fixture_source()
    rw = patcher.rewrite_row_pitch(src, V4_MEMBER, runtime=True)
    removed = [ln for ln in rw.diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in rw.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert removed == ["-    max_blocks_per_seq: tl.constexpr,", "-        max_blocks_per_seq=block_table.shape[-1],"]
    assert added == ["+    max_blocks_per_seq,", "+        max_blocks_per_seq=block_table.stride(0),"]
    const = patcher.rewrite_row_pitch(src, V4_MEMBER, runtime=False)
    assert "max_blocks_per_seq: tl.constexpr," in const.rewritten and len(const.edits) == 1
    assert discovery.scan_module(V4_MEMBER, const.rewritten)[0][0].launch_pitch[0].endswith("block_table.stride(0)")


def test_patch_fails_loudly_when_the_expression_changed():
    changed = fixture_source(**{"max_blocks_per_seq=block_table.shape[-1]": "max_blocks_per_seq=block_table.size(1)"})
    with pytest.raises(patcher.PatchError, match=r"line \d+: .*block_table.size\(1\), expected exactly"):
        patcher.rewrite_row_pitch(changed, V4_MEMBER)
    with pytest.raises(patcher.PatchError, match="no gather kernel"):
        patcher.rewrite_row_pitch("x = 1\n", V4_MEMBER)


def test_loader_imports_with_stubs_only_inside_its_scope(tmp_path, monkeypatch):
    _, entry = cached_release(tmp_path, monkeypatch)
    release = LoadedRelease(entry)
    module = release.import_module(V4_MEMBER)
    assert callable(module.dequantize_and_gather_k_cache_triton)
    assert release.stubs_used == {"vllm.triton_utils", "vllm.utils.import_utils"}
    assert not [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]
    with release.active():
        assert sys.modules[module.__name__] is module
    with pytest.raises(LoadError, match="not in the cache"):
        release.import_module("vllm/models/deepseek_v41/common/ops/cache_utils.py")


def test_an_import_nobody_provides_is_a_load_error_naming_it(tmp_path, monkeypatch):
    src = fixture_source(**{"import torch\n": "import torch\nfrom vllm.distributed import get_rank\n"})
    _, entry = cached_release(tmp_path, monkeypatch, source=src)
    with pytest.raises(LoadError, match=r"vllm\.distributed is neither in vLLM 0\.99\.0's cache nor stubbed"):
        LoadedRelease(entry).import_module(V4_MEMBER)


def test_arm_runs_the_release_wrapper_and_checks_which_kernel_launched(tmp_path, monkeypatch):
    root, _ = cached_release(tmp_path, monkeypatch)
    arm = Arm(
        "0.99.0",
        "v4:_dequantize_and_gather_k_kernel",
        "released",
        V4_MEMBER,
        "dequantize_and_gather_k_cache_triton",
        "v4",
        False,
        kernel_name="_dequantize_and_gather_k_kernel",
        cache_root=str(root),
    )
    assert "dequantize_and_gather_k_cache_triton" in arm.how
    fn = make_callable(arm, interpreted=True)
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    sc = build_scenario(ScenarioSpec(num_reqs=1, block_size=16, seq_len_max=20, max_reqs=2))
    fn(*sc.args(sc.fresh_out()))
    via_dispatcher = Arm(**{**arm.to_dict(), "wrapper": "dequantize_and_gather_k_cache"})
    make_callable(via_dispatcher, interpreted=True)(*sc.args(sc.fresh_out()))  # reaches the same kernel


def test_inside_the_arms_scope_a_call_swaps_no_modules(tmp_path, monkeypatch):
    """Entered once, the release's scope stays: a call inside it is the wrapper alone (no sys.modules swap),
    still checked for the kernel it launched; outside it each call enters and leaves the scope itself."""
    root, _ = cached_release(tmp_path, monkeypatch)
    arm = Arm(
        "0.99.0",
        "v4:_dequantize_and_gather_k_kernel",
        "released",
        V4_MEMBER,
        "dequantize_and_gather_k_cache_triton",
        "v4",
        False,
        kernel_name="_dequantize_and_gather_k_kernel",
        cache_root=str(root),
    )
    fn = make_callable(arm, interpreted=True)
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    sc = build_scenario(ScenarioSpec(num_reqs=1, block_size=16, seq_len_max=20, max_reqs=2))
    entered = []
    real = LoadedRelease.active

    def counting(self):
        entered.append(self)
        return real(self)

    monkeypatch.setattr(LoadedRelease, "active", counting)
    fn(*sc.args(sc.fresh_out()))
    assert len(entered) == 1
    with fn.scope():
        for _ in range(3):
            fn(*sc.args(sc.fresh_out()))
        assert any(k.startswith("vllm.") for k in sys.modules)
    assert len(entered) == 2
    assert not [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]


def test_an_arm_whose_kernel_the_wrapper_never_launches_raises(tmp_path, monkeypatch):
    spare = (
        fixture_source()
        + """

@triton.jit
def _dequantize_and_gather_k_spare_kernel(block_table_ptr, max_blocks_per_seq: tl.constexpr):
    tl.load(block_table_ptr + tl.program_id(0) * max_blocks_per_seq)
"""
    )
    root, _ = cached_release(tmp_path, monkeypatch, source=spare)
    arm = Arm(
        "0.99.0",
        "v4:_dequantize_and_gather_k_spare_kernel",
        "released",
        V4_MEMBER,
        "dequantize_and_gather_k_cache_triton",
        "v4",
        False,
        kernel_name="_dequantize_and_gather_k_spare_kernel",
        cache_root=str(root),
    )
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    sc = build_scenario(ScenarioSpec(num_reqs=1, block_size=16, seq_len_max=20, max_reqs=2))
    with pytest.raises(WrongKernel, match="did not launch _dequantize_and_gather_k_spare_kernel"):
        make_callable(arm, interpreted=True)(*sc.args(sc.fresh_out()))


@pytest.mark.integration  # one poison case runs in a process of its own, as on a GPU
def test_matrix_end_to_end_on_a_fake_release(tmp_path, monkeypatch):
    """In the interpreter every case runs in this process (a bounds-checked launch cannot fault), and a poison
    case's row is what the case's own process gives, as on a GPU."""
    root, _ = cached_release(tmp_path, monkeypatch)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    in_child = matrix.run_isolated
    monkeypatch.setattr(matrix, "run_isolated", lambda *a: pytest.fail("a case ran in a child in the interpreter"))
    rows = []
    cfg = MatrixConfig(
        request_counts=[1, 2],
        modes=["in-range", "poison"],
        block_size=16,
        seq_len_max=20,
        cache_root=root,
        max_workers=2,
    )
    finished = []
    plans = run_matrix(["0.99.0", "9.9.9"], cfg, rows.append, arm_done=finished.append)
    assert [(a.release, a.variant) for a in finished] == [("0.99.0", "released"), ("0.99.0", "patched")]
    frame = pd.DataFrame(rows)
    missing = frame[frame.release == "9.9.9"]
    assert list(missing.status) == ["unknown release"]
    cases = frame[(frame.release == "0.99.0") & frame.num_reqs.notna()]
    assert set(cases.status) == {"ok"}
    released = cases[cases.variant == "released"].set_index(["mode", "num_reqs"])
    assert released.loc[("in-range", 1), "mismatched_tokens"] == 0
    assert released.loc[("in-range", 2), "mismatched_tokens"] > 0
    assert released.loc[("poison", 2), "out_of_bounds_lanes"] > 0
    patched = cases[cases.variant == "patched"]
    assert (patched.mismatched_tokens == 0).all() and (patched.out_of_bounds_lanes == 0).all()
    arm = finished[0]
    spec = replace(matrix.sweep_spec(cfg, arm.record, arm.interleaved), num_reqs=2, mode="poison")
    child = in_child(arm, spec, True, 120)
    fields = ["status", "mismatched_tokens", "stray_writes", "out_of_view_lanes", "out_of_bounds_lanes"]
    assert [getattr(child, f) for f in fields] == released.loc[("poison", 2), fields].tolist()
    diffs = write_rewrites(plans, tmp_path / "rewrites")
    assert len(diffs) == 1 and "+        max_blocks_per_seq=block_table.stride(0)," in diffs[0].read_text()


def test_matrix_reports_a_changed_signature_as_a_row(tmp_path, monkeypatch):
    released_signature = (
        "def dequantize_and_gather_k_cache_triton(out, k_cache, seq_lens, gather_lens, block_table, block_size, "
        "offset):"
    )
    changed_signature = (
        "def dequantize_and_gather_k_cache_triton(out, k_cache, seq_lens, block_table, block_size, offset, *, "
        "gather_lens):"
    )
    src = fixture_source(**{released_signature: changed_signature})
    root, _ = cached_release(tmp_path, monkeypatch, source=src)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    rows = []
    cfg = MatrixConfig(request_counts=[1], modes=["in-range"], block_size=16, seq_len_max=20, cache_root=root)
    run_matrix(["0.99.0"], cfg, rows.append)
    triton_rows = [r for r in rows if r["kernel"] == "v4:_dequantize_and_gather_k_kernel"]
    assert {r["status"] for r in triton_rows} == {"error"}
    assert all("TypeError" in r["error"] for r in triton_rows)


def test_helper_packages_load_as_packages_with_their_submodules(tmp_path, monkeypatch):
    from upstream_fakes import fake_pip, make_wheel

    from repro_studies.upstream import wheelcache

    src = fixture_source(**{"import torch\n": "import torch\n\nfrom vllm.cute_utils import twice\n"})
    files = {
        V4_MEMBER: src,
        "vllm/cute_utils/__init__.py": "from .cvt import twice\n",
        "vllm/cute_utils/cvt.py": "def twice(x):\n    return 2 * x\n",
    }
    fake_pip(monkeypatch, {"0.99.0": make_wheel(tmp_path, "0.99.0", files)})
    entry = wheelcache.ensure_release("0.99.0", tmp_path / "cache")
    release = LoadedRelease(entry)
    module = release.import_module(V4_MEMBER)
    assert module.twice(4) == 8
    assert release.helpers_used == {"vllm/cute_utils/__init__.py", "vllm/cute_utils/cvt.py"}


STUDY_MEMBER = "vllm/v1/worker/gpu/attn_utils.py"
STUDY_SOURCE = """
from vllm.config import VllmConfig, get_layers_from_vllm_config
from vllm.utils.math_utils import cdiv


def blocks(tokens: int, config: VllmConfig | None = None) -> int:
    return cdiv(tokens, 16)


def needs_config():
    return VllmConfig()
"""


def test_a_study_loads_its_own_member_set_with_its_own_stubs(tmp_path, monkeypatch):
    from upstream_fakes import fake_pip, make_wheel

    from repro_studies.upstream import members, wheelcache
    from repro_studies.upstream.stubs import STUBS, StubNotProvided, placeholder_stub

    study = members.MemberSet("test-study", members=(STUDY_MEMBER, "vllm/utils/math_utils.py"), anchor=(STUDY_MEMBER,))
    files = {
        V4_MEMBER: fixture_source(),
        STUDY_MEMBER: STUDY_SOURCE,
        "vllm/utils/math_utils.py": "def cdiv(a, b):\n    return -(-a // b)\n",
    }
    fake_pip(monkeypatch, {"0.99.0": make_wheel(tmp_path, "0.99.0", files)})
    entry = wheelcache.ensure_release("0.99.0", tmp_path / "cache", sets=("gather", study))
    # the gather path keeps its stubs and does not see the study's files
    gather = LoadedRelease(entry)
    assert gather.stubs is STUBS and gather.serves("vllm.v1.worker.gpu.attn_utils") == ""
    with pytest.raises(LoadError, match="not in the cache"):
        gather.import_module(STUDY_MEMBER)
    # the study: its file and helper as released, vllm.config a placeholder module
    release = LoadedRelease(entry, stubs={"vllm.config": placeholder_stub()}, sets=(study,))
    module = release.import_module(STUDY_MEMBER)
    assert module.blocks(33) == 3 and release.stubs_used == {"vllm.config"}
    with pytest.raises(StubNotProvided, match=r"vllm\.config\.VllmConfig is a placeholder"):
        module.needs_config()
    # without the stub, the import nobody provides is named
    with pytest.raises(LoadError, match=r"vllm\.config is neither in vLLM 0\.99\.0's cache nor stubbed") as info:
        LoadedRelease(entry, stubs={}, sets=(study,)).import_module(STUDY_MEMBER)
    assert info.value.missing == "vllm.config"


def test_placeholders_only_exist():
    from repro_studies.upstream.stubs import StubNotProvided, placeholder

    cg = placeholder("vllm.v1.attention.backend", "AttentionCGSupport")
    assert placeholder("vllm.v1.attention.backend", "AttentionCGSupport") is cg
    assert cg.ALWAYS is placeholder("vllm.v1.attention.backend.AttentionCGSupport", "ALWAYS")
    assert (cg | None) is not None  # usable in annotations
    with pytest.raises(StubNotProvided):
        cg()
    assert not hasattr(cg, "__wrapped__")  # dunder look-ups are not placeholders

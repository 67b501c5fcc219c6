"""Bug 1 in releases (notebook 06): the page check, the cache layers a (synthetic) release's ``__init__`` lines build,
the links' refusals, the classification of every cell and the answer per release and runner; then two real
releases' own chains on the CPU."""

from __future__ import annotations

import json
import textwrap
import types

import pandas as pd
import pytest
import torch

from repro_studies.analysis import reshape_chain as rules
from repro_studies.registry import Bug1Answer, CellOutcome, ChainLink, ChainStop, KVViewPath, RaisedBy, Runner
from repro_studies.report import phrases
from repro_studies.upstream.pages import page_check
from repro_studies.upstream.released_code import NotProvided, ReleasedCode
from repro_studies.upstream.released_model import CacheKind, ModelBuilder, cache_kind

# ---- the page check: a view against every logical block's page ------------------------------------------------------


def test_a_view_of_one_kernel_block_per_padded_page_fits_exactly():
    pool = torch.zeros(1728 * 8, dtype=torch.uint8)
    view = torch.as_strided(pool, (8, 2, 584), (1728, 584, 1))
    check = page_check(view, pool, 8, 1728, 1168)
    assert check.exact and (check.kernel_blocks_per_page, check.bytes_addressed) == (1, 8 * 1168)


def test_a_view_inside_the_pool_that_crosses_a_page_is_caught():
    """Kernel blocks one payload apart instead of one page apart: every byte stays inside the pool, so PyTorch
    accepts the view, yet block b's rows land in page b-1's padding and page b's first rows."""
    pool = torch.zeros(1728 * 8, dtype=torch.uint8)
    view = torch.as_strided(pool, (8, 2, 584), (1168, 584, 1))
    check = page_check(view, pool, 8, 1728, 1168)
    assert check.blocks_outside_page == 7 and check.first_outside == (1, 1)
    assert check.padding_bytes_addressed > 0 and not check.exact


def test_a_view_that_misses_half_of_each_payload_is_caught():
    pool = torch.zeros(1728 * 8, dtype=torch.uint8)
    view = torch.as_strided(pool, (8, 1, 584), (1728, 584, 1))
    check = page_check(view, pool, 8, 1728, 1168)
    assert check.inside_pages and check.payload_bytes_missed == 8 * 584 and not check.exact


def test_a_packed_layout_is_checked_at_the_layers_slot_of_each_row():
    pool = torch.zeros(3000 * 4, dtype=torch.uint8)
    view = pool.view(-1, 3000)[:, 1000 : 1000 + 1168].view(4, 2, 584)
    assert page_check(view, pool, 4, 1728, 1168, page_offset=1000, page_stride=3000).exact
    assert not page_check(view, pool, 4, 1728, 1168).exact  # the same view read as pages one after another


# ---- a synthetic release's DeepSeek-V4 layers, built by their __init__ lines ----------------------------------------

MODEL = {
    "vllm/model_executor/layers/attention_layer_base.py": """
        class AttentionLayerBase:
            pass
    """,
    "vllm/models/deepseek_v4/heavy.py": """
        class Heavy:
            def __init__(self, n):
                raise RuntimeError("a linear layer: never built by the study")
    """,
    "vllm/models/deepseek_v4/nvidia/model.py": """
        import torch.nn as nn
        from vllm.models.deepseek_v4.attention import FlashAttention
        from vllm.models.deepseek_v4.heavy import Heavy

        class DeepseekV4DecoderLayer(nn.Module):
            def __init__(self, vllm_config, prefix):
                super().__init__()
                config = vllm_config.model_config.hf_config
                self.mlp = Heavy(config.hidden_size)
                self.attn = FlashAttention(vllm_config, prefix=f"{prefix}.attn")
    """,
    "vllm/models/deepseek_v4/attention.py": """
        import torch.nn as nn
        from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

        def rope(config):
            raise RuntimeError("needs a GPU")

        class ToySWACache(nn.Module, AttentionLayerBase):
            def __init__(self, head_dim, prefix, vllm_config, rotary=None):
                super().__init__()
                self.head_dim = head_dim
                self.block_size = 64
                self.prefix = prefix
                vllm_config.compilation_config.static_forward_context[prefix] = self

            def get_kv_cache_spec(self, vllm_config):
                return ("swa", self.block_size, self.head_dim)

            def get_attn_backend(self):
                return "SWABackend"

        class Attention(nn.Module, AttentionLayerBase):
            def __init__(self, vllm_config, prefix):
                super().__init__()
                config = vllm_config.model_config.hf_config
                self.prefix = prefix
                self.rotary = rope(config)
                self.head_dim = config.head_dim
                self.compress_ratio = max(1, config.compress_ratios[int(prefix.split(".")[2])])
                self.swa_cache = ToySWACache(self.head_dim, f"{prefix}.swa_cache", vllm_config, rotary=self.rotary)
                vllm_config.compilation_config.static_forward_context[prefix] = self

            def get_kv_cache_spec(self, vllm_config):
                if self.compress_ratio <= 1:
                    return None
                return ("mla", vllm_config.cache_config.block_size, self.compress_ratio, self.head_dim + 0)

            def get_attn_backend(self):
                return self.backend_cls

        class FlashAttention(Attention):
            backend_cls = "FlashBackend"

            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
    """,
}


def toy_code() -> ReleasedCode:
    sources = {m: textwrap.dedent(s).lstrip() for m, s in MODEL.items()}
    return ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")


def toy_config(compress_ratios: list[int]) -> types.SimpleNamespace:
    ns = types.SimpleNamespace
    hf = ns(head_dim=512, compress_ratios=compress_ratios)
    return ns(
        model_config=ns(hf_config=hf), cache_config=ns(block_size=256), compilation_config=ns(static_forward_context={})
    )


def test_the_layers_are_built_by_their_own_init_lines_and_register_in_order():
    code, vc = toy_code(), toy_config([0, 128])
    builder = ModelBuilder(code, vc)
    for layer_id in (0, 1):
        builder.decoder_layer(layer_id)
    assert list(vc.compilation_config.static_forward_context) == [
        "model.layers.0.attn.swa_cache",
        "model.layers.0.attn",
        "model.layers.1.attn.swa_cache",
        "model.layers.1.attn",
    ]
    specs = {layer.name: layer.obj.get_kv_cache_spec(vc) for layer in builder.layers}
    assert specs["model.layers.1.attn"] == ("mla", 256, 128, 512) and specs["model.layers.0.attn"] is None
    assert specs["model.layers.1.attn.swa_cache"] == ("swa", 64, 512)
    backends = {layer.name: layer.obj.get_attn_backend() for layer in builder.layers}
    assert backends["model.layers.1.attn"] == "FlashBackend"  # the subclass's, through super().__init__
    assert [layer.kind for layer in builder.layers] == [CacheKind.SWA, None, CacheKind.SWA, CacheKind.C128A]
    # the rotary embedding (an argument of the SWA cache) failed and bound a placeholder no spec reads; the linear
    # layer, which no cache needs, never ran
    assert any("needs a GPU" in f for f in builder.failures)
    assert not any("never built" in f for f in builder.failures)


def test_a_spec_that_reads_a_failed_statement_says_so():
    MODEL_BROKEN = dict(MODEL)
    MODEL_BROKEN["vllm/models/deepseek_v4/attention.py"] = MODEL["vllm/models/deepseek_v4/attention.py"].replace(
        "self.head_dim = config.head_dim", "self.head_dim = rope(config)"
    )
    sources = {m: textwrap.dedent(s).lstrip() for m, s in MODEL_BROKEN.items()}
    code, vc = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9"), toy_config([128])
    builder = ModelBuilder(code, vc)
    builder.decoder_layer(0)
    attn = next(layer for layer in builder.layers if layer.name == "model.layers.0.attn")
    with pytest.raises(TypeError, match="Missing"):
        attn.obj.get_kv_cache_spec(vc)


def test_cache_kinds_from_the_classes_that_built_them():
    path = ("DeepseekV4DecoderLayer", "DeepseekV4Attention", "DeepseekV4Indexer", "DeepseekCompressor")
    assert cache_kind((*path, "CompressorStateCache"), 4) is CacheKind.C4_INDEXER_STATE
    assert (
        cache_kind(("DeepseekV4Attention", "DeepseekCompressor", "CompressorStateCache"), 128)
        is CacheKind.C128_MAIN_STATE
    )
    assert (
        cache_kind(("DeepseekV4Attention", "DeepseekV4Indexer", "DeepseekV4IndexerCache"), 4) is CacheKind.C4_INDEXER_K
    )
    assert cache_kind(("DeepseekV4Attention", "DeepseekV4FlashMLAAttention"), 4) is CacheKind.C4A


# ---- a refusal is the release's, a missing stand-in is the study's --------------------------------------------


def test_a_bare_assert_is_the_releases_refusal_with_its_line_and_a_placeholder_is_not_run():
    from repro_studies.upstream.reshape_chain import stopped

    sources = {
        "vllm/v1/core/kv_cache_utils.py": "def group(a, b):\n    assert a <= b\n    return a\n",
        "vllm/v1/worker/utils.py": "from vllm.missing import helper\n\ndef select(n):\n    return helper(n)\n",
    }
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    with pytest.raises(AssertionError) as refused:
        code.function("vllm/v1/core/kv_cache_utils.py", "group")(2, 1)
    stop = stopped(ChainLink.GROUPS, refused.value, code)
    assert (stop.stop, stop.where, stop.message) == (
        ChainStop.REJECTED,
        "vllm/v1/core/kv_cache_utils.py:2",
        "AssertionError: assert a <= b",
    )
    with pytest.raises(NotProvided) as missing:
        code.function("vllm/v1/worker/utils.py", "select")(3)
    assert stopped(ChainLink.KERNEL_BLOCKS, missing.value, code).stop is ChainStop.NOT_RUN


def test_the_releases_own_raise_is_its_refusal_and_a_raise_inside_a_call_on_its_line_is_not():
    """The rewritten view code's guard (``raise ValueError``) and a bare ``assert`` are the release's own checks; a
    view PyTorch refuses raises inside a call on the release's line."""
    from repro_studies.upstream.reshape_chain import raised_by, stopped

    sources = {
        "vllm/v1/kv_cache_interface.py": textwrap.dedent("""
            import torch

            def create_views(raw, block_stride, page, ratio):
                if ratio > 1 and block_stride != page:
                    raise ValueError(
                        f"block stride {block_stride} != page {page}. Reduce --block-size"
                    )
                assert page > 0
                return torch.as_strided(raw, (4, page), (block_stride, 1))
        """).lstrip()
    }
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    views = code.function("vllm/v1/kv_cache_interface.py", "create_views")
    raw = torch.zeros(64, dtype=torch.int8)
    outcomes = []
    for args in ((48, 8, 2), (8, 0, 1), (32, 32, 1)):
        with pytest.raises(Exception) as raised:
            views(raw, *args)
        outcomes.append((type(raised.value).__name__, raised_by(raised.value, code)))
    assert outcomes == [
        ("ValueError", RaisedBy.RELEASE),
        ("AssertionError", RaisedBy.RELEASE),
        ("RuntimeError", RaisedBy.CALL),  # PyTorch's setStorage, inside torch.as_strided
    ]
    with pytest.raises(ValueError) as guard:
        views(raw, 48, 8, 2)
    stop = stopped(ChainLink.VIEWS, guard.value, code)
    assert (stop.stop, stop.where, stop.raised_by) == (
        ChainStop.REJECTED,
        "vllm/v1/kv_cache_interface.py:5",
        RaisedBy.RELEASE,
    )
    assert "Reduce --block-size" in stop.message


def test_a_runner_views_the_cache_by_its_reshape_by_the_rewritten_path_or_not_at_all():
    from repro_studies.upstream.reshape_chain import ReleaseChain

    rewritten = {
        "vllm/v1/worker/gpu/attn_utils.py": "from vllm.v1.worker.utils import allocate_kv_cache\n\n"
        "def init_kv_cache(config):\n    kv_caches = allocate_kv_cache(config)\n    return kv_caches\n",
        "vllm/v1/worker/utils.py": "from vllm.v1.kv_cache_interface import create_kv_cache_views\n\n"
        "def allocate_kv_cache(c):\n    return create_kv_cache_views(c)\n",
        "vllm/v1/kv_cache_interface.py": "def create_kv_cache_views(c):\n    return {}\n",
    }
    reshape = {"vllm/v1/worker/gpu/attn_utils.py": "def _reshape_kv_cache(a, b):\n    return {}\n"}
    for sources, v2 in ((rewritten, KVViewPath.VIEWS), (reshape, KVViewPath.RESHAPE)):
        chain = ReleaseChain("9.9.9", sources.__getitem__, sources)
        assert (chain.path(Runner.V2), chain.path(Runner.V1)) == (v2, None)
    calls_nothing = {**rewritten, "vllm/v1/worker/utils.py": "def allocate_kv_cache(c):\n    return {}\n"}
    assert ReleaseChain("9.9.9", calls_nothing.__getitem__, calls_nothing).path(Runner.V2) is None


def test_a_layers_pages_in_a_rewritten_tensor_start_at_its_place_among_the_tensors_layers():
    from repro_studies.upstream.reshape_chain import page_layout

    ns = types.SimpleNamespace
    tensor = ns(layers=["a", "b", "c"], offset=100, layer_stride=1728, block_stride=47808)
    config = ns(kv_cache_tensors=[tensor])
    assert page_layout(config, "c", 1728) == (100 + 2 * 1728, 47808)
    assert page_layout(ns(kv_cache_tensors=[ns(shared_by=["a"], offset=0, block_stride=0)]), "a", 1728) == (0, 1728)


def test_the_model_packages_own_platform_choice_picks_the_decoder_layer():
    """From vLLM 0.33.0 the package also holds a CPU implementation (sorted before ``nvidia/``): the package's
    ``__init__`` guard, evaluated as released on the platform studied, picks the module."""
    sources = {m: textwrap.dedent(s).lstrip() for m, s in MODEL.items()}
    sources["vllm/models/deepseek_v4/cpu/model.py"] = textwrap.dedent("""
        class DeepseekV4DecoderLayer:
            def __init__(self, vllm_config, prefix):
                raise RuntimeError("the CPU model: not the platform studied")

        class DeepseekV4ForCausalLM:
            pass
    """).lstrip()
    sources["vllm/models/deepseek_v4/nvidia/model.py"] += "\n\nclass DeepseekV4ForCausalLM:\n    pass\n"
    sources["vllm/models/deepseek_v4/__init__.py"] = textwrap.dedent("""
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            from .cpu.model import DeepseekV4ForCausalLM
        else:
            from .nvidia.model import DeepseekV4ForCausalLM
    """).lstrip()
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    code.standins["vllm.platforms.current_platform"] = types.SimpleNamespace(is_cpu=lambda: False)
    vc = toy_config([0, 128])
    builder = ModelBuilder(code, vc)
    builder.decoder_layer(1)
    assert "model.layers.1.attn" in vc.compilation_config.static_forward_context
    cpu = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.8")
    cpu.standins["vllm.platforms.current_platform"] = types.SimpleNamespace(is_cpu=lambda: True)
    vc = toy_config([0, 128])
    builder = ModelBuilder(cpu, vc)
    builder.decoder_layer(1)  # the CPU module's layer builds no cache the study knows
    assert not builder.layers and not vc.compilation_config.static_forward_context


# ---- cells, runs and answers from rows ------------------------------------------------------------------------------

PAGES = 4


def cell(**changes) -> dict:
    """A C128A cell at --block-size 256 whose view fits exactly."""
    base = {
        "release": "9.9.9",
        "runner": Runner.V1,
        "block size asked": "256",
        "block size": 256,
        "cache group": "C128A KV",
        "layer": "model.layers.2.attn",
        "kv cache group": 0,
        "kernel block size": 256,
        "spec block size": 256,
        "storage rows": 2,
        "page bytes": 1728,
        "payload bytes": 1168,
        "pages": PAGES,
        "error type": "",
        "error": "",
        "where": "",
        "sizes": json.dumps([PAGES, 2, 584]),
        "strides": json.dumps([1728, 584, 1]),
        "kernel blocks per page": 1,
        "blocks outside page": 0,
        "payload bytes missed": 0,
        "padding bytes addressed": 0,
    }
    return {**base, **changes}


ERROR = (
    "setStorage: sizes [8, 4, 584], strides [2880, 584, 1], storage offset 0, and itemsize 1 requiring a storage "
    "size of 21328 are out of bounds for storage of size 11520"
)


def raised_cell(**changes) -> dict:
    return cell(
        **{
            "block size asked": "512",
            "block size": 512,
            "spec block size": 512,
            "storage rows": 4,
            "sizes": "",
            "strides": "",
            "error type": "RuntimeError",
            "error": ERROR,
            "where": "vllm/v1/worker/gpu_model_runner.py:6976",
            "kernel blocks per page": "",
            **changes,
        }
    )


def run(block: str, runner: str = Runner.V1, **changes) -> dict:
    base = {
        "release": "9.9.9",
        "runner": runner,
        "block size asked": block,
        "block size": 256 if block == "default" else int(block),
        "stock": runner == Runner.V1,
        "environment": "" if runner == Runner.V1 else "VLLM_USE_V2_MODEL_RUNNER=1",
        "link": "",
        "stop": "",
        "where": "",
        "message": "",
    }
    return {**base, **changes}


def runners_row(runner: str, expression: str, shipped: bool = True) -> dict:
    return {
        "release": "9.9.9",
        "runner": runner,
        "shipped": shipped,
        "count expression": expression,
        "stock": runner == Runner.V1,
        "reached with": "" if runner == Runner.V1 else "VLLM_USE_V2_MODEL_RUNNER=1",
    }


BUGGY = "kv_cache_spec.block_size // kernel_block_size"
FIXED = "kv_cache_spec.storage_block_size // kernel_block_size"


def test_every_cell_outcome_is_reachable_from_its_row():
    assert rules.cell_outcome(cell()) is CellOutcome.FITS
    assert rules.cell_outcome(raised_cell()) is CellOutcome.RAISES
    assert rules.cell_outcome(cell(**{"blocks outside page": 3})) is CellOutcome.OUTSIDE_PAGE
    assert rules.cell_outcome(cell(**{"kernel blocks per page": ""})) is CellOutcome.OUTSIDE_PAGE
    assert rules.cell_outcome(cell(**{"payload bytes missed": 584})) is CellOutcome.WRONG_BYTES
    assert rules.cell_outcome(cell(**{"error type": ChainStop.REJECTED, "sizes": ""})) is CellOutcome.REJECTED
    assert rules.cell_outcome(cell(**{"error type": ChainStop.NOT_RUN, "sizes": ""})) is CellOutcome.NOT_RUN


def test_pytorchs_two_refusals_are_parsed_and_nothing_else():
    assert rules.pytorch_refusal(ERROR)["sizes"] == [8, 4, 584]
    view = rules.pytorch_refusal("shape '[12, 192, 132]' is invalid for input of size 101376")
    assert (view["kind"], view["sizes"]) == ("view", [12, 192, 132])
    assert rules.pytorch_refusal("CUDA error: out of memory") is None


def answers_of(runners: list[dict], runs: list[dict], cells: list[dict]) -> pd.DataFrame:
    return rules.answers(pd.DataFrame(runners), pd.DataFrame(runs), pd.DataFrame(cells)).set_index("runner")


def test_reached_latent_absent_and_not_shipped_come_from_the_rows():
    rejected = {"link": ChainLink.GROUPS, "stop": ChainStop.REJECTED, "message": "AssertionError: assert x"}
    runs = [
        run("default"),
        run("128", **rejected),
        run("512", link=ChainLink.RESHAPE, message=f"RuntimeError: {ERROR}"),
        run("default", Runner.V2),
        run("512", Runner.V2),
    ]
    default = {"block size asked": "default"}
    cells = [cell(**default), raised_cell(), cell(runner=Runner.V2, **default)]
    cells.append(cell(runner=Runner.V2, **{"block size asked": "512", "spec block size": 512}))
    got = answers_of([runners_row(Runner.V1, BUGGY), runners_row(Runner.V2, FIXED)], runs, cells)
    assert got.loc[Runner.V1, "answer"] == Bug1Answer.REACHED
    assert got.loc[Runner.V1, "configuration"] == "--block-size 512"
    assert (got.loc[Runner.V1, "block sizes rejected"], got.loc[Runner.V1, "block sizes that fit"]) == (
        "128",
        "default",
    )
    assert got.loc[Runner.V2, "answer"] == Bug1Answer.ABSENT
    # the same rows with V2 counting by block_size: every accepted block size fits, so the bug is latent
    got = answers_of([runners_row(Runner.V1, BUGGY), runners_row(Runner.V2, BUGGY)], runs, cells)
    assert got.loc[Runner.V2, "answer"] == Bug1Answer.LATENT
    got = answers_of([runners_row(Runner.V1, "", shipped=False)], [], [])
    assert got.loc[Runner.V1, "answer"] == Bug1Answer.NOT_SHIPPED


def test_a_failure_that_is_not_the_counts_is_another_failure_and_a_run_that_did_not_run_is_undecided():
    other = raised_cell(error=ERROR.replace("sizes [8,", "sizes [5,"))  # not pages x (512 // 256)
    runs = [run("512", link=ChainLink.RESHAPE, message=f"RuntimeError: {ERROR}")]
    got = answers_of([runners_row(Runner.V1, BUGGY)], runs, [other])
    assert got.loc[Runner.V1, "answer"] == Bug1Answer.OTHER_FAILURE
    got = answers_of([runners_row(Runner.V1, FIXED)], runs, [raised_cell()])
    assert got.loc[Runner.V1, "answer"] == Bug1Answer.OTHER_FAILURE  # the right count, a wrong view: not bug 1's
    not_run = run("256", link=ChainLink.SPECS, stop=ChainStop.NOT_RUN, message="NotProvided: x")
    assert answers_of([runners_row(Runner.V1, BUGGY)], [not_run], [])["answer"].iloc[0] == Bug1Answer.UNDECIDED


def test_a_silent_wrong_view_reaches_the_bug_too():
    wrong = cell(
        **{
            "block size asked": "512",
            "spec block size": 512,
            "sizes": json.dumps([8, 4, 584]),
            "blocks outside page": 3,
        }
    )
    got = answers_of([runners_row(Runner.V1, BUGGY)], [run("512")], [wrong])
    assert got.loc[Runner.V1, "answer"] == Bug1Answer.REACHED


GUARD = (
    "The resolved KV cache layout (BLHNC) does not store blocks as dense, unpadded pages (block stride 95040 != "
    "page 2336), so a manager block cannot be split into 2 kernel blocks of 256 tokens. Reduce --block-size to 256"
)


def views_cell(**changes) -> dict:
    """A C128A cell of the rewritten path (``create_kv_cache_views``) at --block-size 256 that fits."""
    return cell(path=KVViewPath.VIEWS, **{"raised by": "", **changes})


def refused_cell(**changes) -> dict:
    return views_cell(
        **{
            "block size asked": "512",
            "block size": 512,
            "spec block size": 512,
            "sizes": "",
            "error type": "ValueError",
            "error": GUARD,
            "where": "vllm/v1/kv_cache_interface.py:337",
            "raised by": RaisedBy.RELEASE,
            "kernel blocks per page": "",
            **changes,
        }
    )


def views_runner(runner: str = Runner.V2) -> dict:
    return {**runners_row(runner, "", shipped=False), "path": KVViewPath.VIEWS}


def test_the_rewritten_path_answers_with_what_its_views_did_never_reached_or_latent():
    """No count of bug 1's kind runs there: every view fits, its own check refuses a block size (the message and
    the configuration), or a view is wrong (a problem for the verdict); a link that did not run leaves it
    undecided."""
    guarded = run("512", Runner.V2, link=ChainLink.VIEWS, message=f"ValueError: {GUARD}", **{"raised by": "x"})
    guarded["raised by"] = RaisedBy.RELEASE
    runs = [run("default", Runner.V2), guarded]
    default = {"block size asked": "default", "runner": Runner.V2}
    assert rules.cell_outcome(refused_cell()) is CellOutcome.REFUSES
    assert rules.cell_outcome(refused_cell(**{"raised by": RaisedBy.CALL})) is CellOutcome.RAISES
    got = answers_of([views_runner()], runs, [views_cell(**default), refused_cell(runner=Runner.V2)])
    assert got.loc[Runner.V2, "answer"] == Bug1Answer.VIEWS_REFUSE
    assert got.loc[Runner.V2, "configuration"] == "VLLM_USE_V2_MODEL_RUNNER=1 --block-size 512"
    assert got.loc[Runner.V2, "first error"].startswith("ValueError: The resolved KV cache layout")
    assert (got.loc[Runner.V2, "block sizes the view refuses"], got.loc[Runner.V2, "block sizes that fail"]) == (
        "512",
        "",
    )
    fits = answers_of([views_runner()], runs[:1], [views_cell(**default)])
    assert fits.loc[Runner.V2, "answer"] == Bug1Answer.VIEWS_FIT
    wrong = views_cell(**{**default, "blocks outside page": 2})
    got = answers_of([views_runner()], runs[:1], [wrong])
    assert got.loc[Runner.V2, "answer"] == Bug1Answer.VIEWS_WRONG
    unexplained = rules.releases_finding(got.reset_index()).unexplained
    assert unexplained == (rules.Unexplained("9.9.9", Runner.V2, Bug1Answer.VIEWS_WRONG),)
    not_run = run("256", Runner.V2, link=ChainLink.LAYOUT, stop=ChainStop.NOT_RUN, message="NotProvided: x")
    assert answers_of([views_runner()], [not_run], [])["answer"].iloc[0] == Bug1Answer.UNDECIDED
    # a runner the release does not ship at all is still not shipped
    assert answers_of([runners_row(Runner.V1, "", shipped=False)], [], [])["answer"].iloc[0] == Bug1Answer.NOT_SHIPPED


def test_the_readmes_reach_carries_the_rewritten_views_refusals_and_their_function():
    guarded = {**run("512", Runner.V2, link=ChainLink.VIEWS, message=f"ValueError: {GUARD}"), "raised by": "x"}
    guarded["raised by"] = RaisedBy.RELEASE
    runner = {**views_runner(), "definition": "vllm/v1/kv_cache_interface.py:create_kv_cache_views"}
    cells = [views_cell(**{"block size asked": "default", "runner": Runner.V2}), refused_cell(runner=Runner.V2)]
    got = rules.reach(pd.DataFrame([runner]), pd.DataFrame([run("default", Runner.V2), guarded]), pd.DataFrame(cells))
    (g,) = got.groups
    assert (g.answer, g.runners, g.failing) == (Bug1Answer.VIEWS_REFUSE, (Runner.V2,), ())
    assert g.definitions == ("vllm/v1/kv_cache_interface.py:create_kv_cache_views",)
    assert g.refusals == ((("512",), ("9.9.9",)),) and got.view_refusals() == g.refusals


def test_the_rewritten_paths_checks_hold_it_to_its_own_split_and_its_refusals_to_their_line():
    split = views_cell(**{"spec block size": 512, "kernel blocks per page": 2, "sizes": json.dumps([8, 1, 584])})
    good = rules.checks(pd.DataFrame([run("256")]), pd.DataFrame([split, refused_cell()]))
    assert good and all(c["ok"] for c in good), [c for c in good if not c["ok"]]
    assert rules.ChainCheck.RELEASE_REFUSAL in {c["check"] for c in good}
    # the same split page read as the reshape's (one kernel block per page) fails, as does a refusal with no line
    bad = rules.checks(pd.DataFrame(), pd.DataFrame([{**split, "path": KVViewPath.RESHAPE}, refused_cell(where="")]))
    assert {c["check"] for c in bad if not c["ok"]} == {
        rules.ChainCheck.FITS_EXACTLY,
        rules.ChainCheck.KERNEL_BLOCKS,
        rules.ChainCheck.RELEASE_REFUSAL,
    }


def test_the_refusals_name_the_view_codes_own_check_beside_the_links_before_it():
    runs = pd.DataFrame(
        [
            run("128", link=ChainLink.KERNEL_BLOCKS, stop=ChainStop.REJECTED, message="ValueError: No common"),
            {**run("512", link=ChainLink.VIEWS, message=f"ValueError: {GUARD}"), "raised by": RaisedBy.RELEASE},
            {**run("768", link=ChainLink.VIEWS, message="RuntimeError: setStorage"), "raised by": RaisedBy.CALL},
        ]
    ).assign(where=["vllm/v1/worker/utils.py:376", "vllm/v1/kv_cache_interface.py:337", "x.py:1"])
    table = rules.refusal_summary(runs)
    assert table[["link", "block sizes"]].values.tolist() == [
        [ChainLink.KERNEL_BLOCKS, "128"],
        [ChainLink.VIEWS, "512"],
    ]


def test_checks_pass_only_on_the_outcome_they_name():
    runs = [run("256"), run("512", link=ChainLink.RESHAPE, message=f"RuntimeError: {ERROR}")]
    good = rules.checks(pd.DataFrame(runs), pd.DataFrame([cell(), raised_cell()]))
    assert good and all(c["ok"] for c in good)
    not_pytorch = raised_cell(**{"error type": "KeyError", "error": "'model.layers.2.attn'"})
    bad = rules.checks(pd.DataFrame(runs[1:]), pd.DataFrame([not_pytorch]))
    assert [c["check"] for c in bad if not c["ok"]] == [rules.ChainCheck.PYTORCH_REFUSAL]
    two_per_page = cell(**{"kernel blocks per page": 2, "sizes": json.dumps([8, 1, 584])})
    bad = rules.checks(pd.DataFrame(runs[:1]), pd.DataFrame([two_per_page]))
    assert {c["check"] for c in bad if not c["ok"]} == {rules.ChainCheck.FITS_EXACTLY, rules.ChainCheck.KERNEL_BLOCKS}
    stopped = rules.checks(pd.DataFrame([run("256", stop=ChainStop.NOT_RUN, link=ChainLink.SPECS)]), pd.DataFrame())
    assert [c["ok"] for c in stopped] == [False]


def test_reach_groups_the_answers_per_runner_with_what_a_user_types_and_what_the_view_did():
    """Two releases: V1 (stock) counts by block_size in both and fails at 512; V2 needs the variable, counts by
    block_size in 1.0.0 (every accepted block size fits: latent) and by storage rows in 1.1.0; neither ships in
    1.2.0."""

    def at(release, rows):
        return [{**r, "release": release} for r in rows]

    failing = run("512", link=ChainLink.RESHAPE, message=f"RuntimeError: {ERROR}")
    default = {"block size asked": "default"}
    runs, cells, runners = [], [], []
    for release, v2 in (("1.0.0", BUGGY), ("1.1.0", FIXED)):
        runs += at(release, [run("default"), failing, run("default", Runner.V2), run("512", Runner.V2)])
        v2_cell = cell(runner=Runner.V2, **{"block size asked": "512", "spec block size": 512})
        cells += at(release, [cell(**default), raised_cell(), cell(runner=Runner.V2, **default), v2_cell])
        runners += at(
            release,
            [
                {**runners_row(Runner.V1, BUGGY), "definition": "v1.py:Runner._reshape"},
                {**runners_row(Runner.V2, v2), "definition": "v2.py:_reshape"},
            ],
        )
    runners += at("1.2.0", [runners_row(Runner.V1, "", shipped=False), runners_row(Runner.V2, "", shipped=False)])
    got = rules.reach(pd.DataFrame(runners), pd.DataFrame(runs), pd.DataFrame(cells))
    assert got.releases == ("1.0.0", "1.1.0", "1.2.0")
    assert [(g.answer, g.runners, g.releases) for g in got.groups] == [
        (Bug1Answer.REACHED, (Runner.V1,), ("1.0.0", "1.1.0")),
        (Bug1Answer.LATENT, (Runner.V2,), ("1.0.0",)),
        (Bug1Answer.ABSENT, (Runner.V2,), ("1.1.0",)),
        (Bug1Answer.NOT_SHIPPED, (Runner.V1, Runner.V2), ("1.2.0",)),
    ]
    reached, latent, absent, gone = got.groups
    assert (reached.stock, reached.switches) == (("1.0.0", "1.1.0"), ())
    assert (reached.failing, reached.outcomes, reached.errors) == (("512",), (CellOutcome.RAISES,), ("RuntimeError",))
    assert (reached.definitions, reached.counts) == (("v1.py:Runner._reshape",), (BUGGY,))
    assert latent.switches == (("VLLM_USE_V2_MODEL_RUNNER=1", ("1.0.0",)),) and latent.failing == ()
    assert absent.counts == (FIXED,) and gone.definitions == () and gone.counts == ("",)
    assert (got.default_block_sizes, got.default_fails, got.sweep) == ((256,), (), ("default", "512"))
    assert got.answered(Bug1Answer.LATENT, Bug1Answer.ABSENT) == (latent, absent)
    # each group keeps the rows of the answers frame behind it
    frame = rules.answers(pd.DataFrame(runners), pd.DataFrame(runs), pd.DataFrame(cells))
    assert [(frame.loc[i, "release"], frame.loc[i, "runner"]) for i in reached.positions] == [
        ("1.0.0", Runner.V1),
        ("1.1.0", Runner.V1),
    ]


def test_compact_answers_merge_consecutive_releases_with_the_same_answer():
    rows = [
        {**dict.fromkeys(rules.ANSWER_COLUMNS, ""), "release": v, "runner": Runner.V1, "answer": a, "stock": True}
        for v, a in (("0.20.0", "reached"), ("0.21.0", "reached"), ("0.22.0", "absent"), ("0.23.0", "reached"))
    ]
    table = rules.compact_answers(pd.DataFrame(rows))
    assert table["releases"].tolist() == ["0.20.0 – 0.21.0", "0.22.0", "0.23.0"]
    assert rules.release_ranges(["0.20.0", "0.20.1", "0.21.0", "0.23.0", "0.24.0", "0.29.0"]) == (
        "0.20.0 – 0.21.0, 0.23.0 – 0.24.0, 0.29.0"
    )
    # a run that read a list (0.20.0, 0.21.0: 0.20.1 unread) names each release, never a range over unread ones
    assert rules.compact_answers(pd.DataFrame(rows), whole=False)["releases"].tolist() == [
        "0.20.0",
        "0.21.0",
        "0.22.0",
        "0.23.0",
    ]
    assert rules.release_ranges(["0.20.0", "0.21.0"], whole=False) == "0.20.0, 0.21.0"
    assert rules.reads_every_release({"parameters": {"releases": "all"}, "profile": "cpu"})
    assert rules.reads_every_release({"parameters": {}, "profile": "gpu"})
    assert not rules.reads_every_release({"parameters": {}, "profile": "cpu"})
    assert not rules.reads_every_release({"parameters": {"releases": "0.22.0,0.23.0"}, "profile": "gpu"})


def test_the_verdict_reproduces_bug_1_only_where_a_release_reaches_it():
    def answer(release, runner, value, configuration=""):
        row = dict.fromkeys(rules.ANSWER_COLUMNS, "")
        return {**row, "release": release, "runner": runner, "answer": value, "configuration": configuration}

    reached = pd.DataFrame(
        [
            answer("0.22.0", Runner.V1, Bug1Answer.REACHED, "--block-size 512"),
            answer("0.22.1", Runner.V1, Bug1Answer.REACHED, "--block-size 512"),
            answer("0.22.0", Runner.V2, Bug1Answer.REACHED, "VLLM_USE_V2_MODEL_RUNNER=1 --block-size 512"),
            answer("0.23.0", Runner.V2, Bug1Answer.ABSENT),
        ]
    )
    finding = rules.releases_finding(reached)
    assert finding.outcomes == ("reproduced",) and not finding.unexplained
    quiet = pd.DataFrame([answer("0.23.0", Runner.V2, Bug1Answer.ABSENT), answer("0.34.0", Runner.V2, "not shipped")])
    assert rules.releases_finding(quiet).outcomes == ("not reproduced",)
    other = pd.DataFrame([answer("0.23.0", Runner.V2, Bug1Answer.OTHER_FAILURE)])
    (unexplained,) = rules.releases_finding(other).unexplained
    assert unexplained == rules.Unexplained("0.23.0", Runner.V2, Bug1Answer.OTHER_FAILURE)
    assert phrases.unexplained(unexplained) == "vLLM 0.23.0 V2: another reshape failure"


# ---- the notebook's parameters --------------------------------------------------------------------------------------


def test_block_sizes_and_releases_are_checked_before_any_work():
    from repro.parameters import ParameterError
    from repro_studies.notebooks import ReshapeReleasesParameters
    from repro_studies.walkthrough.reshape_releases import CPU_BLOCK_SIZES, resolve_block_sizes, resolve_releases

    for bad in ("", "256,,x", "0", "70000", "256, -16", "auto"):
        with pytest.raises(ParameterError, match=r"^block_sizes: "):
            ReshapeReleasesParameters.build({"block_sizes": bad}, "cpu")
    assert ReshapeReleasesParameters.build({"block_sizes": "default,256, 512"}, "cpu").block_sizes == "default,256, 512"
    assert [b.value for b in resolve_block_sizes("default", "cpu")] == list(CPU_BLOCK_SIZES)
    assert [b.label for b in resolve_block_sizes("512,default,512", "cpu")] == ["512", "default"]
    assert [b.value for b in resolve_block_sizes("all", "cpu")][:3] == [None, 16, 32]
    assert resolve_releases("default", "cpu", True) == ["0.22.0", "0.23.0", "0.34.0"]
    assert resolve_releases("0.23.0, 0.22.0,0.23.0", "cpu", True) == ["0.23.0", "0.22.0"]
    with pytest.raises(ParameterError, match=r"^releases: "):
        resolve_releases("0.22.x", "cpu", True)


# ---- two real releases, each through its own chain ------------------------------------------------------------------


def studied(versions: tuple[str, ...], blocks: tuple[int | None, ...]) -> tuple[pd.DataFrame, ...]:
    """The runners, runs and cells of real releases' own chains at ``blocks`` (None: no flag), from the wheel
    cache (fetched once); skipped where the registry cannot be reached."""
    from repro_studies.upstream import reshape_chain as chain_lib
    from repro_studies.upstream.releases import fetch_index

    try:
        fetch_index(timeout_s=20)
    except OSError as exc:
        pytest.skip(f"the registry is not reachable here ({type(exc).__name__})")
    rows: tuple[list, list, list] = ([], [], [])
    for version in versions:
        chain = chain_lib.load_chain(version)
        assert isinstance(chain, chain_lib.ReleaseChain), chain
        study = chain_lib.study_release(chain, [chain_lib.BlockSizeChoice(b) for b in blocks])
        for table, got in zip(rows, (study.runners, study.runs, study.cells)):
            table += got
    return tuple(pd.DataFrame(t) for t in rows)


@pytest.mark.integration
def test_two_releases_own_chains_reach_the_bug_where_they_count_by_block_size():
    """vLLM 0.22.0 counts ``block_size // kernel_block_size`` in both runners and 0.23.0 fixed V2 only: at
    ``--block-size 512`` the release's own selection gives kernel blocks of 256, so every compressed group's view
    asks for twice its pool in 0.22.0's runners and 0.23.0's V1 (PyTorch's error), while 0.23.0's V2 fits; with no
    flag the default path gives 256 and everything fits; 128 is refused by the grouping. (The wheels are the ones
    the CPU run's notebook 06 fetches.)"""
    runners, runs, cells = studied(("0.22.0", "0.23.0"), (None, 128, 512))
    answers = rules.answers(runners, runs, cells).set_index(["release", "runner"])
    assert answers.loc[("0.22.0", Runner.V1), "answer"] == Bug1Answer.REACHED
    assert answers.loc[("0.22.0", Runner.V1), "configuration"] == "--block-size 512"
    assert answers.loc[("0.22.0", Runner.V2), "configuration"] == "VLLM_USE_V2_MODEL_RUNNER=1 --block-size 512"
    assert answers.loc[("0.23.0", Runner.V1), "answer"] == Bug1Answer.REACHED
    assert answers.loc[("0.23.0", Runner.V2), "answer"] == Bug1Answer.ABSENT
    assert set(answers["default block size"]) == {"256"}
    assert set(answers["block sizes rejected"]) == {"128"}
    stock = runners.set_index(["release", "runner"])["stock"]
    assert stock.loc[("0.22.0", Runner.V1)] and not stock.loc[("0.22.0", Runner.V2)]
    c128a = cells[(cells.release == "0.22.0") & (cells["cache group"] == "C128A KV")]
    at_512 = c128a[c128a["block size asked"] == "512"]
    assert set(at_512["error type"]) == {"RuntimeError"} and all("setStorage" in e for e in at_512["error"])
    assert set(at_512["kernel block size"]) == {256} and set(at_512["storage rows"]) == {4}
    checks = rules.checks(runs, cells)
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]][:3]


@pytest.mark.integration
def test_the_rewritten_views_of_two_releases_fit_or_are_refused_by_their_own_checks():
    """vLLM 0.29.0 and 0.34.0 ship no reshape: each runner calls ``allocate_kv_cache``. With no flag every view
    fits its pages; at ``--block-size 512`` 0.29.0's selection splits a block into two kernel blocks of 256 and
    ``create_kv_cache_views`` refuses the block-outermost layout with its own ValueError in both runners, while
    0.34.0's backends take 512 whole and fit; at 16 0.34.0's C128A page holds no row and an ``assert`` of its view
    code refuses it. 0.34.0 ships no V1 runner. (0.34.0 is the CPU run's release; 0.29.0 is fetched here.)"""
    runners, runs, cells = studied(("0.29.0", "0.34.0"), (None, 16, 512))
    answers = rules.answers(runners, runs, cells).set_index(["release", "runner"])
    assert set(runners.path) == {KVViewPath.VIEWS, ""} and set(runs.path) == {KVViewPath.VIEWS}
    for runner in (Runner.V1, Runner.V2):
        assert answers.loc[("0.29.0", runner), "answer"] == Bug1Answer.VIEWS_REFUSE
        assert answers.loc[("0.29.0", runner), "block sizes the view refuses"] == "512"
        assert "Reduce --block-size to 256" in answers.loc[("0.29.0", runner), "first error"]
    assert answers.loc[("0.34.0", Runner.V1), "answer"] == Bug1Answer.NOT_SHIPPED
    assert answers.loc[("0.34.0", Runner.V2), "answer"] == Bug1Answer.VIEWS_REFUSE
    assert answers.loc[("0.34.0", Runner.V2), "block sizes that fit"] == "default, 512"
    assert answers.loc[("0.34.0", Runner.V2), "first error"].startswith("AssertionError: assert all(stride")
    assert set(runs.layout) == {"BLHNC"}
    refused = rules.with_outcomes(cells)
    refused = refused[refused.outcome == CellOutcome.REFUSES]
    assert set(refused["raised by"]) == {RaisedBy.RELEASE}
    assert set(refused[refused.release == "0.34.0"]["cache group"]) == {"C128A KV"}
    checks = rules.checks(runs, cells)
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]][:3]


def test_block_sizes_next_to_each_other_in_the_sweep_are_one_span():
    order = ["default", "16", "32", "48", "64", "256", "384", "512"]
    assert rules.block_spans("16, 32, 48, 64, 384", order) == "16–64, 384"
    assert rules.block_spans("default, 256, 384, 512", order) == "default, 256–512"
    assert rules.block_spans("256, 384", order) == "256, 384"
    assert rules.block_spans("", order) == "" and rules.block_spans("1000", order) == "1000"


def test_an_engine_config_reads_the_releases_defaults_and_its_validators_writes():
    from repro_studies.upstream.released_config import released_config

    sources = {
        "vllm/config/cache.py": textwrap.dedent("""
            from dataclasses import field

            class PassConfig:
                enable_sp: bool = False

            class CacheConfig:
                DEFAULT_BLOCK_SIZE = 16
                block_size: int = None
                cache_dtype: str = "auto"
                passes: PassConfig = field(default_factory=PassConfig)
                user_specified_block_size: bool = field(default=False, init=False)

                def _apply_block_size_default(self):
                    if self.block_size is None:
                        object.__setattr__(self, "block_size", self.DEFAULT_BLOCK_SIZE)
                    else:
                        object.__setattr__(self, "user_specified_block_size", True)
                    return self
        """).lstrip()
    }
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    cache = released_config(code, "vllm/config/cache.py", "CacheConfig")
    assert (cache.cache_dtype, cache.passes.enable_sp, cache.user_specified_block_size) == ("auto", False, False)
    cache._apply_block_size_default()
    assert cache.block_size == 16 and not cache.user_specified_block_size
    cache.block_size = 256  # what update_block_size_for_backend does: a plain assignment after the validator's
    assert cache.block_size == 256
    asked = released_config(code, "vllm/config/cache.py", "CacheConfig", block_size=512)
    asked._apply_block_size_default()
    assert (asked.block_size, asked.user_specified_block_size) == (512, True)


def test_the_reports_bullets_give_each_rewritten_refusal_its_own_releases_configuration_and_message():
    from repro_studies.report.sections.reshape_releases import groups

    def answer(release, runner, value, configuration="", refused="", error=""):
        row = dict.fromkeys(rules.ANSWER_COLUMNS, "")
        return {
            **row,
            "release": release,
            "runner": runner,
            "stock": runner == Runner.V2,
            "answer": value,
            "configuration": configuration,
            "block sizes the view refuses": refused,
            "first error": error,
        }

    frame = pd.DataFrame(
        [
            answer("0.28.0", Runner.V1, Bug1Answer.REACHED, "--block-size 512", error=f"RuntimeError: {ERROR}"),
            answer("0.29.0", Runner.V2, Bug1Answer.VIEWS_REFUSE, "--block-size 512", "512", f"ValueError: {GUARD}"),
            answer("0.30.0", Runner.V2, Bug1Answer.VIEWS_REFUSE, "--block-size 512", "512", f"ValueError: {GUARD}"),
            answer("0.32.0", Runner.V2, Bug1Answer.VIEWS_REFUSE, "--block-size 16", "16", "AssertionError: assert x"),
        ]
    )
    got = groups(frame)
    assert [(g.answer, g.releases, g.configurations, g.first_error[:10]) for g in got] == [
        (Bug1Answer.REACHED, "0.28.0", ("--block-size 512",), "RuntimeErr"),
        (Bug1Answer.VIEWS_REFUSE, "0.29.0 – 0.30.0", ("--block-size 512",), "ValueError"),
        (Bug1Answer.VIEWS_REFUSE, "0.32.0", ("--block-size 16",), "AssertionE"),
    ]
    assert [g.stock for g in got] == ["not stock", "stock", "stock"]


def test_the_bug1_phrases_render_the_groups_and_the_crash_they_are_given():
    from repro.report.template import phrase
    from repro_studies.report.phrases import PHRASES
    from repro_studies.report.sections.reshape_releases import Group, ModelCrash

    reached = Group(Bug1Answer.REACHED, "V1", "0.1 – 0.3", "stock", ("--block-size 512", "X=1 --block-size 512"), "E1")
    refused = Group(Bug1Answer.VIEWS_REFUSE, "V2", "0.4", "not stock", ("--block-size 16",), "E2")
    lines = phrase(PHRASES, "bug1_bullets", [reached, refused]).splitlines()
    for figure in ("**reached**", "V1 runner", "(stock", "0.1 – 0.3", "`--block-size 512`;", "`X=1 --block-size 512`"):
        assert figure in lines[0], figure
    assert "(`E1`)" in lines[0] and "fail" in lines[0] and "refused" not in lines[0]  # the answer picks the verb
    assert "(not stock" in lines[1] and "`--block-size 16`" in lines[1] and "refused" in lines[1]
    assert "(`E2`)" in lines[1] and "(`E2`)" not in phrase(PHRASES, "bug1_bullets", [refused], False)
    crash = ModelCrash("[3, 2, 584]", 1234567, 1000000)
    text = phrase(PHRASES, "unreleased_model", crash, [("0.9", "V1")], "256", "model M")
    for figure in ("`--block-size 256`", "vLLM 0.9 V1", "sizes [3, 2, 584]`", "1,234,567 of 1,000,000", "model M"):
        assert figure in text, figure
    fits = phrase(PHRASES, "unreleased_model", crash, [], "256", "M")
    assert "vLLM 0.9" not in fits and "fits" in fits


def test_the_bug1_cell_phrase_renders_the_runners_answers_and_block_size_it_is_given():
    from repro.report.template import phrase
    from repro_studies.report.phrases import PHRASES
    from repro_studies.report.summary_rows import Bug1Releases, Reached

    reached = (
        Reached("V1", "stock in 0.1 only", "0.1 – 0.2", "E=0", False),
        Reached("V2", "not stock", "0.3", "", True),
    )
    others = (("absent", (("0.4", ("V1", "V2")),)),)
    cell = Bug1Releases("o", "0.1", "0.4", "--block-size 512", reached, others, "256", (("0.2", "V1"),), True)
    text = phrase(PHRASES, "bug1_answers", cell)
    order = (
        "`--block-size 512`",
        "V1 (stock in 0.1 only)",
        "0.1 – 0.2",
        "`E=0`",
        "V2 in 0.3",
        "absent:",
        "V1, V2 in 0.4",
    )
    assert [text.index(figure) for figure in order] == sorted(text.index(figure) for figure in order)
    assert "V2 (" not in text and "256 0.2 V1 fail" in text and text.endswith("(its crash: unreleased code)")
    apart = Bug1Releases(
        "o", "0.1", "0.4", "", (Reached("V1", "stock", "0.1", "", True, ("a", "b")),), (), "256", (), False
    )
    text = phrase(PHRASES, "bug1_answers", apart)
    assert "V1 (stock) in 0.1" in text and "`a` or `b`" in text and "all fit" in text and "crash" not in text

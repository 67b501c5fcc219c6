"""repro_studies.upstream.callsites on small stand-in sources shaped like a release's (no vLLM code here): the call
sites, what reaches them, the defaults as each form of the config code states them, and the verdict."""

import textwrap

import pandas as pd

from repro_studies.analysis.upstream_cost import cuda_path_rows, production_path_summary
from repro_studies.report import phrases
from repro_studies.upstream import callsites as C

ATTENTION = """
from vllm.compilation.breakable_cudagraph import eager_break_during_capture
from vllm.utils.torch_utils import direct_register_custom_op


class V4Attention:
    def __init__(self):
        self.mla = MlaLayer()

    def forward(self, x):
        torch.ops.vllm.deepseek_v4_attention(x)

    def attention_impl(self, x):
        self.mla(x)

    @eager_break_during_capture
    def _sparse_indexer_and_attn(self, x):
        self.forward_mqa(x)


def deepseek_v4_attention(x):
    layer.attention_impl(x)


direct_register_custom_op(op_name="deepseek_v4_attention", op_func=deepseek_v4_attention)


class MlaLayer:
    def forward(self, x):
        self.impl_cls.forward_mqa(self, x)
"""

FLASHMLA = """
class Builder:
    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.UNIFORM_BATCH


class FlashMLAAttention(V4Attention):
    def forward_mqa(self, x):
        self._forward_prefill(x)

    def _forward_prefill(self, x):
        for chunk_start, chunk_end in chunk_plan:
            if not swa_only:
                dequantize_and_gather_k_cache(kv, compressed, gather_lens=None, offset=0)
            dequantize_and_gather_k_cache(kv, swa, gather_lens=gather_lens[chunk_start:chunk_end], offset=n)


def warm_up():
    dequantize_and_gather_k_cache(kv, cache, gather_lens=None, offset=0)
"""

OPS = """
def dequantize_and_gather_k_cache(out, k_cache, gather_lens, offset):
    dequantize_and_gather_k_cache(out, k_cache, gather_lens, offset)
"""

CONFIG_LIST = """
DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES = frozenset({"DeepseekV4ForCausalLM", "Other"})
OPTIMIZATION_LEVEL_02 = {"compilation_config": {"cudagraph_mode": CUDAGraphMode.FULL_AND_PIECEWISE}}
OPTIMIZATION_LEVEL_00 = {"compilation_config": {"cudagraph_mode": CUDAGraphMode.NONE}}
OPTIMIZATION_LEVEL_TO_CONFIG = {
    OptimizationLevel.O0: OPTIMIZATION_LEVEL_00,
    OptimizationLevel.O2: OPTIMIZATION_LEVEL_02,
}


class VllmConfig:
    optimization_level: OptimizationLevel = OptimizationLevel.O2
"""

CONFIG_AUTO = CONFIG_LIST.replace(
    'DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES = frozenset({"DeepseekV4ForCausalLM", "Other"})\n', ""
) + textwrap.indent(
    """
def __post_init__(self):
    if "VLLM_USE_BREAKABLE_CUDAGRAPH" not in os.environ and any(a in ("DeepseekV4ForCausalLM",) for a in archs):
        os.environ["VLLM_USE_BREAKABLE_CUDAGRAPH"] = "1"
""",
    "    ",
)

CONFIG_NONE = CONFIG_AUTO.replace('"DeepseekV4ForCausalLM",', '"SomethingElse",')

COMPILATION = """
class CompilationConfig:
    _attention_ops: ClassVar[list[str]] = ["vllm::unified_attention_with_output", "vllm::deepseek_v4_attention"]
"""

ENVS = """
environment_variables = {
    "VLLM_USE_BREAKABLE_CUDAGRAPH": lambda: (os.environ.get("VLLM_USE_BREAKABLE_CUDAGRAPH", "0") == "1"),
}
"""


def sources(config: str) -> dict[str, str]:
    return {
        "vllm/models/deepseek_v4/attention.py": ATTENTION,
        "vllm/models/deepseek_v4/nvidia/flashmla.py": FLASHMLA,
        "vllm/models/deepseek_v4/common/ops/cache_utils.py": OPS,
        "vllm/config/vllm.py": config,
        "vllm/config/compilation.py": COMPILATION,
        "vllm/envs.py": ENVS,
        "vllm/models/other/model.py": "dequantize_and_gather_k_cache(x)\n",
    }


def test_the_member_set_holds_the_model_package_and_the_config():
    from repro_studies.upstream.members import PRODUCTION_PATH

    names = [
        "vllm/config/vllm.py",
        "vllm/models/deepseek_v4/nvidia/flashmla.py",
        "vllm/models/deepseek_v41/attention.py",
        "vllm/config/model.py",
    ]
    chosen = PRODUCTION_PATH.choose(names, lambda name: b"")
    assert chosen == ["vllm/config/vllm.py", "vllm/models/deepseek_v4/nvidia/flashmla.py"]


def test_call_sites_loops_conditions_and_reach():
    rows = C.production_path(sources(CONFIG_LIST), "vLLM 9.9.9")
    sites = [(r["function"], r["line"], r["condition"], r["gather_lens"]) for r in rows]
    assert sites == [
        ("FlashMLAAttention._forward_prefill", 13, "not swa_only", "None"),
        ("FlashMLAAttention._forward_prefill", 14, "", "gather_lens[chunk_start:chunk_end]"),
        ("warm_up", 18, "", "None"),
    ]
    prefill = rows[0]
    assert prefill["loop"] == "for (chunk_start, chunk_end) in chunk_plan"
    assert prefill["calls in function"] == 2
    assert prefill["reached through"] == "@eager_break_during_capture; splitting op vllm::deepseek_v4_attention"
    assert prefill["runs"] is C.Runs.EAGER_BREAK
    assert rows[2]["reached through"] == "nothing a capture leaves out"
    assert rows[2]["runs"] is C.Runs.IN_GRAPH


def test_defaults_as_each_form_of_the_config_states_them():
    listed = C.graph_defaults(sources(CONFIG_LIST))
    assert (listed.optimization_level, listed.cudagraph_mode) == ("O2", "FULL_AND_PIECEWISE")
    assert listed.breakable_architectures is True
    assert listed.breakable_rule == "DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES"
    assert listed.splitting_ops == ("vllm::unified_attention_with_output", "vllm::deepseek_v4_attention")
    assert listed.breakable_env_default == "'0'"
    assert listed.builder_support == {"flashmla.Builder": "AttentionCGSupport.UNIFORM_BATCH"}
    auto = C.graph_defaults(sources(CONFIG_AUTO))
    assert auto.breakable_architectures is True and auto.breakable_rule.startswith("VllmConfig sets")
    assert C.graph_defaults(sources(CONFIG_NONE)).breakable_architectures is False


def test_without_the_breakable_default_the_splitting_op_decides():
    config = CONFIG_AUTO.replace("    def __post_init__", "    def _gone").replace(
        'os.environ["VLLM_USE_BREAKABLE_CUDAGRAPH"] = "1"', "pass"
    )
    rows = C.production_path(sources(config), "vLLM 9.9.9")
    assert rows[0]["breakable CUDA graph by default"] == "no (VLLM_USE_BREAKABLE_CUDAGRAPH defaults to '0')"
    assert rows[0]["runs"] is C.Runs.BETWEEN_PIECES and rows[0]["default cudagraph_mode"] == "FULL_AND_PIECEWISE"
    no_split = sources(config)
    no_split["vllm/config/compilation.py"] = COMPILATION.replace(', "vllm::deepseek_v4_attention"', "")
    row = C.production_path(no_split, "vLLM 9.9.9")[0]
    assert row["reached through"] == "@eager_break_during_capture"
    assert row["runs"] is C.Runs.MODE_DEPENDENT


def test_summary_per_function_and_sentence():
    frame = pd.DataFrame(C.production_path(sources(CONFIG_LIST), "vLLM 9.9.9"))
    summary = production_path_summary(frame)
    prefill = summary[summary["function"] == "FlashMLAAttention._forward_prefill"].iloc[0]
    counts = (prefill["calls per iteration"], prefill["conditional calls"], prefill["conditions"])
    assert counts == (2, 1, "not swa_only")
    cuda = cuda_path_rows(summary)  # the CUDA path's rows, what the report's phrase words
    assert [r["module"].startswith("vllm/models/deepseek_v4/nvidia/") for r in cuda] == [True] * len(cuda) and cuda
    assert [r["runs"] for r in cuda] == [[C.Runs.EAGER_BREAK], [C.Runs.IN_GRAPH]] and prefill["runs"] == "eager break"
    text = phrases.production_path(summary)
    assert text.startswith("vLLM 9.9.9: FlashMLAAttention._forward_prefill (vllm/models/deepseek_v4/nvidia/")
    for figure in ("2 times", "`for (chunk_start, chunk_end) in chunk_plan`", "(1 of them", "`not swa_only`"):
        assert figure in text, figure
    assert production_path_summary(frame.iloc[0:0]).empty and cuda_path_rows(None) == []
    assert phrases.production_path(None) == ""


def test_the_production_path_phrase_words_each_class_it_is_given():
    row = {"release": "vLLM 1.2.3", "function": "f", "module": "m/nvidia/x.py", "calls per iteration": 3}
    row |= {"loop": "for c in chunks", "conditional calls": 0, "conditions": "", "default cudagraph_mode": "MODE_X"}
    summary = pd.DataFrame([row | {"runs": " | ".join(C.Runs)}])
    text = phrases.production_path(summary)
    assert text.startswith("vLLM 1.2.3: f (m/nvidia/x.py)") and "3 times" in text and "`for c in chunks`" in text
    assert "MODE_X's piecewise graphs" in text and text.count(" | ") == len(C.Runs) - 1

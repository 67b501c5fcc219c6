"""Named sets of wheel members a study needs as released: which ``.py`` files the wheel cache keeps.

A set lists exact member paths and ``fnmatch`` patterns; a pattern match may also have to pass a
content test (the gather set keeps only DeepSeek-V4 modules that define a K-cache gather). The cache
extracts the union of the sets a study asks for and records, per set, which members it found, so a
later study asking for another set extends the entry instead of starting over. A set whose
``anchor`` finds nothing in a wheel means the release does not ship what the study is about.

The release matrix's gather set is defined here; a study may declare its own set next to its code and
pass it to :func:`repro_studies.upstream.wheelcache.ensure_release` (it is registered by name on creation).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MemberSet:
    """Wheel members one study loads as released.

    ``members``: exact paths, kept when the wheel has them. ``patterns``: ``fnmatch`` patterns over the
    wheel's member paths. ``accept``: a content test a pattern match must pass (None: every match).
    ``anchor``: the pattern matches (after ``accept``) that mean "this release ships it"; when a set
    has anchors and none is found, the release does not ship the set's subject.
    """

    name: str
    members: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    accept: Callable[[str, bytes], bool] | None = field(default=None, compare=False)
    anchor: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        MEMBER_SETS[self.name] = self

    def choose(self, names: Iterable[str], read: Callable[[str], bytes]) -> list[str]:
        """The members of a wheel (its member ``names``; ``read`` gives a member's bytes) this set keeps."""
        names = list(names)
        chosen = {n for n in self.members if n in names}
        for name in names:
            if name in chosen or not any(fnmatch.fnmatchcase(name, p) for p in self.patterns):
                continue
            if self.accept is None or self.accept(name, read(name)):
                chosen.add(name)
        return sorted(chosen)

    def anchored(self, chosen: Iterable[str]) -> list[str]:
        """The chosen members that show the release ships this set's subject (all of them without anchors)."""
        chosen = list(chosen)
        if not self.anchor:
            return chosen
        return [n for n in chosen if any(fnmatch.fnmatchcase(n, p) for p in self.anchor)]

    def digest(self) -> str:
        """A short hash of the definition, so an entry made under another definition is refreshed."""
        accept = getattr(self.accept, "__qualname__", "") if self.accept else ""
        text = json.dumps([self.name, self.members, self.patterns, accept, self.anchor])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


#: Every set created so far, by name (the gather set below, and any a study module declares).
MEMBER_SETS: dict[str, MemberSet] = {}


#: A definition whose name says "dequantise and gather K" (Triton functions, JIT classes, CuTe-DSL classes).
GATHER_DEFINITION = re.compile(
    rb"^\s*(?:def|class)\s+\w*(?:dequantize_and_gather_k|dequant_gather_k|"
    rb"DequantizeAndGatherK|DequantGatherK)\w*",
    re.MULTILINE,
)


def is_gather_candidate(member: str, text: bytes) -> bool:
    """A DeepSeek-V4 module defining a K-cache gather: extracted for discovery to read."""
    return (
        member.startswith("vllm/")
        and member.endswith(".py")
        and "deepseek_v4" in member
        and b"block_table" in text
        and GATHER_DEFINITION.search(text) is not None
    )


#: vLLM helper modules loaded as released when a gather module imports them (pure Python, small).
HELPER_MODULES = (
    "vllm/model_executor/warmup/jit_warmup.py",
    "vllm/model_executor/warmup/jit_warmup_triton_helper.py",
    "vllm/model_executor/warmup/jit_warmup_cutedsl_helper.py",
    "vllm/utils/math_utils.py",
)
#: vLLM helper packages extracted whole (the CuTe-DSL gather imports ``vllm.cute_utils``).
HELPER_PACKAGES = ("vllm/cute_utils/",)
GATHER_PATTERN = "vllm/*deepseek_v4*.py"

GATHER = MemberSet(
    "gather",
    members=HELPER_MODULES,
    patterns=(GATHER_PATTERN, *(p + "*.py" for p in HELPER_PACKAGES)),
    accept=lambda member, text: not fnmatch.fnmatchcase(member, GATHER_PATTERN) or is_gather_candidate(member, text),
    anchor=(GATHER_PATTERN,),
    description="DeepSeek-V4 gather module",
)


def resolve(sets: Iterable[MemberSet | str]) -> list[MemberSet]:
    """Sets given as objects or registered names; an unknown name is a ``KeyError`` naming the known ones."""
    out = []
    for s in sets:
        if isinstance(s, str):
            if s not in MEMBER_SETS:
                raise KeyError(f"unknown member set {s!r}; known: {sorted(MEMBER_SETS)}")
            s = MEMBER_SETS[s]
        if s not in out:
            out.append(s)
    return out


#: The V2 model runner's ``_reshape_kv_cache`` (bug 1), in the module that also builds its attention groups.
RESHAPE_FUNCTION_MEMBER = "vllm/v1/worker/gpu/attn_utils.py"


#: Which gather a release runs (:mod:`repro_studies.upstream.dispatch`): the DeepSeek model packages, the platform
#: base class, ``has_cutedsl``, and the few modules their decisions read.
DISPATCH = MemberSet(
    "dispatch",
    members=(
        "vllm/model_executor/layers/deepseek_v4_attention.py",
        "vllm/model_executor/models/deepseek_v4.py",
        "vllm/platforms/interface.py",
        "vllm/utils/import_utils.py",
        "vllm/utils/math_utils.py",
        "vllm/v1/attention/ops/flashmla.py",
        "vllm/v1/attention/backends/registry.py",
        "vllm/config/cache.py",
        "vllm/envs.py",
    ),
    patterns=(
        "vllm/models/deepseek_v4/*.py",
        "vllm/models/deepseek_v41/*.py",
        "vllm/v1/attention/ops/deepseek_v4_ops/*.py",
        "vllm/model_executor/warmup/*.py",
    ),
    anchor=("vllm/models/deepseek_v4/*.py", "vllm/model_executor/layers/deepseek_v4_attention.py"),
    description="DeepSeek-V4 model code",
)

#: Does the runner narrow a table (:mod:`repro_studies.upstream.blocktables`): both runners' table code, the spec
#: classes and config defaults, and the DeepSeek packages for the gather call sites.
BLOCK_TABLES = MemberSet(
    "block-tables",
    members=(
        "vllm/v1/worker/block_table.py",
        "vllm/v1/worker/gpu_input_batch.py",
        "vllm/v1/worker/gpu_model_runner.py",
        "vllm/v1/worker/gpu/block_table.py",
        "vllm/v1/worker/gpu/buffer_utils.py",
        "vllm/v1/worker/gpu/model_runner.py",
        "vllm/v1/worker/utils.py",
        "vllm/v1/worker/ubatch_utils.py",
        "vllm/v1/worker/gpu/ubatch_utils.py",
        "vllm/v1/kv_cache_interface.py",
        "vllm/v1/kv_cache_layout.py",
        "vllm/v1/kv_cache_spec_registry.py",
        "vllm/v1/attention/backends/utils.py",
        "vllm/v1/attention/backends/registry.py",
        "vllm/v1/utils.py",
        "vllm/utils/math_utils.py",
        "vllm/utils/torch_utils.py",
        "vllm/platforms/interface.py",
        "vllm/envs.py",
        "vllm/config/cache.py",
        "vllm/config/parallel.py",
        "vllm/config/scheduler.py",
        "vllm/model_executor/layers/deepseek_v4_attention.py",
    ),
    patterns=("vllm/models/deepseek_v4/*.py", "vllm/models/deepseek_v41/*.py", "vllm/model_executor/warmup/*.py"),
    anchor=("vllm/models/deepseek_v4/*.py", "vllm/model_executor/layers/deepseek_v4_attention.py"),
    description="DeepSeek-V4 model code",
)

#: The DeepSeek-V4 model package and the config modules that set its CUDA-graph defaults, read as text (with
#: ``ast``) by :mod:`repro_studies.upstream.callsites`, never imported.
PRODUCTION_PATH_PACKAGE = "vllm/models/deepseek_v4/*.py"
PRODUCTION_PATH = MemberSet(
    "production-path",
    members=("vllm/config/vllm.py", "vllm/config/compilation.py", "vllm/envs.py"),
    patterns=(PRODUCTION_PATH_PACKAGE,),
    anchor=(PRODUCTION_PATH_PACKAGE,),
    description="DeepSeek-V4 model package",
)


#: The wheel's own metadata: its ``Requires-Dist`` lines say which dependency versions the release pins (the
#: CuTe-DSL stack among them), read by :mod:`repro_studies.upstream.cutedsl_stack`.
METADATA = MemberSet(
    "metadata",
    patterns=("vllm-*.dist-info/METADATA",),
    description="wheel metadata",
)

#: Bug 1's chain in one release (:mod:`repro_studies.upstream.reshape_chain`): DeepSeek-V4's layer code (its cache
#: layers, their backends), the engine configuration and environment, the KV cache grouping and sizing, both
#: runners' attention groups, kernel block selection, allocation and reshape.
V1_RUNNER_MEMBER = "vllm/v1/worker/gpu_model_runner.py"
RESHAPE_CHAIN = MemberSet(
    "reshape-chain",
    members=(
        RESHAPE_FUNCTION_MEMBER,
        V1_RUNNER_MEMBER,
        "vllm/v1/worker/utils.py",
        "vllm/v1/worker/ubatch_utils.py",
        "vllm/v1/worker/worker_base.py",
        "vllm/v1/kv_cache_interface.py",
        "vllm/v1/kv_cache_layout.py",
        "vllm/v1/kv_cache_spec_registry.py",
        "vllm/v1/core/kv_cache_utils.py",
        "vllm/v1/core/kv_cache_planning.py",
        "vllm/v1/core/single_type_kv_cache_manager.py",
        "vllm/v1/hisparse/layout.py",
        "vllm/v1/attention/backend.py",
        "vllm/v1/attention/backends/registry.py",
        "vllm/v1/attention/backends/utils.py",
        "vllm/distributed/kv_transfer/kv_connector/utils.py",
        "vllm/model_executor/layers/attention_layer_base.py",
        "vllm/model_executor/layers/deepseek_v4_attention.py",
        "vllm/model_executor/layers/deepseek_compressor.py",
        "vllm/model_executor/models/deepseek_v4.py",
        "vllm/model_executor/models/utils.py",
        "vllm/config/__init__.py",
        "vllm/config/utils.py",
        "vllm/config/vllm.py",
        "vllm/config/cache.py",
        "vllm/config/model.py",
        "vllm/config/scheduler.py",
        "vllm/config/parallel.py",
        "vllm/config/attention.py",
        "vllm/config/kernel.py",
        "vllm/config/compilation.py",
        "vllm/v1/worker/gpu_worker.py",
        "vllm/envs.py",
        "vllm/platforms/interface.py",
        "vllm/utils/math_utils.py",
        "vllm/utils/torch_utils.py",
    ),
    patterns=("vllm/models/deepseek_v4/*.py", "vllm/v1/attention/backends/mla/*.py"),
    anchor=(RESHAPE_FUNCTION_MEMBER, V1_RUNNER_MEMBER),
    description="model runners' _reshape_kv_cache / _reshape_kv_cache_tensors",
)

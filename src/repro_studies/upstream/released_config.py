"""A release's engine configuration for DeepSeek-V4, built from its own config classes.

A ``vllm serve`` user sets a few knobs (``--block-size``, ``--kv-cache-dtype``, ``VLLM_USE_V2_MODEL_RUNNER``);
every other field of the configuration is the release's own default. :class:`ReleasedConfig` is such an
object: the values the study sets, then the default its class body declares (``x: T = v``,
``Field(default=...)``), then the class's own methods and properties, compiled from the release (so
``vllm_config.use_v2_model_runner`` is the release's property, run). Only the model's facts are the study's:
:data:`MODEL_FACTS` (DeepSeek-V4's public configuration) and :class:`ModelFacts` (what vLLM derives from it
that the study does not compute: a mixture of experts, a quantized checkpoint).

The environment a release reads (``vllm.envs``) is the release's own ``environment_variables`` table evaluated
against :class:`Environment`, the variables the study sets, so an unset variable reads as the release's
default.
"""

from __future__ import annotations

import ast
import os
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from repro_studies.registry import BUG1_KV_CACHE_DTYPE
from repro_studies.upstream.released_code import (
    ClassRef,
    NotProvided,
    ReleasedCode,
    ReleasedObject,
    released_field_default,
)

VLLM_CONFIG = "vllm/config/vllm.py"
CACHE_CONFIG = "vllm/config/cache.py"
MODEL_CONFIG = "vllm/config/model.py"
ENVS = "vllm/envs.py"
#: The environment variable that picks the model runner.
V2_RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"
#: DeepSeek-V4's architecture name (its checkpoint's ``architectures``).
ARCHITECTURE = "DeepseekV4ForCausalLM"


#: DeepSeek-V4's public configuration values that its cache layers read (the checkpoint's ``config.json``):
#: the head and index-head dimensions, the RoPE part of the head, the sliding window, and one decoder layer of
#: each kind (``compress_ratios`` 0: sliding window only, 4: C4A with the indexer, 128: C128A).
MODEL_FACTS: Mapping[str, Any] = types.MappingProxyType(
    {
        "model_type": "deepseek_v4",
        "head_dim": 512,
        "qk_rope_head_dim": 64,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "index_topk": 512,
        "sliding_window": 128,
        "compress_ratios": [0, 4, 128],
        # the same layers as transformers' ``DeepseekV4Config`` names them (vLLM 0.33.0 on reads these)
        "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        "num_hidden_layers": 3,
        "num_attention_heads": 64,
        "o_groups": 8,
    }
)


class HfConfig(types.SimpleNamespace):
    """The checkpoint's configuration: :data:`MODEL_FACTS`; any other value is not provided (raises, naming it)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotProvided(f"DeepSeek-V4's config.{name} is not provided to the released code")


@dataclass
class ModelFacts:
    """What vLLM's ``ModelConfig`` derives from DeepSeek-V4's checkpoint and the study states: the model is a
    mixture of experts and its checkpoint is quantized (its ``quantization_config``); it is a generative,
    attention model with no Mamba state. Any other question is not provided."""

    hf_config: Any
    max_model_len: int
    architectures: list[str] = field(default_factory=lambda: [ARCHITECTURE])
    runner_type: str = "generate"
    is_moe: bool = True
    is_quantized: bool = True
    is_hybrid: bool = False
    is_attention_free: bool = False
    has_inner_state: bool = False
    is_diffusion: bool = False
    use_mla: bool = True
    original_max_model_len: int | None = None

    @property
    def hf_text_config(self) -> Any:
        return self.hf_config

    #: The release's ``ModelConfig``: a field the study does not state reads the default its class declares
    #: (a user's knob left alone, e.g. ``logits_processors``); its properties are not run (they derive facts
    #: from the checkpoint, which are the ones above).
    declared: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "declared":
            raise AttributeError(name)
        if self.declared is not None and _field_default(self.declared._cls, name) is not None:
            return getattr(self.declared, name)
        raise NotProvided(f"ModelConfig.{name} of DeepSeek-V4 is not provided to the released code")


class ReleasedConfig(ReleasedObject):
    """An instance of a release's config class: the values set, then the default its class body declares for
    the field (a default factory naming another config class gives that class at its defaults), then its
    methods and properties, compiled from the release.

    Values live in the instance's ``__dict__``, as in a real instance: the release's own validators set fields
    with ``object.__setattr__`` as well as by assignment."""

    def __init__(self, cls: ClassRef, values: Mapping[str, Any]):
        super().__init__(cls, {})
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        cls: ClassRef = object.__getattribute__(self, "_cls")
        declared = _field_default(cls, name)
        if declared is None:
            return cls._attribute(name, self)
        kind, expr, owner = declared
        code = owner._code
        if kind == "factory" and isinstance(expr, ast.Name):
            nested = _config_class(code, owner._member, expr.id)
            if nested is not None:  # a nested config class, at its own defaults
                self.__dict__[name] = ReleasedConfig(nested, {})
                return self.__dict__[name]
        value = code.evaluate(owner._member, ast.unparse(expr))
        self.__dict__[name] = value() if kind == "factory" else value
        return self.__dict__[name]


def _config_class(code: ReleasedCode, member: str, name: str) -> ClassRef | None:
    """The released class ``name`` of ``member`` (defined there or imported from a released module)."""
    node = code.toplevel(member, name)
    if isinstance(node, ast.ClassDef):
        return code.class_ref(member, name)
    if isinstance(node, ast.ImportFrom):
        source = code.member_of(code.absolute_module(member, node))
        if source is not None and isinstance(code.toplevel(source, name), ast.ClassDef):
            return code.class_ref(source, name)
    return None


def _field_default(cls: ClassRef, name: str) -> tuple[str, ast.expr, ClassRef] | None:
    """``(kind, expression, owner)`` of the default a config class (or a released base) declares for a field."""
    for owner in cls.lineage():
        for stmt in owner._node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                if stmt.value is None:
                    return None
                found = released_field_default(stmt.value)
                return None if found is None else (found[0], found[1], owner)
    return None


def released_config(code: ReleasedCode, member: str, class_name: str, **values: Any) -> ReleasedConfig:
    return ReleasedConfig(code.class_ref(member, class_name), values)


class Environment:
    """``os`` as a release sees it: the real module, with the environment the study sets (nothing else)."""

    def __init__(self, variables: Mapping[str, str]):
        self.environ = dict(variables)

    def getenv(self, key: str, default: Any = None) -> Any:
        return self.environ.get(key, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def env_value(code: ReleasedCode, name: str, variables: Mapping[str, str]) -> Any:
    """The release's own reading of environment variable ``name`` (its ``environment_variables`` entry)."""
    return _in_environment(code, lambda: code.value(ENVS, "environment_variables")[name](), variables)()


def _in_environment(code: ReleasedCode, fn: Any, variables: Mapping[str, str]) -> Any:
    """``fn`` of the release's ``vllm/envs.py``, called with ``os`` as :class:`Environment` (``variables``)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        previous = code.standins.get("os")
        code.standins["os"] = Environment(variables)
        try:
            return fn(*args, **kwargs)
        finally:
            if previous is None:
                code.standins.pop("os", None)
            else:
                code.standins["os"] = previous

    return call


def envs_module(code: ReleasedCode, variables: Mapping[str, str]) -> types.ModuleType:
    """``vllm.envs`` as the release reads it for ``variables``: each attribute is the release's own
    ``environment_variables`` entry, evaluated on first read."""
    module = types.ModuleType("vllm.envs")

    def read(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if isinstance(code.toplevel(ENVS, name), ast.FunctionDef):  # the module's helpers, e.g. ``is_set``
            value = _in_environment(code, code.function(ENVS, name), variables)
        else:
            value = env_value(code, name, variables)
        setattr(module, name, value)
        return value

    module.__getattr__ = read  # type: ignore[attr-defined]
    return module


def engine_config(
    code: ReleasedCode, block_size: int | None, max_model_len: int = 4096, num_blocks: int = 16
) -> ReleasedConfig:
    """The release's ``VllmConfig`` for ``vllm serve <DeepSeek-V4> --kv-cache-dtype fp8 [--block-size N]``.

    ``num_blocks`` is ``--num-gpu-blocks-override``: how many blocks the release sizes its pools for (a small
    pool keeps every view checkable byte by byte). The static forward context starts empty; the model's
    layers register themselves in it as their released ``__init__`` lines run.
    """
    model = ModelFacts(HfConfig(**MODEL_FACTS), max_model_len)
    if MODEL_CONFIG in code.members and code.toplevel(MODEL_CONFIG, "ModelConfig") is not None:
        model.declared = released_config(code, MODEL_CONFIG, "ModelConfig")
    values: dict[str, Any] = {
        "model_config": model,
        "cache_config": released_config(
            code,
            CACHE_CONFIG,
            "CacheConfig",
            block_size=block_size,
            cache_dtype=BUG1_KV_CACHE_DTYPE,
            num_gpu_blocks_override=num_blocks,
        ),
        "speculative_config": None,
        "lora_config": None,
        "quant_config": None,
        "ec_transfer_config": None,
        "kv_transfer_config": None,
        "kv_events_config": None,
        "reasoning_config": None,
    }
    for name, member, cls in CONFIG_CLASSES:
        if member in code.members and code.toplevel(member, cls) is not None:
            values[name] = released_config(code, member, cls)
    values["compilation_config"].static_forward_context = {}
    values["scheduler_config"].max_num_batched_tokens = max_model_len
    return released_config(code, VLLM_CONFIG, "VllmConfig", **values)


#: The parts of the engine configuration that stay at the release's defaults.
CONFIG_CLASSES = (
    ("compilation_config", "vllm/config/compilation.py", "CompilationConfig"),
    ("scheduler_config", "vllm/config/scheduler.py", "SchedulerConfig"),
    ("parallel_config", "vllm/config/parallel.py", "ParallelConfig"),
    ("attention_config", "vllm/config/attention.py", "AttentionConfig"),
    ("kernel_config", "vllm/config/kernel.py", "KernelConfig"),
)

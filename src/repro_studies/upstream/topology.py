"""The engine configuration a release's attention selector reads, and what each of its checks read and returned.

SM100's default for DeepSeek-V4.1 depends on the deployment: the mega attention's ``is_available_for`` reads the
model's heads and ``wo_a`` groups and the tensor-parallel size. The dispatch study hands a selector a
configuration at vLLM's defaults (:func:`default_config`) whose every field notes who read it, and runs the
selector under a profiler that keeps what each released function returned; :func:`checks` then names the
released functions that read the topology, with the values and their answer. A selector that reads the
tensor-parallel size is run again for every size of :data:`TOPOLOGIES`.
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from repro_studies.upstream.released_code import ReleasedCode

#: The configuration fields that make the topology (the model's, and the deployer's tensor-parallel size).
TOPOLOGY_FIELDS = ("num_attention_heads", "o_groups", "tensor_parallel_size")


@dataclass(frozen=True)
class Topology:
    """A deployment's attention topology. The model facts are those of the 64-head geometry with ``wo_a``
    groups of 8 heads that vLLM's own mega-attention code is measured on; the tensor-parallel size is the
    deployer's."""

    tensor_parallel_size: int
    num_attention_heads: int = 64
    o_groups: int = 8


#: The tensor-parallel sizes a selection that reads the topology is run with (the first is vLLM's default).
TOPOLOGIES = tuple(Topology(tp) for tp in (1, 2, 4, 8, 16))
DEFAULT = TOPOLOGIES[0]


def label(topologies: Iterable[Topology]) -> str:
    """``TP 1, 2, 4, 8``."""
    return "TP " + ", ".join(str(t.tensor_parallel_size) for t in topologies)


@dataclass(frozen=True)
class Read:
    """One configuration field a released function read."""

    path: str  # e.g. parallel_config.tensor_parallel_size
    value: Any
    reader: types.CodeType | None


class Recorded:
    """A configuration namespace whose fields note each read (path, value and the reading function)."""

    def __init__(self, path: str, reads: list[Read], **fields: Any):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if name not in fields:
            raise AttributeError(name)
        value = fields[name]
        if not isinstance(value, Recorded):
            path = object.__getattribute__(self, "_path")
            reader = sys._getframe(1).f_code
            object.__getattribute__(self, "_reads").append(Read(f"{path}{name}", value, reader))
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_fields")[name] = value

    def __repr__(self) -> str:
        return f"<configuration {object.__getattribute__(self, '_path') or 'vllm_config'}>"


def default_config(cache_dtype: str, topology: Topology = DEFAULT, reads: list[Read] | None = None) -> Recorded:
    """The engine configuration a selector reads, at vLLM's defaults (no ``--attention-backend``, no LoRA),
    with ``topology`` and ``--kv-cache-dtype`` ``cache_dtype``; reads are appended to ``reads``."""
    reads = reads if reads is not None else []

    def ns(path: str, **fields: Any) -> Recorded:
        return Recorded(path, reads, **fields)

    hf = ns("model_config.hf_config.", num_attention_heads=topology.num_attention_heads, o_groups=topology.o_groups)
    return ns(
        "",
        attention_config=ns("attention_config.", backend=None),
        parallel_config=ns(
            "parallel_config.",
            prefill_context_parallel_size=1,
            tensor_parallel_size=topology.tensor_parallel_size,
            decode_context_parallel_size=1,
            use_ubatching=False,
        ),
        model_config=ns("model_config.", hf_config=hf, hf_text_config=hf, max_model_len=8192),
        cache_config=ns("cache_config.", cache_dtype=cache_dtype),
        kernel_config=ns("kernel_config.", moe_backend=None, enable_jit_warmup=True),
        speculative_config=None,
        lora_config=None,
        use_v2_model_runner=False,
    )


@dataclass
class Traced:
    """One run of a selector: what it returned, the fields read, what each released function returned."""

    chosen: Any
    reads: list[Read]
    returned: dict[types.CodeType, Any] = field(default_factory=dict)

    def read_topology(self) -> bool:
        return any(r.path.endswith(".tensor_parallel_size") for r in self.reads)


def traced(
    code: ReleasedCode, fn: Callable[..., Any], takes_config: bool, cache_dtype: str, topology: Topology
) -> Traced:
    """Call a released selector with the configuration of ``topology``; its exceptions propagate."""
    reads: list[Read] = []
    returned: dict[types.CodeType, Any] = {}
    prefix = f"{code.label}/"

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code.co_filename.startswith(prefix):
            returned[frame.f_code] = arg

    args = [default_config(cache_dtype, topology, reads)] if takes_config else []
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        chosen = fn(*args)
    finally:
        sys.setprofile(previous)
    return Traced(chosen, reads, returned)


def qualname(code: ReleasedCode, reader: types.CodeType) -> str:
    """``Class.method`` (or ``function``) of the released definition a code object was compiled from."""
    member = reader.co_filename[len(code.label) + 1 :]
    if member not in code.members:
        return reader.co_name

    def starts(node: ast.AST) -> set[int]:
        return {node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))}

    for node in code.tree(member).body:
        if isinstance(node, ast.FunctionDef) and reader.co_firstlineno in starts(node):
            return node.name
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and reader.co_firstlineno in starts(sub):
                    return f"{node.name}.{sub.name}"
    return reader.co_name


def checks(code: ReleasedCode, runs: list[Traced]) -> str:
    """The released functions that read the topology over ``runs``, each with the values it read and what it
    returned: ``Class.check (member): num_attention_heads 64, o_groups 8, tensor_parallel_size 1, 2 -> True``."""
    found: dict[str, dict[str, list]] = {}
    answers: dict[str, list] = {}
    for run in runs:
        for r in run.reads:
            name = r.path.rsplit(".", 1)[-1]
            if name not in TOPOLOGY_FIELDS or r.reader is None:
                continue
            key = f"{qualname(code, r.reader)} ({r.reader.co_filename[len(code.label) + 1 :]})"
            values = found.setdefault(key, {}).setdefault(name, [])
            if r.value not in values:
                values.append(r.value)
            answer = run.returned.get(r.reader, "?")
            if answer not in answers.setdefault(key, []):
                answers[key].append(answer)
    parts = []
    for key, fields in found.items():
        text = ", ".join(f"{n} {', '.join(map(str, fields[n]))}" for n in TOPOLOGY_FIELDS if n in fields)
        parts.append(f"{key}: {text} -> {' / '.join(map(str, answers[key]))}")
    return "; ".join(parts)

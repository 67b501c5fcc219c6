"""The smallest stand-ins for the vLLM modules a release's gather module imports, and nothing more.

Each stub is a few lines of source, listed here so a run can record exactly what stood in for vLLM.
A stub either gives what the gather path needs (``triton``/``tl``, a platform that answers
``is_rocm``/``is_cuda``/``is_fp8_fnuz``, ``has_cutedsl``) or raises :class:`StubNotProvided` when
called, so a code path the matrix did not expect ends as a row naming the stub, not as a silent guess.
Switches a matrix arm sets (``ROCM`` to select vLLM's ROCm-only one-pass kernel, ``CUTEDSL`` for the
CuTe-DSL dispatch) are module attributes of the stubs, as is ``COMPRESS_RATIOS``, the model's compress
ratios a release's JIT warm-up reads from the model config (set only by the JIT fingerprint).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping


class StubNotProvided(RuntimeError):
    """A vLLM function the repro loader only stubs was called."""


_RAISE = """
from repro_studies.upstream.stubs import StubNotProvided


def {name}(*args, **kwargs):
    raise StubNotProvided("{module}.{name} is stubbed by the repro loader (not needed by the gather path)")
"""

STUBS: dict[str, str] = {
    "vllm.triton_utils": ("import triton\nimport triton.language as tl\n\nHAS_TRITON = True\n"),
    "vllm.utils.import_utils": (
        "CUTEDSL = False  # set by the matrix: True only for the CuTe-DSL arm\n\n\n"
        "def has_cutedsl():\n"
        "    return CUTEDSL\n"
    ),
    "vllm.platforms": (
        "import torch\n\n"
        "ROCM = False  # set by the matrix to select vLLM's ROCm-only kernels\n\n\n"
        "class _Platform:\n"
        "    @property\n"
        "    def device_type(self):\n"
        "        return 'cuda' if torch.cuda.is_available() else 'cpu'\n\n"
        "    def is_cuda(self):\n"
        "        return torch.cuda.is_available() and not ROCM\n\n"
        "    def is_rocm(self):\n"
        "        return ROCM\n\n"
        "    def is_fp8_fnuz(self):\n"
        "        return False\n\n\n"
        "current_platform = _Platform()\n"
    ),
    "vllm.envs": "VLLM_TRITON_JIT_WARMUP_NUM_THREADS = 1\n",
    "vllm.model_executor.layers.quantization.utils.quant_utils": _RAISE.format(
        module="vllm.model_executor.layers.quantization.utils.quant_utils", name="get_fp8_min_max"
    ),
    "vllm.transformers_utils.deepseek_v4_utils": (
        "from repro_studies.upstream.stubs import StubNotProvided\n\n"
        "COMPRESS_RATIOS = None  # set by the JIT fingerprint: the model's compress ratios\n\n\n"
        "def get_compress_ratios(*args, **kwargs):\n"
        "    if COMPRESS_RATIOS is None:\n"
        "        raise StubNotProvided(\n"
        "            'vllm.transformers_utils.deepseek_v4_utils.get_compress_ratios is stubbed by the repro loader '\n"
        "            '(answered only for the JIT warm-up)'\n"
        "        )\n"
        "    return list(COMPRESS_RATIOS)\n"
    ),
}


def stub_digest(names: Iterable[str], table: Mapping[str, str] = STUBS) -> str:
    """A short hash of the stubs a load used, for result rows."""
    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode() + b"\0" + table[name].encode() + b"\0")
    return h.hexdigest()[:12]


class _PlaceholderType(type):
    """Attribute access on a placeholder (``AttentionCGSupport.ALWAYS``) gives another placeholder."""

    def __getattr__(cls, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return placeholder(f"{cls.__module__}.{cls.__qualname__}", attr)


_PLACEHOLDERS: dict[tuple[str, str], type] = {}


def placeholder(module: str, name: str) -> type:
    """A class named ``name`` that only exists: a module imports it, a signature annotates with it, a class
    derives from it; calling or instantiating it raises :class:`StubNotProvided` naming it."""
    key = (module, name)
    if key not in _PLACEHOLDERS:

        def refuse(cls, *args, **kwargs):
            raise StubNotProvided(f"{module}.{name} is a placeholder of the repro loader (not on the studied path)")

        _PLACEHOLDERS[key] = _PlaceholderType(name, (), {"__module__": module, "__new__": refuse})
    return _PLACEHOLDERS[key]


def placeholder_stub(preamble: str = "", **attributes: str) -> str:
    """A stub module whose every name is a :func:`placeholder`, except what ``preamble`` (source) defines
    and ``attributes`` (name -> expression)."""
    lines = ["from repro_studies.upstream.stubs import placeholder as _placeholder", "", preamble]
    lines += [f"{name} = {expr}" for name, expr in attributes.items()]
    lines += [
        "",
        "",
        "def __getattr__(name):",
        "    if name.startswith('__'):",
        "        raise AttributeError(name)",
        "    return _placeholder(__name__, name)",
        "",
    ]
    return "\n".join(lines)

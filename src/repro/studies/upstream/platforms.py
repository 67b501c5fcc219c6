"""The GPU families a deployer runs DeepSeek-V4 on, as the facts a release's code asks its platform.

A family is what the study tells vLLM's own code about the machine: which platform
(``PlatformEnum`` member of the release's ``vllm/platforms/interface.py``), the device capability, whether
``cutlass`` (nvidia-cutlass-dsl) imports, and whether the compiled extensions of vLLM's CUDA wheel are
present. Everything else (``is_cuda()``, ``is_device_capability_family(100)``, ...) is the release's own
``Platform`` base class answering from those facts. Families are values defined once; tables name them by
:attr:`GpuFamily.key`.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import types
from dataclasses import dataclass
from typing import Any

import torch

from repro.registry import GPU_FAMILY_NAMES, Cutlass
from repro.studies.upstream.released_code import ImportFailure, ReleasedCode

CUTLASS_IMPORTS = Cutlass.IMPORTS
CUTLASS_ABSENT = Cutlass.ABSENT
CUTLASS_IMPORT_FAILS = Cutlass.IMPORT_FAILS
#: What a broken install raises on ``import cutlass`` (its native library missing).
CUTLASS_IMPORT_ERROR = "libcuda.so.1: cannot open shared object file: No such file or directory"

PLATFORM_MEMBER = "vllm/platforms/interface.py"


@dataclass(frozen=True)
class GpuFamily:
    key: str  # a key of repro.registry.GPU_FAMILY_NAMES
    platform: str  # a PlatformEnum member name of the release: CUDA, ROCM, XPU
    capability: tuple[int, int] | None
    cutlass: Cutlass
    cuda_extensions: bool  # vLLM's CUDA wheel's compiled extensions (FlashMLA and its ops) are present

    @property
    def display(self) -> str:
        return GPU_FAMILY_NAMES[self.key]

    @property
    def facts(self) -> str:
        cap = "none" if self.capability is None else ".".join(map(str, self.capability))
        ext = "CUDA wheel's compiled extensions" if self.cuda_extensions else "no CUDA extensions"
        return f"{self.platform}, capability {cap}, cutlass {self.cutlass}, {ext}"


SM90 = GpuFamily("sm90", "CUDA", (9, 0), CUTLASS_IMPORTS, True)
SM100 = GpuFamily("sm100", "CUDA", (10, 0), CUTLASS_IMPORTS, True)
ROCM = GpuFamily("rocm", "ROCM", (9, 4), CUTLASS_ABSENT, False)
XPU = GpuFamily("xpu", "XPU", None, CUTLASS_ABSENT, False)
#: The CUDA families without a working ``cutlass``, on both device capabilities a release tells apart.
SM90_NO_CUTLASS = GpuFamily("sm90-no-cutlass", "CUDA", (9, 0), CUTLASS_ABSENT, True)
SM100_NO_CUTLASS = GpuFamily("sm100-no-cutlass", "CUDA", (10, 0), CUTLASS_ABSENT, True)
SM90_BROKEN_CUTLASS = GpuFamily("sm90-cutlass-fails", "CUDA", (9, 0), CUTLASS_IMPORT_FAILS, True)
SM100_BROKEN_CUTLASS = GpuFamily("sm100-cutlass-fails", "CUDA", (10, 0), CUTLASS_IMPORT_FAILS, True)
FAMILIES: tuple[GpuFamily, ...] = (
    SM90,
    SM100,
    ROCM,
    XPU,
    SM90_NO_CUTLASS,
    SM100_NO_CUTLASS,
    SM90_BROKEN_CUTLASS,
    SM100_BROKEN_CUTLASS,
)


class _Logger(logging.LoggerAdapter):
    """vLLM's logger API (``info_once`` and friends) over a standard logger."""

    def __init__(self, name: str):
        logger = logging.getLogger(f"repro.released.{name}")
        logger.propagate = False  # what a release logs is not this study's output
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
        super().__init__(logger, {})

    def info_once(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.debug(msg, *args)

    warning_once = debug_once = info_once


def _logger_module() -> types.ModuleType:
    module = types.ModuleType("vllm.logger")
    module.init_logger = _Logger
    module.logger = _Logger("vllm")
    return module


class _CompiledOps:
    """``torch.ops`` of vLLM's CUDA wheel: its compiled namespaces carry every op the Python asks for."""

    def __init__(self, ops: Any):
        self._ops = ops

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and not name.startswith("__"):
            return _OpNamespace(name)
        return getattr(self._ops, name)


class _OpNamespace:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, op: str) -> Any:
        if op.startswith("__"):
            raise AttributeError(op)
        return f"torch.ops.{self._name}.{op} (compiled in vLLM's CUDA wheel)"


class _TorchWithExtensions(types.ModuleType):
    """The real ``torch``, except that ``torch.ops`` answers for vLLM's compiled extension namespaces."""

    def __init__(self) -> None:

        super().__init__("torch")
        self._torch = torch
        self.ops = _CompiledOps(torch.ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


def install(code: ReleasedCode, family: GpuFamily) -> None:
    """Give the release's code the stand-ins that make ``family`` what it sees: the platform object (the
    release's own ``Platform`` class, answering from the family's facts), ``cutlass``, the compiled
    extensions, and vLLM's logger."""
    out: dict[str, Any] = {"vllm.logger": _logger_module()}
    if family.cutlass == CUTLASS_ABSENT:
        out["cutlass"] = ImportFailure(ModuleNotFoundError("No module named 'cutlass'", name="cutlass"))
    elif family.cutlass == CUTLASS_IMPORT_FAILS:
        out["cutlass"] = ImportFailure(ImportError(CUTLASS_IMPORT_ERROR, name="cutlass"))
    else:
        out["cutlass"] = types.ModuleType("cutlass")
    if family.cuda_extensions:
        for ext in ("vllm._C", "vllm._flashmla_C", "vllm._flashmla_extension_C"):
            out[ext] = types.ModuleType(ext)
        out["torch"] = _TorchWithExtensions()
    out["importlib"] = _importlib_for(family)
    code.standins.update(out)
    code.standins["vllm.platforms.current_platform"] = platform_for(code, family)


def _importlib_for(family: GpuFamily) -> types.ModuleType:
    """``importlib`` as the family's Python sees it: ``cutlass`` found or not, importing or raising."""

    def find_spec(name: str, package: str | None = None) -> Any:
        if name.split(".")[0] == "cutlass":
            if family.cutlass == CUTLASS_ABSENT:
                return None
            return importlib.machinery.ModuleSpec("cutlass", None)
        return importlib.util.find_spec(name, package)

    def import_module(name: str, package: str | None = None) -> Any:
        if name.split(".")[0] == "cutlass":
            if family.cutlass == CUTLASS_ABSENT:
                raise ModuleNotFoundError("No module named 'cutlass'", name="cutlass")
            if family.cutlass == CUTLASS_IMPORT_FAILS:
                raise ImportError(CUTLASS_IMPORT_ERROR, name="cutlass")
            return types.ModuleType("cutlass")
        return importlib.import_module(name, package)

    module = types.ModuleType("importlib")
    module.util = types.SimpleNamespace(find_spec=find_spec, module_from_spec=importlib.util.module_from_spec)
    module.import_module = import_module
    module.metadata = importlib.metadata
    module.machinery = importlib.machinery
    return module


def platform_for(code: ReleasedCode, family: GpuFamily) -> Any:
    """The release's own ``Platform`` (``vllm/platforms/interface.py``) set to the family's facts."""
    base = code.value(PLATFORM_MEMBER, "Platform")
    enum = code.value(PLATFORM_MEMBER, "PlatformEnum")
    capability_cls = code.value(PLATFORM_MEMBER, "DeviceCapability")
    cap = None if family.capability is None else capability_cls(*family.capability)

    class FamilyPlatform(base):  # type: ignore[misc, valid-type]
        _enum = enum[family.platform]
        device_name = family.display
        device_type = {"CUDA": "cuda", "ROCM": "cuda", "XPU": "xpu"}[family.platform]

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return cap

    FamilyPlatform.__name__ = FamilyPlatform.__qualname__ = f"Platform[{family.key}]"
    return FamilyPlatform()

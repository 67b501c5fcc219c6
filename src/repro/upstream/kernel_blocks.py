"""Which kernel block size a release's V2 runner hands ``_reshape_kv_cache``, found by running its own selection.

A release whose ``_reshape_kv_cache`` takes ``kernel_block_sizes`` computes them in the same module
(``kernel_block_sizes = <function>(kv_cache_config, attn_groups)`` in ``init_attn_backend``). That
function is found in the release's source (not named here), imported from the module the release imports
it from, and called with a ``KVCacheConfig`` of the release's own classes holding one group per
DeepSeek-V4 cache group, each group's attention backend being the release's own backend class
(:data:`GROUP_BACKENDS`: the class the DeepSeek-V4 layer of that group returns from ``get_attn_backend``
on CUDA with FlashMLA). Every release function the call enters is recorded.

Only what the call does not read is stubbed: every ``vllm`` module the loaded modules import that is not
in the cache is a placeholder (a name that exists; calling it raises), recorded per release; the logger,
``get_dtype_size``, Triton (the real one) and a CUDA platform (``is_rocm()`` is False) are the few stubs
that answer. A backend class the release does not have, or cannot import, makes the selection a
"not run" with the reason, never a value from elsewhere.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.geometry.specs import KVCacheSpec
from repro.upstream.loader import LoadedRelease, LoadError, member_to_module
from repro.upstream.members import KERNEL_BLOCKS, RESHAPE, RESHAPE_FUNCTION_MEMBER
from repro.upstream.stubs import placeholder_stub
from repro.upstream.wheelcache import CacheEntry, CacheMiss, ensure_release

#: The argument of ``_reshape_kv_cache`` the selection feeds.
PARAMETER = "kernel_block_sizes"

#: Each cache group's attention backend: the class names (in release order; a release has one of them)
#: of what the group's DeepSeek-V4 layer returns from ``get_attn_backend`` on CUDA with FlashMLA. The
#: class is imported from the release and its own ``get_supported_kernel_block_sizes`` answers.
GROUP_BACKENDS: dict[str, tuple[str, ...]] = {
    "SWA KV": ("DeepseekSparseSWABackend",),
    "C4A KV": ("DeepseekV4FlashMLASparseBackend", "DeepseekV4FlashMLABackend"),
    "C128A KV": ("DeepseekV4FlashMLASparseBackend", "DeepseekV4FlashMLABackend"),
    "C4 indexer K": ("DeepseekV4IndexerBackend",),
    "C4 main compressor state": ("CompressorBackend",),
    "C128 main compressor state": ("CompressorBackend",),
    "C4 indexer compressor state": ("CompressorBackend",),
}

_PLATFORM = placeholder_stub(
    "__path__ = []  # vllm.platforms.<module> is a placeholder module\n\n\n"
    "class _Platform:\n"
    "    # CUDA (the platform of PR #43988's report); any other question is a placeholder.\n"
    "    def is_cuda(self):\n        return True\n\n"
    "    def is_cuda_alike(self):\n        return True\n\n"
    "    def is_rocm(self):\n        return False\n\n"
    "    def is_xpu(self):\n        return False\n\n"
    "    def is_cpu(self):\n        return False\n\n"
    "    def __getattr__(self, name):\n"
    "        if name.startswith('__'):\n            raise AttributeError(name)\n"
    "        return _placeholder('vllm.platforms.current_platform', name)\n\n\n"
    "current_platform = _Platform()\n"
)

#: The stubs that answer (the rest of ``vllm`` outside the cache is placeholders).
SELECTION_STUBS: dict[str, str] = {
    "vllm.logger": "import logging\n\n\ndef init_logger(name):\n    return logging.getLogger(name)\n",
    "vllm.utils.torch_utils": placeholder_stub(
        "import torch\n\n__path__ = []\n\n\n"
        "def get_dtype_size(dtype):\n    return torch.tensor([], dtype=dtype).element_size()\n"
    ),
    "vllm.triton_utils": "import triton\nimport triton.language as tl\n\nHAS_TRITON = True\n",
    "vllm.platforms": _PLATFORM,
}
#: A placeholder module: importable, a package (so its "submodules" are placeholders too), every name a
#: placeholder.
PLACEHOLDER_MODULE = placeholder_stub("__path__ = []")


class PlaceholderStubs(Mapping):
    """``SELECTION_STUBS``, and a placeholder module for every other ``vllm`` module that is neither a cached
    file nor a package of one (so a cached module is always loaded as released)."""

    def __init__(self, cached_modules: set[str]):
        self.cached = cached_modules
        self.packages = {m.rsplit(".", i)[0] for m in cached_modules for i in range(1, m.count(".") + 1)}

    def __contains__(self, name: object) -> bool:
        if name in SELECTION_STUBS:
            return True
        return isinstance(name, str) and name.startswith("vllm.") and name not in self.cached | self.packages

    def __getitem__(self, name: str) -> str:
        if name in SELECTION_STUBS:
            return SELECTION_STUBS[name]
        if name in self:
            return PLACEHOLDER_MODULE
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(SELECTION_STUBS)

    def __len__(self) -> int:
        return len(SELECTION_STUBS)


#: The layer name a group's single layer gets (group ``i`` of a configuration: ``LAYER.i``).
LAYER = "model.layers.0.attn"


@dataclass
class StandInGroup:
    """The fields of vLLM's ``AttentionGroup`` that the selection and ``_reshape_kv_cache`` read."""

    backend: type
    layer_names: list[str]
    kv_cache_spec: Any
    kv_cache_group_id: int = 0


@dataclass
class GroupSelection:
    """What the release's selection chose for one cache group (``kernel_block_size`` None: not run)."""

    kernel_block_size: int | None
    chosen_by: str  # "vLLM 0.22.0 prepare_kernel_block_sizes", or "not run: <why>"
    backend: str = ""  # module.Class whose get_supported_kernel_block_sizes answered
    declared: str = ""  # what it answered


@dataclass
class Selection:
    """A release's own kernel block size selection over the DeepSeek-V4 cache groups."""

    version: str
    function: str = ""  # the runner's function, e.g. prepare_kernel_block_sizes
    groups: dict[str, GroupSelection] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # release functions the call entered, in first-call order
    placeholders: list[str] = field(default_factory=list)  # vllm modules that were placeholders
    reason: str = ""  # why it did not run ("" when it ran)

    def group(self, name: str) -> GroupSelection:
        return self.groups.get(name) or GroupSelection(None, f"not run: {self.reason or 'no selection'}")


def declared(sizes: list) -> str:
    """A backend's supported kernel block sizes as written: ``[256]``, ``[MultipleOf(64)]``."""
    return "[" + ", ".join(str(s) if isinstance(s, int) else f"{type(s).__name__}({s.base})" for s in sizes) + "]"


def runner_selection_call(attn_utils_source: str) -> tuple[str, str]:
    """``(function, module)``: the function whose result the runner's module assigns to
    ``kernel_block_sizes`` and the module it is imported from ("" when the module defines it or none)."""
    tree = ast.parse(attn_utils_source)
    function = ""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == PARAMETER for t in node.targets)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            function = node.value.func.id
            break
    if not function:
        return "", ""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == function for a in node.names):
            return function, node.module or ""
    return function, ""


def defining_members(entry: CacheEntry, class_names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(member, class name)`` for every cached member of the selection set defining one of ``class_names``."""
    found = []
    for member in entry.members_of(KERNEL_BLOCKS):
        tree = ast.parse(entry.read(member))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name in class_names:
                found.append((member, node.name))
    return found


@dataclass
class _Shell:
    """What :func:`repro.upstream.reshape.build_spec` reads of a loaded release."""

    version: str
    release: LoadedRelease
    spec_module: Any


def _trace_calls(root: str, calls: list[str]):
    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            name = frame.f_code.co_qualname
            if name not in calls:
                calls.append(name)

    return profile


#: Builds the release's spec object for a cache group (:func:`repro.upstream.reshape.build_spec`).
SpecBuilder = Callable[[Any, KVCacheSpec], Any]


def run_selection(entry: CacheEntry, specs: list[KVCacheSpec], build_spec: SpecBuilder) -> Selection:
    """Run ``entry``'s own kernel block size selection for ``specs`` (one KV cache group each).

    ``build_spec(shell, spec)`` builds the release's spec object (:func:`repro.upstream.reshape.build_spec`).
    """
    version = entry.version
    function, module_name = runner_selection_call(entry.read(RESHAPE_FUNCTION_MEMBER))
    if not function:
        return Selection(version, reason=f"{RESHAPE_FUNCTION_MEMBER} assigns {PARAMETER} from no function call")
    if not module_name:
        module_name = member_to_module(RESHAPE_FUNCTION_MEMBER)
    cached = {member_to_module(m) for s in (RESHAPE, KERNEL_BLOCKS) for m in entry.members_of(s)}
    release = LoadedRelease(entry, tag="released", stubs=PlaceholderStubs(cached), sets=(RESHAPE, KERNEL_BLOCKS))
    selection = Selection(version, function)
    member = next((m for m in entry.members_of(KERNEL_BLOCKS) if member_to_module(m) == module_name), "")
    try:
        if not member:
            raise LoadError(f"{module_name} (which defines {function}) is not in the cache", missing=module_name)
        runner_module = release.import_module(member)
        spec_module = release.import_module("vllm/v1/kv_cache_interface.py")
        backends = {}
        for spec in specs:
            names = GROUP_BACKENDS.get(spec.name, ())
            where = defining_members(entry, names)
            if not where:
                raise LoadError(f"vLLM {version} defines none of {', '.join(names)} (the {spec.name} backend)")
            backend_member, class_name = where[0]
            backends[spec.name] = getattr(release.import_module(backend_member), class_name)
    except LoadError as exc:
        selection.reason = f"could not load: {exc}"
        selection.placeholders = sorted(release.stubs_used - set(SELECTION_STUBS))
        return selection

    shell = _Shell(version, release, spec_module)
    built = [build_spec(shell, spec) for spec in specs]
    missing = [b.reason for b in built if b.spec is None]
    if missing:
        selection.reason = "; ".join(missing)
        return selection

    with release.active():
        m = spec_module
        groups = [m.KVCacheGroupSpec(layer_names=[f"{LAYER}.{i}"], kv_cache_spec=b.spec) for i, b in enumerate(built)]
        fields = {f.name for f in dataclasses.fields(m.KVCacheConfig)}
        config = m.KVCacheConfig(
            **{
                k: v
                for k, v in {"num_blocks": 1, "kv_cache_tensors": [], "kv_cache_groups": groups}.items()
                if k in fields
            }
        )
        attn_groups = [
            [StandInGroup(backends[spec.name], [f"{LAYER}.{i}"], b.spec, i)]
            for i, (spec, b) in enumerate(zip(specs, built))
        ]
        root = str(entry.files_dir)
        previous = sys.getprofile()
        sys.setprofile(_trace_calls(root, selection.calls))
        try:
            chosen = getattr(runner_module, function)(config, attn_groups)
        except Exception as exc:  # the selection's own failure is the finding
            selection.reason = f"{function} raised {type(exc).__name__}: {exc}"
            return selection
        finally:
            sys.setprofile(previous)
        supported = {name: declared(cls.get_supported_kernel_block_sizes()) for name, cls in backends.items()}
    selection.placeholders = sorted(release.stubs_used - set(SELECTION_STUBS))
    label = f"vLLM {version} {function}"
    for spec, kbs in zip(specs, chosen):
        cls = backends[spec.name]
        selection.groups[spec.name] = GroupSelection(
            int(kbs), label, f"{cls.__module__}.{cls.__qualname__}", supported[spec.name]
        )
    return selection


def select_for_release(
    version: str,
    specs: list[KVCacheSpec],
    build_spec: SpecBuilder,
    cache_root: Path | None = None,
    download: bool = True,
) -> Selection:
    """Fetch (once) the selection's modules of ``version`` and run its selection; a miss is a "not run"."""
    got = ensure_release(version, cache_root, download=download, sets=(RESHAPE, KERNEL_BLOCKS))
    if isinstance(got, CacheMiss):
        return Selection(version, reason=f"{got.status}: {got.reason}")
    return run_selection(got, specs, build_spec)


def chosen_by(loaded: Any, selection: Selection | None) -> str:
    """One cell: which code chose the kernel block sizes a loaded release's function gets."""
    if loaded.function is None:
        return ""
    if PARAMETER not in loaded.parameters:
        return f"none: vLLM {loaded.version}'s _reshape_kv_cache takes no {PARAMETER}"
    if selection is None:
        return "not run: no selection was asked for"
    if selection.reason:
        return f"not run: {selection.reason}"
    return f"vLLM {selection.version} {selection.function}"


def provenance(selection: Selection) -> dict:
    """What ran and what stood in for vLLM in one release's selection (written to the run folder)."""
    return {
        "release": selection.version,
        "function": selection.function,
        "ran": selection.calls,
        "not_run": selection.reason,
        "groups": {name: dataclasses.asdict(g) for name, g in selection.groups.items()},
        "stubs_that_answer": {name: SELECTION_STUBS[name] for name in sorted(SELECTION_STUBS)},
        "placeholder_modules": selection.placeholders,
    }

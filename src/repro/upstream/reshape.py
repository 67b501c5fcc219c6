"""Bug 1 on vLLM's own ``_reshape_kv_cache`` (V2 model runner, ``vllm/v1/worker/gpu/attn_utils.py``).

Each release's function runs as released over a real byte pool, with the spec classes of its own
``vllm/v1/kv_cache_interface.py`` (built from the DeepSeek-V4 catalogue's parameters, each keyword the
release's class accepts). Only the attention backend is a stand-in (:class:`StandInBackend`: the
catalogue's block-first shape and identity stride order), with the attention group the function reads
(:class:`StandInGroup`) and :data:`RESHAPE_STUBS`, placeholders for the modules the function's module
imports but this path never calls.

One call is one observation (:class:`Observation`): which code ran, what it asked the backend for,
the view it returned or the exception it raised, verbatim. Whether that is right is decided in
:mod:`repro.analysis.reshape_releases`. vLLM's contiguous-stride probe (``torch.empty(shape).stride()``,
18.4 GB of host memory for the buggy C128A shape) runs on PyTorch's meta device, so only the view's own
bounds check can fail.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.geometry.layout import DSV4, HEAD_DIM
from repro.geometry.specs import KVCacheSpec, group_kernel_block_size
from repro.registry import (
    KBS_NOT_A_PARAMETER,
    KBS_SELECTED,
    KBS_STORAGE,
    OUTCOME_RAISED,
    OUTCOME_VIEW,
    RESHAPE_BUGGY,
    RESHAPE_FIXED,
    RESHAPE_NO_COMPRESSED_PATH,
    RESHAPE_NO_FUNCTION,
    RESHAPE_NOT_CACHED,
    RESHAPE_NOT_LOADED,
    RESHAPE_RAN,
    RESHAPE_SELECTION_NOT_RUN,
    code_label,
)
from repro.reshape.plan import as_strided_required_elems, check_aliasing, plan_reshape
from repro.upstream.fetch import derive_releases
from repro.upstream.kernel_blocks import LAYER, PARAMETER, Selection, StandInGroup
from repro.upstream.loader import LoadedRelease, LoadError
from repro.upstream.members import RESHAPE, RESHAPE_FUNCTION_MEMBER
from repro.upstream.releases import fetch_index, releases_from_index
from repro.upstream.stubs import placeholder_stub
from repro.upstream.wheelcache import CacheMiss, ensure_release

FUNCTION = "_reshape_kv_cache"
SPEC_MODULE = "vllm/v1/kv_cache_interface.py"
#: The cache dtype string the V2 runner hands a DeepSeek-V4 model on FlashMLA (``--kv-cache-dtype fp8``).
CACHE_DTYPE = "fp8_ds_mla"

#: Modules the function's module (and the spec module) import at load time. All but two are placeholders
#: (nothing on this path calls them); ``vllm.logger`` gives a plain logger, and ``vllm.utils.torch_utils``
#: gives vLLM's one-line ``get_dtype_size`` (the real module registers torch library ops and opaque types
#: at import, which a process can do once, not once per release).
RESHAPE_STUBS: dict[str, str] = {
    "vllm.utils.torch_utils": placeholder_stub(
        "import torch\n\n\ndef get_dtype_size(dtype):\n    return torch.tensor([], dtype=dtype).element_size()\n"
    ),
    "vllm.logger": "import logging\n\n\ndef init_logger(name):\n    return logging.getLogger(name)\n",
    "vllm.envs": placeholder_stub(),
    "vllm.config": placeholder_stub(),
    "vllm.model_executor.layers.attention": placeholder_stub(),
    "vllm.model_executor.layers.attention_layer_base": placeholder_stub(),
    "vllm.multimodal.inputs": placeholder_stub(),
    "vllm.utils.import_utils": placeholder_stub(),
    "vllm.attention.backends.abstract": placeholder_stub(),
    "vllm.v1.attention.backend": placeholder_stub(),
    "vllm.v1.attention.backends.utils": placeholder_stub(),
    "vllm.v1.worker.utils": placeholder_stub(),
    "vllm.v1.worker.gpu.model_states.interface": placeholder_stub(),
}

RAN, NO_FUNCTION, NO_COMPRESSED_PATH, NOT_LOADED, NOT_CACHED, SELECTION_NOT_RUN = (
    RESHAPE_RAN,
    RESHAPE_NO_FUNCTION,
    RESHAPE_NO_COMPRESSED_PATH,
    RESHAPE_NOT_LOADED,
    RESHAPE_NOT_CACHED,
    RESHAPE_SELECTION_NOT_RUN,
)


class StandInBackend:
    """The DeepSeek-V4 attention backends' shape, as the catalogue models it: 3-D, block-first
    ``(num_blocks, block_size, row elements)``, identity stride order. Records what it was asked."""

    row_elems: int = 0
    calls: list

    @classmethod
    def for_spec(cls, spec: KVCacheSpec) -> type[StandInBackend]:
        return type(
            f"StandIn{spec.name.title().replace(' ', '')}Backend", (cls,), {"row_elems": spec.row_elems, "calls": []}
        )

    @classmethod
    def get_kv_cache_shape(
        cls, num_blocks: int, block_size: int, num_kv_heads: int, head_size: int, cache_dtype_str: str = "auto"
    ) -> tuple[int, int, int]:
        cls.calls.append({"num_blocks": num_blocks, "block_size": block_size, "cache_dtype_str": cache_dtype_str})
        return (num_blocks, block_size, cls.row_elems)

    @staticmethod
    def get_kv_cache_stride_order(*args: Any, **kwargs: Any) -> tuple[int, int, int]:
        return (0, 1, 2)

    @classmethod
    def full_cls_name(cls) -> tuple[str, str]:
        return (cls.__module__, cls.__qualname__)


@dataclass
class ReleaseReshape:
    """A release's ``_reshape_kv_cache``, loaded (or why not)."""

    version: str
    status: str  # RAN when loaded, else one of the other words
    reason: str = ""
    release: LoadedRelease | None = None
    function: Callable | None = None
    spec_module: Any = None
    wheel_sha256: str = ""

    @property
    def code(self) -> str:
        return code_label(self.version)

    @property
    def parameters(self) -> list[str]:
        return list(inspect.signature(self.function).parameters) if self.function else []

    def source(self) -> str:
        """The function's source as released (empty when not loaded)."""
        return textwrap.dedent(inspect.getsource(self.function)) if self.function else ""

    def compressed_path(self) -> str:
        """ "" when the function distinguishes compressed specs (reads ``storage_block_size``), else why not."""
        if "storage_block_size" in self.source():
            return ""
        return f"vLLM {self.version}'s {FUNCTION} never reads storage_block_size: it has no compressed-spec path"


def defines_function(source: str) -> bool:
    """Does a module's source define ``_reshape_kv_cache`` at module level (read, not imported)?"""
    return any(isinstance(n, ast.FunctionDef) and n.name == FUNCTION for n in ast.parse(source).body)


def load_release(version: str, cache_root: Path | None = None, download: bool = True) -> ReleaseReshape:
    """Fetch (once) and import ``version``'s ``_reshape_kv_cache`` and spec module with the smallest stubs."""
    got = ensure_release(version, cache_root, download=download, sets=(RESHAPE,))
    if isinstance(got, CacheMiss):
        return ReleaseReshape(version, NOT_CACHED, f"{got.status}: {got.reason}")
    release = LoadedRelease(got, tag="released", stubs=RESHAPE_STUBS, sets=(RESHAPE,))
    sha = got.provenance.get("sha256", "")
    if not defines_function(got.read(RESHAPE_FUNCTION_MEMBER)):
        return ReleaseReshape(
            version,
            NO_FUNCTION,
            f"{RESHAPE_FUNCTION_MEMBER} of vLLM {version} defines no {FUNCTION}",
            release,
            wheel_sha256=sha,
        )
    try:
        module = release.import_module(RESHAPE_FUNCTION_MEMBER)
        specs = release.import_module(SPEC_MODULE)
    except LoadError as exc:
        reason = exc.missing or str(exc)  # the row reads "could not load: <module>"
        return ReleaseReshape(version, NOT_LOADED, reason, release, wheel_sha256=sha)
    return ReleaseReshape(version, RAN, "", release, getattr(module, FUNCTION), specs, sha)


# ---------------------------------------------------------------------------------------------
# The release's own spec objects, from the catalogue's parameters.


def spec_parameters(spec: KVCacheSpec) -> dict[str, Any]:
    """What the DeepSeek-V4 model hands its spec class for this cache group (as the catalogue computes it).

    The fp8_ds_mla token rows carry the cache dtype string, the model version and the 584-byte row; the
    indexer and compressor-state rows are plain ``head_size`` elements.
    """
    token_row = spec.dtype == torch.uint8 and spec.row_bytes == DSV4.token_bytes
    params: dict[str, Any] = {
        "block_size": spec.block_size,
        "num_kv_heads": 1,
        "head_size": HEAD_DIM if token_row else spec.row_elems,
        "dtype": spec.dtype,
        "alignment": spec.alignment,
    }
    if spec.compress_ratio != 1:
        params["compress_ratio"] = spec.compress_ratio
    if spec.sliding_window is not None:
        params["sliding_window"] = spec.sliding_window
    if token_row:
        params.update(cache_dtype_str=CACHE_DTYPE, model_version="deepseek_v4", state_content_bytes=spec.row_bytes)
    return params


@dataclass
class BuiltSpec:
    spec: Any  # the release's spec object (None when it cannot express the group)
    keywords: dict[str, Any] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)  # parameters the release's class has no field for
    reason: str = ""


def build_spec(loaded: ReleaseReshape, spec: KVCacheSpec) -> BuiltSpec:
    """The release's ``spec.spec_class`` built with every catalogue parameter its dataclass has a field for.

    A compressed group whose class has no ``compress_ratio`` cannot be expressed: the release has no
    compressed-spec path. ``kv_quant_mode`` is what the release's ``get_kv_quant_mode`` says for the cache
    dtype string, when both exist.
    """
    cls = getattr(loaded.spec_module, spec.spec_class, None)
    if cls is None:
        return BuiltSpec(None, reason=f"vLLM {loaded.version} has no {spec.spec_class}")
    names = {f.name for f in dataclasses.fields(cls)}
    params = spec_parameters(spec)
    quant = getattr(loaded.spec_module, "get_kv_quant_mode", None)
    if "kv_quant_mode" in names and quant is not None and "cache_dtype_str" in params:
        params["kv_quant_mode"] = quant(params["cache_dtype_str"])
    keywords = {k: v for k, v in params.items() if k in names}
    dropped = sorted(set(params) - set(keywords))
    if "compress_ratio" in dropped:
        return BuiltSpec(
            None,
            keywords,
            dropped,
            f"vLLM {loaded.version}'s {spec.spec_class} has no compress_ratio: no compressed spec",
        )
    with loaded.release.active():
        return BuiltSpec(cls(**keywords), keywords, dropped)


def spec_figures(spec: Any) -> dict[str, int | None]:
    """The layout figures a spec object computes (the release's or the catalogue's)."""
    return {
        "storage_block_size": getattr(spec, "storage_block_size", spec.block_size),
        "real_page_size_bytes": spec.real_page_size_bytes,
        "page_size_bytes": spec.page_size_bytes,
        "page_size_padded": spec.page_size_padded,
    }


# ---------------------------------------------------------------------------------------------
# One call of the release's function.


@dataclass
class Observation:
    """What one call of a release's ``_reshape_kv_cache`` did over one pool."""

    kernel_block_size: int | None  # the group's entry of kernel_block_sizes handed in (None: not a parameter)
    backend_calls: list[dict]
    view: torch.Tensor | None
    error_type: str = ""
    error_text: str = ""
    arguments: str = ""  # how the call was made

    @property
    def raised(self) -> bool:
        return bool(self.error_type)


def call_reshape(
    loaded: ReleaseReshape, built: BuiltSpec, spec: KVCacheSpec, pool: torch.Tensor, kbs: int | None
) -> Observation:
    """Run the release's function for one layer of ``spec``'s group over ``pool`` (a 1-D byte tensor).

    The arguments follow the function's own signature: the attention groups (0.23.0 on) or a
    ``KVCacheConfig`` of the release's classes with a backend per layer (earlier); ``kernel_block_sizes``
    and ``shared_kv_cache_layers`` where it takes them; the optional ``kv_cache_config`` of later releases
    is left out (no packing, no mixed-layout alignment: neither is on DeepSeek-V4's path).
    """
    backend = StandInBackend.for_spec(spec)
    params = loaded.parameters
    kwargs: dict[str, Any] = {"kv_cache_raw_tensors": {LAYER: pool}, "cache_dtype": CACHE_DTYPE}
    with loaded.release.active():
        if "attn_groups" in params:
            kwargs["attn_groups"] = [StandInGroup(backend, [LAYER], built.spec)]
            how = "attn_groups=[stand-in AttentionGroup]"
        else:
            m = loaded.spec_module
            kwargs["kv_cache_config"] = m.KVCacheConfig(
                num_blocks=pool.numel() // spec.page_size_bytes,
                kv_cache_tensors=[m.KVCacheTensor(size=pool.numel(), shared_by=[LAYER])],
                kv_cache_groups=[m.KVCacheGroupSpec(layer_names=[LAYER], kv_cache_spec=built.spec)],
            )
            kwargs["attn_backends"] = {LAYER: backend}
            how = "kv_cache_config=KVCacheConfig(1 tensor, 1 group), attn_backends={layer: stand-in}"
        if PARAMETER in params and kbs is not None:
            kwargs[PARAMETER] = [kbs]
            how += f", kernel_block_sizes=[{kbs}]"
        if "shared_kv_cache_layers" in params:
            kwargs["shared_kv_cache_layers"] = {}
        kwargs = {k: v for k, v in kwargs.items() if k in params}
        try:
            with torch.device("meta"):
                out = loaded.function(**kwargs)
        except Exception as exc:  # the observation is the exception, whatever it is
            where = _release_frame(exc, loaded.release)
            return Observation(kbs, backend.calls, None, type(exc).__name__, f"{exc}{where}", how)
    view = out.get(LAYER) if isinstance(out, dict) else None
    if not isinstance(view, torch.Tensor):
        return Observation(kbs, backend.calls, None, "NoView", f"returned {type(view).__name__} for the layer", how)
    return Observation(kbs, backend.calls, view, arguments=how)


def _release_frame(exc: BaseException, release: LoadedRelease) -> str:
    """`` (at vllm/...py:N)``: the innermost frame of the release's own code that the exception passed."""
    root = str(release.entry.files_dir)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root)]
    if not frames:
        return ""
    return f" (at {Path(frames[-1].filename).relative_to(root)}:{frames[-1].lineno})"


# ---------------------------------------------------------------------------------------------
# The lines that carry the bug, for a reader.


@dataclass(frozen=True)
class CountSite:
    """Where a function counts kernel blocks per logical block: ``<spec>.block_size // kernel_block_size``
    (bug 1) or ``<spec>.storage_block_size // kernel_block_size`` (PR #43988)."""

    expression: str  # the floor division, unparsed
    statement: str  # the statement holding it, unparsed
    first_line: int  # of the statement, 1-based within the source
    last_line: int


def count_sites(source: str) -> list[CountSite]:
    """Every count of kernel blocks per logical block in a function's source."""
    tree = ast.parse(source)
    sites = []
    for stmt in ast.walk(tree):
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.FloorDiv)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr in ("block_size", "storage_block_size")
                and isinstance(node.right, ast.Name)
                and node.right.id == "kernel_block_size"
            ):
                sites.append(CountSite(ast.unparse(node), ast.unparse(stmt), stmt.lineno, stmt.end_lineno))
    return sorted(sites, key=lambda c: c.first_line)


def blocks_per_kv_block_lines(source: str) -> list[str]:
    """The statements that count kernel blocks per logical block, unparsed (one line each)."""
    return [c.statement for c in count_sites(source)]


def as_strided_sites(source: str) -> list[tuple[int, int]]:
    """First and last line (1-based) of every ``torch.as_strided(...)`` call of a function's source."""
    return [
        (node.lineno, node.end_lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.as_strided"
    ]


def as_strided_lines(source: str) -> list[str]:
    """The ``torch.as_strided(...)`` calls of a function's source, each as written."""
    tree = ast.parse(source)
    lines = source.splitlines()
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.as_strided":
            calls.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return calls


# ---------------------------------------------------------------------------------------------
# Observation rows: what the release did, beside what the model predicts for the same spec and pool.


@dataclass(frozen=True)
class KernelBlockInput:
    """One kernel block size handed to a release's function for a group, and which code chose it."""

    label: str  # KBS_SELECTED, KBS_STORAGE or KBS_NOT_A_PARAMETER
    kernel_block_size: int | None  # None: not handed in (no such parameter, or the selection did not run)
    chosen_by: str  # the release's function by name, the storage-rows input, or "not run: <why>"
    backend: str = ""  # the backend class whose declared sizes the selection read
    declared: str = ""  # what that class declared


#: ``chosen_by`` of the storage-rows input.
STORAGE_ROWS_INPUT = "storage rows (block_size // compress_ratio): the input that reproduces PR #43988's report"


def kernel_block_inputs(
    loaded: ReleaseReshape, spec: KVCacheSpec, selection: Selection | None
) -> list[KernelBlockInput]:
    """The kernel block sizes a release's function gets for ``spec``'s group: the release's own runner
    selection (``selection``, run by :mod:`repro.upstream.kernel_blocks`) and, for a compressed group, its
    storage rows; one "not a parameter" input when the function takes no ``kernel_block_sizes`` (or did
    not load). Never the repository's model."""
    if loaded.status != RAN or PARAMETER not in loaded.parameters:
        why = f"vLLM {loaded.version}'s {FUNCTION} takes no {PARAMETER}" if loaded.function else ""
        return [KernelBlockInput(KBS_NOT_A_PARAMETER, None, why)]
    chosen = selection.group(spec.name) if selection is not None else None
    inputs = [
        KernelBlockInput(KBS_SELECTED, chosen.kernel_block_size, chosen.chosen_by, chosen.backend, chosen.declared)
        if chosen is not None
        else KernelBlockInput(KBS_SELECTED, None, "not run: no selection was asked for")
    ]
    if spec.compressed:
        inputs.append(KernelBlockInput(KBS_STORAGE, spec.storage_block_size, STORAGE_ROWS_INPUT))
    return inputs


def _bound_bytes(view: torch.Tensor) -> int:
    """``as_strided``'s bound of a view, in bytes: ``(offset + sum((size - 1) * stride) + 1) * itemsize``."""
    elems = as_strided_required_elems(tuple(view.shape), tuple(view.stride()), view.storage_offset())
    return elems * view.element_size()


def observe(
    loaded: ReleaseReshape,
    spec: KVCacheSpec,
    pool: torch.Tensor,
    kbs: KernelBlockInput,
    pr_geometry: bool,
    aliasing: dict | None = None,
) -> dict[str, Any]:
    """One tidy row: the release's call for ``spec``'s group over ``pool``, the models' figures beside it.

    ``aliasing`` keeps the aliasing check of each (release, group, view geometry): a second call that
    returns the same view over the same pool reuses it instead of writing the pool again.
    """
    pool_bytes = pool.numel()
    model = {
        v: plan_reshape(spec, pool_bytes, group_kernel_block_size(spec), v) for v in (RESHAPE_BUGGY, RESHAPE_FIXED)
    }
    row: dict[str, Any] = {
        "code": loaded.code,
        "release": loaded.version,
        "cache group": spec.name,
        "compress_ratio": spec.compress_ratio,
        "kbs input": kbs.label,
        "kernel_block_size": kbs.kernel_block_size,
        "kbs chosen by": kbs.chosen_by,
        "kbs backend": kbs.backend,
        "kbs backend declares": kbs.declared,
        "model kernel_block_size": group_kernel_block_size(spec),
        "storage_block_size": spec.storage_block_size,
        "pr_geometry": pr_geometry,
        "status": loaded.status,
        "reason": loaded.reason,
        "count expression": "; ".join(blocks_per_kv_block_lines(loaded.source())) if loaded.function else "",
        "call": "",
        "asked_blocks": None,
        "asked_block_size": None,
        "outcome": "",
        "error_type": "",
        "error": "",
        "sizes": "",
        "strides": "",
        "required_bytes": None,
        "available_bytes": pool_bytes,
        "unused_tail_bytes": None,
        "page_tail_bytes": spec.page_size_bytes - spec.real_page_size_bytes,
        "payload_mismatches": None,
        "padding_bytes_changed": None,
        "spec_page_bytes": None,
        "spec_real_page_bytes": None,
        "model_page_bytes": spec.page_size_bytes,
        "model_real_page_bytes": spec.real_page_size_bytes,
        "keywords dropped": "",
        **{f"model_{v}_sizes": json.dumps(list(p.shape)) for v, p in model.items()},
        **{f"model_{v}_strides": json.dumps(list(p.strides)) for v, p in model.items()},
        **{f"model_{v}_required": p.required_bytes for v, p in model.items()},
        "wheel_sha256": loaded.wheel_sha256,
    }
    if loaded.status != RAN:
        return row
    if kbs.label == KBS_SELECTED and kbs.kernel_block_size is None:
        return {**row, "status": SELECTION_NOT_RUN, "reason": kbs.chosen_by}
    why_not = loaded.compressed_path()
    built = build_spec(loaded, spec)
    if built.spec is None or (why_not and spec.compressed):
        return {**row, "status": NO_COMPRESSED_PATH, "reason": built.reason or why_not}
    figures = spec_figures(built.spec)
    row.update(
        spec_page_bytes=figures["page_size_bytes"],
        spec_real_page_bytes=figures["real_page_size_bytes"],
        **{"keywords dropped": ", ".join(built.dropped)},
    )
    obs = call_reshape(loaded, built, spec, pool, kbs.kernel_block_size)
    row["call"] = obs.arguments
    if obs.backend_calls:
        row.update(
            asked_blocks=obs.backend_calls[-1]["num_blocks"], asked_block_size=obs.backend_calls[-1]["block_size"]
        )
    if obs.raised:
        return {**row, "outcome": OUTCOME_RAISED, "error_type": obs.error_type, "error": obs.error_text}
    view = obs.view
    required = _bound_bytes(view)
    row.update(
        outcome=OUTCOME_VIEW,
        sizes=json.dumps(list(view.shape)),
        strides=json.dumps(list(view.stride())),
        required_bytes=required,
        unused_tail_bytes=pool_bytes - required,
    )
    fits_model = list(view.shape) == list(model[RESHAPE_FIXED].shape)
    if fits_model and view.data_ptr() == pool.data_ptr():
        key = (loaded.version, spec.name, tuple(view.shape), tuple(view.stride()), view.storage_offset())
        cache = aliasing if aliasing is not None else {}
        alias = cache[key] = cache.get(key) or check_aliasing(pool, view, spec)
        row.update(payload_mismatches=alias.payload_mismatches, padding_bytes_changed=alias.padding_bytes_changed)
    return row


# ---------------------------------------------------------------------------------------------
# Which releases ship the function.

#: The CPU profile's short list: one release of each count expression (PR #43988's before and after).
CPU_RELEASES = ("0.22.0", "0.23.0")


def ships_function(version: str, cache_root: Path | None = None, download: bool = True) -> bool:
    got = ensure_release(version, cache_root, download=download, sets=(RESHAPE,))
    return not isinstance(got, CacheMiss) and defines_function(got.read(RESHAPE_FUNCTION_MEMBER))


def releases_with_function(cache_root: Path | None = None, document: dict | None = None) -> list[str]:
    """Every release from the first that ships ``_reshape_kv_cache`` on: the releases before the first
    DeepSeek gather release that ship it (scanned backwards until one does not), then every release from
    that first one (a release that no longer ships it is a row saying so). Needs the registry."""

    document = document if document is not None else fetch_index(timeout_s=20)
    derived = derive_releases(cache_root, document)
    versions = [r.version for r in releases_from_index(document)]
    earlier = []
    for version in reversed(versions[: versions.index(derived.first)]):
        if not ships_function(version, cache_root):
            break
        earlier.insert(0, version)
    return earlier + list(derived.releases)

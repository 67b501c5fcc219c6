"""Bug 1 in one release: DeepSeek-V4's KV cache from its layers to the runner's reshape, every link released code.

For one release, one ``--block-size`` a user may pass (or none) and one model runner, the chain runs as the
release's engine does, each link the release's own definition (:class:`~repro.registry.ChainLink`):

1. DeepSeek-V4's decoder layers are built by their released ``__init__`` lines
   (:mod:`repro_studies.upstream.released_model`) on the release's ``VllmConfig`` at its defaults
   (:mod:`repro_studies.upstream.released_config`), the MLA layer turning ``--kv-cache-dtype fp8`` into
   ``fp8_ds_mla`` itself;
2. the block size: ``CacheConfig``'s own default rule, the platform's ``update_block_size_for_backend`` (the
   backend of the first layer the model registered picks the block size when the user passed none) and
   ``VllmConfig.validate_block_size``;
3. each cache layer's ``get_kv_cache_spec``, the KV cache grouping (``get_kv_cache_groups``) and sizing
   (``get_kv_cache_config_from_groups``, for ``--num-gpu-blocks-override`` blocks);
4. the runner's attention groups (each layer's own ``get_attn_backend()``) and kernel block sizes
   (``prepare_kernel_block_sizes``): V1 ``GPUModelRunner.initialize_attn_backend``'s statements that build
   ``self.attn_groups`` and ``initialize_kv_cache``'s selection statement; V2 ``init_attn_backend``;
5. the runner's allocation and reshape: V1 ``_allocate_kv_cache_tensors`` and ``_reshape_kv_cache_tensors``,
   V2 ``init_kv_cache``'s statements up to ``_reshape_kv_cache``; once over every layer (the call a user's
   engine makes, whose first error is what the user sees) and once per layer (so each cache's view is seen).

The platform is SM90 (the release's own ``Platform`` with that device's facts); attention metadata builders are
not built (they need a GPU; they take no part in the reshape). vLLM's contiguous-stride probe
(``torch.empty(shape).stride()``) runs on PyTorch's meta device; every view is over a real pool, so PyTorch's
own ``setStorage`` check runs, and a view that fits is checked against every logical block's page
(:func:`repro_studies.upstream.pages.page_check`). What each row means is :mod:`repro_studies.analysis.reshape_chain`.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import json
import textwrap
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.core.reshape.plan import as_strided_required_elems
from repro_studies.registry import ChainLink, ChainStop, KVViewPath, RaisedBy, Runner
from repro_studies.upstream import platforms as pf
from repro_studies.upstream.dispatch import triton_utils
from repro_studies.upstream.members import RESHAPE_CHAIN, RESHAPE_FUNCTION_MEMBER, V1_RUNNER_MEMBER
from repro_studies.upstream.pages import page_check
from repro_studies.upstream.released_code import (
    NotProvided,
    ReleasedCode,
    StatementFailed,
    backward_slice,
    statement_binding,
)
from repro_studies.upstream.released_config import (
    V2_RUNNER_VARIABLE,
    engine_config,
    envs_module,
)
from repro_studies.upstream.released_model import CacheLayer, ModelBuilder
from repro_studies.upstream.wheelcache import CacheEntry, CacheMiss, ensure_release

KV_CACHE_UTILS = "vllm/v1/core/kv_cache_utils.py"
KV_CACHE_PLANNING = "vllm/v1/core/kv_cache_planning.py"
WORKER = "vllm/v1/worker/gpu_worker.py"
V2_PACKAGE = "vllm/v1/worker/gpu/"
WORKER_UTILS = "vllm/v1/worker/utils.py"
WORKER_BASE = "vllm/v1/worker/worker_base.py"
LAYOUT_UTILS = "vllm/v1/attention/backends/utils.py"
V2_FUNCTION = "_reshape_kv_cache"
V2_HELPER = "_reshape_attention_kv_cache"
V1_METHOD = "_reshape_kv_cache_tensors"
#: Each runner's reshape: the member and the definition (``Class.method`` for V1).
RESHAPES = {
    Runner.V1: (V1_RUNNER_MEMBER, f"GPUModelRunner.{V1_METHOD}"),
    Runner.V2: (RESHAPE_FUNCTION_MEMBER, V2_FUNCTION),
}
RUNNERS = (Runner.V1, Runner.V2)
KV_CACHE_INTERFACE = "vllm/v1/kv_cache_interface.py"
#: The rewritten path (vLLM 0.29.0 on): the runner calls ``allocate_kv_cache`` (one int8 buffer), which calls
#: ``create_kv_cache_views`` per KV cache tensor (``torch.as_strided``, one view per layer).
ALLOCATOR = "allocate_kv_cache"
VIEW_FUNCTION = "create_kv_cache_views"
#: Each runner's definition that calls :data:`ALLOCATOR` (``Class.method`` for V1).
VIEW_CALLERS = {
    Runner.V1: (V1_RUNNER_MEMBER, "GPUModelRunner.initialize_kv_cache_tensors"),
    Runner.V2: (RESHAPE_FUNCTION_MEMBER, "init_kv_cache"),
}
#: ``--num-gpu-blocks-override``: the blocks every pool holds (small enough to check every byte).
NUM_BLOCKS = 4
#: ``--max-model-len`` of the engine.
MAX_MODEL_LEN = 4096
#: Bytes the engine is told are free for the KV cache (the block count is the override's).
AVAILABLE_MEMORY = 1 << 40
#: The block sizes the sweep passes: powers of two 16 ... 1,024 and multiples of 16 that are not.
BLOCK_SIZES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024)
#: The runner-choice environment: unset (the stock default) and each value a user may set.
RUNNER_ENVIRONMENTS = ({}, {V2_RUNNER_VARIABLE: "1"}, {V2_RUNNER_VARIABLE: "0"})


@dataclass(frozen=True)
class BlockSizeChoice:
    """``--block-size N``, or no flag (``None``: the release's own default path)."""

    value: int | None

    @property
    def flag(self) -> str:
        return "" if self.value is None else f"--block-size {self.value}"

    @property
    def label(self) -> str:
        return "default" if self.value is None else str(self.value)


DEFAULT_CHOICE = BlockSizeChoice(None)


class Stopped(Exception):
    """A link of the chain did not complete: the release refused the configuration, or the study could not run
    the link. ``where`` is the innermost line of the release's code the failure passed through."""

    def __init__(self, link: ChainLink, stop: ChainStop, message: str, where: str = "", raised_by: RaisedBy | str = ""):
        super().__init__(f"{link}: {message}")
        self.link, self.stop, self.message, self.where = link, stop, message, where
        self.raised_by = raised_by


def _not_provided(exc: BaseException) -> bool:
    """Did the failure come from something the study does not provide (a placeholder), not from the release?"""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, NotProvided) or "Missing" in str(seen) or "<missing " in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def release_frame(exc: BaseException, code: ReleasedCode) -> tuple[str, str]:
    """``("vllm/...py:N", source line)`` of the innermost frame of the release's code the exception passed."""
    prefix = f"{code.label}/"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(prefix)]
    seen = exc.__cause__
    while not frames and seen is not None:
        frames = [f for f in traceback.extract_tb(seen.__traceback__) if f.filename.startswith(prefix)]
        seen = seen.__cause__
    if not frames:
        return "", ""
    frame = frames[-1]
    member = frame.filename[len(prefix) :]
    line = code.source(member).splitlines()[frame.lineno - 1].strip() if frame.lineno else ""
    return f"{member}:{frame.lineno}", line


def stopped(link: ChainLink, exc: BaseException, code: ReleasedCode) -> Stopped:
    """The row a failure gives: REJECTED when the release's own code raised (its message, or for a bare
    ``assert`` the asserting line), NOT_RUN when the study did not provide what the link needed."""
    root = exc.__cause__ if isinstance(exc, StatementFailed) and exc.__cause__ is not None else exc
    where, line = release_frame(root, code)
    if link != ChainLink.KERNEL_BLOCKS and _passed_through(root, SELECTION):
        link = ChainLink.KERNEL_BLOCKS  # V2's init_attn_backend runs the selection inside the attention groups' link
    if _not_provided(exc):
        return Stopped(link, ChainStop.NOT_RUN, f"{type(root).__name__}: {root}", where)
    text = str(root) or line
    return Stopped(link, ChainStop.REJECTED, f"{type(root).__name__}: {text}", where, raised_by(root, code))


def raised_by(exc: BaseException, code: ReleasedCode) -> RaisedBy:
    """RELEASE when the innermost frame is a ``raise`` or ``assert`` statement of the release's code (its own
    check); CALL when it is any other line (a call on it raised: PyTorch refusing a view, for one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or not frames[-1].filename.startswith(f"{code.label}/") or not frames[-1].lineno:
        return RaisedBy.CALL
    member = frames[-1].filename[len(code.label) + 1 :]
    statement = _statement_at(code, member, frames[-1].lineno)
    return RaisedBy.RELEASE if isinstance(statement, (ast.Raise, ast.Assert)) else RaisedBy.CALL


def _statement_at(code: ReleasedCode, member: str, line: int) -> ast.stmt | None:
    """The innermost statement of ``member`` that starts at ``line``."""
    found = None
    for node in ast.walk(code.tree(member)):
        if isinstance(node, ast.stmt) and node.lineno == line:
            found = node
    return found


#: The runner's kernel block size selection (a failure passing through it is that link's, whichever runs it).
SELECTION = "prepare_kernel_block_sizes"


def _passed_through(exc: BaseException, function: str) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if any(frame.name == function for frame in traceback.extract_tb(seen.__traceback__)):
            return True
        seen = seen.__cause__
    return False


@contextlib.contextmanager
def link(name: ChainLink, code: ReleasedCode) -> Iterator[None]:
    """Run one link; any failure becomes :class:`Stopped` naming it."""
    try:
        yield
    except Stopped:
        raise
    except Exception as exc:
        raise stopped(name, exc, code) from exc


# ---- the release's code --------------------------------------------------------------------------------------
class ReleaseChain:
    """One release's sources, and a fresh :class:`ReleasedCode` per engine configuration (the parsed sources
    shared)."""

    def __init__(self, version: str, read: Callable[[str], str], members: Iterable[str], wheel_sha256: str = ""):
        self.version, self.read, self.members = version, read, sorted(members)
        self.wheel_sha256 = wheel_sha256
        self.parsed: dict = {}
        self._codes: dict[tuple, ReleasedCode] = {}
        self._paths: dict[str, KVViewPath | None] = {}

    def has(self, runner: str) -> bool:
        member, qualname = RESHAPES[runner]
        if member not in self.members:
            return False
        tree = ast.parse(self.read(member))
        if "." in qualname:
            cls, method = qualname.split(".")
            return any(
                isinstance(n, ast.ClassDef)
                and n.name == cls
                and any(isinstance(m, ast.FunctionDef) and m.name == method for m in n.body)
                for n in tree.body
            )
        return any(isinstance(n, ast.FunctionDef) and n.name == qualname for n in tree.body)

    def path(self, runner: str) -> KVViewPath | None:
        """How the runner views the KV cache: its reshape (:data:`RESHAPES`), the rewritten
        ``allocate_kv_cache``/``create_kv_cache_views`` (its :data:`VIEW_CALLERS` definition calls them), or None
        (the release does not ship the runner). Read from the source, nothing run."""
        if runner not in self._paths:
            self._paths[runner] = self._path(runner)
        return self._paths[runner]

    def _path(self, runner: str) -> KVViewPath | None:
        if self.has(runner):
            return KVViewPath.RESHAPE
        member, qualname = VIEW_CALLERS[runner]
        if any(m not in self.members for m in (member, WORKER_UTILS, KV_CACHE_INTERFACE)):
            return None
        caller = _defined_in(ast.parse(self.read(member)), qualname)
        allocator = _defined_in(ast.parse(self.read(WORKER_UTILS)), ALLOCATOR)
        viewer = _defined_in(ast.parse(self.read(KV_CACHE_INTERFACE)), VIEW_FUNCTION)
        if None in (caller, allocator, viewer):
            return None
        return KVViewPath.VIEWS if _calls(caller, ALLOCATOR) and _calls(allocator, VIEW_FUNCTION) else None

    def view_source(self, qualname: str = VIEW_FUNCTION) -> str:
        """A definition of the rewritten path as released (:data:`VIEW_FUNCTION` by default)."""
        member = WORKER_UTILS if qualname == ALLOCATOR else KV_CACHE_INTERFACE
        return _source_of(self.code(), member, qualname)

    def source(self, runner: str, qualname: str = "") -> str:
        """A runner's reshape as released (``qualname``: another definition of the same module)."""
        member, main = RESHAPES[runner]
        return _source_of(self.code(), member, qualname or main)

    def helper(self, runner: str) -> str:
        """The definition a runner's reshape builds its attention views with (V2 from 0.24.0), or ""."""
        member, _ = RESHAPES[runner]
        return V2_HELPER if runner == Runner.V2 and self.code().toplevel(member, V2_HELPER) is not None else ""

    def code(self, environment: dict[str, str] | None = None) -> ReleasedCode:
        """The release's code as one environment sees it (one per environment: the modules it runs whole are
        shared by every engine configuration; ``code.holder.config`` is the configuration in use)."""
        key = tuple(sorted((environment or {}).items()))
        if key not in self._codes:
            self._codes[key] = self._new_code(environment or {})
        return self._codes[key]

    def _new_code(self, environment: dict[str, str]) -> ReleasedCode:
        code = ReleasedCode(self.read, self.members, label=f"vLLM {self.version}", parsed=self.parsed)
        pf.install(code, pf.SM90)
        code.standins["vllm.triton_utils"] = triton_utils()
        code.standins["vllm.envs"] = envs_module(code, environment)
        holder = types.SimpleNamespace(config=None)
        for name in ("vllm.config.get_current_vllm_config", "vllm.config.vllm.get_current_vllm_config"):
            code.standins[name] = lambda: holder.config
        for name in ("vllm.config.set_current_vllm_config", "vllm.config.vllm.set_current_vllm_config"):
            code.standins[name] = lambda *a, **k: contextlib.nullcontext()
        for name in (
            "vllm.distributed.get_tensor_model_parallel_world_size",
            "vllm.distributed.parallel_state.get_tensor_model_parallel_world_size",
        ):
            code.standins[name] = lambda: 1  # one GPU
        code.holder = holder  # type: ignore[attr-defined]
        return code


def _definition(code: ReleasedCode, member: str, qualname: str) -> ast.AST | None:
    return _defined_in(code.tree(member), qualname)


def _defined_in(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The top-level definition ``qualname`` (``Class.method`` for a method) of a parsed module, if any."""
    body, node = tree.body, None
    for name in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
        if node is None:
            return None
        body = node.body
    return node


def _calls(node: ast.AST, name: str) -> bool:
    """Does ``node``'s body call ``name`` (a plain name)?"""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(node))


def definition_line(code: ReleasedCode, member: str, qualname: str) -> int:
    """The line of ``member`` where ``qualname`` starts (its ``def``)."""
    node = _definition(code, member, qualname)
    return node.lineno if node is not None else 0


def _source_of(code: ReleasedCode, member: str, qualname: str) -> str:
    node = _definition(code, member, qualname)
    if node is None:
        return ""
    lines = code.source(member).splitlines()
    return textwrap.dedent("\n".join(lines[node.lineno - 1 : node.end_lineno]))


# ---- which runner a user gets --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunnerChoice:
    """Which runner the release's worker builds for DeepSeek-V4 in one environment, and the expression it read."""

    environment: tuple[tuple[str, str], ...]
    runner: str  # Runner.V1 / Runner.V2, or "" when it could not be decided
    expression: str  # the worker's own statement, e.g. ``self.use_v2_model_runner = vllm_config.use_v2_model_runner``
    reason: str = ""

    @property
    def setting(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.environment)


def runner_choices(chain: ReleaseChain) -> list[RunnerChoice]:
    """The runner in each :data:`RUNNER_ENVIRONMENTS`: the worker's ``self.use_v2_model_runner = ...``
    statement evaluated as released (``vllm_config.use_v2_model_runner``, the release's property, or
    ``envs.VLLM_USE_V2_MODEL_RUNNER``) for DeepSeek-V4's configuration."""
    out = []
    for environment in RUNNER_ENVIRONMENTS:
        code = chain.code(environment)
        vc = engine_config(code, None, MAX_MODEL_LEN, NUM_BLOCKS)
        code.holder.config = vc
        env = tuple(sorted(environment.items()))
        stmt = _worker_statement(code)
        if stmt is None:
            only_v2 = V1_RUNNER_MEMBER not in code.members and any(m.startswith(V2_PACKAGE) for m in code.members)
            why = f"{WORKER} assigns no self.use_v2_model_runner"
            if only_v2:
                out.append(RunnerChoice(env, Runner.V2, f"no choice: {V1_RUNNER_MEMBER} is not in the release"))
            else:
                out.append(RunnerChoice(env, "", "", why))
            continue
        try:
            v2 = code.evaluate(WORKER, ast.unparse(stmt.value), {"vllm_config": vc, "self": types.SimpleNamespace()})
            out.append(RunnerChoice(env, Runner.V2 if v2 else Runner.V1, ast.unparse(stmt)))
        except Exception as exc:
            out.append(RunnerChoice(env, "", ast.unparse(stmt), f"{type(exc).__name__}: {exc}"))
    return out


def _worker_statement(code: ReleasedCode) -> ast.Assign | None:
    if WORKER not in code.members:
        return None
    for node in ast.walk(code.tree(WORKER)):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "self.use_v2_model_runner" for t in node.targets):
            return node
    return None


# ---- the engine up to the KV cache configuration ----------------------------------------------------------------
@dataclass
class Setup:
    """An engine configuration carried through every link before the runner: or where it stopped."""

    chain: ReleaseChain
    choice: BlockSizeChoice
    code: ReleasedCode | None = None
    vllm_config: Any = None
    layers: list[CacheLayer] = field(default_factory=list)
    block_size: int | None = None  # after the release's own block-size rules
    user_specified: bool | None = None
    first_layer: str = ""  # the layer whose backend picked the default block size
    specs: dict[str, Any] = field(default_factory=dict)
    layout: str = ""  # the resolved KV cache layout (releases that resolve one)
    kv_cache_config: Any = None
    stop: Stopped | None = None
    placeholders: list[str] = field(default_factory=list)  # construction statements that bound a placeholder


def set_up(chain: ReleaseChain, choice: BlockSizeChoice, environment: dict[str, str] | None = None) -> Setup:
    """The engine for ``choice`` in ``environment`` (the runner's variable), through every link before the
    runner."""
    setup = Setup(chain, choice)
    code = chain.code(environment)
    vc = engine_config(code, choice.value, MAX_MODEL_LEN, NUM_BLOCKS)
    code.holder.config = vc
    setup.code, setup.vllm_config = code, vc
    try:
        with link(ChainLink.MODEL, code):
            builder = ModelBuilder(code, vc)
            for layer_id in range(len(vc.model_config.hf_config.compress_ratios)):
                builder.decoder_layer(layer_id)
            setup.layers, setup.placeholders = builder.layers, builder.failures
            if not setup.layers:
                raise NotProvided("the release's DeepSeek-V4 code built no cache layer")
        cache = vc.cache_config
        with link(ChainLink.CACHE_CONFIG, code):
            _apply_default_rule(code, cache)
            setup.user_specified = bool(getattr(cache, "user_specified_block_size", choice.value is not None))
        with link(ChainLink.BACKEND_BLOCK_SIZE, code):
            platform = code.standins["vllm.platforms.current_platform"]
            order = list(vc.compilation_config.static_forward_context)
            setup.first_layer = next((n for n in order if n in {layer.name for layer in setup.layers}), "")
            if hasattr(type(platform), "update_block_size_for_backend"):
                type(platform).update_block_size_for_backend(vc)
            setup.block_size = int(cache.block_size)
        with link(ChainLink.VALIDATE, code):
            if code.toplevel("vllm/config/vllm.py", "VllmConfig") is not None and vc._cls.defines(
                "validate_block_size"
            ):
                vc.validate_block_size()
        with link(ChainLink.SPECS, code):
            by_name = {layer.name: layer for layer in setup.layers}
            for name in vc.compilation_config.static_forward_context:
                if name in by_name:
                    spec = by_name[name].obj.get_kv_cache_spec(vc)
                    if spec is not None:
                        setup.specs[name] = spec
        with link(ChainLink.LAYOUT, code):
            setup.layout = resolve_layout(code, vc, list(setup.specs.values()))
        planning = grouping_member(code)
        with link(ChainLink.GROUPS, code):
            groups = code.function(planning, "get_kv_cache_groups")(vc, dict(setup.specs))
        with link(ChainLink.SIZING, code):
            sizing = code.function(planning, "get_kv_cache_config_from_groups")
            setup.kv_cache_config = _call_by_name(
                sizing,
                code,
                planning,
                "get_kv_cache_config_from_groups",
                vllm_config=vc,
                kv_cache_groups=groups,
                kv_cache_specs=dict(setup.specs),
                kv_cache_spec=dict(setup.specs),
                available_memory=AVAILABLE_MEMORY,
            )
    except Stopped as stop:
        setup.stop = stop
    return setup


def grouping_member(code: ReleasedCode) -> str:
    """The module with the release's KV cache grouping and sizing (``kv_cache_planning.py`` from vLLM 0.33.0)."""
    if KV_CACHE_PLANNING in code.members and code.toplevel(KV_CACHE_PLANNING, "get_kv_cache_groups") is not None:
        return KV_CACHE_PLANNING
    return KV_CACHE_UTILS


def resolve_layout(code: ReleasedCode, vc: Any, specs: list[Any]) -> str:
    """The KV cache layout the engine core resolves before sizing (releases that have one; "" before): the
    worker's ``get_supported_kv_cache_layouts`` (its attention backends' declared layouts), the core's
    ``resolve_kv_cache_layout`` over every spec, and the worker's record of the result in ``CacheConfig``."""
    if code.toplevel(LAYOUT_UTILS, "resolve_kv_cache_layout") is None:
        return ""
    worker = code.class_ref(WORKER_BASE, "WorkerBase").instance(vllm_config=vc)
    supported = worker.get_supported_kv_cache_layouts()
    layout = code.function(LAYOUT_UTILS, "resolve_kv_cache_layout")(vc, [supported], specs)
    code.function(LAYOUT_UTILS, "record_kv_cache_layout")(vc.cache_config, layout.name)
    return str(layout.name)


def _apply_default_rule(code: ReleasedCode, cache: Any) -> None:
    """Run ``CacheConfig``'s own rule for a missing ``--block-size``: the method that sets
    ``user_specified_block_size`` (pydantic runs it after construction)."""
    cls = cache._cls
    for stmt in cls._node.body:
        if isinstance(stmt, ast.FunctionDef) and any(_sets_user_specified(n) for n in ast.walk(stmt)):
            getattr(cache, stmt.name)()
            return
    raise NotProvided(f"vLLM {code.label}: CacheConfig has no method setting user_specified_block_size")


def _sets_user_specified(node: ast.AST) -> bool:
    """``self.user_specified_block_size = ...`` or ``object.__setattr__(self, "user_specified_block_size", ...)``."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        return node.attr == "user_specified_block_size"
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "object.__setattr__"
        and len(node.args) > 1
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "user_specified_block_size"
    )


def _call_by_name(fn: Callable, code: ReleasedCode, member: str, name: str, **available: Any) -> Any:
    """Call a released function with the arguments its own signature names (from ``available``)."""
    node = code.toplevel(member, name)
    params = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
    missing = [p for p in params if p not in available and not _has_default(node, p)]
    if missing:
        raise NotProvided(f"{member}:{name} takes {', '.join(missing)}, which the study does not provide")
    return fn(**{p: available[p] for p in params if p in available})


def _has_default(node: ast.FunctionDef, param: str) -> bool:
    a = node.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    with_default = positional[len(positional) - len(a.defaults) :]
    with_default += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    return param in with_default


# ---- the runner ----------------------------------------------------------------------------------------------
@dataclass
class LayerView:
    """One layer's reshape by the runner (called for that layer alone): the view, or PyTorch's error."""

    layer: CacheLayer
    spec: Any
    pool: torch.Tensor | None = None
    view: torch.Tensor | None = None
    error_type: str = ""
    error: str = ""
    where: str = ""
    raised_by: str = ""


@dataclass
class RunnerRun:
    """What one runner did for one engine configuration."""

    runner: str
    path: KVViewPath = KVViewPath.RESHAPE
    kernel_block_sizes: list[int] | None = None
    group_of: dict[str, int] = field(default_factory=dict)  # layer -> KV cache group id
    stop: Stopped | None = None  # a link before the reshape
    whole_error: str = ""  # the reshape over every layer: its error, verbatim ("" when every layer's view fits)
    whole_where: str = ""
    whole_raised_by: str = ""
    views: list[LayerView] = field(default_factory=list)


class _MetadataBuilder:
    """A metadata builder that is not built (it needs a GPU and takes no part in the reshape)."""

    def __init__(self, always: Any):
        self._always = always

    def get_cudagraph_support(self, *args: Any, **kwargs: Any) -> Any:
        return self._always


def _attention_group_class(code: ReleasedCode) -> type:
    """The release's ``AttentionGroup`` whose metadata builders are not built."""
    base = code.value(WORKER_UTILS, "AttentionGroup")
    if not isinstance(base, type):
        raise NotProvided(f"{WORKER_UTILS}: AttentionGroup could not be executed as released")
    try:
        always = code.value("vllm/v1/attention/backend.py", "AttentionCGSupport").ALWAYS
    except Exception:
        always = None

    class AttentionGroup(base):  # type: ignore[misc, valid-type]
        def create_metadata_builders(self, *args: Any, **kwargs: Any) -> None:
            return None

        def get_metadata_builder(self, *args: Any, **kwargs: Any) -> Any:
            return _MetadataBuilder(always)

    AttentionGroup.__qualname__ = AttentionGroup.__name__ = "AttentionGroup"
    return AttentionGroup


def run_runner(setup: Setup, runner: str) -> RunnerRun:
    """The runner's attention groups, kernel block sizes, allocation and reshape (or, on the rewritten path, its
    ``allocate_kv_cache`` call) for one configuration."""
    run = RunnerRun(runner, setup.chain.path(runner) or KVViewPath.RESHAPE)
    views_of = _views if run.path == KVViewPath.VIEWS else _reshape
    last = ChainLink.VIEWS if run.path == KVViewPath.VIEWS else ChainLink.RESHAPE
    code = setup.code
    code.standins["vllm.v1.worker.utils.AttentionGroup"] = _attention_group_class(code)
    try:
        inputs = _runner_inputs(setup, runner, run)
    except Stopped as stop:
        run.stop = stop
        return run
    # The engine's own call: every layer at once (its first error is what a user sees).
    whole = views_of(setup, runner, inputs, None)
    if isinstance(whole, Stopped):
        if whole.link != last:
            run.stop = whole
            return run
        run.whole_error, run.whole_where, run.whole_raised_by = whole.message, whole.where, whole.raised_by
    for layer in setup.layers:
        if layer.name not in setup.specs:
            continue
        view = LayerView(layer, setup.specs[layer.name])
        got = views_of(setup, runner, inputs, layer.name)
        if isinstance(got, Stopped):
            view.error_type, _, view.error = got.message.partition(": ")
            view.where, view.raised_by = got.where, got.raised_by
            if got.link != last:
                view.error_type, view.error, view.raised_by = got.stop, got.message, ""
        else:
            view.pool, view.view = got
        run.views.append(view)
    return run


@dataclass
class _Inputs:
    """What the runner's reshape statement reads, as the runner computed it."""

    kv_cache_config: Any
    attn_groups: Any = None
    attn_backends: Any = None
    kernel_block_sizes: list[int] | None = None
    self_obj: Any = None  # V1: the runner


def _runner_inputs(setup: Setup, runner: str, run: RunnerRun) -> _Inputs:
    code, vc = setup.code, setup.vllm_config
    kvc = copy.deepcopy(setup.kv_cache_config)
    run.group_of = {name: gid for gid, g in enumerate(kvc.kv_cache_groups) for name in g.layer_names}
    if runner == Runner.V2:
        with link(ChainLink.ATTENTION_GROUPS, code):
            node = code.toplevel(RESHAPE_FUNCTION_MEMBER, "init_attn_backend")
            fn = code.function(RESHAPE_FUNCTION_MEMBER, "init_attn_backend")
            result = fn(kvc, vc, torch.device("cpu"))
            named = dict(zip(_returned_names(node), result if isinstance(result, tuple) else (result,)))
        run.kernel_block_sizes = list(named["kernel_block_sizes"]) if "kernel_block_sizes" in named else None
        return _Inputs(kvc, named.get("attn_groups"), named.get("attn_backends"), run.kernel_block_sizes)
    runner_cls = code.class_ref(V1_RUNNER_MEMBER, "GPUModelRunner")
    self_obj = runner_cls.instance(
        vllm_config=vc,
        cache_config=vc.cache_config,
        model_config=vc.model_config,
        parallel_config=vc.parallel_config,
        device=torch.device("cpu"),
        attn_groups=[],
        kv_sharing_fast_prefill_eligible_layers=set(),
        runner_only_attn_layers=set(),
        kv_cache_config=kvc,
    )
    with link(ChainLink.ATTENTION_GROUPS, code):
        owner, method = runner_cls.lookup("initialize_attn_backend")
        targets = [s for s in method.body if "self.attn_groups" in ast.unparse(s) and not isinstance(s, ast.Assert)]
        chosen = {id(s) for t in targets for s in backward_slice(method.body, t)}
        definitions = (ast.FunctionDef, ast.ClassDef)
        stmts = [s for s in method.body if id(s) in chosen or isinstance(s, definitions)]
        code.execute_all(owner._member, stmts, {"self": self_obj, "kv_cache_config": kvc, "is_profiling": False}, "")
    with link(ChainLink.KERNEL_BLOCKS, code):
        owner, method = runner_cls.lookup("initialize_kv_cache")
        target = statement_binding(method.body, "kernel_block_sizes")
        if target is None:
            raise NotProvided("GPUModelRunner.initialize_kv_cache binds no kernel_block_sizes")
        local = {"self": self_obj, "kv_cache_config": kvc}
        code.execute(owner._member, target, local)
        run.kernel_block_sizes = list(local["kernel_block_sizes"])
    return _Inputs(kvc, self_obj.attn_groups, None, run.kernel_block_sizes, self_obj)


def _returned_names(node: ast.FunctionDef) -> list[str]:
    for stmt in ast.walk(node):
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
            return [ast.unparse(e) for e in stmt.value.elts]
    return []


def _restricted(inputs: _Inputs, layer: str | None) -> _Inputs:
    """The runner's inputs with every KV cache group and attention group reduced to one layer (group ids kept):
    the runner's own call, for that layer alone."""
    if layer is None:
        return inputs
    kvc = copy.deepcopy(inputs.kv_cache_config)
    for group in kvc.kv_cache_groups:
        group.layer_names = [n for n in group.layer_names if n == layer]
    tensors = []
    for tensor in kvc.kv_cache_tensors:
        names = "shared_by" if hasattr(tensor, "shared_by") else "layers"
        if layer in getattr(tensor, names):
            tensors.append(dataclasses.replace(tensor, **{names: [layer]}))
    kvc.kv_cache_tensors = tensors

    def groups(nested: Any) -> Any:
        if nested is None:
            return None
        out = []
        for inner in nested:
            kept = []
            for g in inner:
                if layer in g.layer_names:
                    g = copy.copy(g)
                    g.layer_names = [layer]
                    kept.append(g)
            out.append(kept)
        return out

    backends = None if inputs.attn_backends is None else {layer: inputs.attn_backends[layer]}
    self_obj = inputs.self_obj
    if self_obj is not None:
        self_obj = copy.copy(self_obj)
        object.__getattribute__(self_obj, "_attrs")["attn_groups"] = groups(inputs.attn_groups)
        object.__getattribute__(self_obj, "_attrs")["kv_cache_config"] = kvc
    return _Inputs(kvc, groups(inputs.attn_groups), backends, inputs.kernel_block_sizes, self_obj)


def _reshape(
    setup: Setup, runner: str, inputs: _Inputs, layer: str | None
) -> tuple[torch.Tensor, torch.Tensor] | Stopped | dict:
    """The runner's allocation and reshape; for one layer, (its pool, its view)."""
    code, vc = setup.code, setup.vllm_config
    mine = _restricted(inputs, layer)
    try:
        with link(ChainLink.ALLOCATE, code):
            if runner == Runner.V1:
                raws = mine.self_obj._allocate_kv_cache_tensors(mine.kv_cache_config)
            else:
                node = code.toplevel(RESHAPE_FUNCTION_MEMBER, "init_kv_cache")
                target = statement_binding(node.body, "kv_caches")
                statements = backward_slice(node.body, target)
                local = {
                    "kv_cache_config": mine.kv_cache_config,
                    "attn_groups": mine.attn_groups,
                    "attn_backends": mine.attn_backends,
                    "device": torch.device("cpu"),
                    "cache_dtype": vc.cache_config.cache_dtype,
                    "kernel_block_sizes": mine.kernel_block_sizes,
                    "vllm_config": vc,
                    "runner_kv_caches": [],
                    "forward_context": {},
                }
                code.execute_all(RESHAPE_FUNCTION_MEMBER, statements[:-1], local, "init_kv_cache")
                raws = local["kv_cache_raw_tensors"]
        with link(ChainLink.RESHAPE, code), torch.device("meta"):
            if runner == Runner.V1:
                views = mine.self_obj._reshape_kv_cache_tensors(raws, mine.kernel_block_sizes)
            else:
                code.execute(RESHAPE_FUNCTION_MEMBER, statements[-1], local)
                views = local["kv_caches"]
    except Stopped as stop:
        return stop
    return _layer_of(views, layer, lambda _: raws[layer], ChainLink.RESHAPE, "the reshape")


def _layer_of(
    views: dict, layer: str | None, pool_of: Callable[[torch.Tensor], torch.Tensor], at: ChainLink, what: str
) -> tuple[torch.Tensor, torch.Tensor] | Stopped | dict:
    """Every layer's view (``layer`` None), or one layer's pool and view; NOT_RUN when the call gave none."""
    if layer is None:
        return views
    view = views.get(layer)
    if not isinstance(view, torch.Tensor):
        return Stopped(at, ChainStop.NOT_RUN, f"{what} returned {type(view).__name__} for {layer}")
    return pool_of(view), view


def _views(
    setup: Setup, runner: str, inputs: _Inputs, layer: str | None
) -> tuple[torch.Tensor, torch.Tensor] | Stopped | dict:
    """The rewritten path: the runner's own statements up to the one binding ``kv_caches`` (its
    ``allocate_kv_cache`` call, with the layout the engine resolved), over every KV cache tensor; for one layer,
    over the tensor holding it alone (all of its layers: a layer's place in its tensor sets its bytes), giving
    (the backing buffer, the layer's view)."""
    code, vc = setup.code, setup.vllm_config
    mine = _one_tensor(inputs, layer)
    member, qualname = VIEW_CALLERS[runner]
    local: dict[str, Any] = {
        "kv_cache_config": mine.kv_cache_config,
        "kernel_block_sizes": mine.kernel_block_sizes,
        "kv_cache_allocation_context": None,
    }
    if runner == Runner.V1:
        owner, node = code.class_ref(V1_RUNNER_MEMBER, "GPUModelRunner").lookup(qualname.split(".")[-1])
        member = owner._member
        local["self"] = mine.self_obj
    else:
        node = code.toplevel(member, qualname)
        local.update(
            device=torch.device("cpu"),
            vllm_config=vc,
            forward_context={},
            attn_groups=mine.attn_groups or (),
            block_tables=None,
            allocate=None,
        )
    try:
        with link(ChainLink.VIEWS, code):
            target = statement_binding(node.body, "kv_caches")
            if target is None:
                raise NotProvided(f"{member}:{qualname} binds no kv_caches")
            code.execute_all(member, backward_slice(node.body, target), local, qualname)
            views = local["kv_caches"]
    except Stopped as stop:
        return stop
    return _layer_of(views, layer, _backing_buffer, ChainLink.VIEWS, ALLOCATOR)


def _backing_buffer(view: torch.Tensor) -> torch.Tensor:
    """The whole int8 buffer a rewritten view is over, as bytes (every layer's view shares it)."""
    return torch.empty(0, dtype=torch.uint8).set_(view.untyped_storage())


def _one_tensor(inputs: _Inputs, layer: str | None) -> _Inputs:
    """The runner's inputs with the KV cache tensors reduced to the one holding ``layer`` (groups kept)."""
    if layer is None:
        return inputs
    kvc = copy.copy(inputs.kv_cache_config)
    kvc.kv_cache_tensors = [t for t in kvc.kv_cache_tensors if layer in _tensor_layers(t)]
    self_obj = inputs.self_obj
    if self_obj is not None:
        self_obj = copy.copy(self_obj)
        object.__getattribute__(self_obj, "_attrs")["kv_cache_config"] = kvc
    return dataclasses.replace(inputs, kv_cache_config=kvc, self_obj=self_obj)


def _tensor_layers(tensor: Any) -> list[str]:
    return list(getattr(tensor, "shared_by", None) or getattr(tensor, "layers", ()))


# ---- rows ----------------------------------------------------------------------------------------------------
#: One row per release x runner x block size: what the engine did (its first error, verbatim).
RUN_COLUMNS = (
    "release",
    "runner",
    "path",
    "block size asked",
    "block size",
    "stock",
    "environment",
    "first layer",
    "link",
    "stop",
    "where",
    "message",
    "raised by",
    "kernel block sizes",
    "layout",
    "wheel_sha256",
)
#: One row per release x runner x block size x cache layer: its view, or its error.
CELL_COLUMNS = (
    "release",
    "runner",
    "path",
    "block size asked",
    "block size",
    "cache group",
    "layer",
    "kv cache group",
    "kernel block size",
    "spec block size",
    "storage rows",
    "page bytes",
    "payload bytes",
    "pool bytes",
    "pages",
    "page offset",
    "page stride",
    "error type",
    "error",
    "where",
    "raised by",
    "sizes",
    "strides",
    "required bytes",
    "kernel blocks per page",
    "blocks outside page",
    "payload bytes missed",
    "padding bytes addressed",
)


def _attr(spec: Any, *names: str) -> Any:
    for name in names:
        value = getattr(spec, name, None)
        if value is not None:
            return value
    return None


def _first(*values: Any) -> Any:
    """The first value that is not None (a spec's 0 rows are 0 rows)."""
    return next(v for v in values if v is not None)


def page_layout(kv_cache_config: Any, layer: str, page_bytes: int) -> tuple[int, int]:
    """``(offset, stride)`` in bytes of a layer's pages in its pool, as the release's ``KVCacheTensor`` lays them
    out: one page after another, or (a packed layout, ``block_stride > 0``) one slot at ``offset`` of each row,
    the ``l``-th layer of a tensor ``l * layer_stride`` further (vLLM 0.29.0 on)."""
    for tensor in kv_cache_config.kv_cache_tensors:
        names = _tensor_layers(tensor)
        if layer in names and getattr(tensor, "block_stride", 0):
            offset = int(getattr(tensor, "offset", 0)) + names.index(layer) * int(getattr(tensor, "layer_stride", 0))
            return offset, int(tensor.block_stride)
    return 0, page_bytes


def layer_spec(kv_cache_config: Any, layer: str) -> Any:
    """The spec a layer's KV cache group gives it (a uniform-type group's per-layer spec): what the rewritten
    path views the layer's pages with."""
    for group in kv_cache_config.kv_cache_groups:
        if layer in group.layer_names:
            spec = group.kv_cache_spec
            return getattr(spec, "kv_cache_specs", {}).get(layer, spec)
    return None


def cell_row(version: str, runner: str, setup: Setup, run: RunnerRun, view: LayerView) -> dict:
    spec = view.spec
    if run.path == KVViewPath.VIEWS:
        spec = layer_spec(setup.kv_cache_config, view.layer.name) or spec
    gid = run.group_of.get(view.layer.name)
    kbs = run.kernel_block_sizes[gid] if run.kernel_block_sizes is not None and gid is not None else None
    row = dict.fromkeys(CELL_COLUMNS, "")
    page = int(spec.page_size_bytes)
    row.update(
        {
            "release": version,
            "runner": runner,
            "path": run.path,
            "block size asked": setup.choice.label,
            "block size": setup.block_size,
            "cache group": str(view.layer.kind or ""),
            "layer": view.layer.name,
            "kv cache group": gid,
            "kernel block size": kbs,
            "spec block size": int(spec.block_size),
            "storage rows": int(_first(_attr(spec, "storage_block_size", "num_states"), spec.block_size)),
            "page bytes": page,
            "payload bytes": int(_attr(spec, "real_page_size_bytes", "unpadded_page_size_bytes") or page),
            "error type": view.error_type,
            "error": view.error,
            "where": view.where,
            "raised by": view.raised_by,
            "pages": int(setup.kv_cache_config.num_blocks),
        }
    )
    if view.view is None:
        return row
    pool, v = view.pool, view.view
    pool_bytes = pool.numel() * pool.element_size()
    offset, stride = page_layout(setup.kv_cache_config, view.layer.name, page)
    check = page_check(v, pool, row["pages"], page, row["payload bytes"], offset, stride)
    required = as_strided_required_elems(tuple(v.shape), tuple(v.stride()), v.storage_offset()) * v.element_size()
    row.update(
        {
            "pool bytes": pool_bytes,
            "page offset": offset,
            "page stride": stride,
            "sizes": json.dumps(list(v.shape)),
            "strides": json.dumps(list(v.stride())),
            "required bytes": required,
            "kernel blocks per page": check.kernel_blocks_per_page,
            "blocks outside page": check.blocks_outside_page,
            "payload bytes missed": check.payload_bytes_missed,
            "padding bytes addressed": check.padding_bytes_addressed,
        }
    )
    return row


def run_row(version: str, runner: str, setup: Setup, run: RunnerRun | None, choice: RunnerChoice | None) -> dict:
    row = dict.fromkeys(RUN_COLUMNS, "")
    stop = setup.stop or (run.stop if run is not None else None)
    row.update(
        {
            "release": version,
            "runner": runner,
            "path": run.path if run is not None else setup.chain.path(runner) or "",
            "block size asked": setup.choice.label,
            "block size": setup.block_size if setup.block_size is not None else "",
            "stock": choice is not None and not choice.environment,
            "environment": choice.setting if choice is not None else "",
            "first layer": setup.first_layer,
            "layout": setup.layout,
            "wheel_sha256": setup.chain.wheel_sha256,
        }
    )
    if stop is not None:
        row.update(link=stop.link, stop=stop.stop, where=stop.where, message=stop.message)
    elif run is not None:
        last = ChainLink.VIEWS if run.path == KVViewPath.VIEWS else ChainLink.RESHAPE
        row.update(
            link=last if run.whole_error else "",
            where=run.whole_where,
            message=run.whole_error,
            **{"raised by": run.whole_raised_by, "kernel block sizes": json.dumps(run.kernel_block_sizes)},
        )
    return row


def count_expressions(source: str) -> list[str]:
    """Every ``<spec>.block_size // kernel_block_size`` or ``<spec>.storage_block_size // kernel_block_size`` of a
    function's source, unparsed: how it counts kernel blocks per logical block."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.FloorDiv)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr in ("block_size", "storage_block_size")
            and isinstance(node.right, ast.Name)
            and node.right.id == "kernel_block_size"
        ):
            found.append(ast.unparse(node))
    return found


def count_statements(source: str) -> list[str]:
    """The statements holding :func:`count_expressions`' expressions, unparsed."""
    tree = ast.parse(source)
    found = []
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and count_expressions(ast.unparse(stmt)):
            found.append(ast.unparse(stmt))
    return found


def runner_rows(chain: ReleaseChain, choices: list[RunnerChoice]) -> list[dict]:
    stock = next((c.runner for c in choices if not c.environment), "")
    rows = []
    for runner in RUNNERS:
        shipped = chain.has(runner)
        path = chain.path(runner)
        reach = (
            "" if runner == stock else next((c.setting for c in choices if c.environment and c.runner == runner), "")
        )
        views = path == KVViewPath.VIEWS
        rows.append(
            {
                "release": chain.version,
                "runner": runner,
                "shipped": shipped,
                "path": path or "",
                "definition": f"{KV_CACHE_INTERFACE}:{VIEW_FUNCTION}" if views else "{}:{}".format(*RESHAPES[runner]),
                "caller": "{}:{} -> {}:{}".format(*VIEW_CALLERS[runner], WORKER_UTILS, ALLOCATOR) if views else "",
                "count expression": "; ".join(count_expressions(chain.source(runner))) if shipped else "",
                "stock": runner == stock,
                "reached with": reach,
            }
        )
    return rows


def environment_for(runner: str, choices: list[RunnerChoice]) -> RunnerChoice | None:
    """The environment that gives ``runner`` (none set when it is the stock one), or None."""
    for choice in sorted(choices, key=lambda c: len(c.environment)):
        if choice.runner == runner:
            return choice
    return None


@dataclass
class ReleaseStudy:
    """Every row of one release."""

    runners: list[dict] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """PyTorch on one thread: the pools are small, and intra-op threads only contend with each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def study_release(chain: ReleaseChain, choices_of_block: Iterable[BlockSizeChoice]) -> ReleaseStudy:
    """The chain for every block size and each runner the release ships (reached with the environment that
    selects it)."""
    with one_thread():
        return _study_release(chain, list(choices_of_block))


def _study_release(chain: ReleaseChain, choices_of_block: list[BlockSizeChoice]) -> ReleaseStudy:
    out = ReleaseStudy()
    choices = runner_choices(chain)
    out.runners = runner_rows(chain, choices)
    placeholders: set[str] = set()
    out.provenance = {"release": chain.version, "runner choice": [dataclasses.asdict(c) for c in choices]}
    shipped = [r for r in RUNNERS if chain.path(r) is not None]
    for block in choices_of_block:
        for runner in RUNNERS:
            if runner not in shipped:
                continue
            env = environment_for(runner, choices)
            setup = set_up(chain, block, dict(env.environment) if env else {})
            placeholders.update(setup.placeholders)
            run = None if setup.stop is not None else run_runner(setup, runner)
            out.runs.append(run_row(chain.version, runner, setup, run, env))
            for view in run.views if run is not None else ():
                out.cells.append(cell_row(chain.version, runner, setup, run, view))
    # construction statements that raised and bound a placeholder (no cache spec read one: a spec that did is a row)
    out.provenance["placeholders"] = sorted(placeholders)
    return out


def load_chain(version: str, cache_root: Path | None = None, download: bool = True) -> ReleaseChain | CacheMiss:
    """The release's chain members from the wheel cache (fetched once), or the miss."""
    got = ensure_release(version, cache_root, download=download, sets=(RESHAPE_CHAIN,))
    if isinstance(got, CacheMiss):
        return got
    return chain_of(got)


def chain_of(entry: CacheEntry) -> ReleaseChain:
    return ReleaseChain(entry.version, entry.read, entry.members_of(RESHAPE_CHAIN), entry.provenance.get("sha256", ""))

"""DeepSeek-V4's cache layers, built by the release's own ``__init__`` lines.

vLLM builds one ``DeepseekV4DecoderLayer`` per layer of the checkpoint; its attention module builds the
layers that own a KV cache (the MLA attention per compress ratio, the SWA cache, the indexer's K cache, the
compressors' state caches), each registering itself in the static forward context. A released ``__init__``
cannot run whole here (it builds linear layers, CUDA streams, kernels), so :class:`ModelBuilder` runs, of each
``__init__`` along the class's bases, only the statements that matter for the cache:

- those that bind what the layer's ``get_kv_cache_spec`` and ``get_attn_backend`` read of ``self``;
- those that construct a class that is, or builds, a cache layer (found in the release's source, the
  attention selector ``_select_...`` of the model included), which constructs it the same way;
- the layer's registration (``static_forward_context[prefix] = self``) and ``super().__init__(...)``;
- and whatever those statements read (a backward slice of the ``__init__``).

Constructing any other released class gives an inert object carrying its constructor arguments (a linear
layer, a norm: nothing of them reaches a cache spec). A statement of a slice that raises (a rotary embedding
the study has no GPU for) binds a placeholder naming the failure: if the cache path uses it, the spec raises
:class:`~repro_studies.upstream.released_code.NotProvided` with that name, never a guess. Every attribute not
bound by the slices is computed on first read by the slice that binds it.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from repro_studies.upstream.released_code import (
    ClassRef,
    Missing,
    ReleasedCode,
    ReleasedObject,
    backward_slice,
    statement_binding,
    toplevel_statements,
)

#: The decoder layer of DeepSeek-V4, the root of construction (one per layer of the checkpoint).
DECODER_LAYER = "DeepseekV4DecoderLayer"
#: The model package's entry point, which picks the per-platform implementation, and the class it exports.
MODEL_PACKAGE_INIT = "vllm/models/deepseek_v4/__init__.py"
MODEL_CLASS = "DeepseekV4ForCausalLM"
#: A model function choosing the attention class (``_select_dsv4_attn_cls``, ``_select_v4_sparse_impl``), or a
#: layer's method choosing a cache-owning class (``self._get_indexer_cls(...)``, vLLM 0.33.0 on).
SELECTOR = re.compile(r"^_select_\w*(attn|impl)\w*$")
METHOD_SELECTOR = re.compile(r"^_get_\w*_cls$")
#: The methods whose reads of ``self`` make a layer's cache spec and backend.
CACHE_METHODS = ("get_kv_cache_spec", "get_attn_backend")
#: Where DeepSeek-V4's model code lives across releases (the package, and the single modules before it).
MODEL_MEMBERS = re.compile(
    r"^vllm/(models/deepseek_v4/.*|model_executor/models/deepseek_v4\.py|"
    r"model_executor/layers/deepseek_(v4_attention|compressor)\.py|v1/attention/backends/mla/sparse_swa\.py)$"
)
ATTENTION_LAYER_BASE = ("vllm/model_executor/layers/attention_layer_base.py", "AttentionLayerBase")


class CacheKind(StrEnum):
    """A DeepSeek-V4 cache group by what it stores (the names of the repository's catalogue)."""

    SWA = "SWA KV"
    C4A = "C4A KV"
    C128A = "C128A KV"
    C4_INDEXER_K = "C4 indexer K"
    C4_MAIN_STATE = "C4 main compressor state"
    C128_MAIN_STATE = "C128 main compressor state"
    C4_INDEXER_STATE = "C4 indexer compressor state"


@dataclass
class CacheLayer:
    """A layer the release built that owns a KV cache, with how it was constructed."""

    name: str  # its prefix: the key of the static forward context
    obj: Any
    cls: ClassRef
    path: tuple[str, ...]  # the released classes whose construction built it, from the decoder layer down
    compress_ratio: int  # of its decoder layer (``config.compress_ratios``, at least 1)

    @property
    def kind(self) -> CacheKind | None:
        return cache_kind(self.path, self.compress_ratio)


def cache_kind(path: tuple[str, ...], compress_ratio: int) -> CacheKind | None:
    """The cache a layer holds, from the classes that built it and its decoder layer's compress ratio."""
    leaf, owners = path[-1], path[:-1]
    indexer = any(name.endswith("Indexer") for name in owners)
    if leaf.endswith("SWACache"):
        return CacheKind.SWA
    if leaf.endswith("IndexerCache"):
        return CacheKind.C4_INDEXER_K
    if leaf.endswith("StateCache"):
        if indexer:
            return CacheKind.C4_INDEXER_STATE
        return {4: CacheKind.C4_MAIN_STATE, 128: CacheKind.C128_MAIN_STATE}.get(compress_ratio)
    return {4: CacheKind.C4A, 128: CacheKind.C128A}.get(compress_ratio)


class _Constructed(ReleasedObject):
    """A layer built by :class:`ModelBuilder`: an attribute its slices did not bind is bound on first read by
    the statements of its ``__init__`` (along its bases) that bind it."""

    def __getattr__(self, name: str) -> Any:
        try:
            return ReleasedObject.__getattr__(self, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            attrs = object.__getattribute__(self, "_attrs")
            for scope in attrs.get("__init_scopes__", ()):
                target = statement_binding(scope.node.body, f"self.{name}")
                if target is not None:
                    scope.run([s for s in backward_slice(scope.node.body, target) if id(s) not in scope.done])
                    if name in attrs:
                        return attrs[name]
            raise


@dataclass
class _InitScope:
    """One released ``__init__`` being run for an object: its locals and the statements run so far."""

    builder: ModelBuilder
    owner: ClassRef
    node: ast.FunctionDef
    local: dict[str, Any]
    done: set[int] = field(default_factory=set)

    def run(self, statements: Iterable[ast.stmt]) -> None:
        for stmt in statements:
            self.done.add(id(stmt))
            try:
                self.builder.code.execute(self.owner._member, stmt, self.local)
            except Exception as exc:
                why = (
                    f"{self.owner._member}:{stmt.lineno} ({self.owner.__name__}.__init__): {type(exc).__name__}: {exc}"
                )
                self.builder.failures.append(why)
                placeholder = Missing(f"<{why}>")
                for name in _bound_names(stmt):
                    if name.startswith("self."):
                        setattr(self.local["self"], name[5:], placeholder)
                    else:
                        self.local[name] = placeholder


def _bound_names(stmt: ast.stmt) -> set[str]:
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                out.add(f"self.{node.attr}")
    return out


def _is_super_init(stmt: ast.stmt) -> bool:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "__init__"
        and isinstance(call.func.value, ast.Call)
        and ast.unparse(call.func.value.func) == "super"
    )


def _registers(stmt: ast.stmt) -> bool:
    """Does ``stmt`` store into the static forward context (a layer registering itself)?"""
    return any(
        isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and "static_forward_context" in ast.unparse(n.value)
        for n in ast.walk(stmt)
    )


def _self_reads(node: ast.FunctionDef | None) -> set[str]:
    if node is None:
        return set()
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and ast.unparse(n.value) == "self"
    }


class ModelBuilder:
    """Builds DeepSeek-V4's decoder layers of one release and collects the cache layers, in construction order."""

    def __init__(self, code: ReleasedCode, vllm_config: Any):
        self.code, self.vllm_config = code, vllm_config
        self.layers: list[CacheLayer] = []
        self.failures: list[str] = []  # statements that raised (and bound placeholders)
        self._contains: dict[tuple[str, str], bool] = {}
        self._path: list[str] = []
        self._ratio = 1
        self.model_members = sorted(m for m in code.members if MODEL_MEMBERS.match(m))
        self._install()

    # ---- reading the release's source ------------------------------------------------------------------
    def static_class(self, member: str, name: str, depth: int = 0) -> ClassRef | None:
        """The released class a name of ``member`` refers to, following ``from ... import`` (read, never run:
        every branch of an ``if`` counts)."""
        if depth > 8 or member not in self.code.members:
            return None
        for node in toplevel_statements(self.code.tree(member).body):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return self.code.class_ref(member, name)
            if isinstance(node, ast.ImportFrom):
                alias = next((a for a in node.names if (a.asname or a.name) == name), None)
                source = self.code.member_of(self.code.absolute_module(member, node)) if alias else None
                if source:
                    return self.static_class(source, alias.name, depth + 1)
        return None

    def _callee(self, member: str, call: ast.Call) -> ClassRef | str | None:
        """The released class a call constructs, ``"selector"`` for an attention selector's class, else None."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.static_class(member, func.id)
        if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and SELECTOR.match(func.func.id):
            return "selector"
        if (
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Attribute)
            and ast.unparse(func.func.value) == "self"
            and METHOD_SELECTOR.match(func.func.attr)
        ):
            return "selector"
        return None

    def lineage(self, cls: ClassRef) -> list[ClassRef]:
        """The class and its released bases, depth first, found by reading the source (a base that is not a
        released class, ``nn.Module``, ends the walk)."""
        seen: list[ClassRef] = []

        def walk(c: ClassRef) -> None:
            if any(c is s or (c._member, c.__name__) == (s._member, s.__name__) for s in seen):
                return
            seen.append(c)
            for base in c._node.bases:
                found = self.static_class(c._member, base.id) if isinstance(base, ast.Name) else None
                if found is not None:
                    walk(found)

        walk(cls)
        return seen

    def inits(self, cls: ClassRef) -> list[tuple[ClassRef, ast.FunctionDef]]:
        """Every released ``__init__`` along the class's bases, the class's own first."""
        found = []
        for owner in self.lineage(cls):
            node = owner.own("__init__")
            if isinstance(node, ast.FunctionDef):
                found.append((owner, node))
        return found

    def method(self, cls: ClassRef, name: str) -> ast.FunctionDef | None:
        """The released method ``name`` along the class's bases (read, not run)."""
        for owner in self.lineage(cls):
            node = owner.own(name)
            if isinstance(node, ast.FunctionDef):
                return node
        return None

    def is_cache_layer(self, cls: ClassRef) -> bool:
        return self.method(cls, "get_kv_cache_spec") is not None

    def contains_cache(self, cls: ClassRef, stack: tuple = ()) -> bool:
        """Is the class a cache layer, or does its ``__init__`` construct one (through other classes)?"""
        key = (cls._member, cls.__name__)
        if key in self._contains:
            return self._contains[key]
        if key in stack:
            return False
        found = self.is_cache_layer(cls)
        for owner, node in [] if found else self.inits(cls):
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                callee = self._callee(owner._member, call)
                if callee == "selector" or (
                    isinstance(callee, ClassRef) and self.contains_cache(callee, (*stack, key))
                ):
                    found = True
                    break
            if found:
                break
        self._contains[key] = found
        return found

    def _install(self) -> None:
        """Every released class the model code constructs becomes a :class:`ClassRef` built by this builder (a
        class whose module ran whole would otherwise construct itself with its real ``__init__``)."""
        code = self.code
        code.constructor = self._construct
        base = code.class_ref(*ATTENTION_LAYER_BASE) if ATTENTION_LAYER_BASE[0] in code.members else None
        if base is not None:
            code.standins[f"{base.__module__}.{base.__name__}"] = base
        for member in self.model_members:
            for node in code.tree(member).body:
                if not isinstance(node, ast.ClassDef):
                    continue
                cls = code.class_ref(member, node.name)
                if not self.contains_cache(cls):
                    continue
                code.standins[f"{cls.__module__}.{cls.__name__}"] = cls
                for owner, init in self.inits(cls):
                    for call in (n for n in ast.walk(init) if isinstance(n, ast.Call)):
                        callee = self._callee(owner._member, call)
                        if isinstance(callee, ClassRef):
                            code.standins.setdefault(f"{callee.__module__}.{callee.__name__}", callee)

    # ---- building ----------------------------------------------------------------------------------------
    def decoder_layer(self, layer_id: int) -> Any:
        """Build decoder layer ``layer_id`` (``model.layers.<id>``) as the release's model does."""
        member = self._platform_member() or next(
            (m for m in self.model_members if self._defines(m, DECODER_LAYER) and "/amd/" not in m), None
        )
        if member is None:
            raise LookupError(f"no {DECODER_LAYER} in the release's DeepSeek-V4 code")
        cls = self.code.class_ref(member, DECODER_LAYER)
        return self._construct(cls, (self.vllm_config,), {"prefix": f"model.layers.{layer_id}"})

    def _platform_member(self) -> str | None:
        """The module the model package's ``__init__`` takes ``DeepseekV4ForCausalLM`` from on the platform
        studied (its ``current_platform`` guards evaluated as released; vLLM 0.33.0 adds a CPU branch), when that
        module defines the decoder layer."""
        package = MODEL_PACKAGE_INIT
        if package not in self.code.members:
            return None
        node = self.code.toplevel(package, MODEL_CLASS)
        if not isinstance(node, ast.ImportFrom):
            return None
        member = self.code.member_of(self.code.absolute_module(package, node))
        return member if member is not None and self._defines(member, DECODER_LAYER) else None

    def _defines(self, member: str, name: str) -> bool:
        return any(isinstance(n, ast.ClassDef) and n.name == name for n in self.code.tree(member).body)

    def _construct(self, cls: ClassRef, args: tuple, kwargs: dict) -> Any:
        obj = _Constructed(cls, {})
        if not self.contains_cache(cls):
            inits = self.inits(cls)
            if inits:
                for name, value in _bind(self.code, *inits[0], args, kwargs).items():
                    setattr(obj, name, value)
            else:
                for name, value in kwargs.items():
                    setattr(obj, name, value)
            return obj
        object.__getattribute__(obj, "_attrs")["__init_scopes__"] = []
        self._path.append(cls.__name__)
        try:
            self._run_inits(obj, cls, self.inits(cls), args, kwargs)
        finally:
            path = tuple(self._path)
            self._path.pop()
        if self.is_cache_layer(cls):
            ratio = getattr(obj, "compress_ratio", None)
            self.layers.append(CacheLayer(str(obj.prefix), obj, cls, path, self._layer_ratio(obj, ratio)))
        return obj

    def _layer_ratio(self, obj: Any, ratio: Any) -> int:
        prefix = str(obj.prefix)
        layer_id = int(prefix.split(".")[2])
        ratios = self.vllm_config.model_config.hf_config.compress_ratios
        return max(1, ratios[layer_id]) if layer_id < len(ratios) else int(ratio or 1)

    def _run_inits(
        self, obj: Any, cls: ClassRef, chain: list[tuple[ClassRef, ast.FunctionDef]], args: tuple, kwargs: dict
    ) -> None:
        owner, node = chain[0]
        local = {"self": obj, **_bind(self.code, owner, node, args, kwargs)}
        rest = chain[1:]

        def next_init(*a: Any, **k: Any) -> None:  # ``super().__init__(...)``: the next released __init__
            if rest:
                self._run_inits(obj, cls, rest, a, k)

        local["super"] = lambda: types.SimpleNamespace(__init__=next_init)
        targets: list[ast.stmt] = []
        if self.is_cache_layer(cls):
            for attr in sorted(set().union(*(_self_reads(self.method(cls, m)) for m in CACHE_METHODS))):
                stmt = statement_binding(node.body, f"self.{attr}")
                if stmt is not None:
                    targets.append(stmt)
        for stmt in node.body:
            calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
            constructs = any(
                c == "selector" or (isinstance(c, ClassRef) and self.contains_cache(c))
                for c in (self._callee(owner._member, call) for call in calls)
            )
            if constructs or _registers(stmt) or (_is_super_init(stmt) and len(chain) > 1):
                targets.append(stmt)
        chosen = {id(s) for t in targets for s in backward_slice(node.body, t)}
        scope = _InitScope(self, owner, node, local)
        object.__getattribute__(obj, "_attrs")["__init_scopes__"].append(scope)
        scope.run([s for s in node.body if id(s) in chosen])


def _bind(code: ReleasedCode, owner: ClassRef, node: ast.FunctionDef, args: tuple, kwargs: dict) -> dict[str, Any]:
    """A released function's parameters bound to a call's arguments (defaults as released)."""
    a = node.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]][1:]
    bound = dict(zip(positional, args))
    if a.vararg is not None:
        bound[a.vararg.arg] = tuple(args[len(positional) :])
    names = set(positional) | {p.arg for p in a.kwonlyargs}
    extra = {k: v for k, v in kwargs.items() if k not in names}
    bound.update({k: v for k, v in kwargs.items() if k in names})
    if a.kwarg is not None:
        bound[a.kwarg.arg] = extra
    defaults = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
    defaults += [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for name, default in defaults:
        if name not in bound:
            try:
                bound[name] = code.evaluate(owner._member, ast.unparse(default))
            except Exception as exc:
                bound[name] = Missing(f"<default of {name}: {type(exc).__name__}: {exc}>")
    return bound

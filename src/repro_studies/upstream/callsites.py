"""What vLLM's production path pays for the gather: where the DeepSeek-V4 model calls it, and whether the
release's default CUDA-graph setup replays those calls inside a graph or runs them eagerly.

Read from a release's own source (``{member: text}``, as the wheel cache holds it) with :mod:`ast`, nothing
typed by hand:

* **call sites**: every call of ``dequantize_and_gather_k_cache`` in the model's modules, with the function
  that holds it, the loops and conditions around it (so "one call per chunk, one more in compressed
  layers" is read, not assumed);
* **how a call is reached**: a name-based call graph over the model's modules; the roots are the functions
  a CUDA-graph capture does not record:

  - functions decorated ``@eager_break_during_capture`` (vLLM's breakable CUDA graph ends the captured
    segment there and runs the function eagerly at every replay);
  - functions registered with ``direct_register_custom_op(op_name=X, op_func=F)`` where ``vllm::X`` is one
    of the compilation config's splitting ops (``CompilationConfig._attention_ops``): piecewise graphs are
    split around them, and they run eagerly between the captured pieces;

* **the release's defaults**: the default optimisation level (``VllmConfig.optimization_level``), the
  ``cudagraph_mode`` that level sets (``OPTIMIZATION_LEVEL_TO_CONFIG``), the architectures that default to
  the breakable CUDA graph (``DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES``, where the release has it) and
  ``VLLM_USE_BREAKABLE_CUDAGRAPH``'s default (``vllm/envs.py``), and the CUDA-graph support each attention
  metadata builder of the model declares (``_cudagraph_support``).

A call site reached only through those roots runs eagerly in every default mode: once per call, the host
pays its launch path.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from repro_studies.upstream.members import PRODUCTION_PATH, PRODUCTION_PATH_PACKAGE

#: The gather's public entry point in every release that has it.
GATHER_ENTRY = "dequantize_and_gather_k_cache"
#: The decorator of vLLM's breakable CUDA graph that turns a function into an eager segment.
EAGER_BREAK = "eager_break_during_capture"
#: The model architecture whose defaults are read.
ARCHITECTURE = "DeepseekV4ForCausalLM"
#: The gather's own module (its definition is not a call site).
_OPS_SUFFIX = "/ops/cache_utils.py"


@dataclass(frozen=True)
class CallSite:
    """One call of the gather in the model's code."""

    module: str
    function: str  # Class.method or function
    line: int
    loops: tuple[str, ...]  # the enclosing for/while headers, outermost first
    conditions: tuple[str, ...]  # the enclosing if tests (negated for an else branch), outermost first
    keywords: dict = field(default_factory=dict, compare=False)  # keyword arguments as source text


@dataclass(frozen=True)
class GraphDefaults:
    """The release's CUDA-graph defaults for the model, each as found (``""``: the release has no such code)."""

    optimization_level: str
    cudagraph_mode: str
    breakable_architectures: bool | None  # the model defaults to the breakable CUDA graph (None: no such rule)
    breakable_rule: str  # how the release says so ("" when it has no such rule)
    breakable_env_default: str
    splitting_ops: tuple[str, ...]
    builder_support: dict  # metadata builder class -> its _cudagraph_support


def _name(node: ast.AST) -> str:
    """``f`` for ``f(...)``, ``m`` for ``x.y.m(...)``; "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _under(node: ast.AST, namespace: str) -> bool:
    """Whether ``node`` is an attribute of ``namespace`` (``torch.ops.vllm``) or of one of its attributes."""
    while isinstance(node, ast.Attribute):
        node = node.value
        if ast.unparse(node) == namespace:
            return True
    return False


class CallKind(Enum):
    """How a call edge reaches the functions it runs."""

    NAME = "name"  # a call of a name: the functions defined with it
    OP = "op"  # torch.ops.vllm.<op>(...): the registered op function
    MODULE = "module"  # self.<submodule>(...): the forward of the submodule's classes


@dataclass(frozen=True)
class Callee:
    kind: CallKind
    name: str


class _Scanner(ast.NodeVisitor):
    """Call sites of the gather, definitions, call edges, decorators and custom-op registrations of one module."""

    def __init__(self, module: str):
        self.module = module
        self.stack: list[str] = []
        self.loops: list[str] = []
        self.conditions: list[str] = []
        self.sites: list[CallSite] = []
        self.calls: dict[str, set[Callee]] = {}  # qualified function -> what it calls
        self.defined: dict[str, list[str]] = {}  # bare name -> qualified functions
        self.eager: set[str] = set()
        self.ops: dict[str, str] = {}  # op name -> op_func name
        self.builders: dict[str, str] = {}
        self.attr_types: dict[str, set[str]] = {}  # self.<attr> = <Class>(...) anywhere: attr -> classes
        self.bases: dict[str, list[str]] = {}  # class -> base class names

    def _qual(self) -> str:
        return ".".join(self.stack) if self.stack else "<module>"

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign | ast.Assign):
                targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else stmt.targets
                if any(_name(t) == "_cudagraph_support" for t in targets) and stmt.value is not None:
                    self.builders[node.name] = ast.unparse(stmt.value)
        self.bases[node.name] = [_name(b) for b in node.bases if _name(b)]
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call) and _name(node.value.func):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    self.attr_types.setdefault(t.attr, set()).add(_name(node.value.func))
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        qual = self._qual()
        self.defined.setdefault(node.name, []).append(qual)
        self.calls.setdefault(qual, set())
        if any(_name(d.func if isinstance(d, ast.Call) else d) == EAGER_BREAK for d in node.decorator_list):
            self.eager.add(qual)
        saved = self.loops, self.conditions
        self.loops, self.conditions = [], []
        self.generic_visit(node)
        self.loops, self.conditions = saved
        self.stack.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_For(self, node: ast.For) -> None:
        self.loops.append(f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}")
        self.generic_visit(node)
        self.loops.pop()

    def visit_While(self, node: ast.While) -> None:
        self.loops.append(f"while {ast.unparse(node.test)}")
        self.generic_visit(node)
        self.loops.pop()

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        self.visit(node.test)
        self.conditions.append(test)
        for stmt in node.body:
            self.visit(stmt)
        self.conditions.pop()
        self.conditions.append(f"not ({test})")
        for stmt in node.orelse:
            self.visit(stmt)
        self.conditions.pop()

    def visit_Call(self, node: ast.Call) -> None:
        callee = _name(node.func)
        if self.stack:
            self.calls.setdefault(self._qual(), set()).add(Callee(CallKind.NAME, callee))
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
                self.calls[self._qual()].add(Callee(CallKind.MODULE, f.attr))  # self.<submodule>(...) runs its forward
            # torch.ops.vllm.<op>(...) calls the registered op function
            if _under(f, "torch.ops.vllm"):
                self.calls[self._qual()].add(Callee(CallKind.OP, callee))
        if callee == GATHER_ENTRY and self.stack:
            self.sites.append(
                CallSite(
                    self.module,
                    self._qual(),
                    node.lineno,
                    tuple(self.loops),
                    tuple(self.conditions),
                    {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg},
                )
            )
        if callee == "direct_register_custom_op":
            kw = {k.arg: k.value for k in node.keywords}
            op, func = kw.get("op_name"), kw.get("op_func")
            if isinstance(op, ast.Constant) and isinstance(op.value, str) and func is not None:
                self.ops[op.value] = _name(func)
        self.generic_visit(node)


@dataclass
class ModelScan:
    """The model package's call sites, call graph and capture roots."""

    sites: list[CallSite]
    calls: dict[str, set[str]]
    defined: dict[str, list[str]]
    eager: set[str]
    ops: dict[str, str]
    builders: dict[str, str]
    attr_types: dict[str, set[str]] = field(default_factory=dict)
    bases: dict[str, list[str]] = field(default_factory=dict)

    def _forward_of(self, cls: str, depth: int = 0) -> list[str]:
        """``cls.forward``, or the nearest base's (by class name)."""
        own = [q for q in self.defined.get("forward", []) if q == f"{cls}.forward" or q.endswith(f".{cls}.forward")]
        if own or depth > 8:
            return own
        return [q for base in self.bases.get(cls, []) for q in self._forward_of(base, depth + 1)]

    def reached_from(self, roots: Iterable[str]) -> set[str]:
        """Qualified functions reachable from ``roots`` (qualified names) through calls, by name."""
        seen, todo = set(), list(roots)
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            for callee in self.calls.get(f, ()):
                if callee.kind == CallKind.OP:
                    todo += self.defined.get(self.ops.get(callee.name, ""), [])
                elif callee.kind == CallKind.MODULE:
                    todo += [q for cls in self.attr_types.get(callee.name, ()) for q in self._forward_of(cls)]
                else:
                    todo += self.defined.get(callee.name, [])
        return seen


def scan_model(sources: Mapping[str, str]) -> ModelScan:
    """Scan every model module of ``sources`` (members under ``vllm/models/deepseek_v4/``)."""
    scan = ModelScan([], {}, {}, set(), {}, {}, {}, {})
    for member in sorted(sources):
        if not fnmatch.fnmatchcase(member, PRODUCTION_PATH_PACKAGE):
            continue
        s = _Scanner(member)
        s.visit(ast.parse(sources[member], filename=member))
        if not member.endswith(_OPS_SUFFIX):
            scan.sites += s.sites
        for k, v in s.calls.items():
            scan.calls.setdefault(k, set()).update(v)
        for k, v in s.defined.items():
            scan.defined.setdefault(k, []).extend(v)
        scan.eager |= s.eager
        scan.ops.update(s.ops)
        for k, v in s.attr_types.items():
            scan.attr_types.setdefault(k, set()).update(v)
        scan.bases.update(s.bases)
        scan.builders.update({f"{member.rsplit('/', 1)[-1][:-3]}.{k}": v for k, v in s.builders.items()})
    return scan


def _class_body_value(tree: ast.Module, cls: str, attr: str) -> ast.expr | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and _name(stmt.target) == attr:
                    return stmt.value
                if isinstance(stmt, ast.Assign) and any(_name(t) == attr for t in stmt.targets):
                    return stmt.value
    return None


def _module_value(tree: ast.Module, name: str) -> ast.expr | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(_name(t) == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and _name(node.target) == name:
            return node.value
    return None


def _dict_get(node: ast.expr | None, key: str) -> ast.expr | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def graph_defaults(sources: Mapping[str, str], architecture: str = ARCHITECTURE) -> GraphDefaults:
    """The release's CUDA-graph defaults as its config code states them ("" where it has no such code)."""
    vllm_cfg = ast.parse(sources.get("vllm/config/vllm.py", ""))
    level_node = _class_body_value(vllm_cfg, "VllmConfig", "optimization_level")
    level = _name(level_node) if level_node is not None else ""
    mode = ""
    table = _module_value(vllm_cfg, "OPTIMIZATION_LEVEL_TO_CONFIG")
    if isinstance(table, ast.Dict) and level:
        for k, v in zip(table.keys, table.values):
            if k is not None and _name(k) == level:
                found = _dict_get(_dict_get(_module_value(vllm_cfg, _name(v)), "compilation_config"), "cudagraph_mode")
                mode = _name(found) if found is not None else ""
    arch = _module_value(vllm_cfg, "DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES")
    breakable, rule = None, ""
    if arch is not None:
        breakable = architecture in _strings(arch)
        rule = "DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES"
    else:
        for node in ast.walk(vllm_cfg):
            if isinstance(node, ast.If) and any(_sets_breakable_env(stmt) for stmt in node.body):
                breakable = architecture in _strings(node.test)
                rule = "VllmConfig sets VLLM_USE_BREAKABLE_CUDAGRAPH=1 for listed architectures when it is unset"
    env_default = ""
    envs = ast.parse(sources.get("vllm/envs.py", ""))
    for node in ast.walk(envs):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("os.environ.get", "os.getenv")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "VLLM_USE_BREAKABLE_CUDAGRAPH"
            and len(node.args) > 1
        ):
            env_default = ast.unparse(node.args[1])
    comp = ast.parse(sources.get("vllm/config/compilation.py", ""))
    ops_node = _class_body_value(comp, "CompilationConfig", "_attention_ops")
    ops = tuple(ast.literal_eval(ops_node)) if isinstance(ops_node, ast.List) else ()
    builders = scan_model(sources).builders
    return GraphDefaults(level, mode, breakable, rule, env_default, ops, builders)


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _sets_breakable_env(stmt: ast.stmt) -> bool:
    """``os.environ["VLLM_USE_BREAKABLE_CUDAGRAPH"] = "1"``."""
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Constant)
        and stmt.value.value == "1"
        and any(
            isinstance(t, ast.Subscript)
            and ast.unparse(t.value) == "os.environ"
            and isinstance(t.slice, ast.Constant)
            and t.slice.value == "VLLM_USE_BREAKABLE_CUDAGRAPH"
            for t in stmt.targets
        )
    )


def production_path(sources: Mapping[str, str], release: str) -> list[dict]:
    """One row per call site of the gather: where it is, how often per prefill chunk, what reaches it and
    whether the release's default CUDA-graph setup records it or runs it eagerly."""
    scan = scan_model(sources)
    defaults = graph_defaults(sources)
    split_roots = [
        q
        for op, func in scan.ops.items()
        if f"vllm::{op}" in defaults.splitting_ops
        for q in scan.defined.get(func, [])
    ]
    via_split = scan.reached_from(split_roots)
    via_eager = scan.reached_from(sorted(scan.eager))
    per_function: dict[tuple[str, str], int] = {}
    for site in scan.sites:
        per_function[(site.module, site.function)] = per_function.get((site.module, site.function), 0) + 1
    rows = []
    for site in scan.sites:
        eager, split = site.function in via_eager, site.function in via_split
        reached = []
        if eager:
            reached.append(f"@{EAGER_BREAK}")
        if split:
            ops = [f"vllm::{op}" for op in scan.ops if f"vllm::{op}" in defaults.splitting_ops]
            reached.append("splitting op " + ", ".join(ops))
        rows.append(
            {
                "release": release,
                "module": site.module,
                "function": site.function,
                "line": site.line,
                "calls in function": per_function[(site.module, site.function)],
                "loop": " / ".join(site.loops),
                "condition": " and ".join(site.conditions),
                "gather_lens": site.keywords.get("gather_lens", ""),
                "reached through": "; ".join(reached) or "nothing a capture leaves out",
                "default optimization level": defaults.optimization_level,
                "default cudagraph_mode": defaults.cudagraph_mode,
                "breakable CUDA graph by default": _breakable_text(defaults),
                "runs": _verdict(eager, split, defaults),
            }
        )
    return rows


def _breakable_text(d: GraphDefaults) -> str:
    if d.breakable_architectures is not None:
        return f"{'yes' if d.breakable_architectures else 'no'} ({d.breakable_rule})"
    return f"no (VLLM_USE_BREAKABLE_CUDAGRAPH defaults to {d.breakable_env_default or 'unset'})"


class Runs(StrEnum):
    """How a release runs a call site of the gather under its defaults (the production-path table's ``runs``; the
    report's ``phrases.md.j2`` words it), or that the release's code was not read (``status``, ``reason`` say why)."""

    EAGER_BREAK = "eager break"  # an eager break of the breakable CUDA graph, launched from Python at every replay
    BETWEEN_PIECES = "between pieces"  # between the pieces of the default mode's piecewise graphs (a splitting op)
    MODE_DEPENDENT = "mode dependent"  # eagerly only in the mode that skips it
    IN_GRAPH = "in graph"  # inside a graph when the batch is captured
    NOT_READ = "not read"


class NotRead(StrEnum):
    """Why a release's model code was not read, where the module cache gave no miss of its own (``status``)."""

    UNAVAILABLE = "unavailable"
    NO_STUDY_FILES = "no study files"


def _verdict(eager: bool, split: bool, d: GraphDefaults) -> Runs:
    """How the release runs a call site reached through an eager break (``eager``) or a splitting op (``split``)."""
    breakable_default = d.breakable_architectures is True or d.breakable_env_default.strip("'\"") == "1"
    if breakable_default and eager:
        return Runs.EAGER_BREAK
    if split and "PIECEWISE" in d.cudagraph_mode:
        return Runs.BETWEEN_PIECES
    if eager or split:
        return Runs.MODE_DEPENDENT
    return Runs.IN_GRAPH


def release_sources(entry: object) -> dict[str, str]:
    """The study's files of a cache entry (:class:`repro_studies.upstream.wheelcache.CacheEntry` holding the
    :data:`~repro_studies.upstream.members.PRODUCTION_PATH` member set), as text."""
    return {m: entry.read(m) for m in entry.members_of(PRODUCTION_PATH)}

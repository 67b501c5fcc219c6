"""Find every DeepSeek K-cache gather a release ships, by reading its source (nothing is imported).

A *Triton gather* is a ``@triton.jit`` function (at module level or a method of a JIT-warmup class)
whose name says "dequantise and gather K" and which takes a block-table pointer. For each one the
scan records the parameter used as the block table's row pitch (the ``P`` in
``block_table_ptr + batch_idx * P``), whether it is a ``tl.constexpr``, the expression every launch
passes for it, the record it reads (from the kernel's name: ``mxfp8``, ``nvfp4`` or the V4 record),
the Python wrapper that reaches it, and a hash of the kernel's source. The CuTe-DSL gather module is
listed with the dispatchers that import it.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import asdict, dataclass, field

from repro_studies.kernel_id import KernelId, inventory_label

#: Name of a dequantise-and-gather-K definition.
GATHER_NAME = re.compile(r"dequantize_?and_?gather_?k|dequant_?gather_?k", re.IGNORECASE)
#: Wrappers tried in this order: the Triton entry point, then the dispatcher (with CuTe-DSL stubbed off).
WRAPPER_CANDIDATES = ("dequantize_and_gather_k_cache_triton", "dequantize_and_gather_k_cache")
DISPATCHER = "dequantize_and_gather_k_cache"
CUTEDSL_MODULE_SUFFIX = "dequant_gather_k_cutedsl.py"


@dataclass
class KernelInfo:
    """One Triton gather kernel in one module of one release."""

    module: str  # wheel member path
    qualname: str  # "name" or "Class.name"
    name: str
    class_name: str
    record: str  # v4 | mxfp8 | nvfp4
    params: list[str]
    constexpr_params: list[str]
    pitch_param: str  # "" when no block_table_ptr + b * P was found
    pitch_is_constexpr: bool
    launch_pitch: list[str]  # "line N: expr" for every launch keyword that sets the pitch
    wrapper: str  # the module function that reaches the kernel ("" if none)
    interleaved: bool  # V4.1 records: token pointer strides over data + scales (each token's scales follow it)
    source_sha256: str
    lineno: int
    end_lineno: int

    @property
    def id(self) -> KernelId:
        return KernelId.triton(self.module, self.qualname, self.record)

    @property
    def label(self) -> str:
        """Short, release-independent name used in tables: ``v4:_dequantize_and_gather_k_kernel``."""
        return self.id.matrix_label

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CuteInfo:
    """The CuTe-DSL gather module and the dispatchers that reach it."""

    module: str
    classes: list[str]
    source_sha256: str
    dispatchers: list[str] = field(default_factory=list)  # wheel members whose DISPATCHER imports it

    @property
    def label(self) -> str:
        """The kernel inventory's name for it: ``cutedsl:DequantGatherKCacheKernel``."""
        return inventory_label(self.classes)


@dataclass
class Discovery:
    kernels: list[KernelInfo]
    cute: list[CuteInfo]
    modules: list[str]
    errors: list[str]  # modules that did not parse


def record_of(name: str) -> str:
    low = name.lower()
    if "nvfp4" in low:
        return "nvfp4"
    if "mxfp8" in low:
        return "mxfp8"
    return "v4"


def _is_triton_jit(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target) in ("triton.jit", "jit"):
            return True
    return False


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _leftmost_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.BinOp):
        node = node.left
    return node.id if isinstance(node, ast.Name) else None


def find_pitch_param(fn: ast.FunctionDef, table_param: str) -> str:
    """The parameter ``P`` in ``<table_param> + <row> * P`` (the row pitch), or ""."""
    params = {a.arg for a in fn.args.args}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        if _leftmost_name(node) != table_param:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mult):
                for side in (sub.left, sub.right):
                    if isinstance(side, ast.Name) and side.id in params and side.id != table_param:
                        return side.id
    return ""


def reads_interleaved(fn: ast.FunctionDef) -> bool:
    """Does the kernel step from token to token by values plus scales (``p * (head_dim + scale_dim)``)?"""
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side in (node.left, node.right):
                if isinstance(side, ast.BinOp) and isinstance(side.op, ast.Add) and "scale_dim" in _names_in(side):
                    return True
    return False


def _names_in(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _source_hash(text: str, node: ast.AST) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines()[first - 1 : node.end_lineno]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _reachable(tree: ast.Module, start: str) -> set[str]:
    """Names reachable from module function ``start`` through module functions, classes and instances."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    instances = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    instances[t.id] = n.value.func.id
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = funcs.get(name) or classes.get(name)
        if name in instances:
            todo.append(instances[name])
        if node is not None:
            todo.extend(_names_in(node) - seen)
    return seen


def scan_module(member: str, text: str) -> tuple[list[KernelInfo], CuteInfo | None]:
    """Gather kernels (and the CuTe-DSL module, if this is it) of one module's source."""
    tree = ast.parse(text)
    found: list[tuple[ast.FunctionDef, str]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found.append((node, ""))
        elif isinstance(node, ast.ClassDef):
            found.extend((sub, node.name) for sub in node.body if isinstance(sub, ast.FunctionDef))
    kernels = []
    module_funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for fn, cls in found:
        if not _is_triton_jit(fn):
            continue
        qual = f"{cls}.{fn.name}" if cls else fn.name
        if not GATHER_NAME.search(qual):
            continue
        tables = [a.arg for a in fn.args.args if a.arg.startswith("block_table")]
        if not tables:
            continue
        pitch = find_pitch_param(fn, tables[0])
        args = {a.arg: a for a in fn.args.args}
        launches = (
            [f"line {kw.value.lineno}: {ast.unparse(kw.value)}" for kw in launch_keywords(tree, fn.name, cls, pitch)]
            if pitch
            else []
        )
        owner = cls or fn.name
        wrapper = next(
            (w for w in WRAPPER_CANDIDATES if any(f.name == w for f in module_funcs) and owner in _reachable(tree, w)),
            "",
        )
        kernels.append(
            KernelInfo(
                module=member,
                qualname=qual,
                name=fn.name,
                class_name=cls,
                record=record_of(qual),
                params=list(args),
                constexpr_params=[a for a, node in args.items() if _is_constexpr(node)],
                pitch_param=pitch,
                pitch_is_constexpr=bool(pitch) and _is_constexpr(args[pitch]),
                launch_pitch=launches,
                wrapper=wrapper,
                interleaved=record_of(qual) != "v4" and reads_interleaved(fn),
                source_sha256=_source_hash(text, fn),
                lineno=fn.lineno,
                end_lineno=fn.end_lineno,
            )
        )
    cute = None
    if member.endswith(CUTEDSL_MODULE_SUFFIX):
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and GATHER_NAME.search(n.name)]
        cute = CuteInfo(member, names, hashlib.sha256(text.encode()).hexdigest())
    return kernels, cute


def launch_keywords(tree: ast.Module, kernel: str, cls: str, pitch: str) -> list[ast.keyword]:
    """The ``pitch=...`` keywords of the launches of ``kernel``.

    A module-level kernel is launched as ``kernel[grid](..., pitch=...)``, directly or through a local
    variable bound to an expression that names it; a JIT-warmup class's kernel gets its keywords from
    the launch specification its ``__call__`` returns.
    """
    found: list[ast.keyword] = []
    if cls:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef) and sub.name == "__call__":
                        found += [k for k in ast.walk(sub) if isinstance(k, ast.keyword) and k.arg == pitch]
        return found
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
        aliases = {kernel}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and kernel in _names_in(node.value):
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in aliases
            ):
                found += [k for k in node.keywords if k.arg == pitch]
    return found


def _imports_cutedsl(tree: ast.Module, func: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and (sub.module or "").endswith(CUTEDSL_MODULE_SUFFIX[:-3]):
                    return True
    return False


def discover(sources: dict[str, str]) -> Discovery:
    """Scan ``{member: source}`` (a release's cached modules) for gathers and the CuTe-DSL module."""
    kernels, cutes, errors = [], [], []
    for member in sorted(sources):
        try:
            k, c = scan_module(member, sources[member])
        except SyntaxError as exc:
            errors.append(f"{member}: {exc}")
            continue
        kernels.extend(k)
        if c is not None:
            cutes.append(c)
    for c in cutes:
        for member, text in sources.items():
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            if _imports_cutedsl(tree, DISPATCHER):
                c.dispatchers.append(member)
    modules = sorted({k.module for k in kernels})
    return Discovery(kernels, cutes, modules, errors)


def launch_path_source(text: str, wrapper: str) -> str:
    """The source of everything at module level the wrapper reaches (functions, classes, constants).

    Two releases whose launch paths have the same text (and the same stubs and helpers) run the same
    code on the gather path, which is what lets the matrix share their results.
    """
    tree = ast.parse(text)
    reach = _reachable(tree, wrapper)
    parts = []
    for node in tree.body:
        names = set()
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = {node.name}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
        if names & reach:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            parts.append("\n".join(text.splitlines()[first - 1 : node.end_lineno]))
    return "\n\n".join(parts)

"""Can the attention class a release selects serve the model on a GPU family? The ops it binds, called.

vLLM binds its attention ops once, at import, from the platform: ``vllm/v1/attention/ops/flashmla.py`` imports
FlashMLA's kernels where ``vllm._flashmla_C`` loads on CUDA, and binds every op to
``_raise_flashmla_unavailable`` everywhere else. A class whose forward path calls such an op cannot serve the
model on that platform. For one release and family this module finds the ops the selected class's methods call
on the family's branch (the ``if current_platform...`` tests around each call evaluated as released; a taken
branch that returns ends its block), resolves each through the release's own module, and calls it:

- an op whose signature accepts a call without arguments is called so: the ops that refuse a platform raise
  before reading any argument, and the error they raise is the row's reason;
- an op that needs its arguments is a kernel entry this check does not run, and an op bound to a module the
  study does not load (FlashMLA's compiled interface) is recorded as such; neither refuses.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from repro_studies.upstream.released_code import ClassRef, Missing, NotProvided, ReleasedCode

#: The package of vLLM's attention ops, bound per platform at import.
OPS_PACKAGE = "vllm.v1.attention.ops."
#: The gather dispatcher is what the dispatch study calls itself; it is not probed here.
SKIPPED = frozenset({"dequantize_and_gather_k_cache"})


@dataclass(frozen=True)
class BoundOp:
    """A call of an attention op in a method of the selected class (or a base it inherits the method from)."""

    member: str  # the module of the calling method
    method: str  # Class.method
    lineno: int
    name: str  # the op's name in that module
    module: str  # where the module imports it from


@dataclass(frozen=True)
class Probe:
    """One op, called with the family's facts."""

    op: BoundOp
    bound_to: str  # the definition the name resolves to (module:function) or what stands for it
    error: str  # "" when the op did not refuse

    @property
    def refuses(self) -> bool:
        return bool(self.error)

    def describe(self) -> str:
        where = f"{self.op.method} calls {self.op.name} (line {self.op.lineno}) from {self.op.module}"
        if self.refuses:
            return f"{where}, bound to {self.bound_to}, which raised {self.error}"
        return f"{where}, bound to {self.bound_to}"


def _op_imports(code: ReleasedCode, member: str) -> dict[str, str]:
    """Names ``member``'s top level imports from vLLM's attention ops package: name -> module."""
    out = {}
    for stmt in code.tree(member).body:
        if isinstance(stmt, ast.ImportFrom):
            module = code.absolute_module(member, stmt)
            if module.startswith(OPS_PACKAGE):
                out.update({a.asname or a.name: module for a in stmt.names if a.name not in SKIPPED})
    return out


def _is_platform_test(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "current_platform" for n in ast.walk(test))


def _calls_in(node: ast.AST, names: set[str]) -> Iterator[ast.Call]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in names:
            yield sub


def reached_calls(code: ReleasedCode, member: str, body: list[ast.stmt], names: set[str]) -> list[ast.Call]:
    """Calls of ``names`` in ``body`` on the platform's branches: an ``if`` testing ``current_platform`` is
    evaluated as released and only its taken branch is read (both when it cannot be evaluated); a taken branch
    that ends in ``return`` or ``raise`` ends its block."""
    found: list[ast.Call] = []

    def walk(stmts: list[ast.stmt]) -> bool:
        for stmt in stmts:
            if isinstance(stmt, ast.If) and _is_platform_test(stmt.test):
                found.extend(_calls_in(stmt.test, names))
                try:
                    taken: bool | None = bool(code.evaluate(member, ast.unparse(stmt.test)))
                except Exception:  # a test this study cannot evaluate: both branches count
                    taken = None
                if taken is None:
                    if walk(stmt.body) & walk(stmt.orelse):
                        return True
                elif walk(stmt.body if taken else stmt.orelse):
                    return True
                continue
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.excepthandler):
                    walk(child.body)
                elif not isinstance(child, ast.stmt):
                    found.extend(_calls_in(child, names))
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(stmt, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    walk(sub)
            if isinstance(stmt, (ast.Return, ast.Raise)):
                return True
        return False

    walk(body)
    return found


def bound_ops(code: ReleasedCode, cls: ClassRef) -> list[BoundOp]:
    """Every attention-op call on the family's branches of the methods ``cls`` runs (its own and those it
    inherits), in the order of the class lineage."""
    out: list[BoundOp] = []
    for owner in cls.lineage():
        imports = _op_imports(code, owner._member)
        if not imports:
            continue
        for stmt in owner._node.body:
            if not isinstance(stmt, ast.FunctionDef):
                continue
            holder, _ = cls.lookup(stmt.name)
            if not isinstance(holder, ClassRef) or (holder._member, holder.__name__) != (owner._member, owner.__name__):
                continue  # overridden by a class nearer ``cls``: never runs for it
            for call in reached_calls(code, owner._member, stmt.body, set(imports)):
                name = call.func.id  # type: ignore[attr-defined]
                method = f"{owner.__name__}.{stmt.name}"
                out.append(BoundOp(owner._member, method, call.lineno, name, imports[name]))
    return out


def _where(fn: Any, code: ReleasedCode) -> str:
    location = getattr(fn, "released_location", None)
    if location is not None:
        return f"{location.member}:{location.qualname}"
    co = getattr(fn, "__code__", None)
    if co is not None and co.co_filename.startswith(f"{code.label}/"):
        return f"{co.co_filename[len(code.label) + 1 :]}:{co.co_name}"
    return repr(fn)


def probe(code: ReleasedCode, op: BoundOp) -> Probe:
    """Resolve ``op`` through its module, as released with the family's stand-ins, and call it where it
    takes no arguments."""
    try:
        fn = code.value(op.member, op.name)
    except Exception as exc:  # the module binding it did not run here: the op is not this study's to call
        return Probe(op, f"not resolved ({type(exc).__name__}: {exc})"[:200], "")
    if isinstance(fn, Missing):
        return Probe(op, f"{fn.qualified} (a module this study does not load)", "")
    where = _where(fn, code)
    try:
        inspect.signature(fn).bind()
    except TypeError:
        return Probe(op, f"{where} (takes its arguments: a kernel entry, not called)", "")
    except ValueError:
        return Probe(op, f"{where} (no signature to read)", "")
    try:
        fn()
    except NotProvided as exc:
        return Probe(op, f"{where} (reads {exc}, not provided)", "")
    except Exception as exc:  # the op's own refusal is the finding
        return Probe(op, where, f"{type(exc).__name__}: {exc}")
    return Probe(op, f"{where} (returned)", "")


def probes(code: ReleasedCode, cls: ClassRef) -> list[Probe]:
    """Each distinct op ``cls`` calls on the family's branches, probed once (the first call site names it)."""
    seen: dict[tuple[str, str], BoundOp] = {}
    for op in bound_ops(code, cls):
        seen.setdefault((op.member, op.name), op)
    return [probe(code, op) for op in seen.values()]

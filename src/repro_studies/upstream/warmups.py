"""Does a release warm its Triton gather up, and on which platforms: its ``register_warmup()`` calls, with
the ``if`` tests around them evaluated as released for one GPU family and the selected attention class.

vLLM compiles the kernels that registered a warm-up at start-up, for the table width the warm-up keys
name; a gather launched with a width no warm-up compiled compiles on the inference path, and vLLM's JIT
monitor logs that. Which gathers register, and under which conditions, is read here from each release's
own attention code: every ``<gather instance>.register_warmup()`` call under the model packages, the chain
of ``if`` tests that encloses it, and the statements of the enclosing method that bind the names those
tests read (``backend_name = self.backend_cls.get_name()``, ``from ... import has_cutedsl``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from repro_studies.kernel_id import KernelKind
from repro_studies.registry import WarmUpRegistered
from repro_studies.upstream.released_code import ClassRef, ReleasedCode

#: A gather's JIT instance: ``_DEQUANTIZE_AND_GATHER_K_CACHE_KERNEL`` (Triton) or the CuTe-DSL one.
GATHER_INSTANCE = re.compile(r"DEQUANT\w*GATHER\w*")
CUTEDSL_INSTANCE = re.compile(r"CUTEDSL", re.IGNORECASE)
COLUMNS = ("release", "gpu_family", "model", "instance", "kind", "registered", "condition", "site")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    out = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def registration_sites(
    code: ReleasedCode, package_dirs: tuple[str, ...]
) -> list[tuple[str, ast.FunctionDef, ast.Call]]:
    """(member, enclosing method, call) of every gather ``register_warmup()`` call under ``package_dirs``."""
    found = []
    for member in sorted(m for m in code.members if m.startswith(package_dirs)):
        tree = code.tree(member)
        parents = _parents(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_warmup"
                and isinstance(node.func.value, ast.Name)
                and GATHER_INSTANCE.search(node.func.value.id)
            ):
                continue
            fn = node
            while fn is not None and not isinstance(fn, ast.FunctionDef):
                fn = parents.get(fn)
            if fn is not None:
                found.append((member, fn, node))
    return found


def _conditions(fn: ast.FunctionDef, call: ast.Call) -> list[tuple[ast.expr, bool]]:
    """The ``if`` tests between the method and the call, outermost first, with the branch taken to reach it."""
    parents = _parents(fn)
    chain = []
    node: ast.AST = call
    while node is not fn:
        parent = parents[node]
        if isinstance(parent, ast.If) and node is not parent.test:
            chain.append((parent.test, node in parent.body or _within(node, parent.body)))
        node = parent
    return list(reversed(chain))


def _within(node: ast.AST, body: list[ast.stmt]) -> bool:
    return any(node is n for stmt in body for n in ast.walk(stmt))


def _binding_statements(fn: ast.FunctionDef, names: set[str]) -> list[ast.stmt]:
    """Assignments and imports anywhere in the method that bind ``names``, in source order."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            out.append(node)
        elif isinstance(node, ast.ImportFrom) and any((a.asname or a.name) in names for a in node.names):
            out.append(node)
    return sorted(out, key=lambda n: n.lineno)


def registrations(code: ReleasedCode, cls: ClassRef, vllm_config: Any, package_dirs: tuple[str, ...]) -> list[dict]:
    """One row per gather warm-up registration site: would this family, with this attention class, run it?"""
    rows = []
    for member, fn, call in registration_sites(code, package_dirs):
        instance = call.func.value.id
        chain = _conditions(fn, call)
        names = {n.id for test, _ in chain for n in ast.walk(test) if isinstance(n, ast.Name)}
        local: dict[str, Any] = {"self": cls.instance(), "vllm_config": vllm_config}
        for stmt in _binding_statements(fn, names - {"self", "vllm_config"}):
            try:
                code.execute(member, stmt, local)
            except Exception:  # a name the tests read stays unbound: its test is unknown
                continue
        parts, verdict = [], WarmUpRegistered.YES
        for test, branch in chain:
            text = ast.unparse(test) if branch else f"not ({ast.unparse(test)})"
            try:
                value = bool(code.evaluate(member, ast.unparse(test), local)) == branch
            except Exception:
                parts.append(f"{text} (not evaluated)")
                verdict = WarmUpRegistered.UNKNOWN if verdict == WarmUpRegistered.YES else verdict
                continue
            parts.append(f"{text} -> {value}")
            if not value:
                verdict = WarmUpRegistered.NO
        rows.append(
            {
                "instance": instance,
                "kind": str(KernelKind.CUTEDSL if CUTEDSL_INSTANCE.search(instance) else KernelKind.TRITON),
                "registered": verdict,
                "condition": "; ".join(parts) or "unconditional",
                "site": f"{member}:{fn.name} line {call.lineno}",
            }
        )
    return rows

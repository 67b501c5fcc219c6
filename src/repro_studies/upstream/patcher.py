"""Build "release + PR #55109" by rewriting the release's source at load time, one expression per launch.

PR #55109 takes the block table's row pitch from ``block_table.stride(0)`` instead of
``max_blocks_per_seq=block_table.shape[-1]``. :func:`rewrite_row_pitch` applies exactly that to a
module's source text:

* every launch keyword that sets a gather kernel's pitch parameter must read ``block_table.shape[-1]``
  exactly (anything else is a :class:`PatchError`: the release changed, the rewrite must be reviewed)
  and becomes ``block_table.stride(0)``;
* with ``runtime=True`` (the PR's form) the kernel's pitch parameter also loses its ``tl.constexpr``
  annotation, so every table width shares one compiled kernel; with ``runtime=False`` it stays a
  ``tl.constexpr`` (every distinct width compiles a new kernel, which issue 11 measures);
* with ``runtime=True``, a JIT-warmup class (vLLM 0.30.0 on) whose ``CompileKey`` is built with the pitch
  as a keyword (``dispatch``: ``max_blocks_per_seq=ceil(max_model_len / block_size)``) gets that value
  wrapped in the module's own ``triton_scalar_specialization_rep``, as the class already does for its
  other runtime integer, ``offset``: a runtime pitch compiles one kernel per Triton specialization class
  (1, a multiple of 16, anything else), so the warm-up keys name those classes, not table widths.

Edits are made at the AST nodes' exact source positions, the result is re-parsed and re-scanned to
prove each launch now passes the stride, and the unified diff is returned for the run folder.
"""

from __future__ import annotations

import ast
import difflib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from repro_studies.registry import Form
from repro_studies.upstream.discovery import KernelInfo, launch_keywords, scan_module

RELEASED_PITCH = "block_table.shape[-1]"
PATCHED_PITCH = "block_table.stride(0)"
#: vLLM's helper (jit_warmup_triton_helper) mapping a runtime int to its Triton specialization class.
SPECIALIZATION_REP = "triton_scalar_specialization_rep"


class PatchError(RuntimeError):
    """The expected expression was not found exactly; the message says where and what was found."""


@dataclass
class Rewrite:
    variant: str
    member: str
    original: str
    rewritten: str
    edits: list[str] = field(default_factory=list)

    @property
    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.rewritten.splitlines(keepends=True),
                fromfile=f"a/{self.member}",
                tofile=f"b/{self.member}",
            )
        )


def rewrite_file(folder: str | Path, release: str, variant: str, member: str) -> Path:
    """Where a run folder keeps a rewrite's diff: ``<folder>/<release>/<variant>/<member with __ for />.diff``."""
    return Path(folder) / release / variant / (member.replace("/", "__") + ".diff")


def _offsets(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line.encode())
        starts.append(pos)
    return starts


def rewrite_row_pitch(source: str, member: str, runtime: bool = True) -> Rewrite:
    """Rewrite every gather launch of ``member`` to pass ``block_table.stride(0)`` as the row pitch."""
    tree = ast.parse(source)
    kernels, _ = scan_module(member, source)
    kernels = [k for k in kernels if k.pitch_param]
    if not kernels:
        raise PatchError(f"{member}: no gather kernel with a block-table row pitch parameter")
    data = source.encode()
    starts = _offsets(source)

    def at(line: int, col: int) -> int:
        return starts[line - 1] + col  # ast columns are UTF-8 byte offsets

    edits: dict[tuple[int, int], tuple[bytes, str]] = {}
    for k in kernels:
        keywords = launch_keywords(tree, k.name, k.class_name, k.pitch_param)
        if not keywords:
            continue  # never launched from this module: nothing of the PR's change applies to it
        for kw in keywords:
            found = ast.unparse(kw.value)
            if found != RELEASED_PITCH:
                raise PatchError(
                    f"{member} line {kw.value.lineno}: {k.qualname} is launched with "
                    f"{k.pitch_param}={found}, expected exactly {RELEASED_PITCH}"
                )
            span = (at(kw.value.lineno, kw.value.col_offset), at(kw.value.end_lineno, kw.value.end_col_offset))
            edits[span] = (
                PATCHED_PITCH.encode(),
                f"line {kw.value.lineno}: {k.pitch_param}={RELEASED_PITCH} -> {PATCHED_PITCH}",
            )
        if runtime and k.class_name:
            for value in compile_key_pitch_values(tree, k):
                if SPECIALIZATION_REP not in _module_names(tree):
                    raise PatchError(
                        f"{member} line {value.lineno}: {k.class_name}'s CompileKey takes {k.pitch_param}, which "
                        f"becomes a runtime argument, but the module has no {SPECIALIZATION_REP} to key it by"
                    )
                span = (at(value.lineno, value.col_offset), at(value.end_lineno, value.end_col_offset))
                old = data[span[0] : span[1]].decode()
                if "\n" in old:  # one argument line between the call's own lines, as ruff formats it
                    line = source.splitlines()[value.lineno - 1]
                    indent = line[: len(line) - len(line.lstrip())]
                    old = f"\n{indent}    {ast.unparse(value)}\n{indent}"
                edits[span] = (
                    f"{SPECIALIZATION_REP}({old})".encode(),
                    f"line {value.lineno}: {k.class_name}'s CompileKey.{k.pitch_param} is the runtime pitch's "
                    f"specialization class ({SPECIALIZATION_REP}, as for offset)",
                )
        if runtime and k.pitch_is_constexpr:
            fn = _find_function(tree, k)
            arg = next(a for a in fn.args.args if a.arg == k.pitch_param)
            span = (
                at(arg.lineno, arg.col_offset + len(arg.arg.encode())),
                at(arg.annotation.end_lineno, arg.annotation.end_col_offset),
            )
            edits[span] = (
                b"",
                f"line {arg.lineno}: {k.qualname}'s {k.pitch_param} is a runtime argument "
                f"(was {ast.unparse(arg.annotation)})",
            )
    if not edits:
        raise PatchError(f"{member}: no launch sets a gather kernel's row pitch")
    spans = sorted(edits)
    for a, b in itertools.pairwise(spans):
        if a[1] > b[0]:
            raise PatchError(f"{member}: overlapping edits at bytes {a} and {b}")
    out = data
    for span in reversed(spans):
        out = out[: span[0]] + edits[span][0] + out[span[1] :]
    rewritten = out.decode()
    rewrite = Rewrite(
        Form.PATCHED if runtime else Form.PATCHED_CONSTEXPR, member, source, rewritten, [edits[s][1] for s in spans]
    )
    verify(rewrite, runtime)
    return rewrite


def compile_key_pitch_values(tree: ast.Module, k: KernelInfo) -> list[ast.expr]:
    """The values the kernel's JIT-warmup class gives its ``CompileKey`` for the pitch, as keywords
    (``self.CompileKey(..., max_blocks_per_seq=...)``); empty for a module-level kernel."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == k.class_name:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and ast.unparse(call.func).split(".")[-1] == "CompileKey":
                    found += [kw.value for kw in call.keywords if kw.arg == k.pitch_param]
    return found


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound at module level (imports, definitions, assignments)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _find_function(tree: ast.Module, k: KernelInfo) -> ast.FunctionDef:
    for node in tree.body:
        if not k.class_name and isinstance(node, ast.FunctionDef) and node.name == k.name:
            return node
        if k.class_name and isinstance(node, ast.ClassDef) and node.name == k.class_name:
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name == k.name:
                    return sub
    raise PatchError(f"{k.qualname} not found")


def verify(rewrite: Rewrite, runtime: bool) -> None:
    """Re-scan the rewritten source: every launch passes the stride, and the pitch has the asked kind."""
    try:
        kernels, _ = scan_module(rewrite.member, rewrite.rewritten)
    except SyntaxError as exc:
        raise PatchError(f"{rewrite.member}: the rewritten source does not parse ({exc})") from None
    for k in kernels:
        if not k.pitch_param:
            continue
        if not k.launch_pitch:
            continue
        bad = [s for s in k.launch_pitch if not s.endswith(PATCHED_PITCH)]
        if bad:
            raise PatchError(f"{rewrite.member}: {k.qualname} still launched with {bad or 'no pitch'}")
        if k.pitch_is_constexpr == runtime:
            raise PatchError(f"{rewrite.member}: {k.qualname}'s {k.pitch_param} constexpr={k.pitch_is_constexpr}")
        if runtime and k.class_name:
            tree = ast.parse(rewrite.rewritten)
            unkeyed = [
                v.lineno
                for v in compile_key_pitch_values(tree, k)
                if not (isinstance(v, ast.Call) and ast.unparse(v.func) == SPECIALIZATION_REP)
            ]
            if unkeyed:
                raise PatchError(f"{rewrite.member}: {k.class_name}'s CompileKey pitch not keyed at lines {unkeyed}")

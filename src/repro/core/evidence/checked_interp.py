"""Bounds-checked mode for Triton's CPU interpreter (``TRITON_INTERPRET=1``).

Why: the interpreter memcpy's from/to the raw address of every unmasked lane and checks
nothing, so a gather kernel that reads a garbage block id either segfaults the process (far
address) or silently returns heap garbage (near address). And a read through the wrong row
pitch of a column-narrowed view such as ``backing[:n, :w]`` stays inside the storage, so even
a storage-level check would miss it. Inside :func:`checked_interpreter` every unmasked lane of
every load/store/atomic is classified against the launch's tensor arguments:

* class (a) ``in_view``: inside the elements of some argument's view -- proceeds, not reported;
* class (b) ``out_of_view``: outside every view but inside the storage of some argument
  (e.g. the gap columns of a narrowed block table) -- proceeds, reported with that argument;
* class (c) ``out_of_bounds``: outside every argument's storage -- NOT dereferenced (loads
  yield ``other``, zero if none; stores and atomics are dropped), reported with the nearest
  argument as a guess.

Counts are kept per launch, per source line of the innermost @triton.jit frame (the kernel, or
the device function it called), per op (load/store/atomic). Usage::

    with checked_interpreter() as report:
        kernel[grid](...)
    report.out_of_view_lanes, report.out_of_bounds_lanes, report.to_dataframe()

Why not triton-viz: its sanitizer (triton-viz 3.0, the only PyPI release) stops on both of this
project's gather kernels with ``RuntimeError: Unsupported const value type: z3 ArithRef`` (a load
whose address comes from a loaded block id), so it cannot report on them; this layer runs them.

This patches private API of ``triton.runtime.interpreter`` and therefore refuses to run on a
triton outside :data:`SUPPORTED_TRITON` (the range ``pyproject.toml`` declares; each of its minor
releases passes this module's tests). Limits: a wrong address that lands inside *some* argument's view
(e.g. the wrong row of the same block table) is class (a) and invisible; addresses are only
compared with the launch's tensor arguments, so memory reached through pointers hidden in
data (pointer tables) counts as out of bounds.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import triton
from triton.runtime import interpreter as interp
from triton.runtime.interpreter import InterpretedFunction
from triton.tools.tensor_descriptor import TensorDescriptor

if TYPE_CHECKING:
    import pandas as pd

#: Triton releases whose interpreter these patches were tested against: [3.6, 3.10), as ``pyproject.toml`` declares.
SUPPORTED_TRITON = ((3, 6), (3, 10))

OUT_OF_VIEW = "out_of_view"  # class (b)
OUT_OF_BOUNDS = "out_of_bounds"  # class (c)

# Views whose strides cannot be decomposed greedily (overlapping dims) are checked against a
# sorted array of all their element offsets; above this many elements we fall back to the
# view's bounding range and flag the argument as approximate.
_MAX_ENUMERATED_ELEMENTS = 1 << 23

_state = threading.local()
_active_lock = threading.Lock()
_active: CheckReport | None = None


# --------------------------------------------------------------------------------------------
# view membership


class _StridedView:
    """Exact membership test "is element offset ``e`` one of this view's elements?".

    Why a decomposition: for views whose dims nest (sorted by stride, each dim's span is below
    the next stride -- every view torch makes by slicing/permuting/narrowing a contiguous
    tensor), the index tuple of an offset is unique and found greedily, which is O(ndim)
    vectorised numpy per lane batch and needs no per-element table. Overlapping views fall
    back to a sorted table of their offsets.
    """

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...]):
        self.empty = any(s == 0 for s in shape)
        dims = sorted(((st, sz) for sz, st in zip(shape, strides) if sz != 1 and st != 0))
        self.approximate = False
        self.table: np.ndarray | None = None
        self.span = sum((sz - 1) * st for st, sz in dims)  # largest valid element offset
        nested = all(sum((sz - 1) * st for st, sz in dims[: k + 1]) < dims[k + 1][0] for k in range(len(dims) - 1))
        self.dims_desc = list(reversed(dims))
        if not nested and not self.empty:
            numel = int(np.prod([sz for _, sz in dims], dtype=np.int64))
            if numel <= _MAX_ENUMERATED_ELEMENTS:
                offs = np.zeros((), dtype=np.int64)
                for st, sz in dims:
                    offs = np.add.outer(offs, np.arange(sz, dtype=np.int64) * st)
                self.table = np.unique(offs.ravel())
            else:
                self.approximate = True

    def contains(self, e: np.ndarray) -> np.ndarray:
        """Boolean mask: which element offsets (int64, relative to data_ptr) are view elements."""
        if self.empty:
            return np.zeros(e.shape, dtype=bool)
        ok = (e >= 0) & (e <= self.span)
        if self.approximate:
            return ok
        if self.table is not None:
            pos = np.searchsorted(self.table, e)
            pos = np.minimum(pos, len(self.table) - 1)
            return ok & (self.table[pos] == e)
        r = np.where(ok, e, 0)
        for st, sz in self.dims_desc:
            i = r // st
            ok &= i < sz
            r = r - i * st
        return ok & (r == 0)


@dataclass
class TensorArg:
    """A tensor argument of one launch, as seen by the interpreter (host addresses)."""

    name: str
    data_ptr: int
    storage_ptr: int
    storage_nbytes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    element_size: int
    view: _StridedView = field(repr=False, compare=False, default=None)

    @property
    def approximate(self) -> bool:
        """True when the view test fell back to a bounding range (huge overlapping view)."""
        return self.view.approximate

    def contains_bytes(self, a: np.ndarray, nbytes: int) -> np.ndarray:
        """Which addresses ``a`` (int64, inside this storage) access only view elements."""
        off = a - self.data_ptr
        isz = self.element_size
        first = off // isz
        last = (off + (nbytes - 1)) // isz
        ok = self.view.contains(first)
        diff = last != first
        if diff.any():
            ok[diff] &= self.view.contains(last[diff])
        return ok


@dataclass
class _StorageGroup:
    """Arguments sharing one storage byte range; (b) lanes are attributed to the group."""

    start: int
    end: int
    args: list[TensorArg]

    @property
    def label(self) -> str:
        return "|".join(a.name for a in self.args)


@dataclass
class LaunchRecord:
    """What one ``kernel[grid](...)`` call did.

    ``counts`` maps ``(function, line, op, klass, argument)`` to a number of lanes, where
    function/line is the innermost @triton.jit frame (kernel or device function) and ``klass`` is
    ``out_of_view`` (b) or ``out_of_bounds`` (c); ``sources`` maps (function, line) -> source text;
    ``checked_lanes`` counts every unmasked lane that was classified (all classes).
    """

    index: int
    kernel: str
    grid: tuple[int, ...] = ()
    args: dict[str, TensorArg] = field(default_factory=dict)
    counts: dict[tuple[str, int, str, str, str], int] = field(default_factory=dict)
    first_program: dict[tuple[str, int, str, str, str], tuple[int, int, int]] = field(default_factory=dict)
    sources: dict[tuple[str, int], str] = field(default_factory=dict)
    checked_lanes: int = 0
    # internal
    _groups: list[_StorageGroup] = field(default_factory=list, repr=False)
    _code: Any = field(default=None, repr=False)

    def lanes(self, klass: str) -> int:
        return sum(v for (_, _, _, k, _), v in self.counts.items() if k == klass)


class CheckReport:
    """Result of a :func:`checked_interpreter` block: one :class:`LaunchRecord` per launch."""

    def __init__(self) -> None:
        self.launches: list[LaunchRecord] = []

    @property
    def out_of_view_lanes(self) -> int:
        """Total class (b) lanes: outside every view, inside some argument's storage."""
        return sum(r.lanes(OUT_OF_VIEW) for r in self.launches)

    @property
    def out_of_bounds_lanes(self) -> int:
        """Total class (c) lanes: outside every argument's storage (never dereferenced)."""
        return sum(r.lanes(OUT_OF_BOUNDS) for r in self.launches)

    def summary(self) -> dict[str, int]:
        """Totals over all launches, for assertions and one-line logs."""
        return {
            "launches": len(self.launches),
            "checked_lanes": sum(r.checked_lanes for r in self.launches),
            OUT_OF_VIEW: self.out_of_view_lanes,
            OUT_OF_BOUNDS: self.out_of_bounds_lanes,
        }

    def to_dataframe(self) -> pd.DataFrame:
        """One row per (launch, function, line, op, klass, argument) with a nonzero lane count.

        Columns: launch, kernel, function, line, source, op, klass, argument, lanes,
        first_program (grid index of the first program that hit the row).
        For ``out_of_bounds`` rows ``argument`` is the nearest argument's storage (a guess).
        """
        import pandas as pd  # lazy: pandas is only for reports; isolated case processes never load it

        rows = []
        for r in self.launches:
            for (func, line, op, klass, arg), n in r.counts.items():
                rows.append(
                    dict(
                        launch=r.index,
                        kernel=r.kernel,
                        function=func,
                        line=line,
                        source=r.sources.get((func, line), ""),
                        op=op,
                        klass=klass,
                        argument=arg,
                        lanes=n,
                        first_program=r.first_program.get((func, line, op, klass, arg)),
                    )
                )
        cols = ["launch", "kernel", "function", "line", "source", "op", "klass", "argument", "lanes", "first_program"]
        return pd.DataFrame(rows, columns=cols)

    def __repr__(self) -> str:
        return f"CheckReport({self.summary()})"


# --------------------------------------------------------------------------------------------
# launch bookkeeping


def _collect_tensors(name: str, value: Any, out: list[TensorArg]) -> None:
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _collect_tensors(f"{name}[{i}]", v, out)
        return
    if isinstance(value, TensorDescriptor):
        _collect_tensors(f"{name}.base", value.base, out)
        return
    t = interp._unwrap_tensor(value)  # TensorWrapper (tl.reinterpret) -> its torch tensor
    if not hasattr(t, "untyped_storage") or not hasattr(t, "data_ptr"):
        return
    st = t.untyped_storage()
    out.append(
        TensorArg(
            name=name,
            data_ptr=int(t.data_ptr()),
            storage_ptr=int(st.data_ptr()),
            storage_nbytes=int(st.nbytes()),
            shape=tuple(int(s) for s in t.shape),
            strides=tuple(int(s) for s in t.stride()),
            element_size=int(t.element_size()),
            view=_StridedView(tuple(t.shape), tuple(t.stride())),
        )
    )


def _group_storages(args: list[TensorArg]) -> list[_StorageGroup]:
    groups: dict[tuple[int, int], _StorageGroup] = {}
    for a in args:
        if a.storage_nbytes <= 0:
            continue
        key = (a.storage_ptr, a.storage_ptr + a.storage_nbytes)
        groups.setdefault(key, _StorageGroup(key[0], key[1], [])).args.append(a)
    return list(groups.values())


def _current_launch() -> LaunchRecord | None:
    stack = getattr(_state, "launches", None)
    return stack[-1] if stack else None


# --------------------------------------------------------------------------------------------
# lane classification


_jit_codes: dict[int, Any] = {}


def _is_jit_code(code) -> bool:
    """Is ``code`` a rewritten (interpreted) @triton.jit function: a kernel or a device function?"""
    fns = InterpretedFunction.rewritten_fn
    if len(_jit_codes) != len(fns):
        _jit_codes.clear()
        _jit_codes.update({id(f.__code__): f.__code__ for f in fns.values() if hasattr(f, "__code__")})
    return _jit_codes.get(id(code)) is code


def _site(rec: LaunchRecord) -> tuple[str, int]:
    """(function, line) of the innermost @triton.jit frame on the stack (the kernel itself, or the
    device function it called), so a report names the line that computed the address."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is rec._code or _is_jit_code(f.f_code):
            break
        f = f.f_back
    if f is None:
        return ("?", -1)
    site = (f.f_code.co_name, f.f_lineno)
    if site not in rec.sources:
        rec.sources[site] = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return site


def _classify(rec: LaunchRecord, addrs: np.ndarray, active: np.ndarray, nbytes: int, op: str) -> np.ndarray:
    """Count (b)/(c) lanes of one memory op; return the mask of (c) lanes (shape of addrs)."""
    a_all = np.ascontiguousarray(addrs, dtype=np.uint64).view(np.int64)  # addresses >= 2**63 turn negative: outside
    idx = np.flatnonzero(active)
    n = idx.size
    rec.checked_lanes += n
    oob_full = np.zeros(addrs.shape, dtype=bool)
    if n == 0:
        return oob_full
    a = a_all.reshape(-1)[idx]
    groups = rec._groups
    group_of = np.full(n, -1, dtype=np.int64)
    in_view = np.zeros(n, dtype=bool)
    for g, grp in enumerate(groups):
        inside = (a >= grp.start) & (a <= grp.end - nbytes)
        if not inside.any():
            continue
        group_of[inside & (group_of < 0)] = g
        for targ in grp.args:
            cand = inside & ~in_view
            if not cand.any():
                break
            in_view[cand] = targ.contains_bytes(a[cand], nbytes)
    if in_view.all():
        return oob_full
    oov = ~in_view & (group_of >= 0)
    oob = group_of < 0
    if oov.any() or oob.any():
        func, line = _site(rec)
        pid = tuple(int(x) for x in (getattr(interp.interpreter_builder, "grid_idx", None) or (0, 0, 0)))
    if oov.any():
        for g, cnt in enumerate(np.bincount(group_of[oov], minlength=len(groups))):
            if cnt:
                key = (func, line, op, OUT_OF_VIEW, groups[g].label)
                rec.counts[key] = rec.counts.get(key, 0) + int(cnt)
                rec.first_program.setdefault(key, pid)
    if oob.any():
        bad = a[oob].astype(np.float64)
        if groups:
            starts = np.array([g.start for g in groups], dtype=np.float64)
            ends = np.array([g.end for g in groups], dtype=np.float64)
            dist = np.maximum(starts[None, :] - bad[:, None], bad[:, None] - (ends[None, :] - 1))
            nearest = np.bincount(np.argmin(dist, axis=1), minlength=len(groups))
            labels = [g.label for g in groups]
        else:
            nearest, labels = np.array([bad.size]), ["<none>"]
        for g, cnt in enumerate(nearest):
            if cnt:
                key = (func, line, op, OUT_OF_BOUNDS, labels[g])
                rec.counts[key] = rec.counts.get(key, 0) + int(cnt)
                rec.first_program.setdefault(key, pid)
        oob_full.reshape(-1)[idx[oob]] = True
    return oob_full


# --------------------------------------------------------------------------------------------
# patches


def _make_patches(report: CheckReport, interp) -> dict[tuple[Any, str], Any]:
    B = interp.InterpreterBuilder
    G = interp.GridExecutor
    orig = {
        (B, "create_masked_load"): B.__dict__["create_masked_load"],
        (B, "create_masked_store"): B.__dict__["create_masked_store"],
        (B, "create_atomic_rmw"): B.__dict__["create_atomic_rmw"],
        (B, "create_atomic_cas"): B.__dict__["create_atomic_cas"],
        (G, "__call__"): G.__dict__["__call__"],
        (G, "_init_args_hst"): G.__dict__["_init_args_hst"],
    }
    o_load, o_store = orig[(B, "create_masked_load")], orig[(B, "create_masked_store")]
    o_rmw, o_cas = orig[(B, "create_atomic_rmw")], orig[(B, "create_atomic_cas")]
    o_call, o_init = orig[(G, "__call__")], orig[(G, "_init_args_hst")]

    def _nbytes(ptrs) -> int:
        return interp._get_np_dtype(ptrs.get_element_ty()).itemsize

    def _mask_array(mask, shape) -> np.ndarray:
        return np.broadcast_to(np.asarray(mask.data, dtype=bool), shape)

    # The cache policy arguments after the mask changed in triton 3.9 (one ``cache_policy`` instead of a
    # modifier and an eviction policy): they are passed through as they come.
    def create_masked_load(self, ptrs, mask, other, *policy):
        rec = _current_launch()
        if rec is not None:
            m = _mask_array(mask, ptrs.data.shape)
            oob = _classify(rec, ptrs.data, m, _nbytes(ptrs), "load")
            if oob.any():
                mask = interp.TensorHandle(m & ~oob, mask.dtype)
        return o_load(self, ptrs, mask, other, *policy)

    def create_masked_store(self, ptrs, value, mask, *policy):
        rec = _current_launch()
        if rec is not None:
            m = _mask_array(mask, ptrs.data.shape)
            oob = _classify(rec, ptrs.data, m, _nbytes(ptrs), "store")
            if oob.any():
                mask = interp.TensorHandle(m & ~oob, mask.dtype)
        return o_store(self, ptrs, value, mask, *policy)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        rec = _current_launch()
        if rec is not None:
            m = _mask_array(mask, ptr.data.shape)
            oob = _classify(rec, ptr.data, m, _nbytes(ptr), "atomic")
            if oob.any():
                mask = interp.TensorHandle(m & ~oob, mask.dtype)
        return o_rmw(self, rmwOp, ptr, val, mask, sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        rec = _current_launch()
        if rec is not None:
            data = np.asarray(ptr.data)
            oob = _classify(rec, data, np.ones(data.shape, dtype=bool), _nbytes(ptr), "atomic")
            if oob.any():
                # no mask on cas: point the (c) lanes at private zeroed scratch instead
                scratch = np.zeros(data.shape + (2,), dtype=np.uint64)
                scratch_addr = scratch.ctypes.data + np.arange(data.size, dtype=np.uint64).reshape(data.shape) * 16
                ptr = interp.TensorHandle(np.where(oob, scratch_addr, data).astype(np.uint64), ptr.dtype)
                ret = o_cas(self, ptr, cmp, val, sem, scope)
                del scratch
                return ret
        return o_cas(self, ptr, cmp, val, sem, scope)

    def _init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = o_init(self, args_dev, kwargs)
        rec = _current_launch()
        if rec is not None and rec._code is self.fn.__code__:
            tensors: list[TensorArg] = []
            try:
                bound = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
            except TypeError:
                bound = {}
            for name, value in bound.items():
                _collect_tensors(name, value, tensors)
            rec.args = {t.name: t for t in tensors}
            rec._groups = _group_storages(tensors)
        return args_hst, kwargs_hst

    def __call__(self, *args_dev, **kwargs):
        rec = LaunchRecord(index=len(report.launches), kernel=self.fn.__name__, _code=self.fn.__code__)
        report.launches.append(rec)
        stack = getattr(_state, "launches", None)
        if stack is None:
            stack = _state.launches = []
        stack.append(rec)
        try:
            return o_call(self, *args_dev, **kwargs)
        finally:
            stack.pop()
            rec.grid = tuple(getattr(interp.interpreter_builder, "grid_dim", None) or ())

    return orig, {
        (B, "create_masked_load"): create_masked_load,
        (B, "create_masked_store"): create_masked_store,
        (B, "create_atomic_rmw"): create_atomic_rmw,
        (B, "create_atomic_cas"): create_atomic_cas,
        (G, "__call__"): __call__,
        (G, "_init_args_hst"): _init_args_hst,
    }


def triton_minor(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a version string such as ``3.6.0`` or ``3.7.0+git1234``; None if unreadable."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def _check_supported():
    version = getattr(triton, "__version__", "unknown")
    (lo, hi), minor = SUPPORTED_TRITON, triton_minor(version)
    if minor is None or not lo <= minor < hi:
        raise RuntimeError(
            f"checked_interpreter patches private triton.runtime.interpreter API and supports triton "
            f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]} only; installed triton is {version}"
        )
    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "checked_interpreter needs Triton's interpreter: set TRITON_INTERPRET=1 before the kernels "
            f"are defined (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')!r}); otherwise the "
            "kernels run compiled and nothing is checked"
        )


@contextlib.contextmanager
def checked_interpreter() -> Iterator[CheckReport]:
    """Bounds-check every interpreted launch inside the block; yields the :class:`CheckReport`.

    Why a context manager: the checks patch class attributes of the interpreter, which must be
    restored however the block exits. Not reentrant (nesting raises RuntimeError): two reports
    would each see the other's launches.
    """
    global _active
    _check_supported()
    report = CheckReport()
    with _active_lock:
        if _active is not None:
            raise RuntimeError("checked_interpreter is already active; nesting is not supported")
        _active = report
    try:
        orig, patched = _make_patches(report, interp)
        try:
            for (cls, name), fn in patched.items():
                setattr(cls, name, fn)
            yield report
        finally:
            for (cls, name), fn in orig.items():
                setattr(cls, name, fn)
    finally:
        with _active_lock:
            _active = None

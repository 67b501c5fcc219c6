"""Let Triton's CPU interpreter run kernels whose loop bound is a scalar loaded from memory.

Why: vLLM's gathers loop ``for i in range(worker_id, gather_len, num_workers)`` with ``gather_len``
loaded by ``tl.load``. The interpreter holds that scalar as a 1-element NumPy array; triton 3.6's
``tensor.__index__`` calls ``int()`` on it, which NumPy >= 2.4 refuses (``TypeError: only
0-dimensional arrays can be converted to Python scalars``); NumPy < 2.4 converted it, and triton 3.7
and later squeeze the array first. Where it is needed (triton 3.6 with NumPy >= 2.4), inside
:func:`loaded_scalar_loop_bounds` the interpreter's ``__index__`` takes the element of a 1-element
array and still refuses anything larger; elsewhere the scope changes nothing. Nothing in the kernels
changes. The patch wraps private interpreter API of triton 3.6 only, and it is undone on exit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np
import triton
from triton.runtime import interpreter as interp

from repro.core.evidence.checked_interp import triton_minor

#: The one triton release whose interpreter calls ``int()`` on a 1-element array (3.7 squeezes it first).
PATCHED_TRITON = (3, 6)
_lock = threading.Lock()
_depth = 0
_original = None


def _index(self) -> int:
    data = np.asarray(self.handle.data)
    if data.size != 1:
        raise TypeError(f"only a 1-element tensor can be a Python index, got shape {data.shape}")
    return int(data.reshape(()).item())


def needed() -> bool:
    """True when the interpreter's ``__index__`` would call ``int()`` on a 1-element array (triton 3.6) and
    NumPy refuses it (NumPy >= 2.4)."""
    if triton_minor(triton.__version__) != PATCHED_TRITON:
        return False
    try:
        int(np.zeros(1))
    except TypeError:
        return True
    return False


@contextlib.contextmanager
def loaded_scalar_loop_bounds() -> Iterator[None]:
    """Scope in which interpreted kernels may use loaded scalars as ``range`` bounds (re-entrant)."""
    global _depth, _original
    if not needed():
        yield
        return
    with _lock:
        if _depth == 0:
            _original = interp._patch_lang_tensor

            def patched(tensor, scope):
                _original(tensor, scope)
                scope.set_attr(tensor, "__index__", _index)

            interp._patch_lang_tensor = patched
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                interp._patch_lang_tensor = _original
                _original = None

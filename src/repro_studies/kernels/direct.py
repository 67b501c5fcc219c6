"""Launch a compiled Triton kernel again without Triton's Python launcher (tens of microseconds per call).

``kernel[grid](*args, **constexprs)`` binds every argument, computes Triton's specialisation key and
looks the compiled kernel up on every call: 30-60 us of host time for a gather with 20 arguments. A
caller that knows which of its arguments decide the specialisation can key the compiled kernel itself:

* the first call with a key goes through ``kernel[grid]`` (compiling if needed) and keeps the
  :class:`triton.compiler.CompiledKernel` it returns;
* later calls launch that object directly with its own launcher (``CompiledKernel.run``, the call
  Triton's ``JITFunction.run`` ends with; when the kernel needs no scratch memory, the C launch function
  that launcher's ``__call__`` ends with), passing the same arguments in the same order, pointers as the
  ints ``data_ptr()`` returned (the caller checks that the tensors are on the GPU, which Triton's launcher
  would otherwise ask the driver for, per pointer and call).

The key must hold everything Triton specialises on: the constexpr values and, for the runtime
arguments, what :func:`int_spec` and :func:`pointer_spec` return (Triton 3.x: an int is specialised on
``== 1``, divisibility by 16 and its integer width unless it is in ``do_not_specialize``; a tensor on
16-byte alignment of its data pointer). Only Triton versions whose launcher this code was checked
against take the direct path (:data:`CHECKED_TRITON`); any other, the interpreter, or a compiled kernel
without the expected attributes makes every call go through ``kernel[grid]``, which is always correct.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable

import torch
import triton

#: Triton (major, minor) versions whose ``JITFunction.run`` ends with
#: ``kernel.run(g0, g1, g2, stream, kernel.function, kernel.packed_metadata, launch_metadata,
#: launch_enter_hook, launch_exit_hook, *bound_args)`` and returns ``kernel`` (3.4-3.6 read; 3.6 run on
#: the H200).
CHECKED_TRITON = {(3, 4), (3, 5), (3, 6)}
_DIVISIBILITY = 16


def triton_version() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", triton.__version__)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def int_spec(value: int, specialize: bool = True) -> tuple:
    """What Triton's compiled kernel depends on for an int argument (width; ``== 1`` and ``% 16`` too
    when it is specialised)."""
    width = 32 if -(2**31) <= value < 2**31 else 64
    if not specialize:
        return (width,)
    return (width, value == 1, value % _DIVISIBILITY == 0)


def pointer_spec(data_ptr: int) -> bool:
    """What Triton's compiled kernel depends on for a tensor argument besides its dtype: 16-byte alignment."""
    return data_ptr % _DIVISIBILITY == 0


class DirectLauncher:
    """Compiled kernels of one ``@triton.jit`` function by (current device, caller key), launched directly."""

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel
        self.compiled: dict[Hashable, object] = {}
        self.enabled = self.supported(kernel)
        self._stream: Callable[[int], int] | None = None
        self._device: Callable[[], int] | None = None
        self._knobs = None
        self.direct_calls = 0  # launches that went direct (a count for tests and the tuning sweep)

    @staticmethod
    def supported(kernel: object) -> bool:
        """True when the direct path may be used for ``kernel`` (compiled, checked Triton version)."""
        from repro.core.kernels.launch import is_interpreted  # lazy: launch imports triton's interpreter module

        return not is_interpreted(kernel) and triton_version() in CHECKED_TRITON

    def current_device(self) -> int | None:
        """The current CUDA device index (what Triton launches on); None before the first launch."""
        return self._device() if self._device is not None else None

    def lookup(self, device: int | None, key: Hashable) -> _Entry | None:
        """The compiled kernel for ``key`` on ``device`` (None: compile it through :meth:`compile`)."""
        return self.compiled.get((device, key)) if self.enabled and device is not None else None

    def compile(
        self, key: Hashable, grid: tuple, args: tuple, constexprs: dict, num_warps: int, options: dict | None = None
    ) -> None:
        """``kernel[grid](*args, **constexprs, num_warps=num_warps, **options)`` through Triton, tensors as tensors
        (it compiles if needed), and keep the compiled kernel for ``key``; the constexprs are the kernel's
        remaining parameters in signature order, ``options`` further compile options (``maxnreg``)."""
        kernel = self.kernel[grid](*args, **constexprs, num_warps=num_warps, **(options or {}))
        if self.enabled:
            self._remember(key, kernel, constexprs)

    def run(self, entry: _Entry, grid: tuple, raw_args: tuple, device: int) -> None:
        """Launch a compiled kernel: ``raw_args`` are the runtime arguments in signature order with every
        tensor replaced by its ``data_ptr()`` (the launcher takes an int as a pointer as it is; the caller
        has checked that the tensors live on the GPU)."""
        launch, head, tail, kernel = entry
        stream = self._stream(device)
        knobs = self._knobs
        enter, leave = knobs.launch_enter_hook, knobs.launch_exit_hook
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        if (enter is None or getattr(enter, "calls", None) == []) and (
            leave is None or getattr(leave, "calls", None) == []
        ):
            # No hook would run (Triton 3.6's hooks are chains, empty unless a profiler adds one): no launch
            # metadata to build, and the C launcher skips a hook passed as None.
            launch(grid[0], g1, g2, stream, *head, None, None, None, *raw_args, *tail)
        else:
            metadata = kernel.launch_metadata(grid, stream, *raw_args, *tail)
            launch(grid[0], g1, g2, stream, *head, metadata, enter, leave, *raw_args, *tail)
        self.direct_calls += 1

    def launch(
        self,
        key: Hashable,
        grid: tuple,
        raw_args: tuple,
        first_call: Callable[[], tuple[tuple, dict]],
        num_warps: int,
        device: int | None = None,
    ) -> bool:
        """:meth:`lookup`, then :meth:`run` or (``first_call()`` giving ``(args, constexprs)``) :meth:`compile`;
        True when it went direct. ``device``: :meth:`current_device`, if the caller has it."""
        if device is None and self.enabled:
            device = self.current_device()
        entry = self.lookup(device, key)
        if entry is None:
            self.compile(key, grid, *first_call(), num_warps)
            return False
        self.run(entry, grid, raw_args, device)
        return True

    def _remember(self, key: Hashable, kernel: object, constexprs: dict) -> None:
        needed = ("run", "function", "packed_metadata", "launch_metadata")
        if kernel is None or not all(hasattr(kernel, name) for name in needed):
            self.enabled = False  # not the CompiledKernel this code knows: always go through Triton
            return
        if self._stream is None:
            try:
                from triton import knobs  # lazy: guarded, a Triton without it keeps Triton's own launcher
                from triton.runtime import driver  # lazy: the active driver exists once a kernel has launched

                self._knobs = knobs.runtime
                self._stream = driver.active.get_current_stream
                self._device = driver.active.get_current_device
                # torch.cuda.current_device() is this C call behind a lazy-initialisation check that has
                # run by now (a kernel was just launched)
                if self._device is torch.cuda.current_device:
                    self._device = getattr(torch._C, "_cuda_getDevice", self._device)
            except (ImportError, AttributeError):
                self.enabled = False
                return
        run = kernel.run
        if _bare_launch_ok(run):
            # The C launch function itself: what the launcher object's __call__ ends with when the kernel
            # needs no scratch memory.
            launch = run.launch
            head = (kernel.function, run.launch_cooperative_grid, run.launch_pdl, None, None, kernel.packed_metadata)
        else:
            launch, head = run, (kernel.function, kernel.packed_metadata)
        self.compiled[(self._device(), key)] = _Entry(launch, head, tuple(constexprs.values()), kernel)


def _bare_launch_ok(run: object) -> bool:
    """The launcher object is Triton 3.4-3.6's CudaLauncher and the kernel needs no scratch buffers."""
    names = ("launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size")
    return all(hasattr(run, n) for n in names) and run.global_scratch_size == 0 and run.profile_scratch_size == 0


class _Entry(tuple):
    """(launch function, its leading arguments, constexpr values, the compiled kernel) of one kernel."""

    def __new__(cls, launch, head, tail, kernel):
        return super().__new__(cls, (launch, head, tail, kernel))

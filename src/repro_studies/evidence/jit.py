"""The JIT fingerprint: how many compilations a sequence of launches triggers, and what each costs.

Triton keeps one compiled binary per *cache key*: the kernel's specialisation (each argument's type;
for a pointer, whether it is 16-byte aligned; for an int, whether it equals 1 or is divisible by 16,
unless the parameter is in ``do_not_specialize``; the value of every ``tl.constexpr``) plus the launch
options (``num_warps`` ...). A launch whose key is new compiles on the calling thread. So a row pitch
passed as ``tl.constexpr`` (vLLM's ``max_blocks_per_seq = block_table.shape[-1]``) compiles once per
distinct table width, while a runtime ``stride(0)`` compiles once per specialisation class.

Two ways to count, for any ``JITFunction`` (or an autotuner wrapping one) and any launcher that
ends in ``kernel[grid](...)``:

* **predicted** (works everywhere, including the CPU interpreter): every launch goes through
  Triton's own binder (``create_function_from_signature``) and key function (``compute_cache_key``)
  for a fixed target (default: the H200, ``cuda`` sm_90), without a GPU driver and without compiling.
  A key not seen before in the sequence is a compilation Triton would do on that target.
* **observed** (compiled kernels on a GPU only): Triton's ``knobs.runtime.jit_cache_hook`` and
  ``jit_post_compile_hook`` bracket every in-process compilation of the kernel, and
  ``knobs.compilation.listener`` reports Triton's own ``CompileTimes`` and whether the on-disk cache
  answered. ``cold=True`` empties the kernel's in-memory cache and points Triton at a fresh on-disk
  cache for the measurement, so each compilation is a real one.

The interpreter compiles nothing (``InterpretedFunction`` runs the Python body on NumPy; it has no
binder, no cache and calls no hook), so on the CPU the counts are the predicted ones, and compile
times and first-call latencies exist only on a GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction, compute_cache_key, create_function_from_signature

from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.coverage import SentinelMode
from repro_studies.upstream.warm_up import NO_WARM_UP, WarmUp, WarmUpKind

#: The H200's target: the key a prediction computes is the one Triton computes on that GPU.
H200_TARGET = ("cuda", 90, 32)


@dataclass(frozen=True)
class Launch:
    """One call of a launcher in a fingerprint sequence.

    ``width`` is the block-table width the call uses (the x axis of the fingerprint); ``phase``
    separates e.g. a warm-up from inference calls; ``call`` runs the launcher once.
    """

    label: str
    width: int
    call: Callable[[], object]
    phase: str = "inference"


def unwrap_kernel(kernel: Any) -> Any:
    """The ``JITFunction`` or ``InterpretedFunction`` under autotuner/heuristics wrappers."""
    seen = 0
    while not isinstance(kernel, (JITFunction, InterpretedFunction)):
        inner = getattr(kernel, "fn", None)
        if inner is None or seen > 8:
            raise TypeError(f"kernel must be a triton.jit function (or an autotuner wrapping one), got {kernel!r}")
        kernel, seen = inner, seen + 1
    return kernel


def triton_name(kernel: Any) -> str:
    """The name Triton hands its compile hooks (``fn.name``: the Python function's qualified name), which is
    what vLLM's JIT monitor prints in "Triton kernel JIT compilation during inference: <name>"."""
    return unwrap_kernel(kernel).fn.__qualname__


def is_compiled_kernel(kernel: Any) -> bool:
    return isinstance(unwrap_kernel(kernel), JITFunction)


class KeyPredictor:
    """Triton's cache key for a launch of ``kernel`` on ``target``, computed without a driver.

    For an ``InterpretedFunction`` a shadow ``JITFunction`` of the same Python function and the same
    decorator arguments (``do_not_specialize`` ...) is built; it is never launched.
    """

    def __init__(self, kernel, target: tuple = H200_TARGET):
        base = unwrap_kernel(kernel)
        if isinstance(base, InterpretedFunction):
            shadow = JITFunction(base.fn, **base.kwargs)
        else:
            shadow = base
        assert isinstance(shadow, JITFunction)
        self.kernel = base
        self.debug = shadow.debug
        self.params = shadow.params
        self.target = GPUTarget(*target)
        self.backend = make_backend(self.target)
        self.binder = create_function_from_signature(shadow.signature, shadow.params, self.backend)
        self._key_cache: dict = {}

    def key(self, args: tuple, kwargs: dict) -> tuple[str, str]:
        """(Triton's cache key, a short summary of the non-pointer specialisation)."""
        kwargs = dict(kwargs)
        # JITFunction.run adds these two options before binding; the key includes them.
        kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        _, specialization, options = self.binder(*args, **kwargs)
        key = compute_cache_key(self._key_cache, specialization, options)
        parts = []
        for param, (ty, attr) in zip(self.params, specialization):
            if isinstance(ty, str) and ty.startswith("*"):
                continue  # pointers: alignment only, listed by the full key
            if ty == "constexpr":
                parts.append(f"{param.name}=constexpr {attr!r}")
            else:
                parts.append(f"{param.name}={ty}{':' + attr if attr else ''}")
        return key, ", ".join(parts)


def short_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:10]


@dataclass
class _Run:
    """What one ``kernel.run`` inside a call did."""

    key: str
    summary: str


@dataclass
class _CompileEvent:
    key: str
    hook_start: float
    hook_end: float | None = None
    triton_us: int | None = None  # Triton's CompileTimes.total
    disk_cache_hit: bool | None = None


@dataclass
class _Recorder:
    predictor: KeyPredictor
    observe: bool
    execute: bool = True
    runs: list = field(default_factory=list)
    compiles: list = field(default_factory=list)


@contextlib.contextmanager
def _intercept(recorder: _Recorder) -> Iterator[None]:
    """Route the kernel's ``run`` through the key predictor (and, on a GPU, Triton's hooks)."""
    kernel = recorder.predictor.kernel
    original_run = kernel.run  # bound method (or an instance attribute set by someone else)
    had_instance_run = "run" in vars(kernel)

    def run(*args, grid, warmup, **kwargs):
        key, summary = recorder.predictor.key(args, kwargs)
        recorder.runs.append(_Run(key, summary))
        if not recorder.execute:
            return None
        return original_run(*args, grid=grid, warmup=warmup, **kwargs)

    saved = (knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook, knobs.compilation.listener)

    # Triton calls its hooks with keyword arguments only; each is passed on whole to a hook set before ours.
    def pre_hook(**hook):
        if hook["fn"].jit_function is kernel:
            recorder.compiles.append(_CompileEvent(key=str(hook["key"]), hook_start=time.perf_counter()))
        return saved[0](**hook) if saved[0] else False

    def post_hook(**hook):
        if hook["fn"].jit_function is kernel and recorder.compiles:
            recorder.compiles[-1].hook_end = time.perf_counter()
        return saved[1](**hook) if saved[1] else None

    def listener(**event):
        if getattr(event["src"], "fn", None) is kernel and recorder.compiles:
            recorder.compiles[-1].triton_us = int(event["times"].total)
            recorder.compiles[-1].disk_cache_hit = bool(event["cache_hit"])
        if saved[2]:
            saved[2](**event)

    kernel.run = run
    if recorder.observe:
        knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = pre_hook, post_hook
        knobs.compilation.listener = listener
    try:
        yield
    finally:
        if had_instance_run:
            kernel.run = original_run
        else:
            del kernel.run
        if recorder.observe:
            knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook, knobs.compilation.listener = saved


@contextlib.contextmanager
def _cold_caches(kernel) -> Iterator[str]:
    """Empty ``kernel``'s in-memory binaries and use a fresh on-disk cache until the block ends."""
    with tempfile.TemporaryDirectory(prefix="triton-cold-") as tmp, knobs.cache.scope():
        knobs.cache.dir = tmp
        kernel.device_caches.clear()
        try:
            yield tmp
        finally:
            kernel.device_caches.clear()  # binaries from the temporary cache are not kept


def fingerprint(
    kernel: Any,
    launches: Iterable[Launch],
    *,
    variant: str = "",
    table: str = "",
    observe: bool | None = None,
    cold: bool = True,
    target: tuple = H200_TARGET,
    sync: Callable[[], None] | None = None,
    sink: Callable[[dict], None] | None = None,
    execute: bool = True,
) -> list[dict]:
    """Run ``launches`` in order and record, per call, the compilations it triggers.

    ``observe=None`` observes with Triton's hooks when ``kernel`` is compiled (a GPU) and only
    predicts in the interpreter. Every row holds the predicted count; observed columns are empty
    when nothing was observed. ``sync`` (e.g. ``torch.cuda.synchronize``) ends each timed call.
    ``execute=False`` (prediction only) computes each launch's key and skips the launch itself, for
    kernels the interpreter cannot run (vLLM's gather loops to a bound loaded from memory).
    Rows are handed to ``sink`` as they finish and returned.
    """
    base = unwrap_kernel(kernel)
    compiled = is_compiled_kernel(base)
    if observe is None:
        observe = compiled
    if observe and not compiled:
        raise ValueError(
            "observe=True needs a compiled kernel (a GPU); the interpreter compiles nothing: "
            "use observe=False for the predicted count"
        )
    if observe and not execute:
        raise ValueError("execute=False needs observe=False: an observed compilation happens inside the launch")
    recorder = _Recorder(KeyPredictor(base, target), observe, execute)
    kernel_name = triton_name(base)
    seen_keys: set[str] = set()
    seen_widths: set[int] = set()
    rows: list[dict] = []
    cold_ctx = _cold_caches(base) if (observe and cold) else contextlib.nullcontext()
    with cold_ctx, _intercept(recorder):
        for index, launch in enumerate(launches):
            runs_before, compiles_before = len(recorder.runs), len(recorder.compiles)
            t0 = time.perf_counter()
            launch.call()
            if sync is not None:
                sync()
            call_us = (time.perf_counter() - t0) * 1e6
            runs = recorder.runs[runs_before:]
            new_keys = [r.key for r in runs if r.key not in seen_keys]
            new_keys = list(dict.fromkeys(new_keys))
            seen_keys.update(new_keys)
            first_width = launch.width not in seen_widths
            seen_widths.add(launch.width)
            events = recorder.compiles[compiles_before:]
            row = {
                "variant": variant,
                "table": table,
                "kernel_name": kernel_name,
                "call": index,
                "phase": launch.phase,
                "label": launch.label,
                "width": launch.width,
                "first_call_of_width": first_width,
                "distinct_widths": len(seen_widths),
                "launches": len(runs),
                "specialization": " | ".join(dict.fromkeys(r.summary for r in runs)),
                "key": " ".join(short_key(k) for k in dict.fromkeys(r.key for r in runs)),
                "predicted_compiles": len(new_keys),
                "predicted_total": len(seen_keys),
                "target": "{}:sm_{}".format(*target[:2]),
                "observed_compiles": len(events) if observe else None,
                "compile_us": sum(e.triton_us or 0 for e in events) if observe else None,
                "hook_us": round(sum((e.hook_end - e.hook_start) * 1e6 for e in events if e.hook_end), 1)
                if observe
                else None,
                "disk_cache_hits": sum(bool(e.disk_cache_hit) for e in events) if observe else None,
                "call_us": round(call_us, 1) if (compiled and execute) else None,
                "mode": "observed" if observe else "predicted",
            }
            rows.append(row)
            if sink is not None:
                sink(row)
    return rows


def width_launches(
    launcher: Callable[[object], object],
    tables: Iterable[tuple[int, object]],
    phase: str = "inference",
    label: str = "",
) -> list[Launch]:
    """One :class:`Launch` per ``(width, table)``: ``launcher(table)`` with that table."""
    return [
        Launch(label=f"{label}{width}", width=width, call=(lambda t=table: launcher(t)), phase=phase)
        for width, table in tables
    ]


def narrowed_tables(backing: Any, widths: Iterable[int]) -> list[tuple[int, Any]]:
    """Column-narrowed views ``backing[:, :w]`` of one fixed table: ``stride(0)`` stays the backing width."""
    full = backing.shape[-1]
    out = []
    for w in widths:
        if not 1 <= w <= full:
            raise ValueError(f"widths must lie in 1..{full} (the backing table's width), got {w}")
        out.append((w, backing[:, :w]))
    return out


def contiguous_tables(backing: Any, widths: Iterable[int]) -> list[tuple[int, Any]]:
    """Contiguous copies ``backing[:, :w].contiguous()``: ``stride(0)`` equals the width."""
    return [(w, view.contiguous()) for w, view in narrowed_tables(backing, widths)]


def gather_launches(
    gather: Callable,
    widths: Iterable[int],
    table: str = "narrowed",
    num_reqs: int = 4,
    block_size: int = 64,
    backing_width: int | None = None,
    device: str = "cpu",
    phase: str = "inference",
    tokens_per_request: Callable[[int], int] | None = None,
    window: int = 0,
    offset: int = 0,
) -> list[Launch]:
    """Calls of a gather with vLLM's signature, one per width ``w``: ``num_reqs`` requests on a ``w``-column
    table, a narrowed view of a ``backing_width``-wide table or a contiguous one.

    Each request holds ``tokens_per_request(w)`` tokens (default: ``w`` full blocks); the table has ``w``
    columns whatever the requests need, so a short request can stand on a wide table. Everything the launch
    passes except the table (cache block stride, output row pitch class, ``window`` as ``gather_lens``,
    ``offset``) is the same for every width, so new compilations come from the table alone.
    """
    widths = list(widths)
    if table not in ("narrowed", "contiguous"):
        raise ValueError(f"table must be 'narrowed' or 'contiguous', got {table!r}")
    full = backing_width or 2 * max(widths)
    if table == "narrowed" and any(w >= full for w in widths):
        raise ValueError(f"backing_width ({full}) must exceed every width ({max(widths)}) for narrowed views")
    launches = []
    for w in widths:
        length = tokens_per_request(w) if tokens_per_request else w * block_size
        spec = ScenarioSpec(
            num_reqs=num_reqs,
            block_size=block_size,
            seq_len_max=length,
            seq_lens=(length,) * num_reqs,
            max_reqs=num_reqs,
            device=device,
            mode=SentinelMode.IN_RANGE,
            backing_width=0 if table == "contiguous" else full,
            contiguous=table == "contiguous",
            table_width=w,
            window=window,
            offset=offset,
        )
        scenario = build_scenario(spec)
        got = (scenario.block_table.shape[-1], scenario.block_table.stride(0))
        if got != (w, w if table == "contiguous" else full):
            raise AssertionError(f"{table} table for width {w} has (shape[-1], stride(0)) = {got}")
        out = scenario.fresh_out()
        launches.append(
            Launch(label=f"{table} w={w}", width=w, phase=phase, call=(lambda s=scenario, o=out: gather(*s.args(o))))
        )
    return launches


@dataclass(frozen=True)
class JitSubject:
    """A kernel under the fingerprint: the gather with vLLM's signature that launches it, and how its
    row pitch reaches the kernel (``constexpr width``, ``runtime stride``, ``runtime stride
    (do_not_specialize)`` or ``constexpr stride``) and whose code it is.

    ``warm_up`` replaces the default warm-up (one launch on the full-width contiguous table) with the
    code's own, e.g. a vLLM release's JIT-warmup class compiling its warm-up keys; ``warm_up_as`` says what
    that warm-up is (the columns of every row).
    """

    name: str
    gather: Callable
    kernel: object
    pitch: str
    code: str = ""
    warm_up: Callable[[], object] | None = None
    warm_up_as: WarmUp | None = None


def fingerprint_subjects(
    subjects: Iterable[JitSubject],
    widths: list[int],
    backing_width: int,
    warm_up: bool = True,
    tables: tuple = ("narrowed", "contiguous"),
    num_reqs: int = 4,
    block_size: int = 64,
    device: str = "cpu",
    observe: bool | None = None,
    execute: bool = True,
    sink: Callable[[dict], None] | None = None,
    tokens_per_request: Callable[[int], int] | None = None,
    window: int = 0,
    offset: int = 0,
) -> list[dict]:
    """The standard sequence for each subject and table kind: (optionally) a warm-up at the full
    ``backing_width`` (the subject's own, else one launch on the full-width table), then one launch per
    width.

    On a GPU pass ``device="cuda"`` (observed and predicted); on the CPU the count is predicted, and
    ``execute=False`` skips launches the interpreter cannot run.
    """
    sync = None
    if device.startswith("cuda"):
        sync = torch.cuda.synchronize
    shape = dict(
        num_reqs=num_reqs,
        block_size=block_size,
        device=device,
        tokens_per_request=tokens_per_request,
        window=window,
        offset=offset,
    )
    rows = []
    for subject in subjects:
        how = NO_WARM_UP
        for table in tables:
            launches = []
            if warm_up and subject.warm_up is not None:
                own = subject.warm_up_as or WarmUp(WarmUpKind.RELEASE_CLASS)
                how = own.columns()
                label = f"{own.owner or subject.name} warm-up"
                launches.append(Launch(label=label, width=backing_width, call=subject.warm_up, phase="warm-up"))
            elif warm_up:
                how = WarmUp().columns()
                launches += gather_launches(
                    subject.gather, [backing_width], table="contiguous", phase="warm-up", **shape
                )
            launches += gather_launches(subject.gather, widths, table=table, backing_width=backing_width, **shape)

            def tagged(row, subject=subject, how=how):
                row.update({"pitch": subject.pitch, "code": subject.code, **how})
                if sink is not None:
                    sink(row)

            rows += fingerprint(
                subject.kernel,
                launches,
                variant=subject.name,
                table=table,
                observe=observe,
                sync=sync,
                sink=tagged,
                execute=execute,
            )
    return rows

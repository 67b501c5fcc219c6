"""GPU timing for notebook 03: medians from ``triton.testing.do_bench`` (eager) and CUDA-graph
replays, the device-copy ceiling measured in the same run, and bandwidth as a fraction of it.

Bytes counted per gathered token: 584 read from the cache and 1,024 written (512 bf16 values).
Eager timings use ``do_bench``, which clears the L2 cache before every call. Graph timings replay a
graph holding launches over several independent copies of the inputs, enough that together they
exceed twice the L2, so a replay never finds its inputs cached.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from repro.core.geometry.layout import DSV4, GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN

#: Upper bound on input copies a graph rotates through.
MAX_ROTATION = 32


def median_us(fn: Callable[[], object], warmup_ms: int = 25, rep_ms: int = 100) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")) * 1e3


#: Calls per host-time measurement (after a tenth as many warm-up calls).
HOST_CALLS = 100


def host_us(fn: Callable[[], object], calls: int = HOST_CALLS) -> float:
    """Host time per call: a plain clock around ``calls`` back-to-back calls after warm-up, nothing
    synchronised inside, so it is what enqueueing one launch costs the caller (the GPU may still be busy)."""
    import time

    for _ in range(max(1, calls // 10)):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed * 1e6 / calls


@dataclass
class CopyCeiling:
    nbytes: int
    median_us: float

    @property
    def tbps(self) -> float:
        """Bytes read plus bytes written per second, in TB/s."""
        return 2 * self.nbytes / (self.median_us * 1e-6) / 1e12


def copy_ceiling(nbytes: int = 2 << 30) -> CopyCeiling:
    """A large device-to-device copy: the memory system's practical limit for read+write traffic."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return CopyCeiling(nbytes, median_us(lambda: dst.copy_(src)))


def rotation_count(bytes_per_call: int) -> int:
    """Independent input copies so that one pass over them exceeds twice the L2."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return max(1, min(MAX_ROTATION, math.ceil(2 * l2 / max(1, bytes_per_call))))


def graph_median_us(calls: list, rep_ms: int = 100) -> float:
    """Median time per call when ``calls`` are captured in one CUDA graph and replayed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:  # warm up (compile, allocate) outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in calls:
            fn()
    torch.cuda.synchronize()
    total = median_us(graph.replay, rep_ms=rep_ms)
    del graph
    return total / len(calls)


# ---------------------------------------------------------------------------------------------
# The streaming ceiling: the gather's traffic without its block table (repro.studies.kernels.stream)

#: Streaming kernels: what each moves per token (bytes read, bytes written).
STREAM_KINDS = {
    "stream": (GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN),
    "move": (GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN),
    "read-only": (GATHER_READ_BYTES_PER_TOKEN, 0),
    "write-only": (0, GATHER_WRITE_BYTES_PER_TOKEN),
}


@dataclass
class StreamBench:
    """One streaming arm over ``copies`` independent buffers of ``tokens`` tokens.

    ``check()`` runs the kernel once on the first copy and compares it bitwise with the PyTorch
    reference: (mismatched, stray = 0, total, unit); ``eager`` is one launch, ``graph_calls`` one
    launch per copy.
    """

    kind: str
    layout: str
    tokens: int
    block_t: int
    num_warps: int
    bytes_read: int
    bytes_written: int
    check: object
    eager: object
    graph_calls: list


def stream_bench(
    kind: str,
    tokens: int,
    copies: int,
    layout: str = "records",
    block_t: int | None = None,
    num_warps: int | None = None,
    device: str = "cuda",
    seed: int = 0,
    **dequant: object,
) -> StreamBench:
    """Build the inputs, outputs and launches of one streaming arm (``kind`` in :data:`STREAM_KINDS`);
    ``dequant``: :func:`repro.studies.kernels.stream.stream_dequant`'s tile settings (``tile``, ``tiles_per_program``,
    ``num_stages``, ``prefetch``) for the ``"stream"`` kind."""
    from functools import partial

    from repro.studies.kernels import stream as S

    if kind not in STREAM_KINDS:
        raise ValueError(f"kind must be one of {sorted(STREAM_KINDS)}, got {kind!r}")
    if dequant and kind != "stream":
        raise ValueError(f"tile settings {sorted(dequant)} apply to the 'stream' kind only, not {kind!r}")
    block_t = block_t or S.DEFAULT_BLOCK_T
    num_warps = num_warps or S.DEFAULT_NUM_WARPS
    tiles = {"block_t": block_t, "num_warps": num_warps, "plan": "grid"}
    per_read, per_write = STREAM_KINDS[kind]
    if kind == "write-only":
        outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
        calls = [partial(S.stream_write, out, **tiles) for out in outs]

        def check():
            out = torch.full_like(outs[0].view(torch.int16), -1).view(torch.bfloat16)
            S.stream_write(out, **tiles)
            bad = int((out.view(torch.int16) != S.write_reference(tokens, device).view(torch.int16)).any(1).sum())
            return bad, 0, tokens, "rows"
    elif kind == "move":
        inputs = [S.make_stream_input(tokens, layout, seed=seed + k, device=device) for k in range(copies)]
        outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
        moves = {"block_t": block_t, "num_warps": num_warps}
        calls = [partial(S.stream_move, inp, out, **moves) for inp, out in zip(inputs, outs)]

        def check():
            out = inputs[0].fresh_out()
            launch = S.stream_move(inputs[0], out, **moves)
            ref = S.move_reference(inputs[0], launch)
            bad = int((out.view(torch.int16) != ref.view(torch.int16)).any(1).sum())
            return bad, 0, tokens, "tokens"
    else:
        inputs = [S.make_stream_input(tokens, layout, seed=seed + k, device=device) for k in range(copies)]
        if kind == "stream":
            outs = [torch.empty(tokens, DSV4.head_dim, dtype=torch.bfloat16, device=device) for _ in range(copies)]
            calls = [partial(S.stream_dequant, inp, out, **tiles, **dequant) for inp, out in zip(inputs, outs)]

            def check():
                out = inputs[0].fresh_out()
                S.stream_dequant(inputs[0], out, **tiles, **dequant)
                ref = S.stream_reference(inputs[0])
                bad = int((out.view(torch.int16) != ref.view(torch.int16)).any(1).sum())
                return bad, 0, tokens, "tokens"
        else:
            launch = S.plan_stream(tokens, block_t, num_warps, "grid")
            sums = [S.read_sums_buffer(inp, launch) for inp in inputs]
            calls = [partial(S.stream_read, inp, s, **tiles) for inp, s in zip(inputs, sums)]

            def check():
                _, got = S.stream_read(inputs[0], **tiles)
                bad = int((got != S.read_reference(inputs[0], launch)).sum())
                return bad, 0, launch.grid[0], "program sums"

    return StreamBench(
        kind=kind,
        layout=layout if kind != "write-only" else "",
        tokens=tokens,
        block_t=block_t,
        num_warps=num_warps,
        bytes_read=tokens * per_read,
        bytes_written=tokens * per_write,
        check=check,
        eager=calls[0],
        graph_calls=calls,
    )

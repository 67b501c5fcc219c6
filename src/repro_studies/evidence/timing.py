"""GPU timing for notebook 03: medians from ``triton.testing.do_bench`` (eager) and CUDA-graph
replays, the device-copy ceiling measured in the same run, and bandwidth as a fraction of it.

Bytes counted per gathered token: 584 read from the cache and 1,024 written (512 bf16 values).
Eager timings use ``do_bench``, which clears the L2 cache before every call. Graph timings replay a
graph holding launches over several independent copies of the inputs, enough that together they
exceed twice the L2, so a replay never finds its inputs cached.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton.testing

#: Upper bound on input copies a graph rotates through.
MAX_ROTATION = 32


def median_us(fn: Callable[[], object], warmup_ms: int = 25, rep_ms: int = 100) -> float:
    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")) * 1e3


#: Calls per round of a host-time measurement (after a tenth as many warm-up calls), and rounds.
HOST_CALLS = 100
HOST_ROUNDS = 5


def host_us(
    fn: Callable[[], object],
    calls: int = HOST_CALLS,
    rounds: int = HOST_ROUNDS,
    sync: Callable[[], object] = torch.cuda.synchronize,
) -> float:
    """Host time per call: the median over ``rounds`` of a plain clock around ``calls`` back-to-back calls,
    nothing synchronised inside, so it is what enqueueing one launch costs the caller (the GPU may still be
    busy); the median, because a round that the host's scheduler or a collection interrupts is slower.
    ``sync`` waits for the device before each round, outside the clock, so that launches of long kernels never
    fill the driver's queue and wait for room in it, and after the last (a no-op where there is none)."""
    for _ in range(max(1, calls // 10)):
        fn()
    per_round = []
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_round.append((time.perf_counter() - start) * 1e6 / calls)
    sync()
    return statistics.median(per_round)


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

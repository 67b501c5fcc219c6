"""Notebook 03's measurements: what the stride fix costs, against a contiguous table and against
the rejected ``.contiguous()`` alternative, eager and as CUDA-graph replays.

Each shape is checked bitwise against the reference before it is timed. Beside each eager median (device
time, ``do_bench``) stands the host time per call (:func:`repro_studies.evidence.timing.host_us`: enqueueing one
launch), so eager costs compare across arms whatever their launch path. The narrowed-view and
contiguous-table arms run the same kernel binary (the row pitch is not specialised), so their
ratio isolates the cost of reading rows ``stride(0)`` apart. Arms are timed in alternating
rounds and the median of the rounds is kept, so drift does not favour one arm. Verdicts and
ratios are computed above, in :mod:`repro_studies.analysis.performance`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import partial

import torch

from repro.core.evidence.cases import compare_bitwise
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.geometry.layout import GATHER_WRITE_BYTES_PER_TOKEN
from repro.core.geometry.records import layout_for
from repro.coverage import SentinelMode
from repro_studies.evidence import timing
from repro_studies.kernels.records_reference import gather_reference
from repro_studies.registry import Arm, BlockTable


@dataclass(frozen=True)
class TimedArm:
    """An arm of the registry and the gather it times: a callable with vLLM's gather signature, the record it
    reads (``record``, ``interleaved``: :func:`repro.core.geometry.records.layout_for`; the bytes it moves per token
    follow, the record read and a 1,024-byte bf16 row written), and, for code that must run inside a scope (a
    vLLM release's imports), that scope: entered once around all of the arm's calls at a shape, so nothing of
    the harness runs between a timer's events and the launch."""

    arm: Arm
    fn: Callable[..., None]
    scope: Callable[[], AbstractContextManager] | None = None
    record: str = "v4"
    interleaved: bool = False

    def entered(self) -> AbstractContextManager:
        return self.scope() if self.scope is not None else nullcontext()

    @property
    def records(self) -> tuple[str, bool]:
        return self.record, self.interleaved and self.record != "v4"

    def bytes_per_token(self) -> int:
        """Bytes read plus bytes written per gathered token."""
        return layout_for(self.record, self.interleaved).token_bytes + GATHER_WRITE_BYTES_PER_TOKEN


@dataclass(frozen=True)
class ArmCheck:
    """The bitwise check of one arm at one shape, before timing."""

    arm: Arm
    num_reqs: int
    seq_len: int
    mismatched_tokens: int
    stray_writes: int
    tokens: int


def _table(scenario, contiguous_table: torch.Tensor, which: BlockTable) -> torch.Tensor:
    return scenario.block_table if which == BlockTable.NARROWED else contiguous_table


def run_perf(
    request_counts: Sequence[int],
    seq_lens: Sequence[int],
    block_size: int,
    arms: Sequence[TimedArm],
    on_check: Callable[[ArmCheck], None],
    on_median: Callable[[dict], None],
    rounds: int = 2,
    rep_ms: int = 50,
    progress: Callable[[int, int], None] | None = None,
    device: str = "cuda",
) -> None:
    """Time every arm at every (sequence length, request count); report rows as each shape finishes.

    Arms reading different records get scenarios of their own record (same shapes, same seeds)."""
    on_gpu = torch.device(device).type == "cuda"
    max_reqs = max(request_counts)
    kinds = sorted({t.records for t in arms})
    for L in seq_lens:
        for n in request_counts:
            tokens = n * L
            data = {}  # record kind -> (scenarios, contiguous tables, outputs, reference)
            for record, interleaved in kinds:
                spec = ScenarioSpec(
                    num_reqs=n,
                    block_size=block_size,
                    seq_len_max=L,
                    seq_lens=(L,) * n,
                    max_reqs=max_reqs,
                    device=device,
                    mode=SentinelMode.IN_RANGE,
                    record=record,
                    interleaved=interleaved,
                )
                per_token = layout_for(record, interleaved).token_bytes + GATHER_WRITE_BYTES_PER_TOKEN
                copies = timing.rotation_count(tokens * per_token)
                scenarios = [build_scenario(replace(spec, seed=k)) for k in range(copies)]
                ref = scenarios[0].fresh_out()
                gather_reference(layout_for(record, interleaved), *scenarios[0].args(ref))
                data[(record, interleaved)] = (
                    scenarios,
                    [s.block_table.contiguous() for s in scenarios],
                    [s.fresh_out() for s in scenarios],
                    ref,
                )
            # correctness first: every arm, bitwise, on the first copy of its record's scenarios
            for timed in arms:
                scenarios, contiguous, _, ref = data[timed.records]
                out = scenarios[0].fresh_out()
                with timed.entered():
                    timed.fn(*scenarios[0].args(out, _table(scenarios[0], contiguous[0], timed.arm.table)))
                if on_gpu:
                    torch.cuda.synchronize()
                mismatched, stray = compare_bitwise(out, ref, scenarios[0])
                on_check(ArmCheck(timed.arm, n, L, mismatched, stray, tokens))
            times: dict[Arm, dict[str, list[float]]] = {t.arm: {"eager": [], "graph": []} for t in arms}
            host: dict[Arm, float] = {}
            for k in range(rounds):
                for timed in arms:
                    scenarios, contiguous, outs, _ = data[timed.records]
                    s0, which = scenarios[0], timed.arm.table
                    eager = partial(timed.fn, *s0.args(outs[0], _table(s0, contiguous[0], which)))
                    calls = [
                        partial(timed.fn, *s.args(o, _table(s, c, which)))
                        for s, c, o in zip(scenarios, contiguous, outs)
                    ]
                    with timed.entered():
                        times[timed.arm]["eager"].append(timing.median_us(eager, rep_ms=rep_ms))
                        times[timed.arm]["graph"].append(timing.graph_median_us(calls, rep_ms=rep_ms))
                        if k == rounds - 1:
                            host[timed.arm] = timing.host_us(eager)
            for timed in arms:
                moved = tokens * timed.bytes_per_token()
                for mode in ("eager", "graph"):
                    us = statistics.median(times[timed.arm][mode])
                    on_median(
                        {
                            "arm": timed.arm.label,
                            "code": timed.arm.origin,
                            **timed.arm.fields(),
                            "launch": mode,
                            "num_reqs": n,
                            "seq_len": L,
                            "tokens": tokens,
                            "record": timed.record,
                            "rotation": len(data[timed.records][0]),
                            "median_us": round(us, 3),
                            "rounds_us": " ".join(f"{t:.2f}" for t in times[timed.arm][mode]),
                            "bandwidth_tbps": round(moved / (us * 1e-6) / 1e12, 4),
                            "host_us": round(host[timed.arm], 2) if mode == "eager" else None,
                        }
                    )
            if progress:
                progress(L, n)
            del data
            if on_gpu:
                torch.cuda.empty_cache()

"""vLLM's own gather test cases on contiguous tables: every variant must equal the reference.

``tests/kernels/test_compressor_kv_cache.py::test_dequantize_and_gather_k_cache`` uses
``(seq_lens, gather_lens, offset)`` = ``([9, 23, 7], None, 0)`` and ``([19, 8, 257], [6, 8, 129], 5)``
with block size 64 and a contiguous table pre-filled with ``int(-1e6)``. Here each case also runs
with padded blocks (production's 576-byte alignment), the writer kernel is checked byte for byte
over the whole sentinel-filled cache, and each gather over the whole poisoned output buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from repro.core.evidence.cases import (
    alias_of,
    buffer_identity,
    changed_inputs,
    compare_bitwise,
    input_snapshot,
    reference_output,
    repointed,
    warm_up,
)
from repro.core.evidence.scenarios import CACHE_FILL_BYTE, ScenarioSpec, build_scenario
from repro.core.evidence.watchdog import CaseTimeout, time_limit
from repro.core.evidence.worker import CaseWorker
from repro.core.geometry.layout import DSV4
from repro.core.kernels.own import kernel_of
from repro.core.kernels.reference import quantize_and_insert_reference
from repro.coverage import SentinelMode
from repro.outcomes import Outcome
from repro.registry import Implementation

VLLM_CASES = (((9, 23, 7), None, 0), ((19, 8, 257), (6, 8, 129), 5))
VLLM_BLOCK_SIZE = 64


def case_specs(device: str) -> list[tuple[str, ScenarioSpec]]:
    specs = []
    for seq_lens, gather_lens, offset in VLLM_CASES:
        for padded in (False, True):
            label = (
                f"seq_lens={list(seq_lens)} gather_lens={list(gather_lens) if gather_lens else None} "
                f"offset={offset} {'padded' if padded else 'unpadded'}"
            )
            specs.append(
                (
                    label,
                    ScenarioSpec(
                        num_reqs=len(seq_lens),
                        block_size=VLLM_BLOCK_SIZE,
                        mode=SentinelMode.POISON,
                        max_reqs=len(seq_lens),
                        offset=offset,
                        padded=padded,
                        device=device,
                        contiguous=True,
                        seq_lens=seq_lens,
                        gather_lens=gather_lens,
                    ),
                )
            )
    return specs


def writer_differences(spec: ScenarioSpec) -> tuple[int, int]:
    """The Triton writer against the reference writer over the whole sentinel-filled byte pool:
    (bytes that differ, bytes compared)."""
    from repro.core.kernels.writer import quantize_and_insert_k_cache  # lazy: a kernel, defined under the profile

    scenario = build_scenario(spec)
    B = spec.block_size
    lens = scenario.seq_lens.long()
    req = torch.repeat_interleave(torch.arange(spec.num_reqs, device=lens.device), lens)
    pos = torch.arange(req.shape[0], device=lens.device) - torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens)
    slots = scenario.block_table[req, pos // B].long() * B + pos % B
    gen = torch.Generator().manual_seed(spec.seed + 17)
    k = torch.randn(slots.shape[0], DSV4.head_dim, generator=gen).to(torch.bfloat16).to(lens.device)
    pools = []
    for write in (quantize_and_insert_k_cache, quantize_and_insert_reference):
        storage = torch.full_like(scenario.k_cache_storage, CACHE_FILL_BYTE)
        cache = torch.as_strided(
            storage, (scenario.k_cache.shape[0], DSV4.block_bytes(B)), (scenario.k_cache.stride(0), 1)
        )
        write(k, cache, slots, B)
        pools.append(storage)
    if pools[0].is_cuda:
        torch.cuda.synchronize()
    return int((pools[0] != pools[1]).sum()), pools[0].numel()


@dataclass(frozen=True)
class ContiguousObservation:
    """One implementation on one of vLLM's cases: tokens that differ, stray rows, whole buffer equal."""

    case: str
    num_reqs: int
    mismatched_tokens: int
    stray_writes: int
    whole_equal: bool
    total_tokens: int
    error: str = ""  # the implementation raised or ran past its time limit: nothing to compare
    changed_inputs: str = ""  # inputs the call changed (a gather writes only ``out``)
    out_repointed: str = ""  # how ``out`` stopped being the caller's buffer


def run_vllm_cases(
    device: str,
    implementations: Sequence[Implementation],
    on_writer: Callable[[str, int, int, int], None],
    on_gather: Callable[[Implementation, ContiguousObservation], None],
    timeout_s: float = 120.0,
    case_process: Callable[[Implementation], CaseWorker | None] = lambda entry: None,
) -> None:
    """Per case: the writer's byte differences, then every gather implementation's observation; one
    that raises or runs past ``timeout_s`` is observed with its error, and the cases go on. An implementation for
    which ``case_process`` gives a case process (the one under test) runs there and is judged here."""
    warm_up(device, False)
    for label, spec in case_specs(device):
        on_writer(label, spec.num_reqs, *writer_differences(spec))
        scenario = build_scenario(spec)
        ref = reference_output(scenario)
        for entry in implementations:
            worker = case_process(entry)
            seen = (label, spec.num_reqs)
            if worker is not None:
                r = worker.case(entry.target, scenario, ref)
                ran = r.status == Outcome.OK
                error = "" if ran else f"{r.status}: {r.error}"[:300]
                mismatched, stray = (r.mismatched_tokens, r.stray_writes) if ran else (-1, -1)
                whole = ran and mismatched == 0 and stray == 0
                got = (mismatched, stray, whole, scenario.total_tokens, error, r.changed_inputs, r.out_repointed)
                on_gather(entry, ContiguousObservation(*seen, *got))
                continue
            out = scenario.fresh_out()
            buffer, identity = alias_of(out), buffer_identity(out)  # read after the call, whatever became of out
            before = input_snapshot(scenario)
            try:
                fn = kernel_of(entry.target)
                with time_limit(timeout_s, f"{entry.target} on {label}"):
                    fn(*scenario.args(out))
                    if out.is_cuda:
                        torch.cuda.synchronize()
            except (Exception, SystemExit, CaseTimeout) as exc:  # a crashing case is an observation
                error = str(exc) if isinstance(exc, CaseTimeout) else f"{type(exc).__name__}: {exc}"
                if isinstance(exc, SystemExit):
                    error = f"SystemExit({exc.code!r}): the implementation tried to end the process"
                changed = ", ".join(changed_inputs(scenario, before))
                got = (-1, -1, False, scenario.total_tokens, error[:300], changed)
                on_gather(entry, ContiguousObservation(*seen, *got))
                continue
            changed = ", ".join(changed_inputs(scenario, before))
            mismatched, stray = compare_bitwise(buffer, ref, scenario)
            whole = bool(torch.equal(buffer.view(torch.int16), ref.view(torch.int16)))
            got = (mismatched, stray, whole, scenario.total_tokens, "", changed, repointed(identity, out))
            on_gather(entry, ContiguousObservation(*seen, *got))

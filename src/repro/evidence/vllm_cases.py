"""vLLM's own gather test cases on contiguous tables: every variant must equal the reference.

``tests/kernels/test_compressor_kv_cache.py::test_dequantize_and_gather_k_cache`` uses
``(seq_lens, gather_lens, offset)`` = ``([9, 23, 7], None, 0)`` and ``([19, 8, 257], [6, 8, 129], 5)``
with block size 64 and a contiguous table pre-filled with ``int(-1e6)``. Here each case also runs
with padded blocks (production's 576-byte alignment), the writer kernel is checked byte for byte
over the whole sentinel-filled cache, and each gather over the whole poisoned output buffer.
"""

from __future__ import annotations

import torch

from repro.evidence.cases import compare_bitwise, reference_output
from repro.registry import load_implementation
from repro.geometry.layout import DSV4
from repro.evidence.scenarios import CACHE_FILL_BYTE, ScenarioSpec, build_scenario
from repro.evidence.watchdog import CaseTimeout, time_limit

VLLM_CASES = (((9, 23, 7), None, 0), ((19, 8, 257), (6, 8, 129), 5))
VLLM_BLOCK_SIZE = 64


def case_specs(device: str) -> list[tuple[str, ScenarioSpec]]:
    specs = []
    for seq_lens, gather_lens, offset in VLLM_CASES:
        for padded in (False, True):
            label = f"seq_lens={list(seq_lens)} gather_lens={list(gather_lens) if gather_lens else None} " \
                    f"offset={offset} {'padded' if padded else 'unpadded'}"
            specs.append((label, ScenarioSpec(num_reqs=len(seq_lens), block_size=VLLM_BLOCK_SIZE, mode="poison",
                                              max_reqs=len(seq_lens), offset=offset, padded=padded,
                                              device=device, contiguous=True, seq_lens=seq_lens,
                                              gather_lens=gather_lens)))
    return specs


def writer_check(spec: ScenarioSpec) -> dict:
    """The Triton writer against the reference writer, over the whole sentinel-filled byte pool."""
    from repro.kernels.writer import quantize_and_insert_k_cache
    from repro.kernels.reference import quantize_and_insert_reference

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
        cache = torch.as_strided(storage, (scenario.k_cache.shape[0], DSV4.block_bytes(B)),
                                 (scenario.k_cache.stride(0), 1))
        write(k, cache, slots, B)
        pools.append(storage)
    if pools[0].is_cuda:
        torch.cuda.synchronize()
    differ = int((pools[0] != pools[1]).sum())
    return {"expected": "0 bytes differ", "observed": f"{differ}/{pools[0].numel()} bytes differ", "ok": differ == 0,
            "mismatched_bytes": differ, "total_bytes": pools[0].numel()}


def run_vllm_cases(device: str, implementations: dict[str, str], table, timeout_s: float = 120.0) -> None:
    """Append one writer row and one row per gather implementation for every case; an implementation
    that raises or runs past ``timeout_s`` is a failed row, never the end of the notebook."""
    for label, spec in case_specs(device):
        table.append({"check": "writer kernel equals the reference writer", "variant": "writer",
                      "num_reqs": spec.num_reqs, "case": label, **writer_check(spec)})
        scenario = build_scenario(spec)
        ref = reference_output(scenario)
        for variant, path in implementations.items():
            row = {"check": "gather equals the reference on a contiguous table", "variant": variant,
                   "num_reqs": spec.num_reqs, "case": label, "expected": "whole output buffer bitwise equal",
                   "mismatched_bytes": None, "total_bytes": None}
            out = scenario.fresh_out()
            try:
                with time_limit(timeout_s, f"{path} on {label}"):
                    load_implementation(path)(*scenario.args(out))
                    if out.is_cuda:
                        torch.cuda.synchronize()
            except CaseTimeout as exc:
                table.append({**row, "observed": f"timeout: {exc}"[:200], "ok": False})
                continue
            except Exception as exc:  # a crashing case is a result row
                table.append({**row, "observed": f"error: {type(exc).__name__}: {exc}"[:200], "ok": False})
                continue
            mismatched, stray = compare_bitwise(out, ref, scenario)
            whole = bool(torch.equal(out.view(torch.int16), ref.view(torch.int16)))
            table.append({**row, "observed": f"{mismatched}/{scenario.total_tokens} tokens differ, {stray} stray rows",
                          "ok": whole and mismatched == 0 and stray == 0})

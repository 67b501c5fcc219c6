"""Timing the V4.1 record gathers: device-filled narrowed scenarios, vLLM's patched V4.1 kernels as arms,
bitwise checks at every timed shape, CUDA-graph medians in alternating rounds.

Shared by notebook 03's V4.1 section (:mod:`repro_studies.walkthrough.records`) and the tuning run
(:mod:`repro_studies.evidence.v41_tuning`). A scenario for timing is filled on the device (any size in well under
a second); the ones for the checks come from :func:`repro.core.evidence.scenarios.build_scenario`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from repro.core.evidence.cases import compare_bitwise
from repro.core.evidence.scenarios import GatherScenario, ScenarioSpec, build_scenario
from repro.core.geometry.layout import FLASHMLA_ALIGNMENT, HEAD_DIM, ceil_div, round_up
from repro.core.geometry.records import RecordLayout, layout_for
from repro.coverage import SentinelMode
from repro.registry import Origin
from repro_studies.evidence import timing
from repro_studies.kernel_id import KernelFamily, KernelKind
from repro_studies.kernels.records_reference import NEGATIVE_ZERO_BITS, decoded_negative_zero
from repro_studies.registry import Form
from repro_studies.upstream.arms import make_callable
from repro_studies.upstream.cases import reference_for
from repro_studies.upstream.matrix import MatrixConfig, plan_release
from repro_studies.upstream.release_kernel import ReleaseUnavailable, origin_of

#: Which release's kernel reads each layout in the tuning run (the scales moved next to each token's data
#: in 0.33.0; 0.31.0 is the first with both V4.1 records).
RELEASE_FOR_LAYOUT = {True: "0.33.0", False: "0.31.0"}
KINDS = ("mxfp8", "nvfp4")
BF16_BYTES = 2
#: The name of a release's V4.1 kernel with PR #55109's row pitch, after its origin ("vLLM 0.33.0 patched").


def bytes_per_token(layout: RecordLayout) -> int:
    """Bytes a gather moves per token: the record read, 512 bf16 values written."""
    return layout.token_bytes + HEAD_DIM * BF16_BYTES


def layout_word(interleaved: bool) -> str:
    return "interleaved" if interleaved else "page-split"


# ---------------------------------------------------------------------------------------------
# Inputs


def random_pages(
    layout: RecordLayout, k_cache: torch.Tensor, block_size: int, gen: torch.Generator, valid: bool
) -> None:
    """Fill every page with random bytes; ``valid`` keeps the records finite (no fp8 NaN codes, positive
    normal scales, UE8M0 scales 2**-15..2**15), otherwise any byte goes (every code, NaNs included)."""
    from repro_studies.kernels.records_reference import (
        pages_as_bytes,  # lazy: torch-side helper beside Triton kernels of its package; loaded when pages are drawn
    )

    pages = pages_as_bytes(k_cache, layout, block_size)
    dev = k_cache.device
    pages.copy_(torch.randint(0, 256, pages.shape, generator=gen, device=dev, dtype=torch.int32).to(torch.uint8))
    if not valid:
        return
    at = torch.arange(layout.page_bytes(block_size), device=dev)
    if layout.interleaved:
        is_scale = at % layout.token_bytes >= layout.data_bytes
    else:
        is_scale = at >= block_size * layout.data_bytes
    n_scale = int(is_scale.sum())
    if layout.kind == "mxfp8":
        data = pages[:, ~is_scale]
        pages[:, ~is_scale] = torch.where((data & 0x7F) == 0x7F, data - 1, data)  # 0x7F/0xFF -> 0x7E/0xFE
        low, high = 112, 143
    else:
        low, high = 0x08, 0x7F  # e4m3 exponent field 1..15, sign 0, not 0x7F (NaN)
    scales = torch.randint(low, high, (pages.shape[0], n_scale), generator=gen, device=dev, dtype=torch.int32)
    pages[:, is_scale] = scales.to(torch.uint8)


def timing_scenario(
    kind: str, interleaved: bool, num_reqs: int, seq_len: int, block_size: int, seed: int, device: str
) -> GatherScenario:
    """A column-narrowed scenario of ``num_reqs`` x ``seq_len`` tokens filled on the device (fast at any size):
    the table is ``backing[:n, :w]`` of a ``[max(n, 2), 2w]`` backing, blocks permuted, unused entries decoys."""
    spec = ScenarioSpec(
        num_reqs=num_reqs,
        block_size=block_size,
        seq_len_max=seq_len,
        seq_lens=(seq_len,) * num_reqs,
        max_reqs=max(num_reqs, 2),
        device=device,
        record=kind,
        interleaved=interleaved,
        seed=seed,
    )
    gen = torch.Generator(device=device).manual_seed(seed)
    w = ceil_div(seq_len, block_size)
    owned, decoys = num_reqs * w, 8
    num_blocks = owned + decoys
    backing = torch.randint(owned, num_blocks, (spec.max_reqs, 2 * w), generator=gen, device=device, dtype=torch.int32)
    backing[:num_reqs, :w] = torch.randperm(owned, generator=gen, device=device).to(torch.int32).view(num_reqs, w)
    layout = spec.layout
    stride = round_up(layout.page_bytes(block_size), FLASHMLA_ALIGNMENT)
    storage = torch.empty(num_blocks * stride, dtype=torch.uint8, device=device)
    k_cache = torch.as_strided(storage, (num_blocks, block_size, layout.token_bytes), (stride, layout.token_bytes, 1))
    random_pages(layout, k_cache, block_size, gen, valid=True)
    return GatherScenario(
        spec=spec,
        seq_lens=torch.full((num_reqs,), seq_len, dtype=torch.int32, device=device),
        gather_lens=None,
        backing=backing,
        block_table=backing[:num_reqs, :w],
        k_cache=k_cache,
        k_cache_storage=storage,
        decoy_ids=torch.arange(owned, num_blocks, dtype=torch.int32, device=device),
    )


def check_scenario(kind: str, interleaved: bool, device: str, tiny: bool) -> GatherScenario:
    """Ragged requests on a narrowed table with ``gather_lens`` (a window) and an output ``offset``."""
    spec = ScenarioSpec(
        num_reqs=3 if tiny else 6,
        block_size=8 if tiny else 16,
        seq_len_max=48 if tiny else 300,
        max_reqs=4 if tiny else 8,
        window=40 if tiny else 200,
        offset=3,
        device=device,
        record=kind,
        interleaved=interleaved,
        seed=7,
    )
    return build_scenario(spec)


# ---------------------------------------------------------------------------------------------
# The arms


@dataclass
class Candidate:
    """One timed gather: its record and layout, its name in tables, whose code it is, the callable."""

    kind: str
    interleaved: bool
    name: str  # a registry label, a tuning variant key, or "<origin> patched"
    code: str  # who wrote it: the registry's Origin.REPO or "vLLM <version>" read from the wheel
    fn: Callable[..., None]
    settings: dict
    upstream: bool = False  # a release's kernel (what the others are compared with)
    negative_zero: bool = False  # NVFP4: decodes e2m1 code 8 to -0 (read from one token it decoded)


def ours(kind: str, interleaved: bool, name: str, settings: dict) -> Candidate:
    """:func:`repro_studies.kernels.fast_v41.gather_v41_with` with ``settings`` (none: its defaults)."""
    from repro_studies.kernels import (
        fast_v41,  # lazy: defines Triton kernels, which must follow the profile's TRITON_INTERPRET
    )

    fn = partial(fast_v41.gather_v41_with, interleaved=interleaved, **settings)
    return Candidate(kind, interleaved, name, Origin.REPO, fn, settings)


def load_release_gather(
    release: str, kind: str, device: str, download: bool, interleaved: bool | None = None
) -> tuple[Candidate | None, str]:
    """vLLM ``release``'s V4.1 Triton gather of ``kind`` with PR #55109's row pitch (the repository's patcher),
    called through the release's own wrapper (``has_cutedsl()`` false), or (None, why not). ``interleaved``
    (when given) is the layout the caller needs; the release's own is read from its kernel."""

    interpreted = device == "cpu"
    cfg = MatrixConfig(
        [1],
        [SentinelMode.IN_RANGE],
        device=device,
        interpreted=interpreted,
        variants=(Form.PATCHED,),
        download=download,
    )
    plan = plan_release(release, cfg)
    if plan.entry is None:
        return None, f"vLLM {release}: {plan.miss.status}: {plan.miss.reason}"
    arm = next(
        (
            a
            for a in plan.arms
            if a.id.family == KernelFamily.V41 and a.id.kind == KernelKind.TRITON and a.record == kind
        ),
        None,
    )
    if arm is None:
        return None, f"vLLM {release} ships no V4.1 {kind} Triton gather"
    if interleaved is not None and arm.interleaved != interleaved:
        return None, f"vLLM {release}'s {kind} gather reads {layout_word(arm.interleaved)} pages"
    try:
        origin = origin_of(plan.entry)
    except ReleaseUnavailable as exc:
        return None, str(exc)
    if isinstance(plan.rewrites.get((arm.module, Form.PATCHED)), str):
        return None, f"vLLM {release}: {plan.rewrites[(arm.module, Form.PATCHED)]}"
    try:
        fn = make_callable(arm, interpreted)
    except Exception as exc:
        return None, f"vLLM {release}: could not load {arm.kernel}: {type(exc).__name__}: {exc}"[:300]
    name = f"{origin} {Form.PATCHED}"
    negative = False
    if kind == "nvfp4":
        try:
            negative = decoded_negative_zero(fn, arm.interleaved, device) is True
        except Exception:  # the checks that follow run the kernel again and record what it raises
            negative = False
    cand = Candidate(kind, arm.interleaved, name, origin, fn, {"kernel": arm.kernel}, upstream=True)
    cand.negative_zero = negative
    return cand, ""


# ---------------------------------------------------------------------------------------------
# Checks and timing


def run_out(c: Candidate, scenario: GatherScenario) -> torch.Tensor:
    """The candidate's output on a fresh poisoned buffer."""
    out = scenario.fresh_out()
    c.fn(*scenario.args(out))
    if out.is_cuda:
        torch.cuda.synchronize()
    return out


def bitwise_rows(
    scenario: GatherScenario,
    cands: list[Candidate],
    vllm_out: torch.Tensor | None,
    ref: torch.Tensor | None,
    check: str,
    vllm_negative_zero: bool = False,
) -> list[dict]:
    """Each candidate's output against the reference decoder (``ref``, NVFP4's code 8 as +0; a candidate that
    decodes it to -0 is compared with the reference that does too) and a release's output (``vllm_out``, whose
    code 8 is -0 when ``vllm_negative_zero``; where the two decode it with opposite signs, bf16's -0 is read as +0
    in both and the row says so), bitwise: one row per comparison; a candidate that raises is a row with the
    error."""
    rows = []
    for c in cands:
        row = {"check": check, "kind": c.kind, "layout": layout_word(c.interleaved), "arm": c.name, "code": c.code}
        total = scenario.total_tokens
        try:
            out = run_out(c, scenario)
        except Exception as exc:  # a variant that does not compile or launch is a row, not the end of the run
            rows.append(
                {**row, "against": "", "mismatched": -1, "stray": -1, "tokens": total, "error": repr(exc)[:300]}
            )
            continue
        if ref is not None:
            want, note = ref, ""
            if c.negative_zero:
                want, note = reference_for(scenario, negative_zero=True), "e2m1 code 8 decoded as -0"
            bad, stray = compare_bitwise(out, want, scenario)
            rows.append(
                {**row, "against": "reference decoder", "mismatched": bad, "stray": stray, "tokens": total}
                | ({"note": note} if note else {})
            )
        if vllm_out is not None and not c.upstream:
            mine, theirs, note = out, vllm_out, ""
            if c.negative_zero != vllm_negative_zero:
                mine, theirs = positive_zero(out), positive_zero(vllm_out)
                note = "bf16 -0 read as +0: the two decode e2m1 code 8 with opposite signs"
            bad, stray = compare_bitwise(mine, theirs, scenario)
            rows.append(
                {**row, "against": "vLLM patched", "mismatched": bad, "stray": stray, "tokens": total}
                | ({"note": note} if note else {})
            )
    return rows


def positive_zero(out: torch.Tensor) -> torch.Tensor:
    """``out`` with every bf16 -0 turned into +0 (nothing else changes)."""
    bits = out.view(torch.int16)
    return torch.where(bits == NEGATIVE_ZERO_BITS, torch.zeros_like(bits), bits).view(torch.bfloat16)


def graph_us(calls: list[Callable[[], None]], rep_ms: int) -> float:

    return timing.graph_median_us(calls, rep_ms=rep_ms)


def wall_us(calls: list[Callable[[], None]], rep_ms: int) -> float:
    """CPU smoke runs: one call's wall time (the interpreter's time says nothing about a GPU)."""
    start = time.perf_counter()
    calls[0]()
    return (time.perf_counter() - start) * 1e6


def copy_rate_tbps(device: str) -> float | None:
    if device == "cpu":
        return None

    return timing.copy_ceiling().tbps


@dataclass
class Shape:
    kind: str
    interleaved: bool
    num_reqs: int
    seq_len: int


def time_shape(
    shape: Shape,
    cands: list[Candidate],
    block_size: int,
    device: str,
    rounds: int,
    rep_ms: int,
    checks: list[dict],
    timings: list[dict],
) -> None:
    """Build rotated inputs, check every candidate bitwise against vLLM's output (and the reference on the
    first copy), then time them in alternating rounds."""

    layout = layout_for(shape.kind, shape.interleaved)
    tokens = shape.num_reqs * shape.seq_len
    moved = tokens * bytes_per_token(layout)
    copies = 1
    if device != "cpu":
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        copies = max(1, min(32, ceil_div(2 * l2, moved)))
    scenarios = [
        timing_scenario(shape.kind, shape.interleaved, shape.num_reqs, shape.seq_len, block_size, k, device)
        for k in range(copies)
    ]
    outs = [s.fresh_out() for s in scenarios]
    ref = reference_for(scenarios[0])
    base = {"kind": shape.kind, "layout": layout_word(shape.interleaved), "num_reqs": shape.num_reqs}
    vllm = next((c for c in cands if c.upstream), None)
    vllm_out = None
    if vllm is not None:
        try:
            vllm_out = run_out(vllm, scenarios[0])
        except Exception as exc:
            checks.append(
                {
                    **base,
                    "check": "vLLM runs",
                    "arm": vllm.name,
                    "mismatched": -1,
                    "stray": -1,
                    "error": repr(exc)[:300],
                }
            )
            cands = [c for c in cands if c is not vllm]
    shown = f"timed shape {shape.num_reqs}x{shape.seq_len}"
    signed = vllm is not None and vllm.negative_zero
    rows = bitwise_rows(scenarios[0], cands, vllm_out, ref, shown, vllm_negative_zero=signed)
    checks += rows
    broken = {r["arm"] for r in rows if r.get("error")}
    wrong = {r["arm"] for r in rows if r["mismatched"] or r["stray"]}
    cands = [c for c in cands if c.name not in broken]
    timer = wall_us if device == "cpu" else graph_us
    samples: dict[str, list[float]] = {c.name: [] for c in cands}
    for _ in range(rounds):
        for c in cands:
            calls = [partial(c.fn, *s.args(o)) for s, o in zip(scenarios, outs)]
            try:
                samples[c.name].append(timer(calls, rep_ms))
            except Exception as exc:
                checks.append(
                    {**base, "check": "timing", "arm": c.name, "mismatched": -1, "stray": -1, "error": repr(exc)[:300]}
                )
    for c in cands:
        if not samples[c.name]:
            continue
        us = statistics.median(samples[c.name])
        timings.append(
            {
                **base,
                "seq_len": shape.seq_len,
                "tokens": tokens,
                "arm": c.name,
                "code": c.code,
                "upstream": c.upstream,
                "settings": " ".join(f"{k}={v}" for k, v in c.settings.items()),
                "bitwise_ok": c.name not in wrong,
                "rotation": copies,
                "median_us": round(us, 2),
                "rounds_us": " ".join(f"{t:.2f}" for t in samples[c.name]),
                "bytes_moved": moved,
            }
        )
    del scenarios, outs, ref, vllm_out
    if device != "cpu":
        torch.cuda.empty_cache()

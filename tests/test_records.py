"""The V4.1 record references, bit for bit, against decoders written from the formats' definitions."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.core.geometry import records
from repro.core.geometry.layout import HEAD_DIM
from repro_studies import records as v41
from repro_studies.kernels import records_reference as rr


def e4m3(code: int) -> float:
    """OCP fp8 e4m3fn from its bits: sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7F/0xFF are NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    exp, man = (code >> 3) & 0xF, code & 7
    if exp == 0xF and man == 7:
        return math.nan
    if exp == 0:
        return sign * man / 8 * 2.0**-6
    return sign * (1 + man / 8) * 2.0 ** (exp - 7)


def e2m1(code: int) -> float:
    """fp4 e2m1 from its bits: sign bit 3, 2 exponent bits (bias 1), 1 mantissa bit."""
    exp, man = (code >> 1) & 3, code & 1
    mag = man * 0.5 if exp == 0 else (1 + man / 2) * 2.0 ** (exp - 1)
    return -mag if code & 8 else mag


def bf16_bits(values) -> list[int]:
    return torch.tensor(values, dtype=torch.float64).to(torch.float32).to(torch.bfloat16).view(torch.int16).tolist()


def test_layouts_match_the_byte_counts_of_the_formats():
    assert (records.V4.token_bytes, v41.MXFP8.token_bytes, v41.NVFP4.token_bytes) == (584, 528, 288)
    assert v41.MXFP8.n_scales * v41.MXFP8.quant_block == HEAD_DIM
    assert v41.NVFP4.n_scales * v41.NVFP4.quant_block == HEAD_DIM == 2 * v41.NVFP4.data_bytes
    assert v41.MXFP8.scale_offset(16, 3) == 3 * 528 + 512
    assert v41.MXFP8_PAGE_SPLIT.scale_offset(16, 3) == 16 * 512 + 3 * 16
    with pytest.raises(ValueError, match=r"^record: "):
        records.layout_for("fp16")


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=512, max_size=512), st.lists(st.integers(100, 150), min_size=16, max_size=16))
def test_mxfp8_decode_is_bitwise_the_format(data, scales):
    codes = [c for c in data]
    codes = [c if (c & 0x7F) != 0x7F else 0 for c in codes]  # NaN codes are not valid records
    got = rr.decode_mxfp8(torch.tensor([codes], dtype=torch.uint8), torch.tensor([scales], dtype=torch.uint8))
    want = bf16_bits([e4m3(c) * 2.0 ** (scales[i // 32] - 127) for i, c in enumerate(codes)])
    assert got.view(torch.int16)[0].tolist() == want


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=256, max_size=256), st.lists(st.integers(0x08, 0x7E), min_size=32, max_size=32))
def test_nvfp4_decode_is_bitwise_the_format_low_nibble_first(data, scales):
    packed = torch.tensor([list(data)], dtype=torch.uint8)
    sc = torch.tensor([scales], dtype=torch.uint8)
    elems = [n for b in data for n in (b & 0xF, b >> 4)]
    signed = rr.decode_nvfp4(packed, sc, signed_zero=True).view(torch.int16)[0].tolist()
    assert signed == bf16_bits([e2m1(c) * e4m3(scales[i // 16]) for i, c in enumerate(elems)])
    kernel_like = rr.decode_nvfp4(packed, sc).view(torch.int16)[0].tolist()
    plus_zero = [0 if c == 8 else b for c, b in zip(elems, signed)]  # -0 (code 8) comes out +0, as 0 - 0 does
    assert kernel_like == plus_zero


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(-20, 20))
def test_mxfp8_writer_picks_the_smallest_power_of_two_scale_and_round_trips(seed, shift):
    gen = torch.Generator().manual_seed(seed)
    k = (torch.randn(3, 512, generator=gen) * 2.0**shift).to(torch.bfloat16)
    data, scales = rr.encode_mxfp8(k)
    amax = k.float().reshape(3, 16, 32).abs().amax(-1).clamp(min=1e-4)
    e = scales.float() - 127
    assert torch.all(amax <= 448 * torch.exp2(e)) and torch.all(amax > 448 * torch.exp2(e - 1) * (1 - 2**-20))
    back = rr.decode_mxfp8(data, scales).float()
    # fp8 e4m3 keeps 3 mantissa bits (relative error <= 2**-4); its subnormal step is 2**-9 of the scale.
    tol = k.float().abs() * 2.0**-4 + torch.exp2(e - 10).repeat_interleave(32, 1)
    assert torch.all((back - k.float()).abs() <= tol)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("kind", ["mxfp8", "nvfp4"])
def test_write_then_read_puts_records_where_the_layout_says(kind, interleaved):
    layout = records.layout_for(kind, interleaved)
    B, pages = 4, 3
    cache = torch.zeros(pages, B, layout.token_bytes, dtype=torch.uint8)
    slots = torch.tensor([5, 0, 11])
    data = torch.randint(0, 256, (3, layout.data_bytes), dtype=torch.uint8)
    scales = torch.randint(0, 256, (3, layout.scale_bytes), dtype=torch.uint8)
    flat = rr.pages_as_bytes(cache, layout, B)
    rr.write_tokens(flat, layout, B, slots, data, scales)
    for n, slot in enumerate(slots.tolist()):
        page, p = divmod(slot, B)
        at = layout.data_offset(B, p)
        assert torch.equal(flat[page, at : at + layout.data_bytes], data[n])
        at = layout.scale_offset(B, p)
        assert torch.equal(flat[page, at : at + layout.scale_bytes], scales[n])
    got_d, got_s = rr.read_tokens(flat, layout, B, slots // B, slots % B)
    assert torch.equal(got_d, data) and torch.equal(got_s, scales)


@pytest.mark.parametrize("record", ["v4", "mxfp8", "nvfp4"])
def test_scenarios_fill_every_page_with_valid_records_and_the_reference_gathers_them(record):
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    sc = build_scenario(
        ScenarioSpec(
            num_reqs=2, block_size=8, seq_len_max=20, max_reqs=2, record=record, interleaved=True, contiguous=True
        )
    )
    assert sc.k_cache.shape[-1] == records.layout_for(record, True).token_bytes
    out = sc.fresh_out()
    rr.gather_reference(sc.spec.layout, out, *sc.args(out)[1:])
    rows = torch.cat([out[r, : int(n)] for r, n in enumerate(sc.seq_lens.tolist())])
    assert torch.isfinite(rows.float()).all()
    assert (out.view(torch.int16)[0, int(sc.seq_lens[0]) :] == 0x7FA5).all()  # nothing past the gather


def gather_deciding_zero(sign: int | None):
    """A gather with vLLM's signature: the reference, with code 8 as -0 (sign -1), +0 (sign 1) or 1.0 (None)."""

    def fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
        layout = records.layout_for("nvfp4", True)
        rr.gather_reference(
            layout, out, k_cache, seq_lens, gather_lens, block_table, block_size, offset, negative_zero=sign == -1
        )
        if sign is None:
            out[0, 0, 16] = 1.0  # element 16 is byte 8's low nibble: code 8 in the probe

    return fn


@pytest.mark.parametrize("sign, found", [(-1, True), (1, False), (None, None)])
def test_the_probe_reads_how_a_gather_decodes_nvfp4s_negative_zero(sign, found):
    assert rr.decoded_negative_zero(gather_deciding_zero(sign), interleaved=True) is found


def test_a_reference_with_negative_zero_differs_from_the_plus_zero_one_exactly_at_code_8():
    layout = records.layout_for("nvfp4", True)
    k_cache = torch.zeros((1, 16, layout.token_bytes), dtype=torch.uint8)
    gen = torch.Generator().manual_seed(3)
    rr.fill_records(layout, k_cache, torch.arange(16), 16, gen)
    args = (k_cache, torch.tensor([16], dtype=torch.int32), None, torch.zeros((1, 1), dtype=torch.int32), 16, 0)
    plus, minus = (torch.zeros((1, 16, HEAD_DIM), dtype=torch.bfloat16) for _ in range(2))
    rr.gather_reference(layout, plus, *args)
    rr.gather_reference(layout, minus, *args, negative_zero=True)
    data, _ = rr.read_tokens(rr.pages_as_bytes(k_cache, layout, 16), layout, 16, torch.zeros(16), torch.arange(16))
    code8 = rr.nvfp4_codes(data) == 8
    differs = plus.view(torch.int16)[0] != minus.view(torch.int16)[0]
    assert code8.any() and torch.equal(differs, code8)
    assert (minus.view(torch.int16)[0][code8] == rr.NEGATIVE_ZERO_BITS).all()

"""The streaming ceiling kernels in Triton's interpreter, bitwise against their PyTorch references.

The stream kernel must compute exactly what the gather computes for the same tokens (checked
against the gather's own reference on a one-block cache), the read kernel must depend on every
byte it is meant to read, and the write kernel must write every byte of every row and nothing else.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import pytest
import torch

from repro.core.geometry.layout import DSV4
from repro.core.kernels.launch import is_interpreted
from repro.core.kernels.reference import dequantize_and_gather_reference
from repro_studies.kernels import stream as S
from repro_studies.kernels.settings import TileSettings


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


# (tokens, plan, block_t): the interpreter shape, and the GPU grid shape with ragged last tiles.
SHAPES = [(1, None, 8), (37, None, 8), (300, None, 8), (37, "grid", 8), (70, "grid", 32)]


def test_kernels_are_interpreted():
    assert all(is_interpreted(k) for k in (S._stream_dequant_kernel, S._stream_read_kernel, S._stream_write_kernel))


@pytest.mark.parametrize("layout", S.LAYOUTS)
@pytest.mark.parametrize("tokens,plan,block_t", SHAPES)
def test_stream_dequant_is_bitwise_the_reference(layout, tokens, plan, block_t):
    inp = S.make_stream_input(tokens, layout, seed=tokens)
    out = inp.fresh_out()
    launch = S.stream_dequant(inp, out, plan=plan, block_t=block_t)
    assert launch.grid[0] * launch.tokens_per_program >= tokens
    assert torch.equal(bits(out), bits(S.stream_reference(inp)))


@pytest.mark.parametrize("layout", S.LAYOUTS)
@pytest.mark.parametrize(
    "kw",
    [
        {"tile": TileSettings(tile="lanes"), "block_t": 4},
        {"tile": TileSettings(tile="lanes", overread=True), "block_t": 8},
        {"tile": TileSettings(tile="wide"), "block_t": 4},
        {"tile": TileSettings(store_cache=".cs", load_evict=""), "block_t": 8},
        {"tile": TileSettings(tile="lanes"), "block_t": 4, "tiles_per_program": 4, "prefetch": True},
        {"tile": TileSettings(overread=True), "block_t": 8, "tiles_per_program": 2, "num_stages": 2},
    ],
    ids=["lanes", "lanes-overread", "wide", "grouped-hints", "lanes-prefetch", "grouped-staged"],
)
def test_every_tile_and_loop_is_bitwise_the_reference(layout, kw):
    inp = S.make_stream_input(37, layout, seed=3)
    out = inp.fresh_out()
    S.stream_dequant(inp, out, plan="grid", **kw)
    assert torch.equal(bits(out), bits(S.stream_reference(inp)))


@pytest.mark.parametrize("tokens,block_t", [(37, 8), (64, 16), (3, 4)])
def test_the_byte_mover_writes_each_programs_record_words_then_zeros(tokens, block_t):
    inp = S.make_stream_input(tokens, "records", seed=tokens)
    out = inp.fresh_out()
    launch = S.stream_move(inp, out, block_t=block_t)
    ref = S.move_reference(inp, launch)
    assert torch.equal(bits(out), bits(ref))
    first = min(tokens, block_t) * 146  # the first program's record words come first, as they were
    assert torch.equal(ref.view(torch.int32).reshape(-1)[:first], inp.buffer.view(torch.int32)[:first])
    with pytest.raises(ValueError, match="records"):
        S.stream_move(S.make_stream_input(4, "split"), inp.fresh_out()[:4])


@pytest.mark.parametrize("tokens,block_t", [(37, 8), (3, 4)])
def test_the_byte_mover_reading_a_whole_row_per_token_is_a_copy(tokens, block_t):
    src = torch.randint(0, 256, (tokens * 1024,), dtype=torch.uint8)
    out = S.make_stream_input(tokens, "records").fresh_out()
    S.move_words(src, out, tokens, 1024, block_t=block_t)
    assert torch.equal(out.view(torch.uint8).reshape(-1), src)


@pytest.mark.parametrize("read_bytes", [0, 6, 1028])
def test_the_byte_mover_refuses_what_it_cannot_read(read_bytes):
    out = S.make_stream_input(4, "records").fresh_out()
    with pytest.raises(ValueError, match=r"read_bytes must be a multiple of 4 in 4\.\.1024"):
        S.move_words(torch.zeros(8192, dtype=torch.uint8), out, 4, read_bytes)
    with pytest.raises(ValueError, match="src must hold"):
        S.move_words(torch.zeros(100, dtype=torch.uint8), out, 4, 584)


def test_prefetch_needs_the_lanes_tile():
    inp = S.make_stream_input(8, "split")
    with pytest.raises(ValueError, match="prefetch needs a 'lanes' tile"):
        S.stream_dequant(inp, inp.fresh_out(), tiles_per_program=2, prefetch=True)


@pytest.mark.parametrize("tokens", [5, 130])
def test_stream_reference_is_the_gathers_reference_on_one_block(tokens):
    """The split layout is one cache block of N tokens: the gather's reference must agree."""
    inp = S.make_stream_input(tokens, "split", seed=1)
    rec = DSV4.token_bytes
    cache = torch.as_strided(inp.buffer, (1, tokens, rec), (tokens * rec, rec, 1))
    out = torch.zeros(1, tokens, DSV4.head_dim, dtype=torch.bfloat16)
    dequantize_and_gather_reference(
        out, cache, torch.tensor([tokens], dtype=torch.int32), None, torch.zeros(1, 1, dtype=torch.int32), tokens, 0
    )
    assert torch.equal(bits(out[0]), bits(S.stream_reference(inp)))


def test_layouts_hold_the_same_tokens():
    a, b = (S.make_stream_input(50, layout, seed=7) for layout in S.LAYOUTS)
    assert not torch.equal(a.buffer, b.buffer)  # the bytes are arranged differently ...
    assert torch.equal(bits(S.stream_reference(a)), bits(S.stream_reference(b)))  # ... and decode the same
    da, sa = a.rows()
    db, sb = b.rows()
    assert torch.equal(da, db) and torch.equal(sa, sb)


def test_reference_decodes_known_values():
    """One hand-built record: fp8 0x38 = 1.0, scale byte 128 = x2, RoPE = 3.0 (bf16 0x4040)."""
    inp = S.layout_views(torch.zeros(DSV4.token_bytes, dtype=torch.uint8), 1, "records")
    data, scales = inp.rows()
    data[0, : DSV4.fp8_bytes] = 0x38
    scales[0, : DSV4.n_scales] = 128
    data[0, DSV4.fp8_bytes :].view(torch.int16)[:] = 0x4040
    ref = S.stream_reference(inp)
    assert (ref[0, : DSV4.nope_dim] == 2.0).all() and (ref[0, DSV4.nope_dim :] == 3.0).all()
    out = inp.fresh_out()
    S.stream_dequant(inp, out)
    assert torch.equal(bits(out), bits(ref))


@pytest.mark.parametrize("layout", S.LAYOUTS)
@pytest.mark.parametrize("tokens,plan,block_t", SHAPES)
def test_stream_read_sums_every_byte(layout, tokens, plan, block_t):
    inp = S.make_stream_input(tokens, layout, seed=2)
    launch, sums = S.stream_read(inp, plan=plan, block_t=block_t)
    assert torch.equal(sums, S.read_reference(inp, launch))


@pytest.mark.parametrize(
    "part,column,delta",
    [
        ("fp8", 0, 1),
        ("fp8", DSV4.fp8_bytes - 1, 1),
        ("rope", DSV4.fp8_bytes, 1),
        ("scale", DSV4.n_scales - 1, 1),
        ("scale", DSV4.scale_bytes - 1, 1),
    ],
)
def test_stream_read_depends_on_each_part_of_the_record(part, column, delta):
    """Raising one byte of the last token changes its program's sum by exactly that much."""
    inp = S.make_stream_input(21, "records", seed=4)
    data, scales = inp.rows()
    launch, before = S.stream_read(inp, plan="grid", block_t=8)
    target = scales if part == "scale" else data
    target[20, column] = 0
    _, zeroed = S.stream_read(inp, plan="grid", block_t=8)
    target[20, column] = delta
    _, after = S.stream_read(inp, plan="grid", block_t=8)
    assert int(after[-1]) - int(zeroed[-1]) == delta  # the last program sees the byte
    assert torch.equal(after[:-1], before[:-1])  # other programs do not
    assert torch.equal(after, S.read_reference(inp, launch))


def test_read_sums_do_not_overflow():
    """1,100 tokens of 0x7F bytes sum past 2**31 in one program: int64 sums hold it exactly."""
    n = 1100
    inp = S.layout_views(torch.full((n * DSV4.token_bytes,), 0x7F, dtype=torch.uint8), n, "records")
    per_token = DSV4.fp8_bytes * 0x7F + DSV4.scale_bytes * 0x7F + DSV4.rope_dim * 0x7F7F
    assert n * per_token > 2**31 - 1
    expected = n * per_token
    launch, sums = S.stream_read(inp, plan="per-program")
    assert S.read_reference(inp, launch).tolist() == [expected]
    assert sums.tolist() == [expected]


@pytest.mark.parametrize("tokens,plan,block_t", SHAPES)
def test_stream_write_writes_every_row(tokens, plan, block_t):
    out = torch.full((tokens, DSV4.head_dim), -1, dtype=torch.int16).view(torch.bfloat16)
    S.stream_write(out, plan=plan, block_t=block_t)
    assert torch.equal(bits(out), bits(S.write_reference(tokens)))


def test_write_pattern_is_not_constant():
    ref = bits(S.write_reference(3))
    assert ref[:, 0].tolist() == [0, 1, 2] and (ref == ref[:, :1]).all()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(layout="rows"), "layout must be one of"),
        (dict(num_tokens=0), "num_tokens must be a positive int"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        S.make_stream_input(**{"num_tokens": 4, **kwargs})


def test_bad_launch_settings_name_the_parameter():
    inp = S.make_stream_input(4)
    with pytest.raises(ValueError, match="block_t must be a power of two"):
        S.stream_dequant(inp, inp.fresh_out(), block_t=6)
    with pytest.raises(ValueError, match="num_warps must be a power of two"):
        S.stream_read(inp, num_warps=3)
    with pytest.raises(ValueError, match="out must be a contiguous bf16 tensor of shape"):
        S.stream_dequant(inp, torch.zeros(4, 512))
    with pytest.raises(ValueError, match="sums must be int64"):
        S.stream_read(inp, torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="buffer must be a 1-D uint8 tensor"):
        S.layout_views(torch.zeros(10, dtype=torch.uint8), 1, "split")

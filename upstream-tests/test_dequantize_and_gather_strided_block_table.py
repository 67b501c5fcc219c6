# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Dequantize-and-gather of the DeepSeek-V4 / V4.1 K cache through a block table
that is a column-narrowed view of a wider one (vllm-project/vllm#55109).

``backing[:num_reqs, :width]`` keeps the backing table's ``stride(0)``. A gather
that steps from one request's row to the next by ``block_table.shape[-1]`` reads
the wrong block ids for every request after the first: another row's ids (a
stale table) or ids far outside the cache (the ``int(-1e6)`` padding).

Every case gathers through the narrowed view into a sentinel-filled buffer and
compares it bitwise, sentinel rows included, with the expected buffer: a
PyTorch reference for the 584-byte record (whose page layout every release
shares), and for the V4.1 records (whose page layouts changed between releases;
their decoding is covered by the round-trip tests of test_compressor_kv_cache.py)
the same call through ``view.contiguous()``.

Both the dispatcher ``dequantize_and_gather_k_cache`` and the Triton entry points
are called: on NVIDIA GPUs with the CuTe DSL the dispatcher takes the CuTe-DSL
gather, so only the direct calls test the Triton kernels there.

``DSV4_GATHER_TEST_SIZES=small`` selects a few small cases, through the
dispatcher only, for Triton's CPU interpreter (``TRITON_INTERPRET=1``); the
default is ``full``.
"""

import importlib
import os
from types import ModuleType

import pytest
import torch

SIZES = os.environ.get("DSV4_GATHER_TEST_SIZES", "full")
if SIZES not in ("full", "small"):
    raise ValueError(f"DSV4_GATHER_TEST_SIZES={SIZES!r}; accepted: full, small")
SMALL = SIZES == "small"

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(
    DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a CUDA device or Triton's interpreter (TRITON_INTERPRET=1)",
)

# Where each release keeps the modules (deepseek_v4_ops before 0.22).
V4_MODULES = (
    "vllm.models.deepseek_v4.common.ops.cache_utils",
    "vllm.v1.attention.ops.deepseek_v4_ops.cache_utils",
)
V41_MODULES = ("vllm.models.deepseek_v41.common.ops.cache_utils",)

BLOCK_SIZE = 16 if SMALL else 64
# (width of the narrowed view, width of the backing table), in blocks.
TABLE_WIDTHS = [(3, 8)] if SMALL else [(4, 8), (9, 64)]
NUM_REQS = [1, 2] if SMALL else [1, 2, 16, 256]
# The dispatcher takes the CuTe-DSL gather where the CuTe DSL is installed.
ENTRIES = ["dispatcher"] if SMALL else ["dispatcher", "triton"]
OFFSET = 3
SENTINEL = -123.0
INVALID_BLOCK_ID = int(-1e6)
NUM_STALE_BLOCKS = 8

# (module family, bytes per token, one-pass kernel)
RECORDS = {
    "v4-584": ("v4", 584, False),
    "v41-584": ("v41", 584, False),
    "v41-584-one-pass": ("v41", 584, True),
    "v41-528-mxfp8": ("v41", 528, False),
    "v41-288-nvfp4": ("v41", 288, False),
}
# The constant naming the record in the V4.1 module (absent: no such gather).
RECORD_CONSTANTS = {528: "V41_BYTES_PER_TOKEN", 288: "V41_NVFP4_BYTES_PER_TOKEN"}


def _import_first(names: tuple[str, ...]) -> ModuleType:
    """The first module of ``names`` this vLLM has; skip when it has none."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not (name + ".").startswith(e.name + "."):
                raise  # the module exists but one of its imports failed
    pytest.skip(f"this vLLM has none of {', '.join(names)}")


def _gather_fn(record: str, entry: str, monkeypatch: pytest.MonkeyPatch):
    family, bytes_per_token, one_pass = RECORDS[record]
    module = _import_first(V4_MODULES if family == "v4" else V41_MODULES)
    constant = RECORD_CONSTANTS.get(bytes_per_token)
    if (
        family == "v41"
        and constant
        and getattr(module, constant, None) != bytes_per_token
    ):
        pytest.skip(f"{module.__name__} has no {bytes_per_token}-byte record")
    if one_pass:
        if not hasattr(module, "_dequantize_and_gather_k_one_pass_kernel"):
            pytest.skip(f"{module.__name__} has no one-pass gather")
        from vllm.platforms import current_platform

        # The wrapper picks the one-pass kernel on ROCm alone.
        monkeypatch.setattr(current_platform, "is_rocm", lambda: True)
    if entry == "dispatcher":
        return module.dequantize_and_gather_k_cache
    for name in (
        "dequantize_and_gather_k_cache_triton",
        "_DEQUANTIZE_AND_GATHER_K_CACHE_KERNEL",
    ):
        if hasattr(module, name):
            return getattr(module, name)
    pytest.skip(f"{module.__name__} has no Triton entry point besides the dispatcher")


def _make_cache(num_blocks: int, bytes_per_token: int) -> torch.Tensor:
    """Random NaN-free records in pages padded past them, so ``stride(0)`` is not
    ``block_size * bytes_per_token``."""
    page_bytes = -(-BLOCK_SIZE * bytes_per_token // 576) * 576
    # Bytes below 0x7F: no fp8 e4m3 NaN, no bf16 Inf or NaN.
    pages = torch.randint(
        0, 0x7F, (num_blocks, page_bytes), dtype=torch.uint8, device=DEVICE
    )
    if bytes_per_token == 584:
        # UE8M0 scales near 2**0 keep every product exact in bf16.
        scales = pages[:, BLOCK_SIZE * 576 : BLOCK_SIZE * 584]
        scales.copy_(torch.randint_like(scales, 120, 135))
    return pages.as_strided(
        (num_blocks, BLOCK_SIZE, bytes_per_token), (page_bytes, bytes_per_token, 1)
    )


def _reference_584(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: list[int],
    gather_lens: list[int],
    block_table: torch.Tensor,
    offset: int,
) -> None:
    """vLLM's _dequantize_and_gather_k_cache_reference, one request at a time."""
    page_bytes = k_cache.stride(0)
    pages = k_cache.as_strided((k_cache.shape[0], page_bytes), (page_bytes, 1))
    for req, (seq_len, gather_len) in enumerate(zip(seq_lens, gather_lens)):
        pos = torch.arange(seq_len - gather_len, seq_len, device=k_cache.device)
        page = pages[block_table[req, pos // BLOCK_SIZE].long()]
        slot = (pos % BLOCK_SIZE)[:, None]
        data = page.gather(1, slot * 576 + torch.arange(576, device=page.device))
        scale_bytes = page.gather(
            1, BLOCK_SIZE * 576 + slot * 8 + torch.arange(7, device=page.device)
        )
        scales = torch.exp2(scale_bytes.float() - 127.0).repeat_interleave(64, dim=1)
        nope = data[:, :448].view(torch.float8_e4m3fn).float() * scales
        rope = data[:, 448:].contiguous().view(torch.bfloat16)
        out[req, offset : offset + gather_len, :448] = nope.to(torch.bfloat16)
        out[req, offset : offset + gather_len, 448:] = rope


def _narrowed_table(
    num_reqs: int, width: int, backing_width: int, hidden: str
) -> tuple[torch.Tensor, list[int], int]:
    """``backing[:, :width]`` with each request's blocks; (view, seq_lens, blocks).

    Entries that map nothing hold ids of blocks no request owns (``stale``, what
    a reused table holds) or ``int(-1e6)`` (``invalid``, as the padding of
    test_dequantize_and_gather_k_cache), so a read of the wrong row is never
    the right block.
    """
    seq_lens = torch.randint(1, width * BLOCK_SIZE + 1, (num_reqs,)).tolist()
    num_live = num_reqs * width
    num_blocks = num_live + NUM_STALE_BLOCKS
    if hidden == "stale":
        backing = torch.randint(num_live, num_blocks, (num_reqs, backing_width))
    else:
        backing = torch.full((num_reqs, backing_width), INVALID_BLOCK_ID)
    physical = torch.randperm(num_live)
    for req, seq_len in enumerate(seq_lens):
        used = -(-seq_len // BLOCK_SIZE)
        backing[req, :used] = physical[req * width : req * width + used]
    backing = backing.to(torch.int32).to(DEVICE)
    return backing[:, :width], seq_lens, num_blocks


def _check_narrowed_table_gather(
    record: str,
    entry: str,
    hidden: str,
    width: int,
    backing_width: int,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gather = _gather_fn(record, entry, monkeypatch)
    torch.manual_seed(num_reqs * 1000 + width)
    block_table, seq_lens_host, num_blocks = _narrowed_table(
        num_reqs, width, backing_width, hidden
    )
    assert block_table.stride(0) == backing_width != block_table.shape[-1]
    bytes_per_token = RECORDS[record][1]
    k_cache = _make_cache(num_blocks, bytes_per_token)
    gather_lens_host = [torch.randint(1, n + 1, ()).item() for n in seq_lens_host]
    seq_lens = torch.tensor(seq_lens_host, dtype=torch.int32, device=DEVICE)
    gather_lens = torch.tensor(gather_lens_host, dtype=torch.int32, device=DEVICE)
    out_shape = (num_reqs, OFFSET + max(gather_lens_host) + 3, 512)
    expected = torch.full(out_shape, SENTINEL, dtype=torch.bfloat16, device=DEVICE)
    actual = torch.full_like(expected, SENTINEL)

    if bytes_per_token == 584:
        _reference_584(
            expected, k_cache, seq_lens_host, gather_lens_host, block_table, OFFSET
        )
    else:
        contiguous = block_table.contiguous()
        gather(expected, k_cache, seq_lens, gather_lens, contiguous, BLOCK_SIZE, OFFSET)
    gather(actual, k_cache, seq_lens, gather_lens, block_table, BLOCK_SIZE, OFFSET)
    if DEVICE == "cuda":
        torch.cuda.synchronize()

    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("num_reqs", NUM_REQS)
@pytest.mark.parametrize("width,backing_width", TABLE_WIDTHS)
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("record", list(RECORDS))
@torch.inference_mode()
def test_dequantize_and_gather_k_cache_narrowed_block_table(
    record: str,
    entry: str,
    width: int,
    backing_width: int,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
):
    """Entries outside the view hold stale ids: a wrong row pitch gathers other
    blocks' tokens."""
    _check_narrowed_table_gather(
        record, entry, "stale", width, backing_width, num_reqs, monkeypatch
    )


# Last in the file: as released, a GPU faults on these (an illegal memory
# access), which leaves the CUDA context unusable for any test after them.
@pytest.mark.parametrize("num_reqs", [1, 2])
@pytest.mark.parametrize("entry", ["triton"] if not SMALL else ENTRIES)
@pytest.mark.parametrize("record", list(RECORDS))
@torch.inference_mode()
def test_dequantize_and_gather_k_cache_narrowed_block_table_invalid_ids(
    record: str,
    entry: str,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
):
    """Entries outside the view hold ``int(-1e6)``: a wrong row pitch reads
    outside the K cache."""
    width, backing_width = TABLE_WIDTHS[0]
    _check_narrowed_table_gather(
        record, entry, "invalid", width, backing_width, num_reqs, monkeypatch
    )

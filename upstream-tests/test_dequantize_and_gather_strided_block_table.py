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
PyTorch reference that reads each page through ``k_cache.stride(0)`` for the
584-byte record (whose page layout every release shares), and for the V4.1
records (whose page layouts changed between releases; their decoding is covered
by the round-trip tests of test_compressor_kv_cache.py) the same call through
``block_table.contiguous()``.

Both the dispatcher ``dequantize_and_gather_k_cache`` and the Triton entry
points are called: on NVIDIA GPUs with the CuTe DSL the dispatcher takes the
CuTe-DSL gather, so only the direct calls test the Triton kernels there.
"""

import importlib
import os
from types import ModuleType

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(
    DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a CUDA device or Triton's interpreter (TRITON_INTERPRET=1)",
)

V4_MODULE = "vllm.models.deepseek_v4.common.ops.cache_utils"
V41_MODULE = "vllm.models.deepseek_v41.common.ops.cache_utils"
# The Triton gather each module launches without the dispatcher's choice.
TRITON_ENTRIES = {
    V4_MODULE: "_DEQUANTIZE_AND_GATHER_K_CACHE_KERNEL",
    V41_MODULE: "dequantize_and_gather_k_cache_triton",
}

# (module, bytes per token, one-pass kernel)
RECORDS = {
    "v4-584": (V4_MODULE, 584, False),
    "v41-584": (V41_MODULE, 584, False),
    "v41-584-one-pass": (V41_MODULE, 584, True),
    "v41-528-mxfp8": (V41_MODULE, 528, False),
    "v41-288-nvfp4": (V41_MODULE, 288, False),
}
# The constant naming the record in the V4.1 module (absent: no such gather).
RECORD_CONSTANTS = {528: "V41_BYTES_PER_TOKEN", 288: "V41_NVFP4_BYTES_PER_TOKEN"}

# (width of the narrowed view, width of the backing table), in blocks.
TABLE_WIDTHS = [(3, 8), (9, 64)]
OFFSET = 3
SENTINEL = -123.0
INVALID_BLOCK_ID = int(-1e6)
NUM_STALE_BLOCKS = 8


def _import_or_skip(name: str) -> ModuleType:
    """The module; skip when this vLLM has no such module (an import that fails
    inside an existing module is an error, not a skip)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not (name + ".").startswith(e.name + "."):
            raise
        pytest.skip(f"this vLLM has no {name}")


def _gather_fn(record: str, entry: str, monkeypatch: pytest.MonkeyPatch):
    module_name, bytes_per_token, one_pass = RECORDS[record]
    module = _import_or_skip(module_name)
    constant = RECORD_CONSTANTS.get(bytes_per_token)
    if constant and getattr(module, constant, None) != bytes_per_token:
        pytest.skip(f"{module_name} has no {bytes_per_token}-byte record")
    if one_pass:
        if not hasattr(module, "_dequantize_and_gather_k_one_pass_kernel"):
            pytest.skip(f"{module_name} has no one-pass gather")
        from vllm.platforms import current_platform

        # The wrapper picks the one-pass kernel on ROCm alone.
        monkeypatch.setattr(current_platform, "is_rocm", lambda: True)
    if entry == "dispatcher":
        return module.dequantize_and_gather_k_cache
    name = TRITON_ENTRIES[module_name]
    if not hasattr(module, name):
        pytest.skip(f"{module_name} has no {name} besides the dispatcher")
    return getattr(module, name)


def _make_cache(num_blocks: int, block_size: int, bytes_per_token: int) -> torch.Tensor:
    """Random NaN-free records in pages padded past them, so ``stride(0)`` is not
    ``block_size * bytes_per_token``."""
    page_bytes = -(-block_size * bytes_per_token // 576) * 576
    # Bytes below 0x7F: no fp8 e4m3 NaN, no bf16 Inf or NaN.
    pages = torch.randint(
        0, 0x7F, (num_blocks, page_bytes), dtype=torch.uint8, device=DEVICE
    )
    if bytes_per_token == 584:
        # UE8M0 scales near 2**0 keep every product exact in bf16.
        scales = pages[:, block_size * 576 : block_size * 584]
        scales.copy_(torch.randint_like(scales, 120, 135))
    return pages.as_strided(
        (num_blocks, block_size, bytes_per_token), (page_bytes, bytes_per_token, 1)
    )


def _dequantize_and_gather_k_cache_reference(
    out: torch.Tensor,
    k_cache: torch.Tensor,
    seq_lens: list[int],
    gather_lens: list[int],
    block_table: torch.Tensor,
    block_size: int,
    offset: int,
) -> None:
    """test_compressor_kv_cache.py's reference, reading each page through
    ``k_cache.stride(0)`` (pages here are padded past their records)."""
    page_bytes = k_cache.stride(0)
    pages = k_cache.as_strided((k_cache.shape[0], page_bytes), (page_bytes, 1))
    for req, (seq_len, gather_len) in enumerate(zip(seq_lens, gather_lens)):
        pos = torch.arange(seq_len - gather_len, seq_len, device=k_cache.device)
        page = pages[block_table[req, pos // block_size].long()]
        slot = (pos % block_size)[:, None]
        data = page.gather(1, slot * 576 + torch.arange(576, device=page.device))
        scale_bytes = page.gather(
            1, block_size * 576 + slot * 8 + torch.arange(7, device=page.device)
        )
        scales = torch.exp2(scale_bytes.float() - 127.0).repeat_interleave(64, dim=1)
        nope = data[:, :448].view(torch.float8_e4m3fn).float() * scales
        rope = data[:, 448:].contiguous().view(torch.bfloat16)
        out[req, offset : offset + gather_len, :448] = nope.to(torch.bfloat16)
        out[req, offset : offset + gather_len, 448:] = rope


def _narrowed_table(
    num_reqs: int, block_size: int, width: int, backing_width: int, hidden: str
) -> tuple[torch.Tensor, list[int], int]:
    """``backing[:, :width]`` with each request's blocks; (view, seq_lens, blocks).

    Entries that map nothing hold ids of blocks no request owns (``stale``, what
    a reused table holds) or ``int(-1e6)`` (``invalid``, as the padding of
    test_dequantize_and_gather_k_cache), so a read of the wrong row is never
    the right block.
    """
    seq_lens = torch.randint(1, width * block_size + 1, (num_reqs,)).tolist()
    num_live = num_reqs * width
    num_blocks = num_live + NUM_STALE_BLOCKS
    if hidden == "stale":
        backing = torch.randint(num_live, num_blocks, (num_reqs, backing_width))
    else:
        backing = torch.full((num_reqs, backing_width), INVALID_BLOCK_ID)
    physical = torch.randperm(num_live)
    for req, seq_len in enumerate(seq_lens):
        used = -(-seq_len // block_size)
        backing[req, :used] = physical[req * width : req * width + used]
    backing = backing.to(torch.int32).to(DEVICE)
    return backing[:, :width], seq_lens, num_blocks


def _check_narrowed_table_gather(
    record: str,
    entry: str,
    hidden: str,
    block_size: int,
    width: int,
    backing_width: int,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gather = _gather_fn(record, entry, monkeypatch)
    torch.manual_seed(num_reqs * 1000 + width * 10 + block_size)
    block_table, seq_lens_host, num_blocks = _narrowed_table(
        num_reqs, block_size, width, backing_width, hidden
    )
    assert block_table.stride(0) == backing_width != block_table.shape[-1]
    bytes_per_token = RECORDS[record][1]
    k_cache = _make_cache(num_blocks, block_size, bytes_per_token)
    gather_lens_host = [torch.randint(1, n + 1, ()).item() for n in seq_lens_host]
    seq_lens = torch.tensor(seq_lens_host, dtype=torch.int32, device=DEVICE)
    gather_lens = torch.tensor(gather_lens_host, dtype=torch.int32, device=DEVICE)
    out_shape = (num_reqs, OFFSET + max(gather_lens_host) + 3, 512)
    expected = torch.full(out_shape, SENTINEL, dtype=torch.bfloat16, device=DEVICE)
    actual = torch.full_like(expected, SENTINEL)

    if bytes_per_token == 584:
        _dequantize_and_gather_k_cache_reference(
            expected,
            k_cache,
            seq_lens_host,
            gather_lens_host,
            block_table,
            block_size,
            OFFSET,
        )
    else:
        contiguous = block_table.contiguous()
        gather(expected, k_cache, seq_lens, gather_lens, contiguous, block_size, OFFSET)
    gather(actual, k_cache, seq_lens, gather_lens, block_table, block_size, OFFSET)
    if DEVICE == "cuda":
        torch.cuda.synchronize()

    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("num_reqs", [1, 2, 3, 16, 127, 256])
@pytest.mark.parametrize("width,backing_width", TABLE_WIDTHS)
@pytest.mark.parametrize("block_size", [16, 64])
@pytest.mark.parametrize("entry", ["dispatcher", "triton"])
@pytest.mark.parametrize("record", list(RECORDS))
@torch.inference_mode()
def test_dequantize_and_gather_k_cache_narrowed_block_table(
    record: str,
    entry: str,
    block_size: int,
    width: int,
    backing_width: int,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
):
    """Entries outside the view hold stale ids: a wrong row pitch gathers other
    blocks' tokens."""
    _check_narrowed_table_gather(
        record,
        entry,
        "stale",
        block_size,
        width,
        backing_width,
        num_reqs,
        monkeypatch,
    )


@pytest.mark.parametrize("num_reqs", [1, 2])
@pytest.mark.parametrize("entry", ["dispatcher", "triton"])
@pytest.mark.parametrize("record", list(RECORDS))
@torch.inference_mode()
def test_dequantize_and_gather_k_cache_narrowed_block_table_invalid_ids(
    record: str,
    entry: str,
    num_reqs: int,
    monkeypatch: pytest.MonkeyPatch,
):
    """Entries outside the view hold ``int(-1e6)``: a wrong row pitch reads
    outside the K cache (on a GPU, an illegal memory access)."""
    width, backing_width = TABLE_WIDTHS[0]
    _check_narrowed_table_gather(
        record,
        entry,
        "invalid",
        16,
        width,
        backing_width,
        num_reqs,
        monkeypatch,
    )

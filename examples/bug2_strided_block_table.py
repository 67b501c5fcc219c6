"""vllm-project/vllm#55109 in one file: a paged gather that steps block-table rows by ``shape[-1]``.

vLLM's DeepSeek-V4 ``_dequantize_and_gather_k_kernel`` reads request ``b``'s block ids at
``block_table_ptr + b * max_blocks_per_seq`` and launches with ``max_blocks_per_seq=block_table.shape[-1]``.
A column-narrowed view ``backing[:, :w]`` keeps the backing's row stride, so from request 2 on the
kernel reads another row's entries. The fix passes ``block_table.stride(0)``.
Run: ``python examples/bug2_strided_block_table.py`` (GPU, or Triton's interpreter on a CPU). Needs torch and
triton, on a CPU also numpy (the interpreter imports it; neither declares it): ``pip install torch triton numpy``.
"""

import importlib.util
import os
import sys

missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
torch = None if missing else importlib.import_module("torch")
on_cpu = torch is not None and not torch.cuda.is_available()
if on_cpu and importlib.util.find_spec("numpy") is None:
    missing.append("numpy")  # Triton's interpreter imports it; neither torch nor triton declares it
if missing:
    sys.exit(f"bug2_strided_block_table.py needs {' and '.join(missing)}: pip install {' '.join(missing)}")
if on_cpu:
    os.environ["TRITON_INTERPRET"] = "1"  # must be set before @triton.jit runs
import triton
import triton.language as tl


@triton.jit
def gather_kernel(
    out_ptr, ids_ptr, cache_ptr, table_ptr, seq_lens_ptr,
    stride_out_req, stride_out_tok, stride_out_dim,
    stride_ids_req, stride_ids_tok,
    stride_cache_block, stride_cache_row, stride_cache_dim,
    stride_table_req, stride_table_col,
    BLOCK_SIZE: tl.constexpr, DIM: tl.constexpr,
):  # fmt: skip
    req, tok = tl.program_id(0), tl.program_id(1)  # one program per (request, token)
    active = tok < tl.load(seq_lens_ptr + req)
    block_id = tl.load(table_ptr + req * stride_table_req + (tok // BLOCK_SIZE) * stride_table_col, mask=active)
    tl.store(ids_ptr + req * stride_ids_req + tok * stride_ids_tok, block_id, mask=active)
    dims = tl.arange(0, DIM)
    row = cache_ptr + block_id * stride_cache_block + (tok % BLOCK_SIZE) * stride_cache_row
    values = tl.load(row + dims * stride_cache_dim, mask=active)
    tl.store(out_ptr + req * stride_out_req + tok * stride_out_tok + dims * stride_out_dim, values, mask=active)


def gather(cache, table, seq_lens, row_pitch):
    """Launch with ``row_pitch`` as the table's row stride; returns (rows gathered, block id per token)."""
    num_reqs, width = table.shape
    out = torch.zeros(num_reqs, width * cache.shape[1], cache.shape[2], device=cache.device)
    ids = torch.full(out.shape[:2], -1, dtype=torch.int32, device=cache.device)
    gather_kernel[(num_reqs, out.shape[1])](
        out, ids, cache, table, seq_lens, *out.stride(), *ids.stride(), *cache.stride(),
        row_pitch, table.stride(1), BLOCK_SIZE=cache.shape[1], DIM=cache.shape[2],
    )  # fmt: skip
    return out, ids


device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
num_reqs, block_size, width, backing_width, dim = 4, 4, 3, 8, 16
cache = torch.randn(32, block_size, dim, device=device)  # 32 physical blocks of 4 tokens
backing = torch.randint(12, 32, (num_reqs, backing_width), dtype=torch.int32, device=device)  # stale ids
backing[:, :width] = torch.randperm(12, device=device).view(num_reqs, width).int()  # this step's ids
table = backing[:, :width]  # the column-narrowed view
seq_lens = torch.tensor([12, 9, 11, 5], dtype=torch.int32, device=device)
pos = torch.arange(width * block_size, device=device)
valid = pos < seq_lens[:, None].long()
expected = torch.where(valid[..., None], cache[table[:, pos // block_size].long(), pos % block_size], 0.0)
print(f"table {tuple(table.shape)}: shape[-1] = {table.shape[-1]}, stride(0) = {table.stride(0)}")

for name, expr, pitch in (("buggy", "table.shape[-1]", table.shape[-1]), ("fixed", "table.stride(0)", table.stride(0))):
    out, ids = gather(cache, table, seq_lens, pitch)
    print(f"\n{name}: row pitch = {expr} = {pitch}")
    for r in range(num_reqs):
        read = ids[r, ::block_size][valid[r, ::block_size]].tolist()
        bad = int((out[r] != expected[r]).any(-1).sum())
        print(f"  request {r + 1}: block ids read {read}, expected {table[r].tolist()[: len(read)]}: "
              + (f"{bad} of {int(valid[r].sum())} tokens wrong" if bad else "ok"))  # fmt: skip
    print(f"  equal to the PyTorch gather, bitwise: {torch.equal(out, expected)}")

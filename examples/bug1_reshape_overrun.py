"""vllm-project/vllm#43988 in one file: the padded-page reshape of the code state that PR fixed overruns its pool.

This runs the repository's model of unreleased code: vLLM's main branch between PR #38831 and PR #43988, where
the V2 model runner's ``_reshape_kv_cache`` (vllm/v1/worker/gpu/attn_utils.py) overrode a compressed spec's kernel
block size to its storage rows and still counted kernel blocks per logical block as ``block_size //
kernel_block_size``. DeepSeek-V4's C128A cache (``--block-size 256``, compress ratio 128, fp8_ds_mla) stores
``storage_block_size = 256 // 128 = 2`` rows of 584 bytes per logical block, a page padded to 576-byte alignment
(1,728 bytes). What each vLLM release's own runners do, at every block size, is notebook 06 (it finds where
released code reaches the overrun, and with which ``--block-size``).
Run: ``python examples/bug1_reshape_overrun.py`` (CPU or GPU). Needs torch only: ``pip install torch``.
"""

import importlib.util
import sys

if importlib.util.find_spec("torch") is None:
    sys.exit("bug1_reshape_overrun.py needs torch: pip install torch")
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
block_size, compress_ratio, row_bytes, alignment = 256, 128, 584, 576
storage_block_size = block_size // compress_ratio  # 2 rows stored per 256-token logical block
kernel_block_size = storage_block_size  # that code state's override for compressed specs
page_bytes = -(-storage_block_size * row_bytes // alignment) * alignment  # round_up(1168, 576) = 1728
pool = torch.empty(53_255_232, dtype=torch.uint8, device=device)  # the pool of the PR's crash
num_blocks = pool.numel() // page_bytes  # 30,819 logical blocks, one padded page each


def reshape(blocks_per_logical_block: int) -> torch.Tensor:
    """The padded branch: a [kernel blocks, rows, 584] view whose block dimension steps one page."""
    shape = (num_blocks * blocks_per_logical_block, kernel_block_size, row_bytes)
    return torch.as_strided(pool, size=shape, stride=(page_bytes, row_bytes, 1))


print(f"pool {pool.numel():,} bytes on {device}: {num_blocks:,} pages of {page_bytes:,} bytes")
print("\nbuggy:  num_blocks_per_kv_block = block_size // kernel_block_size  # 256 // 2 = 128")
try:
    reshape(block_size // kernel_block_size)
    raise SystemExit("unexpected: the buggy view fitted")
except RuntimeError as exc:
    print(f"RuntimeError: {exc}")

print("\nfixed:  num_blocks_per_kv_block = storage_block_size // kernel_block_size  # 2 // 2 = 1")
view = reshape(storage_block_size // kernel_block_size)
size, stride = list(view.shape), list(view.stride())
required = sum((n - 1) * s for n, s in zip(size, stride)) + 1  # what as_strided checks, in bytes
print(f"sizes {size}, strides {stride}: requires {required:,} of {pool.numel():,} bytes (fits)")
print(f"the last page's {pool.numel() - required} unused bytes are its padding past 2 x 584")

"""Gather scenarios: a filled K cache, a wide backing block table and its column-narrowed view.

The view ``backing[:num_reqs, :w]`` of a ``[max_reqs, W]`` table (``W > w``) keeps
``stride(0) == W`` while ``shape[-1] == w``; that is the input PR #55109 is about. Entries no
request owns hold a sentinel:

* ``in-range``: ids of decoy blocks that exist in the cache but belong to no request, so a
  misread gathers real but wrong data and never faults;
* ``poison``: ``int(-1e6)``, as vLLM's own test, so a misread addresses far outside the cache.

Everything is drawn from one seeded generator, so a case can be rebuilt in another process.

``record`` picks what the cache pages hold: the V4 record (584 B, the default), or a record another package
registers (DeepSeek V4.1's ``mxfp8`` and ``nvfp4``, with the scale placement of ``interleaved``:
:mod:`repro.core.geometry.records`); every page is filled with valid random records of that kind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from repro.core.geometry.layout import DSV4, FLASHMLA_ALIGNMENT, ceil_div, round_up
from repro.core.geometry.records import RecordLayout, filler, layout_for, record_kinds
from repro.core.kernels.reference import quantize_and_insert_reference
from repro.coverage import SentinelMode

SENTINEL_MODES = tuple(SentinelMode)
#: vLLM's test fills unused block-table entries with this id.
POISON_ID = int(-1e6)
#: Byte every cache and pool is filled with before writing (vLLM's tests use 165).
CACHE_FILL_BYTE = 0xA5
#: Decoy blocks (owned by no request) that in-range sentinels point at.
NUM_DECOY_BLOCKS = 8
#: bf16 bit pattern written into outputs before a run, to find rows nobody wrote (a NaN).
OUT_POISON_BITS = 0x7FA5


@dataclass(frozen=True)
class ScenarioSpec:
    """Everything needed to rebuild one case, in this process or another."""

    num_reqs: int
    block_size: int = 64
    seq_len_max: int = 256
    seed: int = 0
    mode: str = SentinelMode.IN_RANGE
    max_reqs: int = 256
    backing_width: int = 0  # 0: twice the narrowed width
    window: int = 0  # 0: gather whole sequences (gather_lens=None); else gather the last `window`
    offset: int = 0
    padded: bool = True  # blocks padded to FlashMLA's 576-byte alignment, as in production
    device: str = "cpu"
    contiguous: bool = False  # True: the table is the whole backing (vLLM's existing test)
    seq_lens: tuple | None = None  # explicit lengths instead of seeded random ones
    gather_lens: tuple | None = None  # explicit gather lengths (needs seq_lens)
    record: str = "v4"  # v4, or a registered kind: mxfp8 | nvfp4 (repro.core.geometry.records)
    interleaved: bool = False  # V4.1 records: each token's scales after its data (vLLM >= 0.33) or page-split
    table_width: int = 0  # 0: as many columns as the longest request needs; else this many (JIT fingerprint)
    negative_zero: bool = False  # NVFP4: the reference decodes e2m1 code 8 to -0 (the gather under test does)
    first_block: int = 0  # every block id (owned and decoy) from here on; the pages below hold the fill byte

    def __post_init__(self) -> None:
        for name in ("seq_lens", "gather_lens"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def layout(self) -> RecordLayout:
        return layout_for(self.record, self.interleaved)

    @property
    def block_stride(self) -> int:
        """Bytes between pages: the records, padded to FlashMLA's 576-byte alignment unless ``padded`` is off."""
        raw = self.layout.page_bytes(self.block_size)
        return round_up(raw, FLASHMLA_ALIGNMENT) if self.padded else raw


def validate_spec(spec: ScenarioSpec) -> None:
    """Clear errors for impossible cases, before any memory is touched."""
    if spec.seq_lens is not None and (len(spec.seq_lens) != spec.num_reqs or min(spec.seq_lens) < 1):
        raise ValueError(f"seq_lens must hold {spec.num_reqs} positive lengths, got {spec.seq_lens}")
    if spec.gather_lens is not None and (
        spec.seq_lens is None
        or len(spec.gather_lens) != spec.num_reqs
        or any(not 0 <= g <= s for g, s in zip(spec.gather_lens, spec.seq_lens))
    ):
        raise ValueError(f"gather_lens must give 0 <= gather_len <= seq_len per request, got {spec.gather_lens}")
    if not 1 <= spec.num_reqs <= spec.max_reqs:
        raise ValueError(f"num_reqs must be between 1 and max_reqs={spec.max_reqs}, got {spec.num_reqs}")
    if spec.block_size < 1:
        raise ValueError(f"block_size must be positive, got {spec.block_size}")
    if spec.seq_len_max < 1:
        raise ValueError(f"seq_len_max must be positive, got {spec.seq_len_max}")
    if spec.first_block < 0:
        raise ValueError(f"first_block must be 0 or more, got {spec.first_block}")
    if spec.record not in record_kinds():
        raise ValueError(f"record must be one of {record_kinds()}, got {spec.record!r}")
    if spec.mode not in SENTINEL_MODES:
        raise ValueError(f"mode must be one of {SENTINEL_MODES}, got {spec.mode!r}")
    longest = ceil_div(max(spec.seq_lens) if spec.seq_lens is not None else spec.seq_len_max, spec.block_size)
    if spec.table_width and spec.table_width < longest:
        raise ValueError(f"table_width must hold the longest request's {longest} blocks, got {spec.table_width}")
    need = narrowed_width(spec)
    if spec.backing_width and not spec.contiguous and spec.backing_width <= need:
        raise ValueError(
            f"backing_width must exceed the view's {need} block-table columns (what a "
            f"{spec.seq_len_max}-token request needs at block_size {spec.block_size}, or table_width); "
            f"got {spec.backing_width}"
        )


def narrowed_width(spec: ScenarioSpec) -> int:
    """Columns of the view: ``table_width`` if set, else enough blocks for the longest possible request."""
    if spec.table_width:
        return spec.table_width
    longest = max(spec.seq_lens) if spec.seq_lens is not None else spec.seq_len_max
    return ceil_div(longest, spec.block_size)


@dataclass
class GatherScenario:
    spec: ScenarioSpec
    seq_lens: torch.Tensor  # int32 [num_reqs]
    gather_lens: torch.Tensor | None  # int32 [num_reqs] or None
    backing: torch.Tensor  # int32 [max_reqs, W]
    block_table: torch.Tensor  # the narrowed view backing[:num_reqs, :w]
    k_cache: torch.Tensor  # uint8 [num_blocks, B, token_bytes] (584 for V4), stride(0) = block stride
    k_cache_storage: torch.Tensor  # the whole byte pool behind k_cache
    decoy_ids: torch.Tensor

    @property
    def max_gather(self) -> int:
        lens = self.gather_lens if self.gather_lens is not None else self.seq_lens
        return int(lens.max())

    @property
    def total_tokens(self) -> int:
        lens = self.gather_lens if self.gather_lens is not None else self.seq_lens
        return int(lens.sum())

    def fresh_out(self) -> torch.Tensor:
        """An output buffer with 3 spare rows, every element poisoned with a NaN pattern."""
        shape = (self.spec.num_reqs, self.spec.offset + self.max_gather + 3, DSV4.head_dim)
        out = torch.empty(shape, dtype=torch.int16, device=self.k_cache.device)
        out.fill_(OUT_POISON_BITS)
        return out.view(torch.bfloat16)

    def args(self, out: torch.Tensor, block_table: torch.Tensor | None = None) -> tuple:
        """Positional arguments in vLLM's gather signature."""
        table = self.block_table if block_table is None else block_table
        return (out, self.k_cache, self.seq_lens, self.gather_lens, table, self.spec.block_size, self.spec.offset)


def build_scenario(spec: ScenarioSpec) -> GatherScenario:
    validate_spec(spec)
    gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + spec.num_reqs)
    B, n = spec.block_size, spec.num_reqs
    if spec.seq_lens is not None:
        seq_lens = torch.tensor(spec.seq_lens, dtype=torch.int32)
    else:
        seq_lens = torch.randint(1, spec.seq_len_max + 1, (n,), generator=gen, dtype=torch.int32)
    gather_lens = None
    if spec.gather_lens is not None:
        gather_lens = torch.tensor(spec.gather_lens, dtype=torch.int32)
    elif spec.window:
        gather_lens = torch.minimum(seq_lens, torch.tensor(spec.window, dtype=torch.int32))
    w = narrowed_width(spec)
    W = w if spec.contiguous else (spec.backing_width or 2 * w)
    rows = n if spec.contiguous else spec.max_reqs
    blocks_per_req = [ceil_div(int(s), B) for s in seq_lens]
    owned = sum(blocks_per_req)
    first = spec.first_block
    num_blocks = first + owned + NUM_DECOY_BLOCKS
    perm = torch.randperm(owned, generator=gen).to(torch.int32) + first
    decoy_ids = torch.arange(first + owned, num_blocks, dtype=torch.int32)

    backing = torch.empty(rows, W, dtype=torch.int32)
    if spec.mode == SentinelMode.POISON:
        backing.fill_(POISON_ID)
    else:
        backing.copy_(decoy_ids[torch.randint(0, NUM_DECOY_BLOCKS, backing.shape, generator=gen)])
    taken = 0
    for r, k in enumerate(blocks_per_req):
        backing[r, :k] = perm[taken : taken + k]
        taken += k

    # The K rows: request r's token p lives at slot table[r, p // B] * B + p % B.
    req = torch.repeat_interleave(torch.arange(n), seq_lens.long())
    pos = torch.arange(req.shape[0]) - torch.repeat_interleave(
        torch.cumsum(seq_lens.long(), 0) - seq_lens.long(), seq_lens.long()
    )
    slots = backing[req, pos // B].long() * B + pos % B
    # Decoy blocks are filled too, so in-range misreads gather real (wrong) data.
    decoy_slots = (decoy_ids.long()[:, None] * B + torch.arange(B)).reshape(-1)
    slot_mapping = torch.cat([slots, decoy_slots])
    k = torch.randn(slot_mapping.shape[0], DSV4.head_dim, generator=gen).to(torch.bfloat16)

    # Drawn on the CPU (seeded), written on the target device by the reference writer.
    device = torch.device(spec.device)
    storage = torch.full((num_blocks * spec.block_stride,), CACHE_FILL_BYTE, dtype=torch.uint8, device=device)
    token_bytes = spec.layout.token_bytes
    k_cache = torch.as_strided(storage, (num_blocks, B, token_bytes), (spec.block_stride, token_bytes, 1))
    if spec.record == "v4":
        quantize_and_insert_reference(k.to(device), k_cache, slot_mapping.to(device), B)
    else:
        filler(spec.record)(spec.layout, k_cache, slot_mapping, B, gen)
    backing = backing.to(device)
    return GatherScenario(
        spec=spec,
        seq_lens=seq_lens.to(device),
        gather_lens=None if gather_lens is None else gather_lens.to(device),
        backing=backing,
        block_table=backing[:n, :w],
        k_cache=k_cache,
        k_cache_storage=storage,
        decoy_ids=decoy_ids.to(device),
    )

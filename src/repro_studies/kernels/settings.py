"""The launch settings of the K-cache gathers and the streaming kernels, as plain values.

:class:`TileSettings` says how one tile of tokens is loaded and stored (the tile layouts of
:mod:`repro_studies.kernels.tiles`, cache operators, eviction hints); :class:`FastSettings` how :func:`gather_fast
<repro_studies.kernels.fast.gather_fast>` launches (tile size, warps, grid filling, tiles per program). They hold no
kernel, so code that only names settings (the ceiling's list of streaming kernels, the tuning sweep's
candidates) imports them before the profile decides between Triton's compiler and its interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from repro.core.geometry.layout import DSV4, is_pow2

#: Tile layouts (see the module docstring); the index is the kernels' ``TILE`` constexpr, and for the lanes family
#: also its chunk in units of 8 bytes (``tiles.LANES_CHUNK * TILE``: lanes 8, wide 16).
TILES = ("grouped", "lanes", "wide")
#: PTX cache operators Triton accepts on loads and stores ("" = the default).
LOAD_CACHE = ("", ".ca", ".cg", ".cv")
STORE_CACHE = ("", ".wb", ".cg", ".cs", ".wt")
#: Eviction policies ("" = the default).
EVICT = ("", "evict_first", "evict_last")


@dataclass(frozen=True)
class TileSettings:
    """How one tile of tokens is loaded and stored (compile-time constants of the kernels)."""

    tile: str = "grouped"
    overread: bool = False
    load_cache: str = ""
    load_evict: str = "evict_first"
    store_cache: str = ""
    store_evict: str = ""

    def __post_init__(self) -> None:
        for name, value, accepted in (
            ("tile", self.tile, TILES),
            ("load_cache", self.load_cache, LOAD_CACHE),
            ("store_cache", self.store_cache, STORE_CACHE),
            ("load_evict", self.load_evict, EVICT),
            ("store_evict", self.store_evict, EVICT),
        ):
            if value not in accepted:
                raise ValueError(f"{name} must be one of {accepted}, got {value!r}")
        if not isinstance(self.overread, bool):
            raise ValueError(f"overread must be a bool, got {self.overread!r}")

    def constexprs(self) -> dict:
        """The kernels' keyword arguments for these settings (with the record geometry)."""
        return {
            "TILE": TILES.index(self.tile),
            "OVERREAD": self.overread,
            "LOAD_CACHE": self.load_cache,
            "LOAD_EVICT": self.load_evict,
            "STORE_CACHE": self.store_cache,
            "STORE_EVICT": self.store_evict,
            **RECORD_CONSTEXPRS,
        }

    def label(self) -> str:
        parts = [self.tile]
        if self.overread:
            parts.append("overread")
        for name in ("load_cache", "load_evict", "store_cache", "store_evict"):
            value = getattr(self, name)
            if value != getattr(DEFAULT_TILE, name):
                parts.append(f"{name} {value or 'none'}")
        return ", ".join(parts)


DEFAULT_TILE = TileSettings()

#: The record geometry as the kernels' constexprs.
RECORD_CONSTEXPRS = {
    "N_GROUPS": DSV4.scale_bytes,  # the 7 quant blocks rounded up to a power of two
    "N_SCALES": DSV4.n_scales,
    "QUANT_BLOCK": DSV4.quant_block,
    "FP8_DIM": DSV4.fp8_bytes,
    "HEAD_DIM": DSV4.head_dim,
}


def check_maxnreg(maxnreg: object) -> None:
    """``maxnreg`` (registers per thread the compiler may use): None or an int from 16 to 255."""
    if maxnreg is not None and (isinstance(maxnreg, bool) or not isinstance(maxnreg, int) or not 16 <= maxnreg <= 255):
        raise ValueError(f"maxnreg must be None or an int from 16 to 255, got {maxnreg!r}")


def maxnreg_options(maxnreg: int | None) -> dict:
    """Triton's compile options for a register limit (none when the compiler chooses)."""
    return {} if maxnreg is None else {"maxnreg": maxnreg}


@dataclass(frozen=True)
class FastSettings:
    """How :func:`gather_fast` launches: tile size, warps, grid filling, tiles per program, tile layout."""

    block_t: int = 8  # tokens per tile (a power of two)
    num_warps: int = 4  # warps per program (a power of two <= 32)
    min_block_t: int = 8  # smallest tile the grid-filling heuristic may shrink to
    waves: float = 2  # shrink the tile while the grid has fewer than waves * SMs programs
    tiles_per_program: int = 1  # consecutive tiles one program handles (a loop when > 1)
    num_stages: int = 1  # software-pipelining stages of that loop (Triton's tl.range)
    prefetch: bool = False  # that loop loads tile k+1 into registers before storing tile k ("lanes" tiles)
    early_table: bool = False  # without gather_lens, each program's block-table entry is loaded beside the
    # request's length instead of after it (when the program lies in one block)
    maxnreg: int | None = None  # registers per thread the compiler may use (PTX .maxnreg); None: its own choice
    tile: TileSettings = field(default_factory=TileSettings)

    def __post_init__(self) -> None:
        for name in ("block_t", "min_block_t", "num_warps", "tiles_per_program"):
            if not is_pow2(getattr(self, name)):
                raise ValueError(f"{name} must be a power of two >= 1, got {getattr(self, name)!r}")
        if self.num_warps > 32:
            raise ValueError(f"num_warps must be a power of two <= 32, got {self.num_warps!r}")
        if isinstance(self.waves, bool) or not isinstance(self.waves, (int, float)) or self.waves < 0:
            raise ValueError(f"waves must be a non-negative number, got {self.waves!r}")
        if not isinstance(self.num_stages, int) or not 1 <= self.num_stages <= 8:
            raise ValueError(f"num_stages must be an int from 1 to 8, got {self.num_stages!r}")
        if not isinstance(self.tile, TileSettings):
            raise ValueError(f"tile must be a TileSettings, got {self.tile!r}")
        if not isinstance(self.early_table, bool):
            raise ValueError(f"early_table must be a bool, got {self.early_table!r}")
        check_maxnreg(self.maxnreg)
        if self.prefetch and self.tile.tile != "lanes":
            raise ValueError(f"prefetch needs a 'lanes' tile (loads and stores apart), got tile {self.tile.tile!r}")

    def label(self) -> str:
        text = f"{self.block_t} tok x {self.num_warps} warps"
        if self.tiles_per_program > 1:
            text += f", {self.tiles_per_program} tiles/program"
        if self.num_stages > 1:
            text += f", {self.num_stages} stages"
        if self.prefetch:
            text += ", prefetch"
        if self.early_table:
            text += ", early table"
        if self.maxnreg is not None:
            text += f", maxnreg {self.maxnreg}"
        return f"{text}, {self.tile.label()}"

    def launch_options(self) -> dict:
        """Triton's compile options beyond ``num_warps`` these settings ask for."""
        return maxnreg_options(self.maxnreg)


#: The settings :func:`gather_fast <repro_studies.kernels.fast.gather_fast>` uses: the best of the H200 sweeps
#: (data/h200/tuning-gather-fast.md, runs 3, 8 and 12): the chunk-major "lanes" tile, 4 tokens and 2 warps per
#: program, no load eviction hint, each tile's table entry loaded beside the request's length when there are no
#: gather_lens, and 40 registers per thread (the compiler alone chooses 32, and the tile then loses 0.6-7 %).
DEFAULT_SETTINGS = FastSettings(
    block_t=4,
    num_warps=2,
    min_block_t=4,
    early_table=True,
    maxnreg=40,
    tile=TileSettings(tile="lanes", load_evict=""),
)


def with_settings(**changes) -> FastSettings:
    """:data:`DEFAULT_SETTINGS` with some fields changed (``tile=`` takes a :class:`TileSettings`)."""
    return replace(DEFAULT_SETTINGS, **changes)

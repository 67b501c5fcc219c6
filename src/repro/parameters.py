"""The notebooks a run executes and their parameters: types, the values each accepts, and validation before
anything runs.

This package's notebooks are 01 and 02 (the two bugs); a package built on it adds notebooks of its own, with the
parameters they declare and the rules over them, by registration (:class:`Notebooks`, :mod:`repro.plugins`).

papermill only warns about a parameter a notebook does not declare and never checks a value, so
the runner reads every ``-p NAME=VALUE`` by its declared kind (:mod:`repro.cli.params`, which checks the name) and
builds each selected notebook's :class:`Parameters` from them before anything runs: the one place a value is checked.
An unknown name, a wrong type or an out-of-range value is one line naming the parameter and what is accepted (exit
code 2).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Self

from repro.core.evidence import environment
from repro.core.geometry.layout import ceil_div, is_pow2
from repro.coverage import Geometry, SentinelMode
from repro.plugins import Point, registered
from repro.profiles import PROFILES, Profile
from repro.registry import ImplementationError, load_implementation
from repro.seeds import load

#: Set by the runner itself; a user may not pass them with -p.
RESERVED = ("profile", "run_dir")
MAX_REQUESTS = 256
#: The scenario generator seeds torch with ``seed * 1_000_003 + num_reqs``; torch takes 64 bits.
MAX_SEED = (2**64 - 1 - MAX_REQUESTS) // 1_000_003
#: A backing table is ``256 x backing_width`` int32: at most 64 MiB.
MAX_BACKING_WIDTH = 65536


class ParameterError(ValueError):
    """One line naming the parameter and what it accepts.

    In a notebook it is shown as that line alone (IPython's ``_render_traceback_`` hook), the same
    text the command line prints before exiting with code 2.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"ParameterError: {self}"]


@dataclass(frozen=True)
class Param:
    kind: type  # int, float, str or list
    accepted: str  # what a user may pass, in words
    check: Callable[[Any], bool] = lambda v: True
    item_kind: type | None = None  # element type for lists


def distinct(v: list) -> bool:
    """A repeated value would write the same check rows twice."""
    return len(set(v)) == len(v)


#: This package's notebooks, in reading order (file names under ``notebooks/``).
NOTEBOOKS = ("01-reshape-overrun.ipynb", "02-strided-block-table-gather.ipynb")


SCHEMA: dict[str, Param] = {
    # notebook 01
    "block_size": Param(
        int,
        "a positive multiple of 256 (vLLM's --block-size; DeepSeek-V4 compresses by "
        "up to 128 and SWA blocks are block_size/4, a multiple of 64)",
        lambda v: v > 0 and v % 256 == 0,
    ),
    "pool_bytes": Param(
        int,
        "0 (the pool of the seed's error) or a positive byte count that fits in half the device's memory",
        lambda v: v >= 0,
    ),
    # notebook 02
    "request_counts": Param(
        list,
        f"a non-empty list of distinct integers from 1 to {MAX_REQUESTS}",
        lambda v: len(v) > 0 and distinct(v) and all(1 <= x <= MAX_REQUESTS for x in v),
        item_kind=int,
    ),
    "cache_block_size": Param(
        int, "a power of two from 1 to 256 (tokens per stored cache block)", lambda v: is_pow2(v) and v <= 256
    ),
    "seq_len_max": Param(int, "0 (the profile's default) or an integer from 1 to 65536", lambda v: 0 <= v <= 65536),
    "backing_width": Param(
        int,
        f"0 (twice the narrowed width) or more columns than the longest request needs, at most {MAX_BACKING_WIDTH}",
        lambda v: 0 <= v <= MAX_BACKING_WIDTH,
    ),
    "seed": Param(
        int, f"an integer from 0 to {MAX_SEED} (torch generators take 64 bits)", lambda v: 0 <= v <= MAX_SEED
    ),
    "sentinel_modes": Param(
        list,
        "a non-empty list of distinct values drawn from " + " and ".join(f"'{m}'" for m in SentinelMode),
        lambda v: len(v) > 0 and distinct(v) and set(v) <= set(SentinelMode),
        item_kind=str,
    ),
    "geometries": Param(
        list,
        "a non-empty list of distinct values drawn from "
        + ", ".join(f"'{g}'" for g in Geometry)
        + " (the sweep's table and call geometries; every one by default)",
        lambda v: len(v) > 0 and distinct(v) and set(v) <= set(Geometry),
        item_kind=str,
    ),
    "implementation": Param(str, "'package.module:function' with vLLM's gather signature", lambda v: bool(v.strip())),
    "case_timeout_s": Param(
        float,
        "0 (the profile's default) or a number of seconds from 1 (no case finishes sooner) to 86400",
        lambda v: v == 0 or 1 <= v <= 86400,
    ),
    "sanitizer": Param(
        str,
        "'auto' (use compute-sanitizer where present), 'required' or 'off'",
        lambda v: v in ("auto", "required", "off"),
    ),
}


#: ``import_check(path, name)``: checks an implementation path a parameter names (:meth:`Parameters.check`).
ImportCheck = Callable[[str, str], object]


@dataclass(frozen=True)
class Notebooks:
    """Notebooks a package built on this one adds to a run (entry point ``notebooks`` of :mod:`repro.plugins`): the
    parameters class of each (:class:`Parameters`, its ``NOTEBOOK`` a file name under ``notebooks/``) and the specs
    of the parameters they declare beyond :data:`SCHEMA`."""

    notebooks: tuple[type[Parameters], ...]
    parameters: Mapping[str, Param]


def _registered() -> tuple[Notebooks, ...]:
    return registered(Point.NOTEBOOKS, Notebooks)


def parameter_classes() -> dict[str, type[Parameters]]:
    """Every notebook a run may execute, by file name, with its parameters class: this package's, then those
    installed packages register."""
    own = (ReshapeParameters, GatherParameters)
    return {c.NOTEBOOK: c for c in (*own, *(c for r in _registered() for c in r.notebooks))}


def notebook_names() -> tuple[str, ...]:
    """Every notebook a run may execute: this package's, then those installed packages register."""
    return tuple(parameter_classes())


def schema() -> dict[str, Param]:
    """Every parameter a notebook of :func:`notebook_names` declares: :data:`SCHEMA` and the registered ones."""
    return {**SCHEMA, **{name: p for r in _registered() for name, p in r.parameters.items()}}


def _type_ok(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def check_name(name: str, declared_by: Mapping[str, Any]) -> None:
    """A name a user may pass: declared by a notebook (``declared_by``) and not the runner's own."""
    if name in RESERVED:
        raise ParameterError(f"{name}: set by the runner (use --profile/--out), not with -p")
    if name not in declared_by:
        known = ", ".join(sorted(n for n in declared_by if n not in RESERVED))
        raise ParameterError(f"{name}: unknown parameter; accepted: {known}")


def validate(name: str, value: Any, declared_by: dict[str, list[str]]) -> Any:
    """Check one parameter against the schema and the notebooks' declarations; return it normalised. Only a
    notebook's :class:`Parameters` calls it (building one checks every field): values are validated there once."""
    check_name(name, declared_by)
    spec = schema().get(name)
    if spec is None:
        return value
    if not _type_ok(value, spec.kind) or (
        spec.item_kind is not None and not all(_type_ok(x, spec.item_kind) for x in value)
    ):
        raise ParameterError(f"{name}: {value!r} has the wrong type; accepted: {spec.accepted}")
    if not spec.check(value):
        raise ParameterError(f"{name}: {value!r} is out of range; accepted: {spec.accepted}")
    if spec.kind is float:
        value = float(value)
    return value


# --------------------------------------------------------------------------------------------
# Checks that need several parameters, the profile or an import: the same for the CLI and the
# notebooks, so a value that cannot work stops before any work, with one line.


def _default_pool_bytes() -> int:
    return int(load(43988)["reported"]["available_bytes"])


def host_memory_bytes() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def device_memory_bytes(profile: str) -> int:
    """The memory a profile allocates from: the host's RAM (``cpu``) or the CUDA device's (``gpu``)."""
    if profile == "gpu":
        import torch  # lazy: seconds to import; only the gpu profile asks the device

        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    return host_memory_bytes()


def check_reshape_pool(block_size: int, pool_bytes: int, memory_bytes: int | None = None) -> None:
    """Notebook 01 reshapes a pool of ``pool_bytes`` (0: the PR's) as the C128A cache at ``block_size``:
    the pool must be a whole number of that cache's padded pages, and it is allocated for real, so it
    must fit in half of ``memory_bytes`` (the device's memory) when that is given."""
    from repro.core.geometry.specs import dsv4_catalogue  # lazy: imports pandas, which --help does not need

    if memory_bytes is not None and pool_bytes > memory_bytes // 2:
        raise ParameterError(
            f"pool_bytes: {pool_bytes:,} bytes do not fit in half of this device's {memory_bytes:,} bytes; "
            f"accepted: 0 (the PR's pool) or at most {memory_bytes // 2:,}"
        )

    c128a = next(
        s
        for s in dsv4_catalogue(block_size)
        if s.compress_ratio == max(x.compress_ratio for x in dsv4_catalogue(block_size))
    )
    page = c128a.page_size_bytes
    pool = pool_bytes or _default_pool_bytes()
    if pool % page:
        which = "pool_bytes" if pool_bytes else "block_size"
        shown = f"{pool:,} (the PR's pool, pool_bytes=0)" if not pool_bytes else f"{pool:,}"
        raise ParameterError(
            f"{which}: at block_size {block_size} a C128A page is {page:,} bytes and the pool of "
            f"{shown} bytes is not a whole number of pages; accepted: pool_bytes a positive "
            f"multiple of {page:,}, or block_size 256 with pool_bytes=0"
        )


#: Host memory one gathered token costs while a sweep case is built and checked (the seeded float32 draw, its bf16
#: copy, the quantiser's temporaries, the cache record, the poisoned output and the reference): measured about
#: 9,900-10,100 bytes at 16 and 64 requests x 4,096 tokens; with a fifth for allocator variation, 12 KiB
#: (``tests/test_params.py`` measures it again and keeps it an upper bound).
SWEEP_HOST_BYTES_PER_TOKEN = 12_288


def check_sweep_memory(request_counts: list[int], seq_len_max: int, memory_bytes: int) -> None:
    """The largest sweep case (every request ``seq_len_max`` tokens long) must fit in half of the host's memory."""
    tokens = max(request_counts) * seq_len_max
    need = tokens * SWEEP_HOST_BYTES_PER_TOKEN
    if need > memory_bytes // 2:
        fits = max(1, memory_bytes // 2 // SWEEP_HOST_BYTES_PER_TOKEN // max(request_counts))
        raise ParameterError(
            f"seq_len_max: {max(request_counts)} requests x {seq_len_max:,} tokens need about {need:,} bytes of host "
            f"memory per case, more than half of this host's {memory_bytes:,}; accepted: seq_len_max at most "
            f"{fits:,} at {max(request_counts)} requests, or fewer request_counts"
        )


@dataclass(frozen=True)
class Parameters:
    """A notebook's parameters cell as one value: a field per parameter, its default the cell's literal. Building one
    checks every field by its spec in :func:`schema` (one line naming a bad one); :meth:`build` then applies the rules
    over several of them, the profile or an import (:meth:`check`). The command line's check before a run and the
    notebook's first cell build it the same way, so a value that cannot work stops with the same line."""

    NOTEBOOK: ClassVar[str]  # the notebook's file name under notebooks/

    def __post_init__(self) -> None:
        declared = {f.name: [self.NOTEBOOK] for f in fields(self)}
        for f in fields(self):
            object.__setattr__(self, f.name, validate(f.name, getattr(self, f.name), declared))

    def check(self, profile: str, import_check: ImportCheck) -> None:
        """The rules over several parameters, the profile or an import; :class:`ParameterError` names the first
        broken one."""

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def build(cls, values: Mapping[str, Any], profile: str, import_check: ImportCheck | None = None) -> Self:
        """``values`` (the cell's, as papermill left them or the command line will inject them) checked once;
        ``import_check(path, name)`` checks an implementation path (default: import it here)."""
        declared = {f.name: [cls.NOTEBOOK] for f in fields(cls)}
        for name in (n for n in values if n not in declared):
            check_name(name, declared)  # a reserved or unknown name: its one line
        params = cls(**values)
        params.check(profile, import_check or load_implementation)
        return params


def _checked_import(import_check: ImportCheck, path: str, param: str) -> None:
    try:
        import_check(path, param)
    except ImplementationError as exc:
        raise ParameterError(str(exc)) from None


@dataclass(frozen=True)
class ReshapeParameters(Parameters):
    """Notebook 01's parameters: the block size of the reshaped caches and the pool (0: the PR's)."""

    NOTEBOOK: ClassVar[str] = NOTEBOOKS[0]
    block_size: int = 256
    pool_bytes: int = 0

    def check(self, profile: str, import_check: ImportCheck) -> None:
        check_reshape_pool(self.block_size, self.pool_bytes, device_memory_bytes(profile))


@dataclass(frozen=True)
class GatherParameters(Parameters):
    """Notebook 02's parameters: the sweep's cases, the implementation under test and how each case is run."""

    NOTEBOOK: ClassVar[str] = NOTEBOOKS[1]
    request_counts: list[int] = field(default_factory=lambda: [1, 2, 3, 5, 8, 13, 21, 37, 64, 100, 256])
    cache_block_size: int = 64
    seq_len_max: int = 0  # 0: the profile's
    backing_width: int = 0  # 0: twice the narrowed width
    seed: int = 0
    sentinel_modes: list[SentinelMode] = field(default_factory=lambda: list(SentinelMode))
    geometries: list[Geometry] = field(default_factory=lambda: list(Geometry))
    implementation: str = "repro.core.kernels.gather:gather_fixed"
    case_timeout_s: float = 0  # 0: the profile's
    sanitizer: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sentinel_modes", [SentinelMode(m) for m in self.sentinel_modes])
        object.__setattr__(self, "geometries", [Geometry(g) for g in self.geometries])

    def check(self, profile: str, import_check: ImportCheck) -> None:
        _checked_import(import_check, self.implementation, "implementation")
        seq_len_max = self.seq_len_max or PROFILES[profile].gather_seq_len_max
        need = ceil_div(seq_len_max, self.cache_block_size)
        if self.backing_width and self.backing_width <= need:
            raise ParameterError(
                f"backing_width: {self.backing_width} is not wider than the {need} columns a {seq_len_max}-token "
                f"request needs at cache_block_size {self.cache_block_size}; accepted: 0 (auto) or more than {need}"
            )
        check_sweep_memory(self.request_counts, seq_len_max, host_memory_bytes())
        if self.sanitizer == "required" and (profile != "gpu" or environment.find_compute_sanitizer() is None):
            raise ParameterError(
                "sanitizer: 'required' but compute-sanitizer is not available here "
                f"(profile {profile}); accepted: 'auto' or 'off'"
            )

    def resolved(self, profile: Profile) -> GatherParameters:
        """The zeros that stand for the profile's defaults replaced by them (sequence length, case time limit)."""
        return replace(
            self,
            seq_len_max=self.seq_len_max or profile.gather_seq_len_max,
            case_timeout_s=self.case_timeout_s or profile.case_timeout_s,
        )

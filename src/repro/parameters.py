"""Notebook parameters: their types, the values each accepts, and validation before anything runs.

papermill only warns about a parameter a notebook does not declare and never checks a value, so
the runner checks every ``-p NAME=VALUE`` here first (read by its declared kind in
:mod:`repro.cli.params`): an unknown name, a wrong type or an out-of-range value is one line naming
the parameter and what is accepted (exit code 2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repro.core.evidence import environment
from repro.core.geometry.layout import ceil_div, is_pow2
from repro.coverage import Geometry
from repro.profiles import PROFILES
from repro.registry import BENCH_VARIANTS, RECORD_GATHERS, ImplementationError, load_implementation
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


def _distinct(v: list) -> bool:
    """A repeated value would write the same check rows twice."""
    return len(set(v)) == len(v)


#: A vLLM release number as the registry writes it.
RELEASE = re.compile(r"\d+(\.\d+){1,3}")


def _releases(v: str) -> bool:
    """Comma-separated release numbers, at least one, none empty and none twice (``0.22.0,`` names no release)."""
    items = [x.strip() for x in v.split(",")]
    return all(RELEASE.fullmatch(x) for x in items) and _distinct(items)


def _block_sizes(v: str) -> bool:
    """Comma-separated block sizes from 1 to 65536 or ``default``, at least one, none empty and none twice."""
    items = [x.strip() for x in v.split(",")]
    return all(x == "default" or (x.isdigit() and 1 <= int(x) <= 65536) for x in items) and _distinct(items)


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
    # notebooks 02 and 03
    "request_counts": Param(
        list,
        f"a non-empty list of distinct integers from 1 to {MAX_REQUESTS}",
        lambda v: len(v) > 0 and _distinct(v) and all(1 <= x <= MAX_REQUESTS for x in v),
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
        "a non-empty list of distinct values drawn from 'in-range' and 'poison'",
        lambda v: len(v) > 0 and _distinct(v) and set(v) <= {"in-range", "poison"},
        item_kind=str,
    ),
    "geometries": Param(
        list,
        "a non-empty list of distinct values drawn from "
        + ", ".join(f"'{g}'" for g in Geometry)
        + " (the sweep's table and call geometries; every one by default)",
        lambda v: len(v) > 0 and _distinct(v) and set(v) <= set(Geometry),
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
    "seq_lens": Param(
        list,
        "a non-empty list of distinct integers from 1 to 65536 (tokens per request)",
        lambda v: len(v) > 0 and _distinct(v) and all(1 <= x <= 65536 for x in v),
        item_kind=int,
    ),
    "reference_gather": Param(
        str,
        "'' (none) or 'package.module:function' with vLLM's gather signature, timed on "
        "the contiguous table beside the project's kernels",
    ),
    # notebooks 04, 05 and 06
    "releases": Param(
        str,
        "'default' (every known release on a GPU, a short list on a CPU), 'all' (the registry's list from the "
        "first release with DeepSeek-V4; needs download=true) or comma-separated release numbers such as "
        "'0.22.0,0.33.0'",
        lambda v: v in ("default", "all") or _releases(v),
    ),
    # notebook 06
    "block_sizes": Param(
        str,
        "'default' (the profile's: no --block-size, 128, 256, 384 and 512 on a CPU; every value of 'all' on a GPU), "
        "'all' (no --block-size, then 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 640, 768 and 1024) or "
        "comma-separated distinct block sizes from 1 to 65536, 'default' among them for no --block-size, such as "
        "'default,256,512'",
        lambda v: v in ("default", "all") or _block_sizes(v),
    ),
    # notebook 05
    "runner_sweep": Param(
        str,
        "'default' (the profile's: three configurations on a CPU, every one on a GPU), 'short' or 'full' "
        "(the runner configurations notebook 05 runs each release's table code through)",
        lambda v: v in ("default", "short", "full"),
    ),
    "matrix_request_counts": Param(
        list,
        f"[] (the profile's default) or a list of integers from 1 to {MAX_REQUESTS}",
        lambda v: all(1 <= x <= MAX_REQUESTS for x in v),
        item_kind=int,
    ),
    "matrix_block_size": Param(
        int, "0 (the profile's default) or a power of two from 1 to 256", lambda v: v == 0 or (is_pow2(v) and v <= 256)
    ),
    "variants": Param(
        list,
        "a non-empty list drawn from 'released', 'patched' and 'patched-constexpr'",
        lambda v: len(v) > 0 and set(v) <= {"released", "patched", "patched-constexpr"},
        item_kind=str,
    ),
    "share_identical": Param(bool, "true or false (share rows between releases whose launch path is identical)"),
    "record_gathers": Param(
        list,
        "[] (none) or distinct values drawn from "
        + " and ".join(f"'{e.label}'" for e in RECORD_GATHERS.values())
        + " (the repository's V4.1 gathers, run on the records of every release whose own gathers read their "
        "page layout)",
        lambda v: _distinct(v) and set(v) <= {e.label for e in RECORD_GATHERS.values()},
        item_kind=str,
    ),
    "download": Param(bool, "true or false (false: use only the carried cache, never the registry)"),
    "matrix": Param(
        bool, "true or false (false: skip the release matrix; the patches and the regression test still run)"
    ),
    "upstream_test": Param(
        bool,
        "true or false (write each release's patch and run upstream-tests/ against its modules, as released "
        "and patched)",
    ),
    "bench_variants": Param(
        list,
        "a non-empty list of distinct values drawn from 'fixed' and 'fast'",
        lambda v: len(v) > 0 and _distinct(v) and set(v) <= set(BENCH_VARIANTS),
        item_kind=str,
    ),
    "stream_ceiling": Param(
        str,
        "'on' (the streaming ceiling at every shape, the gap arms at the largest request count of each "
        "sequence length) or 'off'",
        lambda v: v in ("on", "off"),
    ),
    "jit_widths": Param(
        list,
        "a non-empty list of block-table widths from 1 to 4096",
        lambda v: len(v) > 0 and all(1 <= x <= 4096 for x in v),
        item_kind=int,
    ),
    "vllm_releases": Param(
        list,
        "[] (none) or distinct vLLM release numbers such as 0.22.0,0.33.0 (their own gather, loaded from the "
        "module cache: timed on a GPU, its JIT fingerprint on both profiles)",
        lambda v: all(RELEASE.fullmatch(x) for x in v) and _distinct(v),
        item_kind=str,
    ),
    "vllm_request_counts": Param(
        list,
        f"[] (the same as request_counts) or a list of integers from 1 to {MAX_REQUESTS} (request counts at "
        "which vLLM's kernels are timed)",
        lambda v: all(1 <= x <= MAX_REQUESTS for x in v),
        item_kind=int,
    ),
    "jit_backing_width": Param(
        int,
        "an integer from 2 to 8192, wider than every jit_widths entry (the table the narrowed views are cut from)",
        lambda v: 2 <= v <= 8192,
    ),
}


def _type_ok(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def validate(name: str, value: Any, declared_by: dict[str, list[str]]) -> Any:
    """Check one parameter against the schema and the notebooks' declarations; return it normalised."""
    if name in RESERVED:
        raise ParameterError(f"{name}: set by the runner (use --profile/--out), not with -p")
    if name not in declared_by:
        known = ", ".join(sorted(n for n in declared_by if n not in RESERVED))
        raise ParameterError(f"{name}: unknown parameter; accepted: {known}")
    spec = SCHEMA.get(name)
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
    from repro.core.geometry.specs import dsv4_catalogue  # lazy: imports torch; --help and the CLI's checks do not

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


def cross_check(params: dict[str, Any], profile: str, import_check: Callable[[str, str], object] | None = None) -> None:
    """Rules over several parameters; ``params`` holds every value a notebook will see.

    ``import_check(path, name)`` checks an implementation path (default: import it here); the CLI
    imports one from outside this package in a child process, so it cannot end or hang the run.
    """
    for name in ("implementation", "reference_gather"):
        if params.get(name):
            try:
                (import_check or load_implementation)(params[name], name)
            except ImplementationError as exc:
                raise ParameterError(str(exc)) from None
    if "block_size" in params or "pool_bytes" in params:
        check_reshape_pool(params.get("block_size", 256), params.get("pool_bytes", 0), device_memory_bytes(profile))
    if "backing_width" in params:
        seq_len_max = params.get("seq_len_max") or PROFILES[profile].gather_seq_len_max
        block = params.get("cache_block_size") or 1
        width = params.get("backing_width", 0)
        need = ceil_div(seq_len_max, block)
        if width and width <= need:
            raise ParameterError(
                f"backing_width: {width} is not wider than the {need} columns a {seq_len_max}-token "
                f"request needs at cache_block_size {block}; accepted: 0 (auto) or more than {need}"
            )
    if "request_counts" in params and "seq_len_max" in params:
        seq_len_max = params["seq_len_max"] or PROFILES[profile].gather_seq_len_max
        check_sweep_memory(params["request_counts"], seq_len_max, host_memory_bytes())
    if "jit_widths" in params or "jit_backing_width" in params:
        widths, backing = params.get("jit_widths") or [1], params.get("jit_backing_width") or 2
        if backing <= max(widths):
            raise ParameterError(
                f"jit_backing_width: {backing} is not wider than the widest of jit_widths ({max(widths)}); "
                f"accepted: more than {max(widths)}"
            )
    if params.get("download") is False:
        if params.get("releases") == "all":
            raise ParameterError(
                "releases: 'all' asks the registry for its release list and download is false; accepted: "
                "'default' or release numbers, or download=true"
            )
    if params.get("sanitizer") == "required" and (profile != "gpu" or environment.find_compute_sanitizer() is None):
        raise ParameterError(
            "sanitizer: 'required' but compute-sanitizer is not available here "
            f"(profile {profile}); accepted: 'auto' or 'off'"
        )


def validate_notebook(
    values: dict[str, Any], profile: str, import_check: Callable[[str, str], object] | None = None
) -> dict[str, Any]:
    """A notebook's parameters cell, checked by the rules the CLI applies (first line of every notebook).

    ``values`` are the notebook's parameters as papermill left them (defaults or injected);
    ``profile`` is the resolved profile name. Returns the values, normalised.
    """
    declared = {name: ["notebook"] for name in values}
    checked = {name: validate(name, value, declared) for name, value in values.items() if name not in RESERVED}
    cross_check(checked, profile, import_check)
    return checked

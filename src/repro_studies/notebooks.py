"""The studies' notebooks (03-06) and the parameters they declare beyond notebooks 01 and 02's: registered with
the runner as entry point ``notebooks`` of :mod:`repro.plugins`, so ``python -m repro run`` executes them, checks
their parameters and lists them in ``--help`` where this package is installed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from repro.core.geometry.layout import is_pow2
from repro.coverage import SentinelMode
from repro.parameters import MAX_REQUESTS, ImportCheck, Notebooks, Param, ParameterError, Parameters, distinct
from repro.registry import ImplementationError
from repro_studies.registry import BENCH_VARIANTS, RECORD_GATHERS, TRITON_FORMS

#: A vLLM release number as the registry writes it.
RELEASE = re.compile(r"\d+(\.\d+){1,3}")


def _releases(v: str) -> bool:
    """Comma-separated release numbers, at least one, none empty and none twice (``0.22.0,`` names no release)."""
    items = [x.strip() for x in v.split(",")]
    return all(RELEASE.fullmatch(x) for x in items) and distinct(items)


def _block_sizes(v: str) -> bool:
    """Comma-separated block sizes from 1 to 65536 or ``default``, at least one, none empty and none twice."""
    items = [x.strip() for x in v.split(",")]
    return all(x == "default" or (x.isdigit() and 1 <= int(x) <= 65536) for x in items) and distinct(items)


PARAMETERS: dict[str, Param] = {
    # notebook 03
    "seq_lens": Param(
        list,
        "a non-empty list of distinct integers from 1 to 65536 (tokens per request)",
        lambda v: len(v) > 0 and distinct(v) and all(1 <= x <= 65536 for x in v),
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
        "a non-empty list drawn from "
        + " and ".join((", ".join(repr(str(f)) for f in TRITON_FORMS[:-1]), repr(str(TRITON_FORMS[-1])))),
        lambda v: len(v) > 0 and set(v) <= set(TRITON_FORMS),
        item_kind=str,
    ),
    "share_identical": Param(bool, "true or false (share rows between releases whose launch path is identical)"),
    "record_gathers": Param(
        list,
        "[] (none) or distinct values drawn from "
        + " and ".join(f"'{e.label}'" for e in RECORD_GATHERS.values())
        + " (the repository's V4.1 gathers, run on the records of every release whose own gathers read their "
        "page layout)",
        lambda v: distinct(v) and set(v) <= {e.label for e in RECORD_GATHERS.values()},
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
        lambda v: len(v) > 0 and distinct(v) and set(v) <= set(BENCH_VARIANTS),
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
        lambda v: all(RELEASE.fullmatch(x) for x in v) and distinct(v),
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


def _checked_import(import_check: ImportCheck, path: str, param: str) -> None:
    try:
        import_check(path, param)
    except ImplementationError as exc:
        raise ParameterError(str(exc)) from None


def _downloads_for_all(releases: str, download: bool) -> None:
    if not download and releases == "all":
        raise ParameterError(
            "releases: 'all' asks the registry for its release list and download is false; accepted: "
            "'default' or release numbers, or download=true"
        )


@dataclass(frozen=True)
class PerformanceParameters(Parameters):
    """Notebook 03's parameters: the timed shapes and arms, the streaming ceiling, the JIT widths, vLLM's kernels."""

    NOTEBOOK: ClassVar[str] = "03-performance.ipynb"
    request_counts: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128, 256])
    seq_lens: list[int] = field(default_factory=lambda: [256, 2048])
    cache_block_size: int = 64
    bench_variants: list[str] = field(default_factory=lambda: ["fixed", "fast"])
    reference_gather: str = ""
    stream_ceiling: str = "on"
    jit_widths: list[int] = field(default_factory=lambda: [1, 2, 3, 5, 8, 13, 21, 32])
    jit_backing_width: int = 64
    vllm_releases: list[str] = field(default_factory=lambda: ["0.22.0", "0.33.0"])
    vllm_request_counts: list[int] = field(default_factory=lambda: [1, 4, 16, 64, 256])
    download: bool = True

    def check(self, profile: str, import_check: ImportCheck) -> None:
        if self.reference_gather:
            _checked_import(import_check, self.reference_gather, "reference_gather")
        if self.jit_backing_width <= max(self.jit_widths):
            raise ParameterError(
                f"jit_backing_width: {self.jit_backing_width} is not wider than the widest of jit_widths "
                f"({max(self.jit_widths)}); accepted: more than {max(self.jit_widths)}"
            )


@dataclass(frozen=True)
class ReleasesParameters(Parameters):
    """Notebook 04's parameters: the releases, the matrix's cases and variants, the regression test."""

    NOTEBOOK: ClassVar[str] = "04-upstream-releases.ipynb"
    releases: str = "default"
    matrix_request_counts: list[int] = field(default_factory=list)  # []: the profile's
    matrix_block_size: int = 0  # 0: the profile's
    seq_len_max: int = 0  # 0: the profile's
    sentinel_modes: list[SentinelMode] = field(default_factory=lambda: list(SentinelMode))
    variants: list[str] = field(default_factory=lambda: ["released", "patched"])
    seed: int = 0
    case_timeout_s: float = 0  # 0: 300 s
    share_identical: bool = True
    record_gathers: list[str] = field(default_factory=lambda: ["fast-v41", "fast-v41-page-split"])
    download: bool = True
    matrix: bool = True
    upstream_test: bool = True

    def check(self, profile: str, import_check: ImportCheck) -> None:
        _downloads_for_all(self.releases, self.download)


@dataclass(frozen=True)
class AffectedParameters(Parameters):
    """Notebook 05's parameters: the releases and the runner configurations their table code runs through."""

    NOTEBOOK: ClassVar[str] = "05-who-is-affected.ipynb"
    releases: str = "default"
    download: bool = True
    runner_sweep: str = "default"

    def check(self, profile: str, import_check: ImportCheck) -> None:
        _downloads_for_all(self.releases, self.download)


@dataclass(frozen=True)
class ReshapeReleasesParameters(Parameters):
    """Notebook 06's parameters: the releases and the block sizes each release's reshape chain runs at."""

    NOTEBOOK: ClassVar[str] = "06-reshape-in-releases.ipynb"
    releases: str = "default"
    block_sizes: str = "default"
    download: bool = True

    def check(self, profile: str, import_check: ImportCheck) -> None:
        _downloads_for_all(self.releases, self.download)


NOTEBOOKS = Notebooks(
    notebooks=(PerformanceParameters, ReleasesParameters, AffectedParameters, ReshapeReleasesParameters),
    parameters=PARAMETERS,
)

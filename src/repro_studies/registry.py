"""What the studies compare and the words their tables hold, named once: this repository's own gathers beyond the
two pull requests (``gather_fast``, the V4.1 gathers), every arm notebook 03 times (this repository's kernels and
each vLLM release's own, as released or patched), vLLM's regression-test outcomes, and the vocabulary of the
who-is-affected and bug-1-in-releases studies.

``gather_fast`` joins notebook 02's sweep through :data:`REGISTERED` (entry point ``registry`` of
:mod:`repro.plugins`), which also hands ``repro`` the V4.1 gathers' loaders, so a case reaches every gather of the
studies as the function itself (:func:`repro.core.kernels.own.kernel_of`); everything else here is read by the studies
alone. Nothing here imports torch: an entry's loader imports its kernel module when a case first calls it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from repro import registry
from repro.registry import Expectation, Implementation, Origin, Registered, Role
from repro_studies.tables import Table


def _style(**kw: Any) -> Mapping[str, Any]:
    return MappingProxyType(kw)


class BlockTable(StrEnum):
    """Which block table an arm's kernel reads: the narrowed view ``backing[:n, :w]`` or its contiguous copy."""

    NARROWED = "narrowed"
    CONTIGUOUS = "contiguous"


class Form(StrEnum):
    """What of a vLLM release's gather an upstream arm runs: the Triton gather as shipped, with PR #55109's change
    (``stride(0)`` as a runtime argument), with the stride left ``tl.constexpr``; or the release's CuTe-DSL gather
    (as released only: it takes no row pitch, so PR #55109 has nothing to change). Notebook 04's ``variants`` are
    the Triton forms."""

    RELEASED = "released"
    PATCHED = "patched"
    PATCHED_CONSTEXPR = "patched-constexpr"
    CUTEDSL = "CuTe-DSL"


#: The forms of a release's Triton gather (what the row-pitch rewrite makes of it).
TRITON_FORMS = (Form.RELEASED, Form.PATCHED, Form.PATCHED_CONSTEXPR)
#: How an arm's display label names its table.
TABLE_WORDS = MappingProxyType({BlockTable.NARROWED: "narrowed view", BlockTable.CONTIGUOUS: "contiguous table"})
COPY_WORDS = " + .contiguous()"
#: The columns a timing or check row records its arm's identity in (:meth:`Arm.fields`, :func:`arm_of_row`).
ARM_FIELDS = ("implementation", "table", "release", "form", "copy")


@dataclass(frozen=True)
class Arm:
    """One timed configuration in notebook 03: an implementation on one kind of table, and whose code it is.

    The identity is ``implementation``, ``table`` and, for an upstream arm (:func:`upstream_arm`), the vLLM
    ``release`` whose kernel it runs, its ``form`` and ``copy`` (the table is materialised with ``.contiguous()``
    before the launch). Result rows record these fields (:meth:`fields`) and the analysis rebuilds the arm from
    them (:func:`arm_of_row`); ``label``, ``display`` and ``style`` are for people only.
    """

    implementation: str  # an Implementation label, or UPSTREAM_IMPLEMENTATION
    table: BlockTable
    release: str = ""  # the vLLM release whose kernel runs ("" for the repository's and outside kernels)
    form: Form | None = None
    copy: bool = False
    display: str = field(default="", compare=False)  # short name for report tables and legends
    style: Mapping[str, Any] = field(default_factory=lambda: _style(), compare=False)
    origin: Origin | str = field(default=Origin.REPO, compare=False)  # whose code: an Origin or "vLLM <release>"

    @property
    def label(self) -> str:
        """The display label (the ``arm`` column): ``fixed / narrowed view``, ``vLLM 0.33.0 patched / narrowed
        view``, ``vLLM 0.33.0 released + .contiguous() / narrowed view``."""
        table = TABLE_WORDS[self.table]
        if self.form is None:
            return f"{self.implementation} / {table}"
        return f"{code_label(self.release)} {self.form}{COPY_WORDS if self.copy else ''} / {table}"

    @property
    def upstream(self) -> bool:
        """A vLLM release's own kernel (loaded by ``repro_studies.upstream``)."""
        return self.implementation == UPSTREAM_IMPLEMENTATION

    def fields(self) -> dict[str, Any]:
        """The arm's identity as a result row's columns (:data:`ARM_FIELDS`)."""
        return {
            "implementation": self.implementation,
            "table": str(self.table),
            "release": self.release,
            "form": "" if self.form is None else str(self.form),
            "copy": self.copy,
        }


def _gather_fast() -> Callable[..., None]:
    from repro_studies.kernels.fast import gather_fast  # lazy: Triton defines the kernel under the profile chosen first

    return gather_fast


def _gather_v41() -> Callable[..., None]:
    from repro_studies.kernels.fast_v41 import dequantize_and_gather_k_cache  # lazy: a kernel module, as above

    return dequantize_and_gather_k_cache


def _gather_v41_page_split() -> Callable[..., None]:
    from repro_studies.kernels.fast_v41 import dequantize_and_gather_k_cache_page_split  # lazy: as above

    return dequantize_and_gather_k_cache_page_split


FAST = Implementation(
    "fast",
    "repro_studies.kernels.fast:gather_fast",
    Expectation.CORRECT,
    False,
    "gather_fast",
    Origin.REPO,
    _style(color="#e67e22", marker="D"),
    role=Role.OWN,
    loader=_gather_fast,
    moved_from=("repro.kernels.fast:gather_fast", "repro.studies.kernels.fast:gather_fast"),
)
#: DeepSeek V4.1's records (528-B MXFP8, 288-B NVFP4): this repository's bandwidth-tiled gathers with the
#: signature of vLLM's V4.1 dispatcher, one per page layout. Not in notebook 02's V4 sweep; notebook 03 times
#: them beside vLLM's V4.1 kernels and notebook 04 runs them on each release's records.
FAST_V41 = Implementation(
    "fast-v41",
    "repro_studies.kernels.fast_v41:dequantize_and_gather_k_cache",
    Expectation.CORRECT,
    False,
    "fast V4.1 gather",
    Origin.REPO,
    _style(color="#d35400", marker="P"),
    in_sweep=False,
    role=Role.OWN,
    loader=_gather_v41,
    detail="scales after each token, vLLM 0.33",
)
FAST_V41_PAGE_SPLIT = Implementation(
    "fast-v41-page-split",
    "repro_studies.kernels.fast_v41:dequantize_and_gather_k_cache_page_split",
    Expectation.CORRECT,
    False,
    "fast V4.1 gather",
    Origin.REPO,
    _style(color="#d35400", marker="P", linestyle="--", markerfacecolor="none"),
    in_sweep=False,
    role=Role.OWN,
    loader=_gather_v41_page_split,
    detail="page-split scales, vLLM 0.30-0.32",
)
#: The V4.1 gathers by the page layout they read (True: each token's scales after its data).
RECORD_GATHERS: Mapping[bool, Implementation] = MappingProxyType({True: FAST_V41, False: FAST_V41_PAGE_SPLIT})


def record_gather(label: str) -> Implementation:
    """The V4.1 gather labelled ``label``."""
    for entry in RECORD_GATHERS.values():
        if entry.label == label:
            return entry
    known = ", ".join(e.label for e in RECORD_GATHERS.values())
    raise KeyError(f"no V4.1 gather labelled {label!r}; known: {known}")


def reads_interleaved(entry: Implementation) -> bool:
    """The page layout a V4.1 gather reads."""
    return next(k for k, v in RECORD_GATHERS.items() if v == entry)


def code_label(release: str) -> str:
    """``vLLM 0.22.0`` for a release's own code, ``model`` for the repository's."""
    return f"vLLM {release}" if release else registry.CODE_MODEL


#: Label of an outside kernel timed beside ours (the ``reference_gather`` parameter).
OUTSIDE_ARM_IMPLEMENTATION = "outside"
FIXED_VIEW = Arm("fixed", BlockTable.NARROWED, display="fixed (view)", style=_style(color="#27ae60", marker="o"))
FIXED_CONTIG = Arm(
    "fixed",
    BlockTable.CONTIGUOUS,
    display="fixed (contig)",
    style=_style(color="#27ae60", marker="o", linestyle="--", markerfacecolor="none", markersize=9),
)
COPY_VIEW = Arm(
    "contiguous-copy",
    BlockTable.NARROWED,
    display=".contiguous() + kernel",
    style=_style(color="#2980b9", marker="^"),
)
FAST_VIEW = Arm("fast", BlockTable.NARROWED, display="fast (view)", style=_style(color="#e67e22", marker="D"))
FAST_CONTIG = Arm(
    "fast",
    BlockTable.CONTIGUOUS,
    display="fast (contig)",
    style=_style(color="#e67e22", marker="D", linestyle="--", markerfacecolor="none", markersize=9),
)
#: The repository's arms, in the order reports list them.
ARMS: tuple[Arm, ...] = (FIXED_VIEW, FIXED_CONTIG, COPY_VIEW, FAST_VIEW, FAST_CONTIG)
#: The outside kernel's arm; its display name is completed with the loaded package's version.
OUTSIDE_ARM = Arm(
    OUTSIDE_ARM_IMPLEMENTATION,
    BlockTable.CONTIGUOUS,
    display="outside (contig)",
    style=_style(color="#c0392b", marker="s", linestyle=":"),
    origin=Origin.USER,
)
#: Arms whose kernels notebook 03 can time, by the ``bench_variants`` parameter value.
BENCH_VARIANTS = ("fixed", "fast")
#: Arms every timing run includes; ``fast`` arms join when ``bench_variants`` names it.
BASE_BENCH_ARMS = (FIXED_VIEW, FIXED_CONTIG, COPY_VIEW)
#: The pair whose time ratio says what reading rows ``stride(0)`` apart costs, per kernel.
STRIDE_COST_PAIRS = MappingProxyType({"fixed": (FIXED_VIEW, FIXED_CONTIG), "fast": (FAST_VIEW, FAST_CONTIG)})
#: The rejected alternative and the arm it is compared with.
COPY_OVERHEAD_PAIR = (COPY_VIEW, FIXED_VIEW)

# --------------------------------------------------------------------------------------------
# Upstream arms: a vLLM release's own gather, as shipped or with PR #55109's change, timed in notebook 03.

#: The ``implementation`` of every upstream arm (the kernel is the release's, loaded by repro_studies.upstream).
UPSTREAM_IMPLEMENTATION = "upstream"
_RELEASE_COLORS = ("#8e44ad", "#16a085", "#d35400", "#2c3e50", "#b7950b", "#1f618d", "#6c3483", "#117864")


def _release_color(release: str) -> str:
    """A colour per release, the same in every run and process (from the release number's hash)."""
    return _RELEASE_COLORS[int(hashlib.sha256(release.encode()).hexdigest(), 16) % len(_RELEASE_COLORS)]


def _checked_release(release: str) -> str:
    if not release:
        raise ValueError("release: empty; an upstream arm names the vLLM release whose wheel was loaded")
    return release


def upstream_arm(release: str, form: Form | str, table: BlockTable | str, copy: bool = False) -> Arm:
    """The registry entry of a vLLM release's Triton kernel timed on one table: ``release`` is the version of the
    loaded wheel (``repro_studies.upstream.release_kernel.release_of``), never typed."""
    release, form, table = _checked_release(release), Form(form), BlockTable(table)
    if form not in TRITON_FORMS:
        raise ValueError(f"form: {form!r} is not one of {', '.join(TRITON_FORMS)}")
    narrowed = table == BlockTable.NARROWED
    style = _style(
        color=_release_color(release),
        marker="^" if copy else {Form.RELEASED: "s", Form.PATCHED: "o", Form.PATCHED_CONSTEXPR: "v"}[form],
        linestyle=":" if copy else ("-" if narrowed else "--"),
        markerfacecolor=None if narrowed or copy else "none",
    )
    short = f"{release} {form}{' + copy' if copy else ''} ({'view' if narrowed else 'contig'})"
    return Arm(UPSTREAM_IMPLEMENTATION, table, release, form, copy, short, style, code_label(release))


def cutedsl_arm(release: str, table: BlockTable | str) -> Arm:
    """The registry entry of a release's CuTe-DSL gather timed on one table (``release`` from the loaded wheel)."""
    release, table = _checked_release(release), BlockTable(table)
    narrowed = table == BlockTable.NARROWED
    style = _style(
        color="#34495e", marker="P", linestyle="-" if narrowed else "--", markerfacecolor=None if narrowed else "none"
    )
    short = f"{release} CuTe-DSL ({'view' if narrowed else 'contig'})"
    return Arm(UPSTREAM_IMPLEMENTATION, table, release, Form.CUTEDSL, False, short, style, code_label(release))


def cutedsl_bench_arms(release: str) -> tuple[Arm, Arm]:
    """What notebook 03 times of a release's CuTe-DSL gather: the narrowed view and its contiguous copy
    (the same compiled kernel; the pair says what following ``stride(0)`` costs it)."""
    return cutedsl_arm(release, BlockTable.NARROWED), cutedsl_arm(release, BlockTable.CONTIGUOUS)


def upstream_bench_arms(release: str) -> tuple[Arm, ...]:
    """What notebook 03 times of one release: the kernel as shipped on a contiguous table (what every
    deployment runs today), PR #55109's kernel on the narrowed view and on the contiguous table, and the
    shipped kernel after ``.contiguous()`` of the narrowed view. (The shipped kernel on the narrowed view is
    wrong by design and never timed.)"""
    return (
        upstream_arm(release, Form.RELEASED, BlockTable.CONTIGUOUS),
        upstream_arm(release, Form.PATCHED, BlockTable.NARROWED),
        upstream_arm(release, Form.PATCHED, BlockTable.CONTIGUOUS),
        upstream_arm(release, Form.RELEASED, BlockTable.NARROWED, copy=True),
    )


def upstream_pairs(release: str) -> dict[str, tuple[Arm, Arm]]:
    """(numerator, denominator) arms of each ratio the report gives per release."""
    shipped, patched_view, patched_contig, copied = upstream_bench_arms(release)
    return {
        "patched/released (contig)": (patched_contig, shipped),
        "patched narrowed/contig": (patched_view, patched_contig),
        "copy over patched (view)": (copied, patched_view),
        "copy over released (contig)": (copied, shipped),
    }


def arm_of(
    implementation: str, table: BlockTable | str, release: str = "", form: Form | str | None = None, copy: bool = False
) -> Arm:
    """The arm with this identity: a release's kernel (``form`` given), one of :data:`ARMS` or the outside arm, or,
    for an implementation the registry does not hold (an outside kernel an older run named), an arm of a user's
    code styled as :func:`repro.registry.style` styles that label."""
    table = BlockTable(table)
    if implementation == UPSTREAM_IMPLEMENTATION or form:
        if implementation != UPSTREAM_IMPLEMENTATION or not form:
            raise ValueError(f"an upstream arm needs implementation {UPSTREAM_IMPLEMENTATION!r} and a form")
        form = Form(form)
        return cutedsl_arm(release, table) if form == Form.CUTEDSL else upstream_arm(release, form, table, copy)
    if release or copy:
        raise ValueError(f"arm {implementation!r}: release and copy name an upstream arm only")
    for entry in (*ARMS, OUTSIDE_ARM):
        if (entry.implementation, entry.table) == (implementation, table):
            return entry
    if not implementation:
        raise ValueError("implementation: empty")
    bare = Arm(implementation, table, origin=Origin.USER)
    return replace(bare, display=bare.label, style=registry.style(implementation))


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def arm_of_row(row: Mapping[str, Any]) -> Arm:
    """The arm a result row records in its :data:`ARM_FIELDS` columns (a row of a CSV table: empty cells read as
    NaN, ``copy`` as a bool or its text)."""
    missing = [k for k in ("implementation", "table") if not _text(row.get(k))]
    if missing:
        raise KeyError(f"row records no arm: {', '.join(missing)} missing (columns {', '.join(ARM_FIELDS)})")
    copy = row.get("copy")
    return arm_of(
        _text(row["implementation"]),
        _text(row["table"]),
        _text(row.get("release")),
        _text(row.get("form")) or None,
        copy is True or _text(copy) == "True",
    )


def arms_by_label(frame: Any) -> dict[str, Arm]:
    """Each display label of a timing table (a DataFrame with an ``arm`` column and :data:`ARM_FIELDS`) and the
    arm its rows record, in order of appearance."""
    out: dict[str, Arm] = {}
    for row in frame.drop_duplicates("arm").to_dict("records"):
        out[row["arm"]] = arm_of_row(row)
    return out


def bench_arms(variants: list[str] | tuple[str, ...]) -> tuple[Arm, ...]:
    """The arms notebook 03 times for ``bench_variants``: the base arms plus each named kernel's pair."""
    chosen = set(BASE_BENCH_ARMS)
    for v in variants:
        chosen.update(STRIDE_COST_PAIRS[v])
    return tuple(a for a in ARMS if a in chosen)


# --------------------------------------------------------------------------------------------
# The regression test written for vLLM's suite (upstream-tests/), run against each release's modules.


class SuiteOutcome(StrEnum):
    """One test's outcome, typed from the phase that decided it (repro_studies.upstream.regression)."""

    PASSED = "passed"
    MISMATCH = "failed: bitwise mismatch"  # the test's own assert_close
    OUT_OF_BOUNDS = "failed: reads outside every tensor"  # that assertion, and the interpreter counted wild lanes
    FAULT = "failed: device fault"  # an illegal memory access (or the process died in the test)
    OTHER = "failed: other exception"
    ERROR = "error"  # setup, collection or import
    SKIPPED = "skipped"  # the release has no such gather
    NOT_RUN = "not run"


#: Outcomes that mean the test's own assertion named the defect (or the device faulted on it).
SUITE_ASSERTION_FAILURES = (SuiteOutcome.MISMATCH, SuiteOutcome.OUT_OF_BOUNDS, SuiteOutcome.FAULT)


# --------------------------------------------------------------------------------------------
# The release matrix (notebook 04): what one (release, kernel, variant) did, and what PR #55109's change did to it.


class VerdictClass(StrEnum):
    """A release-matrix verdict's class; with the first failing request counts it is the whole verdict
    (repro_studies.analysis.release_verdict renders it). The arm-level ones are the matrix rows' own statuses."""

    CORRECT = "correct"
    WRONG = "wrong"  # a gathered token differs bitwise, or a row outside the range was written
    FAULTS = "faults"  # a named fault, or lanes the bounds-checked interpreter counted outside every argument
    COULD_NOT_RUN = "could not run"  # a case raised, timed out or ended without a result
    NOT_PRESENT = "not present"  # the release ships no such kernel
    COULD_NOT_LOAD = "could not load"
    NOT_RUN = "not run"  # this run could not try it (no GPU, no package)
    NOT_APPLICABLE = "not applicable"  # the variant does not apply to the kernel
    UNKNOWN_RELEASE = "unknown release"  # the wheel cache's misses (repro_studies.upstream.wheelcache)
    DOWNLOAD_FAILED = "download failed"
    BAD_WHEEL = "bad wheel"


#: The classes that mean the kernel misread the narrowed table.
VERDICT_MISREADS = (VerdictClass.WRONG, VerdictClass.FAULTS)
#: The classes of a kernel that ran to a result.
VERDICT_RAN = (VerdictClass.CORRECT, *VERDICT_MISREADS)
#: The classes that decide an arm without a case (the matrix rows' arm-level statuses).
VERDICT_ARM_LEVEL = tuple(c for c in VerdictClass if c not in (*VERDICT_RAN, VerdictClass.COULD_NOT_RUN))
#: The classes of a patched variant that tell nothing about the change.
VERDICT_UNTESTED = (
    VerdictClass.NOT_APPLICABLE,
    VerdictClass.NOT_RUN,
    VerdictClass.COULD_NOT_LOAD,
    VerdictClass.COULD_NOT_RUN,
)


class PatchOutcome(StrEnum):
    """What PR #55109's row pitch does to one (release, kernel), from its released and patched verdicts."""

    FIXED = "fixed"  # wrong or faulting as released, correct with the change
    NOT_FIXED = "not fixed"  # wrong or faulting as released, and still with the change
    NOT_TESTED = "not tested"  # wrong or faulting as released; the change did not run on it
    NOT_NEEDED = "not needed"  # correct both ways
    NOT_REACHED = "not reached (correct as released)"  # correct, and the change does not apply (no row-pitch argument)
    BREAKS = "patch breaks it"  # correct as released, not with the change
    NO_VERDICT = "-"  # the kernel did not run as released


class KernelBugClass(StrEnum):
    """Whether the gather a deployment path runs has PR #55109's bug: its release-matrix verdict as released."""

    PRESENT = "present"  # wrong or faulting as released
    ABSENT = "absent"  # correct as released
    NOT_MEASURED = "not measured"  # the matrix has no verdict for it, or one that measured nothing
    NO_KERNEL = "—"  # the path runs no gather (the backend does not gather, or the dispatcher raised)


class StreamKind(StrEnum):
    """A streaming kernel of the ceiling (a ceiling row's ``kernel``): the gather's traffic without its block table."""

    STREAM = "stream"  # the gather's reads, writes and dtype work
    MOVE = "move"  # its bytes as flat runs, no dtype work
    READ = "read-only"
    WRITE = "write-only"


# --------------------------------------------------------------------------------------------
# Who is affected: the words the dispatch study and the runner sweep write and their analysis reads.


class DispatchStatus(StrEnum):
    """A dispatch row's status: what running the release's chain for one (release, GPU family, model, record) gave."""

    RAN = "ran"  # the dispatcher launched a kernel (``gather_kernel`` names it)
    NOT_SHIPPED = "not shipped"  # the release has no code for this model
    #: The release's model code cannot serve the model on the family: its package has no branch for the platform,
    #: or an op the selected attention class calls raises there (``how`` has the release's error).
    NOT_SERVED = "model not served on this platform"
    NO_KERNEL = "no kernel for this record"  # the model's gather module reads other records only
    NOT_GATHERED = "backend does not gather"  # the selected attention class never calls the dispatcher
    NOT_DECIDED = "could not run"  # a link of the chain could not run (``how`` says which)
    RAISED = "dispatcher raised"  # the release's dispatcher raised (``how`` has the error)
    NOT_LOADED = "could not load"  # the wheel cache could not provide the release's code


#: A dispatch row's ``topology`` when the selection never read the tensor-parallel size (a row that read it names
#: the sizes, ``TP 1, 2, 4, 8``; a row that selected nothing has none).
ANY_TOPOLOGY = "any TP (not read)"


def names_tp_sizes(topology: object) -> bool:
    """Whether a ``topology`` cell names tensor-parallel sizes (the selection read them), not "any" or nothing."""
    return isinstance(topology, str) and topology not in ("", ANY_TOPOLOGY)


class TableStage(StrEnum):
    """Where a block table is recorded on its way to a gather."""

    RUNNER = "runner table"
    KERNEL = "kernel-block table"
    CALL = "gather call site"


class TableStatus(StrEnum):
    """A runner-table row's status: whether its configuration's tables were recorded."""

    RAN = "ran"
    NOT_RUN = "could not run"
    NOT_SHIPPED = "runner not shipped"  # the release has no such model runner (one row says so)
    NOT_LOADED = "could not load"  # the wheel cache could not provide the release's code


class Runner(StrEnum):
    """vLLM's model runners: V1 (``gpu_model_runner.py``) and V2 (``gpu/model_runner.py``)."""

    V1 = "V1"
    V2 = "V2"


#: The GPU families notebook 05 tells a release's code about (``repro_studies.upstream.platforms`` holds their facts).
GPU_FAMILY_NAMES = {
    "sm90": "SM90 (H100/H200)",
    "sm100": "SM100 (B200/GB200)",
    "rocm": "ROCm (MI300)",
    "xpu": "XPU (Intel)",
    "sm90-no-cutlass": "SM90 without cutlass",
    "sm100-no-cutlass": "SM100 without cutlass",
    "sm90-cutlass-fails": "SM90 whose cutlass import fails",
    "sm100-cutlass-fails": "SM100 whose cutlass import fails",
}
#: The same families in a few words, for the compact who-is-affected table (its note says what they mean).
GPU_FAMILY_SHORT = {
    "sm90": "SM90",
    "sm100": "SM100",
    "rocm": "ROCm",
    "xpu": "XPU",
    "sm90-no-cutlass": "SM90 no cutlass",
    "sm100-no-cutlass": "SM100 no cutlass",
    "sm90-cutlass-fails": "SM90 cutlass fails",
    "sm100-cutlass-fails": "SM100 cutlass fails",
}


class Cutlass(StrEnum):
    """Whether ``cutlass`` (nvidia-cutlass-dsl) imports on a GPU family: a setting of the deployer's install."""

    IMPORTS = "imports"
    ABSENT = "absent"
    IMPORT_FAILS = "import fails"


@dataclass(frozen=True)
class FamilySetting:
    """A GPU family as a deployer names it: the platform (``SM90``, ``ROCm``) and cutlass's state there."""

    platform: str
    cutlass: Cutlass


#: Each family of :data:`GPU_FAMILY_NAMES` as platform and cutlass state (``repro_studies.upstream.platforms`` tells
#: the releases the same facts): what the README's bug-2 sentence groups the families by.
GPU_FAMILY_SETTINGS = MappingProxyType(
    {
        "sm90": FamilySetting("SM90", Cutlass.IMPORTS),
        "sm100": FamilySetting("SM100", Cutlass.IMPORTS),
        "rocm": FamilySetting("ROCm", Cutlass.ABSENT),
        "xpu": FamilySetting("XPU", Cutlass.ABSENT),
        "sm90-no-cutlass": FamilySetting("SM90", Cutlass.ABSENT),
        "sm100-no-cutlass": FamilySetting("SM100", Cutlass.ABSENT),
        "sm90-cutlass-fails": FamilySetting("SM90", Cutlass.IMPORT_FAILS),
        "sm100-cutlass-fails": FamilySetting("SM100", Cutlass.IMPORT_FAILS),
    }
)
#: Notebook 05's result tables.
TABLE_DISPATCH, TABLE_WARMUPS, TABLE_RUNNER, TABLE_ANSWERS, TABLE_AFFECTED = (
    Table.GATHER_DISPATCH,
    Table.GATHER_WARMUPS,
    Table.RUNNER_TABLES,
    Table.RUNNER_ANSWERS,
    Table.WHO_IS_AFFECTED,
)


class WarmUpRegistered(StrEnum):
    """Whether a release's JIT warm-up registers a gather instance (a warm-up row's ``registered``)."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"  # a condition of the registration could not be evaluated


class Bug2Answer(StrEnum):
    """Does stock vLLM hand a gather a column-narrowed table (per release and runner)?"""

    REACHED = "reached"  # some configuration hands one to a call site
    LATENT = "latent"  # every configuration ran; no call-site table is narrowed
    UNDECIDED = "undecided"  # some configuration could not run and none reached


# --------------------------------------------------------------------------------------------
# Bug 1 in releases: the words the reshape chain (repro_studies.upstream.reshape_chain) writes and its analysis
# (repro_studies.analysis.reshape_chain) reads.


class ChainLink(StrEnum):
    """A link of a release's chain from DeepSeek-V4's layers to the runner's reshape."""

    MODEL = "DeepSeek-V4 layers"  # the decoder layers' released __init__ lines
    CACHE_CONFIG = "CacheConfig block size"  # the default rule for a missing --block-size
    BACKEND_BLOCK_SIZE = "update_block_size_for_backend"  # the platform picks the block size from a backend
    VALIDATE = "VllmConfig.validate_block_size"
    SPECS = "get_kv_cache_spec"
    LAYOUT = "resolve_kv_cache_layout"  # the engine core's one KV cache layout (vLLM 0.29.0 on)
    GROUPS = "get_kv_cache_groups"
    SIZING = "get_kv_cache_config_from_groups"
    ATTENTION_GROUPS = "attention groups"  # the runner's grouping of layers by backend
    KERNEL_BLOCKS = "prepare_kernel_block_sizes"
    ALLOCATE = "allocation"
    RESHAPE = "reshape"
    VIEWS = "allocate_kv_cache"  # vLLM 0.29.0 on: one backing buffer, create_kv_cache_views per KV cache tensor


class ChainStop(StrEnum):
    """Why a link did not complete."""

    REJECTED = "rejected"  # the release's own code refused the configuration (its message)
    NOT_RUN = "not run"  # the study did not provide what the link needed (the row names it)


class KVViewPath(StrEnum):
    """The code of a release's runner that turns the KV cache's bytes into each layer's view."""

    RESHAPE = "reshape"  # V1 _reshape_kv_cache_tensors / V2 _reshape_kv_cache: where bug 1's count is (to 0.28.0)
    VIEWS = "create_kv_cache_views"  # allocate_kv_cache's one int8 buffer, as_strided per layer (0.29.0 on)


class RaisedBy(StrEnum):
    """What raised a view's error: the release's own ``raise``/``assert`` statement (a check of its own), or a
    call on the release's line (PyTorch refusing the view, for one)."""

    RELEASE = "the release's raise or assert"
    CALL = "a call on the release's line"


class CellOutcome(StrEnum):
    """What a release's runner did with one cache group at one block size."""

    FITS = "fits"  # a view addressing exactly each logical block's page payload
    RAISES = "raises"  # the reshape raised (PyTorch's error, verbatim)
    REFUSES = "refused by the view code's own check"  # the release's raise/assert in its view code (its message)
    OUTSIDE_PAGE = "aliases bytes outside a block's page"  # a view that fits the pool but crosses pages
    WRONG_BYTES = "misses or adds bytes within the pages"  # inside the pages, but not exactly the payload
    REJECTED = "rejected"  # a link before the reshape refused the block size
    NOT_RUN = "not run"  # a link could not run here


#: The outcomes that are bug 1's failure (the view is wrong).
CELL_FAILURES = (CellOutcome.RAISES, CellOutcome.OUTSIDE_PAGE, CellOutcome.WRONG_BYTES)


class Bug1Answer(StrEnum):
    """Bug 1 per release and runner."""

    REACHED = "reached"  # a configuration the release accepts makes the view wrong
    LATENT = "latent"  # the count is ``block_size // kernel_block_size``, yet every accepted configuration fits
    ABSENT = "absent"  # the count is right (or there is none) and every accepted configuration fits
    NOT_SHIPPED = "not shipped"  # the release ships neither this runner's reshape nor its count
    OTHER_FAILURE = "another reshape failure"  # the count is right, yet a view is wrong (not bug 1's expression)
    UNDECIDED = "undecided"  # a link could not run and nothing reached
    # The rewritten path (KVViewPath.VIEWS: create_kv_cache_views, no count of bug 1's kind): what its views do.
    VIEWS_FIT = "no count: fits"  # every block size the release accepts fits
    VIEWS_REFUSE = "no count: refuses"  # the view code's own check refuses a block size (the message)
    VIEWS_WRONG = "no count: a view is wrong"  # PyTorch refuses a view, or one crosses pages


#: The rewritten path's answers (no count of bug 1's kind ran).
BUG1_VIEWS_ANSWERS = (Bug1Answer.VIEWS_FIT, Bug1Answer.VIEWS_REFUSE, Bug1Answer.VIEWS_WRONG)


#: ``--kv-cache-dtype`` the bug-1 chain serves DeepSeek-V4 with (its MLA layer turns it into ``fp8_ds_mla``): part of
#: the configuration a user types, named by the README's bug-1 sentence.
BUG1_KV_CACHE_DTYPE = "fp8"

#: Which code a bug-1 row describes: a release's, or the repository's model of PR #43988's unreleased code state
#: (vLLM main between PR #38831 and PR #43988, never in a release).
CODE_UNRELEASED_MODEL = "model of unreleased code (main between PR #38831 and PR #43988)"


#: What notebook 02's sweep gains when the studies are installed, and the V4.1 gathers' loaders (notebooks 03 and 04 run
#: them through repro's cases).
REGISTERED = Registered(implementations=(FAST,), kernels=tuple(RECORD_GATHERS.values()))

"""What is compared, named once: every gather implementation of PR #55109's sweep and bug 1's two reshapes.

The sweep, plots, the report and the parameter checks all read these entries; a label is a key into this
registry and nowhere else is one matched by its text. A user's implementation is resolved from
``"package.module:function"``, so a vLLM developer can point the notebooks at an installed vLLM's
``vllm.models.deepseek_v4.common.ops.cache_utils:dequantize_and_gather_k_cache_triton``; this repository's own are
reached as the functions themselves (:mod:`repro.core.kernels.own`), and packages built on this one register
theirs with a loader that returns the function (:class:`Implementation` ``loader``; :class:`Registered`,
:mod:`repro.plugins`), so their ``target`` is the name a table records, never text to import.
Nothing here imports torch: analysis and rendering use the registry too.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from repro.plugins import Point, registered

GATHER_SIGNATURE = "fn(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)"
GATHER_ARGS = ("out", "k_cache", "seq_lens", "gather_lens", "block_table", "block_size", "offset")


class Expectation(StrEnum):
    """What a check expects of an implementation on a column-narrowed table."""

    BUG = "reproduces the bug"  # equals the reference at one request, differs or faults from two on
    CORRECT = "matches the reference"  # equals the reference everywhere


class Origin(StrEnum):
    """Whose code an entry runs."""

    REPO = "this repository"
    USER = "named by the user"


class Role(StrEnum):
    """What an implementation stands for in the report's story (the report groups and names them by it)."""

    BUG = "the bug"  # the code before the fix
    FIX = "the fix"  # the pull request's fix
    ALTERNATIVE = "the rejected alternative"
    OWN = "in neither pull request"  # a kernel of this repository's own
    UNDER_TEST = "under test"  # named by the user


class ReshapeVariant(StrEnum):
    """The two variants of bug 1's reshape (vLLM #43988): before and after the one-expression fix."""

    BUGGY = "buggy"
    FIXED = "fixed"


def _style(**kw: Any) -> Mapping[str, Any]:
    return MappingProxyType(kw)


#: A registered package's own gather, reached as the function itself: called with no arguments, it imports the
#: kernel's module by an import statement of that package's code (after the caller chose Triton's profile) and
#: returns the function.
Loader = Callable[[], Callable[..., None]]


@dataclass(frozen=True)
class Implementation:
    """A gather with vLLM's signature, as it appears in result tables (``variant`` column)."""

    label: str
    target: str  # "package.module:function": the name a run records (and a user's path, imported by its text)
    expect: Expectation
    may_fault: bool  # poison cases run in their own process
    name: str  # how a sentence names it: "the {name} gather"
    origin: Origin
    style: Mapping[str, Any] = field(default_factory=lambda: _style(), compare=False)
    in_sweep: bool = True  # part of notebook 02's sweep and memcheck sweep
    role: Role = Role.FIX
    #: a registered package's own gather (:data:`Loader`); None for this repository's (repro.core.kernels.own holds
    #: them) and for a user's, imported by ``target``
    loader: Loader | None = field(default=None, compare=False, repr=False)
    detail: str = ""  # what tells it from the others, after its name in parentheses
    #: the targets earlier runs recorded it under, before its module moved (``git log --follow`` of the module)
    moved_from: tuple[str, ...] = ()

    @property
    def display(self) -> str:
        return f"{self.name} ({self.detail})" if self.detail else self.name


BUGGY = Implementation(
    "buggy",
    "repro.core.kernels.gather:gather_buggy",
    Expectation.BUG,
    True,
    "buggy",
    Origin.REPO,
    _style(color="#c0392b", marker="o"),
    role=Role.BUG,
    detail="row pitch shape[-1]",
    moved_from=("repro.kernels.gather:gather_buggy",),
)
FIXED = Implementation(
    "fixed",
    "repro.core.kernels.gather:gather_fixed",
    Expectation.CORRECT,
    False,
    "fixed",
    Origin.REPO,
    _style(color="#27ae60", marker="s"),
    role=Role.FIX,
    detail="row pitch stride(0)",
    moved_from=("repro.kernels.gather:gather_fixed",),
)
CONTIGUOUS_COPY = Implementation(
    "contiguous-copy",
    "repro.core.kernels.gather:gather_contiguous_copy",
    Expectation.CORRECT,
    False,
    ".contiguous() + buggy kernel",
    Origin.REPO,
    _style(color="#2980b9", marker="^"),
    role=Role.ALTERNATIVE,
    moved_from=("repro.kernels.gather:gather_contiguous_copy",),
)

#: Which code produced a row of notebook 01: the repository's model of the runner's reshape.
CODE_MODEL = "model"

#: Label of the implementation a user names with the ``implementation`` parameter.
UNDER_TEST_LABEL = "under-test"
UNDER_TEST_STYLE = _style(color="#8e44ad", marker="x", linestyle="--")

#: This repository's gathers of PR #55109: the kernel before the fix, the fix, the rejected alternative.
IMPLEMENTATIONS: tuple[Implementation, ...] = (BUGGY, FIXED, CONTIGUOUS_COPY)

_GENERIC_STYLE = _style(color="#7f8c8d", marker=".")


@dataclass(frozen=True)
class Registered:
    """What a package built on this one adds to the registry (entry point ``registry`` of :mod:`repro.plugins`):
    gathers of its own, each with its ``loader``: ``implementations`` join this registry's (swept beside
    :data:`IMPLEMENTATIONS` where ``in_sweep``), ``kernels`` are the package's others, which only its own notebooks
    run and :func:`implementations` does not list."""

    implementations: tuple[Implementation, ...] = ()
    kernels: tuple[Implementation, ...] = ()


def implementations() -> tuple[Implementation, ...]:
    """This repository's gathers, then those installed packages register."""
    return IMPLEMENTATIONS + tuple(e for r in registered(Point.REGISTRY, Registered) for e in r.implementations)


def loaders() -> dict[str, Loader]:
    """Every registered package's own gathers (:class:`Registered`), each by the ``target`` its tables record: the
    loader that returns the function itself (:func:`repro.core.kernels.own.kernel_of`)."""
    entries = (e for r in registered(Point.REGISTRY, Registered) for e in (*r.implementations, *r.kernels))
    return {e.target: e.loader for e in entries if e.loader is not None}


def implementation(label: str) -> Implementation:
    for entry in implementations():
        if entry.label == label:
            return entry
    raise KeyError(f"no implementation labelled {label!r}; known: {', '.join(e.label for e in implementations())}")


def sweep_implementations() -> tuple[Implementation, ...]:
    return tuple(e for e in implementations() if e.in_sweep)


def under_test(target: str) -> Implementation:
    """The implementation a user names; it is expected to be correct, and may fault (this repository's own kernels:
    as their entries say)."""
    own = next((e for e in IMPLEMENTATIONS if e.target == target), None)
    return Implementation(
        UNDER_TEST_LABEL,
        target,
        Expectation.CORRECT,
        own.may_fault if own is not None else True,
        f"under test: {target}",
        Origin.USER,
        UNDER_TEST_STYLE,
        role=Role.UNDER_TEST,
    )


def is_outside(entry: Implementation) -> bool:
    """Is ``entry`` code from outside this repository (a module a user named)? Such code runs only in case
    processes and never decides a case (repro.core.evidence.worker); this repository's own kernels run beside it."""
    return entry.target not in builtin_targets()


def builtin_targets() -> frozenset[str]:
    return frozenset(e.target for e in implementations())


def expectations() -> dict[str, Expectation]:
    """What each implementation label is expected to do (labels not listed: correct)."""
    return {e.label: e.expect for e in implementations()}


def expectation(label: str) -> Expectation:
    """What a table's variant label is expected to do (unknown labels: correct)."""
    return expectations().get(label, Expectation.CORRECT)


def style(label: str) -> Mapping[str, Any]:
    """Plot style of an implementation label; a neutral one for labels of other runs."""
    fallback = UNDER_TEST_STYLE if label == UNDER_TEST_LABEL else _GENERIC_STYLE
    return next((entry.style for entry in implementations() if entry.label == label), fallback)


def prose(label: str) -> str:
    """``the buggy gather (row pitch shape[-1])``: an implementation named in a sentence."""
    for entry in implementations():
        if entry.label == label:
            return f"the {entry.name} gather" + (f" ({entry.detail})" if entry.detail else "")
    return f"the {label} gather"


# --------------------------------------------------------------------------------------------
# Resolving "package.module:function".


class ImplementationError(ValueError):
    """The named implementation cannot be used; the message says why and what is accepted."""


def load_implementation(path: str, param: str = "implementation") -> Callable[..., None]:
    """Import ``"package.module:function"`` and check it accepts vLLM's 7 positional arguments."""
    accepted = f"accepted: 'package.module:function' with signature {GATHER_SIGNATURE}"
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ImplementationError(f"{param}: {path!r} is not of the form 'package.module:function'; {accepted}")
    module_name, func_name = path.split(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ImplementationError(
            f"{param}: cannot import module {module_name!r} ({type(exc).__name__}: {exc}); {accepted}"
        ) from None
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise ImplementationError(f"{param}: module {module_name!r} has no function {func_name!r}; {accepted}")
    try:
        sig = inspect.signature(fn)
        sig.bind(*GATHER_ARGS)
    except (TypeError, ValueError) as exc:
        raise ImplementationError(
            f"{param}: {path} has signature {_describe(fn)}, which does not take "
            f"the 7 positional arguments of {GATHER_SIGNATURE} ({exc})"
        ) from None
    return fn


def provenance(path: str) -> dict[str, Any]:
    """Where an implementation came from: its top package's version and the module file's hash.

    The version is read from the loaded package (``__version__``, or its ``_version`` module), so
    a report names the release actually under test, never one typed into the code. The module itself is found, not
    imported, when it is not loaded yet: hashing a file needs no torch.
    """
    module_name = path.split(":")[0]
    module = sys.modules.get(module_name)
    top = module_name.split(".")[0]
    importlib.import_module(top)
    package = sys.modules.get(top)
    version = getattr(package, "__version__", None)
    if version is None:
        try:
            version = getattr(importlib.import_module(f"{top}._version"), "__version__", None)
        except Exception:
            version = None
    info: dict[str, Any] = {"target": path, "package": top, "version": version}
    file = getattr(module, "__file__", None) if module is not None else _module_file(module_name)
    if file and Path(file).is_file():
        info["module_sha256"] = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    return info


def _module_file(module_name: str) -> str | None:
    spec = importlib.util.find_spec(module_name)
    return spec.origin if spec is not None else None


def is_registered(path: str) -> bool:
    """Whether ``path`` is a gather a registry holds (this repository's or a registered package's own), which the
    run's pre-flight need not import to check: its signature is the registry's (tests/test_short_paths.py)."""
    return path in {e.target for e in IMPLEMENTATIONS} or path in loaders()


class Whose(StrEnum):
    """Whose code produced a result: what a vLLM reviewer asks before reading a row as a finding about vLLM."""

    RELEASE = "release"  # a vLLM release's own function or kernel, loaded from its wheel
    REPLICA = "replica"  # this repository's replica of vLLM's code (the expression before or after a fix)
    OWN = "own"  # a kernel of this repository's own, in neither pull request
    NAMED = "named"  # an implementation the user named (``package.module:function``)


@dataclass(frozen=True)
class CodeRan:
    """The code behind a result row, rendered by the report's ``ran`` filter."""

    whose: Whose
    name: str  # ``module:function`` (replica, own, named) or the release's function or kernel name
    source: str = ""  # who shipped it, as the run recorded it: ``vLLM 0.22.0``; ``vllm 0.22.0`` or ``vllm`` (named)


#: Notebook 01's reshape: this repository's replica of the V2 runner's ``_reshape_kv_cache`` (buggy and fixed count).
RESHAPE_REPLICA = CodeRan(Whose.REPLICA, "repro.core.reshape.plan:reshape_kv_cache")


def code_of(label: str) -> CodeRan:
    """The code a registered implementation label runs (this repository's replica or own kernel)."""
    entry = next(e for e in implementations() if e.label == label)
    return CodeRan(Whose.OWN if entry.role == Role.OWN else Whose.REPLICA, entry.target)


def role(label: str) -> Role:
    """The role of a table's variant label; labels this registry does not list are under test."""
    return next((entry.role for entry in implementations() if entry.label == label), Role.UNDER_TEST)


def _describe(fn: Callable[..., Any]) -> str:
    try:
        return f"{fn.__name__}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return repr(fn)

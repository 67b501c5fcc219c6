"""Which gather kernel of a vLLM release a row is about: a :class:`KernelId` built where the kernel is found.

The release matrix names a kernel by its module family and Triton name (``v41:_dequantize_and_gather_k_mxfp8_kernel``)
or, for the CuTe-DSL gather the dispatcher reaches, by family and record (``cutedsl:v4:v4``); the dispatch table
names what launched (``triton:_dequantize_and_gather_k_kernel``, ``CuTe-DSL <entry>``); the kernel inventory names a
CuTe-DSL module by its gather classes (``cutedsl:DequantGatherKCacheKernel``, :func:`inventory_label`). These labels are
written here only, from the identity's fields. A table read back gives a label to :func:`from_matrix_label` or
:func:`from_launch_label`, which return the identity whose label is that text exactly (among the identities the text
can stand for, :meth:`KernelId.candidates`), so a label no identity writes is no kernel (``None``), never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class KernelKind(StrEnum):
    """The kind of gather (how reports name it)."""

    TRITON = "Triton"
    CUTEDSL = "CuTe-DSL"


class KernelFamily(StrEnum):
    """The model code a kernel's module belongs to."""

    V4 = "v4"
    V41 = "v41"


def family_of(member: str) -> KernelFamily:
    """The gather family of a wheel member: DeepSeek-V4.1's modules (``deepseek_v41`` in the path) or V4's."""
    return KernelFamily.V41 if "deepseek_v41" in member else KernelFamily.V4


#: The fixed parts of the written labels, per kind: the release matrix's (Triton: none) and the dispatch table's.
_MATRIX_MARK = {KernelKind.TRITON: "", KernelKind.CUTEDSL: "cutedsl:"}
_LAUNCH_MARK = {KernelKind.TRITON: "triton:", KernelKind.CUTEDSL: "CuTe-DSL "}


@dataclass(frozen=True)
class KernelId:
    """One gather kernel of a release.

    ``name``: a Triton kernel's qualified name (``Class.kernel`` for a JIT class's) or the CuTe-DSL entry the
    dispatcher called ("" for the matrix's CuTe-DSL arm, which calls the dispatcher and names no entry).
    ``record``: the record it reads (v4, mxfp8, nvfp4); "" where the row that found it does not say.
    """

    kind: KernelKind
    family: KernelFamily | None  # None: read back from a launch label, which does not name it
    name: str
    record: str = ""

    @classmethod
    def triton(cls, member: str, qualname: str, record: str = "") -> KernelId:
        """The ``@triton.jit`` kernel ``qualname`` of wheel member ``member``."""
        return cls(KernelKind.TRITON, family_of(member), qualname, record)

    @classmethod
    def cutedsl(cls, family: KernelFamily, record: str, entry: str = "") -> KernelId:
        """The CuTe-DSL gather of ``record`` reached through the ``family`` dispatcher (``entry``: what it called)."""
        return cls(KernelKind.CUTEDSL, family, entry, record)

    @property
    def matrix_label(self) -> str:
        """The release matrix's ``kernel`` cell: ``v4:_dequantize_and_gather_k_kernel``, ``cutedsl:v41:mxfp8``."""
        if self.kind == KernelKind.CUTEDSL:
            return f"{_MATRIX_MARK[self.kind]}{self.family}:{self.record}"
        return f"{self.family}:{self.name}"

    @property
    def launch_label(self) -> str:
        """The dispatch table's ``gather_kernel`` cell (what launched): ``triton:<name>``, ``CuTe-DSL <entry>``."""
        return f"{_LAUNCH_MARK[self.kind]}{self.name}"

    def __str__(self) -> str:
        return self.launch_label

    @staticmethod
    def candidates(label: str) -> list[KernelId]:
        """The identities a written ``label`` can stand for, one per kind, family and record the code knows, with
        the name the text leaves for it (none for a CuTe-DSL matrix label, which names no entry); the readers keep
        the one whose label is the text exactly. A launch label names no family or record: those stay unset."""
        out = [KernelId.cutedsl(f, r) for f in KernelFamily for r in RECORD_KINDS]
        out += [KernelId(KernelKind.TRITON, f, label[len(f"{f}:") :]) for f in KernelFamily]
        out += [KernelId(kind, None, label[len(_LAUNCH_MARK[kind]) :]) for kind in KernelKind]
        return out


def inventory_label(classes: Iterable[str]) -> str:
    """The kernel inventory's ``kernel`` cell of a release's CuTe-DSL gather module: the classes it defines
    (``cutedsl:DequantGatherKCacheKernel``); no reader takes it apart."""
    return _MATRIX_MARK[KernelKind.CUTEDSL] + ",".join(classes)


#: The records a gather reads, as kernels name them.
RECORD_KINDS = ("v4", "mxfp8", "nvfp4")


def from_matrix_label(label: str, identities: Iterable[KernelId] | None = None) -> KernelId | None:
    """The identity whose release-matrix label is ``label`` exactly, among ``identities`` (by default the
    :meth:`KernelId.candidates` of the label); ``None`` when no kernel writes that text."""
    pool = KernelId.candidates(label) if identities is None else identities
    return next((k for k in pool if k.family is not None and k.matrix_label == label), None)


def from_launch_label(label: str, identities: Iterable[KernelId] | None = None) -> KernelId | None:
    """The identity whose dispatch-table label (what launched) is ``label`` exactly, among ``identities`` (by
    default the :meth:`KernelId.candidates` of the label); ``None`` when no kernel writes that text (``the
    dispatcher raises``, an empty cell)."""
    pool = KernelId.candidates(label) if identities is None else identities
    return next((k for k in pool if k.name and k.launch_label == label), None)

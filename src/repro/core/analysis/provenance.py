"""What a run recorded of the implementations it loaded by name, read back: each as a reader names it today
(this repository's own under its module path of today, an outside function with the version its package reported),
and whose code it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro.registry import CodeRan, Whose, builtin_targets, code_of, implementations


def current_target(target: str) -> str:
    """This repository's implementation under the module path it has today, for a target a run recorded under an
    earlier one (an entry's ``moved_from``: ``repro.kernels.gather:gather_fixed`` before the core/studies split); any
    other target as it is."""
    return next((e.target for e in implementations() if target in e.moved_from), target)


def provenance_name(info: Mapping[str, Any]) -> str:
    """``vllm 0.22.0's dequantize_and_gather_k_cache_triton`` from :func:`provenance`'s record; this repository's
    own function by its import path today; an outside function whose package reported no version by its import
    path (what the run recorded of it)."""
    target = current_target(str(info.get("target", "")))
    if target in builtin_targets():
        return f"this repository's `{target}`"
    module, _, function = target.rpartition(":")
    package = info.get("package") or target.split(".", 1)[0] or "?"
    version = info.get("version")
    return f"{package} {version}'s {function}" if version else f"{package}'s {function} (from {module})"


def provenance_short(info: Mapping[str, Any]) -> str:
    """``vllm 0.22.0`` (or ``vllm`` when its version was not recorded): a table column's name for an outside
    kernel."""
    target = str(info.get("target", ""))
    package = info.get("package") or target.split(".", 1)[0] or "?"
    version = info.get("version")
    return f"{package} {version}" if version else str(package)


def named_code(info: Mapping[str, Any]) -> CodeRan:
    """The code of an implementation a run loaded by name, from the provenance it recorded (:func:`provenance`):
    this repository's own under today's path, else the named function with what its package reported."""
    target = current_target(str(info.get("target", "")))
    for entry in implementations():
        if entry.target == target:
            return code_of(entry.label)
    return CodeRan(Whose.NAMED, target, provenance_short(info))

"""This repository's gathers of the registry (:data:`repro.registry.IMPLEMENTATIONS`) as the functions themselves: a
case reaches one of them through its entry, never by importing the entry's ``module:function`` text; only a path a
user names, or a registered package's, is imported by its text (:func:`repro.registry.load_implementation`)."""

from __future__ import annotations

from collections.abc import Callable

from repro.registry import BUGGY, CONTIGUOUS_COPY, FIXED, load_implementation


def kernel_of(target: str, param: str = "implementation") -> Callable[..., None]:
    """The gather ``target`` names: this repository's own as defined, any other imported by its path."""
    from repro.core.kernels import gather  # lazy: Triton defines the kernels under the profile chosen first

    own = {
        BUGGY.target: gather.gather_buggy,
        FIXED.target: gather.gather_fixed,
        CONTIGUOUS_COPY.target: gather.gather_contiguous_copy,
    }
    return own[target] if target in own else load_implementation(target, param)

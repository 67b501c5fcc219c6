"""This repository's gathers of the registry (:data:`repro.registry.IMPLEMENTATIONS`) as the functions themselves, and
those a package built on this one registers, through their loaders (:func:`repro.registry.loaders`): a case reaches
one of them through its entry, never by importing the entry's ``module:function`` text; only a path a user names is
imported by its text (:func:`repro.registry.load_implementation`)."""

from __future__ import annotations

from collections.abc import Callable

from repro.registry import BUGGY, CONTIGUOUS_COPY, FIXED, load_implementation, loaders


def kernel_of(target: str, param: str = "implementation") -> Callable[..., None]:
    """The gather ``target`` names: this repository's own as defined, a registered package's own through its loader,
    any other imported by its path."""
    from repro.core.kernels import gather  # lazy: Triton defines the kernels under the profile chosen first

    own = {
        BUGGY.target: gather.gather_buggy,
        FIXED.target: gather.gather_fixed,
        CONTIGUOUS_COPY.target: gather.gather_contiguous_copy,
    }
    if target in own:
        return own[target]
    loader = loaders().get(target)
    return loader() if loader is not None else load_implementation(target, param)

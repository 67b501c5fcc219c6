"""Which CuTe-DSL stack ran a release's CuTe-DSL gather, and which one the release pins.

vLLM's CuTe-DSL gather compiles through ``nvidia-cutlass-dsl`` and ``quack-kernels``, and every release pins both
in its wheel's ``Requires-Dist`` (read from the wheel's own ``METADATA`` in the module cache,
:func:`repro_studies.upstream.wheelcache.requirements`). The matrix runs whatever stack the host has installed;
:func:`describe` puts both side by side (``ran nvidia-cutlass-dsl 4.8.0, quack-kernels 0.6.5; vLLM 0.34.0 pins
nvidia-cutlass-dsl==4.8.0, quack-kernels==0.6.5``) so a row run with another stack than the release's says so.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from repro_studies.upstream.members import METADATA
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release, requirements

#: The distributions of the CuTe-DSL stack, as the registry names them.
STACK = ("nvidia-cutlass-dsl", "quack-kernels")


def installed() -> dict[str, str | None]:
    """The version of each stack distribution installed here (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in STACK:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def pinned(version: str, cache_root: Path | None = None, download: bool = True) -> dict[str, str] | None:
    """Each stack distribution's requirement in release ``version``'s wheel (``nvidia-cutlass-dsl==4.8.0``),
    "" for one the release does not require; None when the cache has no metadata for the release."""
    entry = ensure_release(version, cache_root, download=download, sets=(METADATA,))
    if isinstance(entry, CacheMiss):
        return None
    found = requirements(entry)
    if found is None:
        return None
    return {name: found.get(name, "") for name in STACK}


def pinned_versions(pins: dict[str, str] | None) -> dict[str, str]:
    """``{name: "4.8.0"}`` from exact pins (``==``); other requirements as written."""
    out = {}
    for name, line in (pins or {}).items():
        exact = re.search(r"==\s*([^\s;,]+)", line)
        out[name] = exact.group(1) if exact else line
    return out


def matches(ran: dict[str, str | None], pins: dict[str, str] | None) -> bool | None:
    """Did the installed stack equal the release's exact pins (None: pins unknown)?"""
    if pins is None:
        return None
    want = pinned_versions(pins)
    return all(ran.get(name) == want.get(name) for name in STACK)


def describe(version: str, ran: dict[str, str | None] | None, pins: dict[str, str] | None) -> str:
    """``ran nvidia-cutlass-dsl 4.8.0, quack-kernels 0.6.5; vLLM 0.34.0 pins nvidia-cutlass-dsl==4.8.0, ...``
    (``ran``: the installed stack, None when the gather did not run)."""
    if ran is None:
        shown = "not run"
    else:
        shown = "ran " + ", ".join(f"{name} {ran[name]}" if ran.get(name) else f"no {name}" for name in STACK)
    if pins is None:
        wanted = f"vLLM {version}'s pins unknown (the module cache holds no wheel metadata)"
    else:
        lines = [pins[name] or f"no {name}" for name in STACK]
        wanted = f"vLLM {version} pins {', '.join(lines)}"
    same = None if ran is None else matches(ran, pins)
    flag = "" if same is None or same else " (differs)"
    return f"{shown}; {wanted}{flag}"

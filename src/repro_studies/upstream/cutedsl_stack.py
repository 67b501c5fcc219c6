"""Which CuTe-DSL stack ran a release's CuTe-DSL gather, and which one the release pins.

vLLM's CuTe-DSL gather compiles through ``nvidia-cutlass-dsl`` and ``quack-kernels``, and every release pins both
in its wheel's ``Requires-Dist`` (read from the wheel's own ``METADATA`` in the module cache,
:func:`repro_studies.upstream.wheelcache.requirements`). The matrix runs whatever stack the host has installed;
:func:`describe` puts both side by side (``ran nvidia-cutlass-dsl 4.8.0, quack-kernels 0.6.5; vLLM 0.34.0 pins
nvidia-cutlass-dsl==4.8.0, quack-kernels==0.6.5``) so a row run with another stack than the release's says so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

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


def _requirement(line: str) -> Requirement | None:
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


def lowest_allowed(line: str) -> str | None:
    """The lowest version a requirement line admits when it names one (``==4.8.0`` or ``>=0.3.3``), else None.

    A release that asks ``quack-kernels>=0.3.3`` runs with 0.3.3 here: the oldest stack its own requirement lets a
    user install, and the one its code was written against."""
    req = _requirement(line) if line else None
    if req is None:
        return None
    floors = [s.version for s in req.specifier if s.operator in ("==", ">=")]
    admitted = [v for v in floors if req.specifier.contains(v, prereleases=True)]
    return min(admitted, key=Version) if admitted else None


def pinned_pair(pins: dict[str, str] | None) -> tuple[str, str] | None:
    """The (nvidia-cutlass-dsl, quack-kernels) versions a release's requirements ask for (:func:`lowest_allowed`
    of each), None when either is unknown or open-ended."""
    wanted = tuple(lowest_allowed((pins or {}).get(name, "")) for name in STACK)
    return None if None in wanted else wanted  # type: ignore[return-value]


def matches(ran: dict[str, str | None], pins: dict[str, str] | None) -> bool | None:
    """Did the installed stack satisfy each of the release's requirements (None: pins unknown)?"""
    if pins is None:
        return None
    for name in STACK:
        req = _requirement(pins.get(name, "")) if pins.get(name) else None
        version = ran.get(name)
        if req is None or version is None or not req.specifier.contains(version, prereleases=True):
            return False
    return True


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


def pairs(
    versions: list[str], cache_root: Path | None = None, download: bool = True
) -> dict[tuple[str, str], list[str]]:
    """Each pinned (nvidia-cutlass-dsl, quack-kernels) pair and the releases that ask for it, in the given order;
    releases whose pins are unknown or open-ended are left out (the caller names them)."""
    out: dict[tuple[str, str], list[str]] = {}
    for version in versions:
        pair = pinned_pair(pinned(version, cache_root, download))
        if pair is not None:
            out.setdefault(pair, []).append(version)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m repro_studies.upstream.cutedsl_stack [--no-download] RELEASE ...``: one line per pinned pair,
    ``<nvidia-cutlass-dsl> <quack-kernels> <release>,<release>...``, read from each release's wheel (what
    ``scripts/fetch-cutedsl-wheels.sh`` fetches and ``scripts/gpu-evidence.sh matrix-pinned`` runs)."""
    parser = argparse.ArgumentParser(prog="python -m repro_studies.upstream.cutedsl_stack")
    parser.add_argument("--no-download", action="store_true", help="read only the module cache")
    parser.add_argument("releases", nargs="+", metavar="RELEASE")
    args = parser.parse_args(argv)
    found = pairs(args.releases, download=not args.no_download)
    missing = [v for v in args.releases if not any(v in rs for rs in found.values())]
    for (cutlass, quack), releases in found.items():
        print(cutlass, quack, ",".join(releases))
    if missing:
        print(f"releases: no pinned CuTe-DSL pair known for {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

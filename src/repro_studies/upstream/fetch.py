"""Which releases to fetch, and fetching them: the first release that ships a DeepSeek gather found by bisecting the
registry's releases with the wheel cache's scan, recorded in the cache (``releases.json``) so a host without a
registry that carries the cache still knows the list; and the command that fills (and exports) the cache::

    python -m repro_studies.upstream.fetch [--sets gather,metadata] [--export DEST] [VERSION ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from repro_studies.upstream.members import GATHER, METADATA, resolve
from repro_studies.upstream.releases import (
    RELEASES_FILE,
    ReleaseListError,
    fetch_index,
    first_release,
    releases_from_index,
)
from repro_studies.upstream.wheelcache import CacheMiss, MissStatus, default_cache_root, ensure_release, export


@dataclass(frozen=True)
class DerivedReleases:
    """The first release shipping a DeepSeek gather and every indexed release from it, as found."""

    first: str
    releases: list[str]
    probed: dict[str, bool]  # release -> shipped a gather (the bisection's probes)
    member_set: str
    set_digest: str
    checked: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def recorded_releases(cache_root: Path) -> DerivedReleases | None:
    """The release list recorded in a cache root (None when absent or unreadable)."""
    try:
        return DerivedReleases(**json.loads((cache_root / RELEASES_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def derive_releases(cache_root: Path | None = None, document: dict | None = None) -> DerivedReleases:
    """Bisect the index's releases for the first that ships a DeepSeek gather; record the result.

    Reuses the recorded result when it was made with the same gather member set and its first release
    is still on the index (a new release only extends the list). Raises ``OSError`` when the registry
    cannot be reached and ``ReleaseListError`` when a probe could not download a wheel.
    """
    cache_root = cache_root or default_cache_root()
    document = document if document is not None else fetch_index(timeout_s=20)
    indexed = releases_from_index(document)
    versions = [r.version for r in indexed]
    known = recorded_releases(cache_root)
    if known is not None and known.set_digest == GATHER.digest() and known.first in versions:
        first, probed = known.first, known.probed
    else:
        probed: dict[str, bool] = {}

        def ships(version: str) -> bool:
            r = next(r for r in indexed if r.version == version)
            got = ensure_release(version, cache_root, sets=(GATHER,), platforms=r.platforms)
            if isinstance(got, CacheMiss) and got.status != MissStatus.UNKNOWN:
                raise ReleaseListError(f"releases: probing vLLM {version} failed: {got.status}: {got.reason}")
            probed[version] = not isinstance(got, CacheMiss)
            return probed[version]

        first = first_release(versions, ships)
        if first is None:
            raise ReleaseListError("releases: no release on the registry ships a DeepSeek-V4 gather")
    derived = DerivedReleases(
        first,
        versions[versions.index(first) :],
        probed,
        GATHER.name,
        GATHER.digest(),
        dt.date.today().isoformat(),
    )
    cache_root.mkdir(parents=True, exist_ok=True)
    (cache_root / RELEASES_FILE).write_text(derived.to_json())
    return derived


def gpu_default_releases(cache_root: Path | None = None, download: bool = True) -> list[str]:
    """The GPU profile's default: every release from the first with a DeepSeek gather.

    From the registry when downloads are on (recorded in the cache), else from the carried cache's record.
    """
    cache_root = cache_root or default_cache_root()
    if download:
        try:
            return derive_releases(cache_root).releases
        except OSError:
            pass
    known = recorded_releases(cache_root)
    if known is None:
        raise ReleaseListError(
            f"releases: 'default' needs the registry or a cache that records the list ({cache_root / RELEASES_FILE}, "
            "written by `python -m repro_studies.upstream.fetch` where the registry is reachable); "
            "accepted otherwise: a list of release numbers such as ['0.22.0', '0.33.0']"
        )
    return list(known.releases)


def main(argv: list[str] | None = None) -> int:
    """``python -m repro_studies.upstream.fetch [--sets gather,metadata] [VERSION ...]``: fill the cache.

    Default: every release from the first that ships a DeepSeek gather (found on the registry, recorded
    in the cache so a host without one can carry it), with the gather member set and the wheel's metadata
    (the CuTe-DSL pins the matrix's rows compare with the stack that ran).
    """
    parser = argparse.ArgumentParser(prog="python -m repro_studies.upstream.fetch")
    default = f"{GATHER.name},{METADATA.name}"
    parser.add_argument("--sets", default=default, help=f"comma-separated member sets (default: {default})")
    parser.add_argument(
        "--export",
        metavar="DEST",
        type=Path,
        help="after filling, copy the entries (of the VERSIONs given, else all) restricted to --sets into DEST",
    )
    parser.add_argument("versions", nargs="*")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        sets = resolve(s.strip() for s in args.sets.split(",") if s.strip())
    except KeyError as exc:
        parser.error(f"--sets: {exc.args[0]}")
    versions = args.versions
    if not versions:
        derived = derive_releases()
        print(f"first release with a DeepSeek gather: {derived.first} (probed {derived.probed or 'earlier'})")
        versions = derived.releases
    failed = 0
    for version in versions:
        got = ensure_release(version, sets=sets)
        if isinstance(got, CacheMiss):
            failed += 1
            print(f"{version}: {got.status}: {got.reason}")
        else:
            wheel, digest = got.provenance["wheel"], got.provenance["sha256"][:16]
            print(f"{version}: {wheel} sha256 {digest}, {len(got.members())} files")
    print(f"cache: {default_cache_root()}")
    if args.export:
        copied = export(args.export, sets, versions=args.versions)
        print(f"exported {len(copied)} releases ({', '.join(s.name for s in sets)} only) to {args.export}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

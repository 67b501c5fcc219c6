"""Which vLLM releases to test: every release from the first that ships a DeepSeek gather, from the registry.

The registry's JSON API lists every release with its files. A release is a candidate when it has an
x86_64 Linux wheel; its wheel's platform tags (``manylinux_2_35_x86_64``, ...) are what ``pip download``
is asked for. The first release that ships a DeepSeek-V4 gather is found by bisecting the candidates
with the wheel cache's scan (:func:`first_release`), and the GPU default list is every candidate from
there on. Both are recorded in ``<cache>/releases.json``, so a host without a registry that carries the
cache still knows the list. The CPU profile keeps a short committed list.
"""

from __future__ import annotations

import functools
import json
import re
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from repro import downloads

#: The CPU profile's short list: a release with the V4 Triton gather only and the newest (every kernel kind).
CPU_DEFAULT_RELEASES = ("0.22.0", "0.34.0")
INDEX_URL = "https://pypi.org/pypi/{package}/json"
#: Where the derived release list is recorded in a cache root (carried with it).
RELEASES_FILE = "releases.json"
_VERSION = re.compile(r"^\d+(\.\d+){1,3}$")


class ReleaseListError(ValueError):
    """A release list that cannot be used; the message names the parameter and what is accepted."""


@dataclass(frozen=True)
class IndexedRelease:
    version: str
    wheel: str  # the x86_64 wheel's file name ("" when the release has none)
    size: int
    sha256: str
    uploaded: str

    @property
    def platforms(self) -> tuple[str, ...]:
        """The wheel's platform tags, as ``pip download --platform`` takes them."""
        return wheel_platforms(self.wheel)


def wheel_platforms(filename: str) -> tuple[str, ...]:
    """Platform tags of a wheel file name (a compressed tag set ``a.b`` is both ``a`` and ``b``)."""
    return tuple(filename.removesuffix(".whl").split("-")[-1].split("."))


def is_linux_x86_64(filename: str) -> bool:
    return filename.endswith(".whl") and any(
        "linux" in tag and tag.endswith("x86_64") for tag in wheel_platforms(filename)
    )


def version_key(version: str) -> tuple:
    """Numeric sort key for plain release numbers (``0.22.1`` < ``0.23.0``)."""
    return tuple(int(p) for p in version.split("."))


def is_plain_version(text: str) -> bool:
    """A final release number such as ``0.33.0`` (no pre-release or local parts)."""
    return bool(_VERSION.match(text))


def fetch_index(package: str = "vllm", timeout_s: float = 30.0) -> dict:
    """The registry's JSON document for ``package`` (raises ``OSError`` when it cannot be reached, or must not be:
    a notebook run with ``download=false``)."""
    if not downloads.allowed():
        raise OSError("the registry is not asked: downloads are off (download=false)")
    with urllib.request.urlopen(INDEX_URL.format(package=package), timeout=timeout_s) as resp:
        return json.load(resp)


@functools.lru_cache(maxsize=1)
def _index_once() -> dict | None:
    try:
        return fetch_index(timeout_s=20)
    except OSError:
        return None


def releases_from_index(document: dict, first: str | None = None) -> list[IndexedRelease]:
    """Final releases (from ``first`` on, when given) with an x86_64 Linux wheel (the highest build tag)."""
    found = []
    for version, files in document.get("releases", {}).items():
        if not is_plain_version(version) or (first is not None and version_key(version) < version_key(first)):
            continue
        wheels = [f for f in files if is_linux_x86_64(f.get("filename", "")) and not f.get("yanked")]
        if not wheels:
            continue
        best = max(wheels, key=lambda f: (len(f["filename"].split("-")), f["filename"]))
        found.append(
            IndexedRelease(
                version,
                best["filename"],
                int(best.get("size", 0)),
                best.get("digests", {}).get("sha256", ""),
                best.get("upload_time", "")[:10],
            )
        )
    return sorted(found, key=lambda r: version_key(r.version))


def generic_platforms() -> list[str]:
    """Every manylinux x86_64 tag (PEP 600, glibc 2.17 to 2.40): asked for when the index is unavailable."""
    return [f"manylinux_2_{minor}_x86_64" for minor in range(40, 16, -1)] + ["manylinux2014_x86_64"]


def release_platforms(version: str, document: dict | None = None) -> list[str]:
    """The platform tags of ``version``'s x86_64 wheel on the index (every manylinux tag without one)."""
    document = document if document is not None else _index_once()
    for r in releases_from_index(document or {}):
        if r.version == version:
            return list(r.platforms)
    return generic_platforms()


def first_release(versions: list[str], ships: Callable[[str], bool]) -> str | None:
    """The first of ``versions`` (ascending) for which ``ships`` is true, by bisection.

    Assumes a release that ships the code is followed only by releases that ship it (each probe costs a
    wheel download); None when the newest does not ship it.
    """
    if not versions or not ships(versions[-1]):
        return None
    lo, hi = 0, len(versions) - 1  # versions[hi] ships; everything below lo does not
    while lo < hi:
        mid = (lo + hi) // 2
        if ships(versions[mid]):
            hi = mid
        else:
            lo = mid + 1
    return versions[lo]


def resolve_releases(
    selection: str | list[str],
    profile: str,
    index_versions: list[str] | None = None,
    gpu_default: Callable[[], list[str]] | None = None,
) -> list[str]:
    """Turn the notebook's ``releases`` parameter into version strings.

    ``"default"``: the profile's default (on a GPU every release from the first with a DeepSeek gather,
    as ``gpu_default`` finds it, e.g. :func:`repro.studies.upstream.fetch.gpu_default_releases`; the short list on
    a CPU);
    ``"all"``: every release the registry index lists (``index_versions``); otherwise a list of
    versions or a comma-separated string. Unknown versions are kept: the matrix reports them as rows.
    """
    accepted = "accepted: 'default', 'all', or a list of release numbers such as ['0.22.0', '0.33.0']"
    if isinstance(selection, str):
        if selection == "default":
            if profile != "gpu":
                return list(CPU_DEFAULT_RELEASES)
            if gpu_default is None:
                raise ReleaseListError("releases: 'default' on a GPU needs the derived release list; " + accepted)
            return list(gpu_default())
        if selection == "all":
            if index_versions is None:
                raise ReleaseListError("releases: 'all' needs the registry index, which was not available; " + accepted)
            return list(index_versions)
        selection = [s.strip() for s in selection.split(",") if s.strip()]
    if not isinstance(selection, (list, tuple)) or not selection:
        raise ReleaseListError(f"releases: {selection!r} is not a release list; {accepted}")
    out = []
    for item in selection:
        text = str(item).strip()
        if not is_plain_version(text):
            raise ReleaseListError(f"releases: {item!r} is not a release number; {accepted}")
        if text not in out:
            out.append(text)
    return out

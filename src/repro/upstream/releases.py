"""Which vLLM releases to test: a small committed default list, or the registry's own index.

The registry's JSON API lists every release with its files; a release is a candidate when it is at
least :data:`FIRST_RELEASE` (the first with DeepSeek-V4 gather code) and has an x86_64 wheel. The
committed :data:`DEFAULT_RELEASES` are the releases known to matter, so a host without a registry can
still name them (its cache then has to be carried in).
"""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass

#: The first vLLM release that ships DeepSeek-V4 gather code.
FIRST_RELEASE = "0.21.0"
#: Releases known to ship DeepSeek-V4 gather code (0.21.0 and 0.22.0 .. 0.33.0 with patch releases).
DEFAULT_RELEASES = (
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
)
#: The CPU profile's short list: the release of the existing evidence and the newest (every kernel kind).
CPU_DEFAULT_RELEASES = ("0.22.0", "0.33.0")
INDEX_URL = "https://pypi.org/pypi/{package}/json"
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


def version_key(version: str) -> tuple:
    """Numeric sort key for plain release numbers (``0.22.1`` < ``0.23.0``)."""
    return tuple(int(p) for p in version.split("."))


def is_plain_version(text: str) -> bool:
    """A final release number such as ``0.33.0`` (no pre-release or local parts)."""
    return bool(_VERSION.match(text))


def fetch_index(package: str = "vllm", timeout_s: float = 30.0) -> dict:
    """The registry's JSON document for ``package`` (raises ``OSError`` when it cannot be reached)."""
    with urllib.request.urlopen(INDEX_URL.format(package=package), timeout=timeout_s) as resp:
        return json.load(resp)


def releases_from_index(document: dict, first: str = FIRST_RELEASE) -> list[IndexedRelease]:
    """Final releases from ``first`` on, each with its x86_64 wheel (the highest build tag if several)."""
    found = []
    for version, files in document.get("releases", {}).items():
        if not is_plain_version(version) or version_key(version) < version_key(first):
            continue
        wheels = [f for f in files if f.get("filename", "").endswith("x86_64.whl") and not f.get("yanked")]
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


def resolve_releases(selection: str | list[str], profile: str, index_versions: list[str] | None = None) -> list[str]:
    """Turn the notebook's ``releases`` parameter into version strings.

    ``"default"``: the profile's default (every known release on a GPU, the short list on a CPU);
    ``"all"``: every release the registry index lists (``index_versions``); otherwise a list of
    versions or a comma-separated string. Unknown versions are kept: the matrix reports them as rows.
    """
    accepted = "accepted: 'default', 'all', or a list of release numbers such as ['0.22.0', '0.33.0']"
    if isinstance(selection, str):
        if selection == "default":
            return list(DEFAULT_RELEASES if profile == "gpu" else CPU_DEFAULT_RELEASES)
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

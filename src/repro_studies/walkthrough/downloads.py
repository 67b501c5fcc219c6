"""What a first run downloads, said before it starts and shown while it runs.

A notebook that needs vLLM releases the module cache lacks fetches their wheels (hundreds of MB each, kept
only as a few extracted modules). :func:`fetch_missing` names every wheel and its size from the registry's
index first, then fetches them under a progress bar over their bytes, one wheel at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from repro.walkthrough.session import Progress
from repro_studies.upstream import releases as idx
from repro_studies.upstream.members import GATHER, MemberSet
from repro_studies.upstream.wheelcache import CacheEntry, CacheMiss, default_cache_root, ensure_release, load_entry


def missing_releases(
    releases: Sequence[str], cache_root: Path | None, sets: Sequence[MemberSet] = (GATHER,)
) -> list[str]:
    """Releases the cache does not hold with ``sets`` (or holds in an older extraction format)."""
    out = []
    for v in releases:
        entry = load_entry(v, cache_root)
        if entry is None or not entry.current_format or not all(entry.covers(s) for s in sets):
            out.append(v)
    return out


def fetch_missing(
    releases: Sequence[str],
    cache_root: Path | None,
    download: bool,
    listed: dict[str, idx.IndexedRelease] | None = None,
    say: Callable[[str], None] = print,
    sets: Sequence[MemberSet] = (GATHER,),
) -> dict[str, CacheEntry | CacheMiss]:
    """Fetch the wheels the cache lacks, naming each with its size (``listed``: the registry index's entries;
    None: read the index here) before a progress bar over their bytes; returns release -> entry or miss.
    Nothing is said when nothing is missing or downloads are off."""
    todo = missing_releases(releases, cache_root, sets) if download else []
    if not todo:
        return {}
    if listed is None:
        try:
            listed = {r.version: r for r in idx.releases_from_index(idx.fetch_index(timeout_s=20))}
        except OSError:
            listed = {}
    sizes = {v: (listed[v].size if v in listed else 0) for v in todo}
    total = sum(sizes.values())
    say(
        f"Downloading {len(todo)} vLLM wheel{'s' * (len(todo) > 1)} ({_mb(total)} in all) into "
        f"{cache_root or default_cache_root()}; only a few of each wheel's modules are kept (a few hundred KB "
        "per release) and the wheel is deleted after extraction:"
    )
    for v in todo:
        say(f"  {listed[v].wheel if v in listed else f'vllm=={v}'}  {_mb(sizes[v]) if sizes[v] else 'size unknown'}")
    bar = Progress(total or len(todo), "vLLM wheels", unit="B" if total else "wheel")
    got: dict[str, CacheEntry | CacheMiss] = {}
    for v in todo:
        got[v] = ensure_release(v, cache_root, download=True, sets=sets)
        bar.advance(sizes[v] if total else 1)
        if isinstance(got[v], CacheMiss):
            say(f"  {v}: {got[v].status}: {got[v].reason}")
    return got


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"

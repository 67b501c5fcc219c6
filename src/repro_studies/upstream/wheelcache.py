"""A cache of the few vLLM source files the studies need, taken from each release's wheel.

A release's x86_64 wheel is fetched with ``pip download --no-deps --only-binary=:all:`` and the
platform tags the registry index shows for it (so the user's pip configuration applies and pip checks
the index's hash), its SHA-256 is recorded, and only the ``.py`` members of the asked member sets
(:mod:`repro_studies.upstream.members`) are extracted, each checked against the wheel's own ``RECORD``. Asking
for another set later extends the entry from the same wheel. The wheel itself is deleted: the cache
holds modules only (a few hundred KB per release), so it can be carried to a host without a registry.
Layout::

    <cache>/<version>/provenance.json      wheel name, sha256, size, every extracted file and its hash,
                                           the members found per set
    <cache>/<version>/files/vllm/...py     the extracted modules, as released
    <cache>/releases.json                  the derived release list (:mod:`repro_studies.upstream.releases`)

A failure (unknown release, no registry, a wheel whose files do not match its RECORD) is a
:class:`CacheMiss` carrying the reason, never an exception.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import email.parser
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from repro.paths import repo_root
from repro_studies import downloads
from repro_studies.upstream.members import GATHER, MEMBER_SETS, MemberSet, resolve
from repro_studies.upstream.releases import RELEASES_FILE, release_platforms

#: The wheel's metadata member (``vllm-<version>.dist-info/METADATA``), kept beside the modules.
METADATA_SUFFIX = ".dist-info/METADATA"
#: Bump when the extraction rule changes; an entry made under another format is refreshed when possible.
CACHE_FORMAT = 2
CACHE_ENV = "REPRO_VLLM_CACHE"
PYTHON_VERSION = "3.12"


def default_cache_root() -> Path:
    """``$REPRO_VLLM_CACHE`` or ``<repo>/.vllm-cache`` (ignored by git)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return repo_root() / ".vllm-cache"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_digest(data: bytes) -> str:
    """A file's hash as a wheel's RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass
class CacheEntry:
    """One release in the cache."""

    version: str
    root: Path
    provenance: dict = field(repr=False)

    @property
    def files_dir(self) -> Path:
        return self.root / "files"

    def has(self, member: str) -> bool:
        return member in self.provenance.get("files", {})

    def path_of(self, member: str) -> Path:
        return self.files_dir / member

    def read(self, member: str) -> str:
        return self.path_of(member).read_text()

    def members(self) -> list[str]:
        return sorted(self.provenance.get("files", {}))

    @property
    def current_format(self) -> bool:
        return self.provenance.get("format") == CACHE_FORMAT

    def sets(self) -> dict[str, list[str]]:
        """Members found per member set (an entry made before sets were recorded holds the gather set)."""
        return self.provenance.get("sets") or {GATHER.name: self.members()}

    def set_digests(self) -> dict[str, str]:
        return self.provenance.get("set_digests") or {GATHER.name: GATHER.digest()}

    def covers(self, member_set: MemberSet) -> bool:
        """Was ``member_set`` (as defined now) extracted into this entry?"""
        return self.set_digests().get(member_set.name) == member_set.digest()

    def ships(self, member_set: MemberSet) -> bool:
        """Does the release ship the set's subject (its anchors found something)?"""
        return bool(member_set.anchored(self.sets().get(member_set.name, [])))

    def members_of(self, member_set: MemberSet) -> list[str]:
        return list(self.sets().get(member_set.name, []))


class MissStatus(StrEnum):
    """Why the cache could not provide a release (the words a release-matrix row keeps as its arm's status)."""

    UNKNOWN = "unknown release"
    DOWNLOAD = "download failed"
    BAD_WHEEL = "bad wheel"


@dataclass
class CacheMiss:
    """A release the cache could not provide, and why."""

    version: str
    status: MissStatus
    reason: str


def load_entry(version: str, cache_root: Path | None = None) -> CacheEntry | None:
    """The cached entry for ``version`` if its provenance file is complete, else None."""
    root = (cache_root or default_cache_root()) / version
    prov = root / "provenance.json"
    if not prov.exists():
        return None
    try:
        data = json.loads(prov.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("version") != version:
        return None
    return CacheEntry(version, root, data)


def _pip_download(version: str, dest: Path, timeout_s: float, platforms: Sequence[str]) -> tuple[Path | None, str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--python-version",
        PYTHON_VERSION,
        "-d",
        str(dest),
    ]
    for platform in platforms:
        cmd += ["--platform", platform]
    cmd.append(f"vllm=={version}")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"pip download did not finish within {timeout_s:g} s"
    wheels = sorted(dest.glob("vllm-*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        return None, (lines[-1].strip() if lines else f"pip exited with {proc.returncode}")[:300]
    return wheels[0], ""


def _read_record(zf: zipfile.ZipFile) -> dict[str, str]:
    names = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
    if not names:
        return {}
    rows = csv.reader(io.StringIO(zf.read(names[0]).decode()))
    return {r[0]: r[1] for r in rows if len(r) >= 2}


@dataclass
class Extraction:
    """What :func:`extract_members` took from one wheel."""

    files: dict[str, dict]  # member -> {sha256, size, record}
    sets: dict[str, list[str]]  # set name -> its members found in the wheel
    python_files: int
    error: str = ""  # why the wheel cannot be trusted ("" when every file matched its RECORD)


def extract_members(wheel: Path, dest_files: Path, sets: Sequence[MemberSet | str] = (GATHER,)) -> Extraction:
    """Extract the members of ``sets`` from ``wheel``, each checked against the wheel's ``RECORD``."""
    wanted = resolve(sets)
    files: dict[str, dict] = {}
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".py") or n.endswith(METADATA_SUFFIX)]
        python_files = sum(n.endswith(".py") for n in names)
        found = {s.name: s.choose(names, zf.read) for s in wanted}
        record = _read_record(zf)
        if not record:
            return Extraction({}, found, python_files, "the wheel has no RECORD")
        for name in sorted({m for members in found.values() for m in members}):
            data = zf.read(name)
            want = record.get(name)
            got = record_digest(data)
            if want != got:
                return Extraction({}, found, python_files, f"{name}: RECORD says {want}, the file hashes to {got}")
            target = dest_files / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            files[name] = {"sha256": sha256_hex(data), "size": len(data), "record": want}
    return Extraction(files, found, python_files)


def _outcome(entry: CacheEntry, wanted: list[MemberSet]) -> CacheEntry | CacheMiss:
    """The entry when the release ships every wanted set, else a miss naming the first it does not ship."""
    for s in wanted:
        if not entry.ships(s):
            scanned = entry.provenance.get("python_files", "its")
            return CacheMiss(entry.version, MissStatus.UNKNOWN, f"no {s.description} among {scanned} Python files")
    return entry


def ensure_release(
    version: str,
    cache_root: Path | None = None,
    download: bool = True,
    expected_sha256: str = "",
    timeout_s: float = 900.0,
    sets: Sequence[MemberSet | str] = (GATHER,),
    platforms: Sequence[str] | None = None,
) -> CacheEntry | CacheMiss:
    """The cached entry for ``version`` holding ``sets``, downloading and extracting once if needed.

    An entry that lacks one of ``sets`` is extended from the same wheel (the other sets' files are kept);
    a release that does not ship a set's subject is a :class:`CacheMiss` (recorded, so it is not fetched
    again). ``platforms``: the ``pip download --platform`` tags (default: the tags of the release's
    x86_64 wheel on the registry index). Processes that ask for one release at once (two runs, the notebooks
    of a test session) download it once: the first holds the release's lock, the others then find its entry.
    """
    cache_root = cache_root or default_cache_root()
    download = download and downloads.allowed()  # a notebook's download=false holds for every caller
    held = load_entry(version, cache_root)
    if not download or (held is not None and held.current_format and all(held.covers(s) for s in resolve(sets))):
        # nothing to fetch or not allowed to: the cache is only read (a carried cache may be read-only, no lock)
        return _ensure_release(version, cache_root, False, expected_sha256, timeout_s, sets, platforms)
    try:
        lock = _ensure_dir(cache_root) / f".{version}.lock"
        handle = lock.open("a")
    except OSError as exc:
        return CacheMiss(version, MissStatus.DOWNLOAD, f"cannot write the cache {cache_root} ({exc.strerror or exc})")
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        return _ensure_release(version, cache_root, download, expected_sha256, timeout_s, sets, platforms)


def _ensure_release(
    version: str,
    cache_root: Path,
    download: bool,
    expected_sha256: str,
    timeout_s: float,
    sets: Sequence[MemberSet | str],
    platforms: Sequence[str] | None,
) -> CacheEntry | CacheMiss:
    wanted = resolve(sets)
    entry = load_entry(version, cache_root)
    if entry is not None and (entry.current_format or not download):
        lacking = [s.name for s in wanted if not entry.covers(s)]
        if not lacking:
            return _outcome(entry, wanted)
        if not download:
            return CacheMiss(
                version,
                MissStatus.DOWNLOAD,
                f"the cache {cache_root} holds vLLM {version} without the member set(s) {', '.join(lacking)} "
                "and downloads are off",
            )
    if not download:
        return CacheMiss(version, MissStatus.DOWNLOAD, f"not in the cache {cache_root} and downloads are off")
    if platforms is None:
        platforms = release_platforms(version)
    with tempfile.TemporaryDirectory(prefix="vllm-wheel-") as tmp:
        wheel, error = _pip_download(version, Path(tmp), timeout_s, platforms)
        if wheel is None:
            status = (
                MissStatus.UNKNOWN
                if "No matching distribution" in error or "from versions" in error
                else MissStatus.DOWNLOAD
            )
            return CacheMiss(version, status, error)
        data_hash = hashlib.sha256()
        with wheel.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                data_hash.update(chunk)
        digest = data_hash.hexdigest()
        if expected_sha256 and digest != expected_sha256:
            return CacheMiss(
                version, MissStatus.BAD_WHEEL, f"{wheel.name} hashes to {digest}, the index says {expected_sha256}"
            )
        # Extend an entry of the same wheel; otherwise rebuild it.
        keep = (
            entry if entry is not None and entry.current_format and entry.provenance.get("sha256") == digest else None
        )
        # While the wheel is here, every registered set is taken too: a later study does not fetch it again.
        todo = [s for s in [*wanted, *MEMBER_SETS.values()] if keep is None or not keep.covers(s)]
        todo = list(dict.fromkeys(todo))
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=_ensure_dir(cache_root)))
        try:
            if keep is not None and keep.files_dir.exists():
                shutil.copytree(keep.files_dir, staging / "files")
            got = extract_members(wheel, staging / "files", todo)
            if got.error:
                return CacheMiss(version, MissStatus.BAD_WHEEL, got.error)
            old = keep.provenance if keep is not None else {}
            provenance = {
                "format": CACHE_FORMAT,
                "version": version,
                "wheel": wheel.name,
                "sha256": digest,
                "size": wheel.stat().st_size,
                "fetched": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "how": "pip download --no-deps --only-binary=:all: (user's pip configuration; "
                "pip checks the index hash)",
                "platforms": list(platforms),
                "python_files": got.python_files,
                "files": {**old.get("files", {}), **got.files},
                "sets": {**(keep.sets() if keep else {}), **got.sets},
                "set_digests": {**(keep.set_digests() if keep else {}), **{s.name: s.digest() for s in todo}},
            }
            (staging / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
            final = cache_root / version
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    entry = load_entry(version, cache_root)
    if entry is None:
        return CacheMiss(version, MissStatus.BAD_WHEEL, "the cache entry did not read back")
    return _outcome(entry, wanted)


def _ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def verify_entry(entry: CacheEntry) -> list[str]:
    """Files of a (possibly carried) entry whose bytes no longer match the recorded hash."""
    bad = []
    for member, info in entry.provenance.get("files", {}).items():
        path = entry.path_of(member)
        if not path.exists() or sha256_hex(path.read_bytes()) != info["sha256"]:
            bad.append(member)
    return bad


def export(
    dest: Path, sets: Sequence[MemberSet | str], cache_root: Path | None = None, versions: Sequence[str] = ()
) -> list[str]:
    """Copy the cache's entries (those of ``versions``, default all) into ``dest`` restricted to ``sets`` (a small
    cache to carry to a host without a registry), with the recorded release list. Returns the versions copied."""
    cache_root = cache_root or default_cache_root()
    wanted = resolve(sets)
    copied = []
    for prov in sorted(cache_root.glob("*/provenance.json")):
        if versions and prov.parent.name not in versions:
            continue
        entry = load_entry(prov.parent.name, cache_root)
        if entry is None or not all(entry.covers(s) for s in wanted):
            continue
        keep = sorted({m for s in wanted for m in entry.members_of(s)})
        target = dest / entry.version
        if target.exists():
            shutil.rmtree(target)
        for member in keep:
            (target / "files" / member).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry.path_of(member), target / "files" / member)
        provenance = dict(entry.provenance)
        provenance["files"] = {m: entry.provenance["files"][m] for m in keep}
        provenance["sets"] = {s.name: entry.members_of(s) for s in wanted}
        provenance["set_digests"] = {s.name: entry.set_digests()[s.name] for s in wanted}
        target.mkdir(parents=True, exist_ok=True)
        (target / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
        copied.append(entry.version)
    if (cache_root / RELEASES_FILE).exists():
        shutil.copy2(cache_root / RELEASES_FILE, dest / RELEASES_FILE)
    return copied


def requirements(entry: CacheEntry) -> dict[str, str] | None:
    """The release's ``Requires-Dist`` lines as {distribution name (lower case): the line}, from the wheel's own
    ``METADATA`` in the cache (None when the entry holds none)."""
    member = next((m for m in entry.members() if m.endswith(METADATA_SUFFIX)), None)
    if member is None:
        return None
    message = email.parser.Parser().parsestr(entry.read(member), headersonly=True)
    out: dict[str, str] = {}
    for line in message.get_all("Requires-Dist") or []:
        name = re.match(r"[A-Za-z0-9._-]+", line.strip())
        if name:
            out.setdefault(re.sub(r"[-_.]+", "-", name.group(0)).lower(), line.strip())
    return out

"""A cache of the few vLLM source files the matrix needs, taken from each release's wheel.

A release's x86_64 wheel is fetched once with ``pip download --no-deps --only-binary=:all:`` (so the
user's pip configuration applies and pip checks the index's hash), its SHA-256 is recorded, and only
the needed ``.py`` members are extracted, each checked against the wheel's own ``RECORD``. The wheel
itself is deleted: the cache holds modules only (a few hundred KB per release), so it can be carried
to a host without a registry. Layout::

    <cache>/<version>/provenance.json      wheel name, sha256, size, every extracted file and its hash
    <cache>/<version>/files/vllm/...py     the extracted modules, as released

A failure (unknown release, no registry, a wheel whose files do not match its RECORD) is a
:class:`CacheMiss` carrying the reason, never an exception.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
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
from dataclasses import dataclass, field
from pathlib import Path

from repro.paths import repo_root
from repro.upstream.releases import DEFAULT_RELEASES

#: Bump when the extraction rule changes; an entry made under another format is refreshed when possible.
CACHE_FORMAT = 2
CACHE_ENV = "REPRO_VLLM_CACHE"
#: Wheel platforms accepted for the x86_64 wheel (vLLM 0.21.0 ships manylinux_2_24, later ones 2_28).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
PYTHON_VERSION = "3.12"
#: vLLM helper modules loaded as released when a gather module imports them (pure Python, small).
HELPER_MODULES = (
    "vllm/model_executor/warmup/jit_warmup.py",
    "vllm/model_executor/warmup/jit_warmup_triton_helper.py",
    "vllm/model_executor/warmup/jit_warmup_cutedsl_helper.py",
    "vllm/utils/math_utils.py",
)
#: vLLM helper packages extracted whole (the CuTe-DSL gather imports ``vllm.cute_utils``).
HELPER_PACKAGES = ("vllm/cute_utils/",)


def default_cache_root() -> Path:
    """``$REPRO_VLLM_CACHE`` or ``<repo>/.vllm-cache`` (ignored by git)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return repo_root() / ".vllm-cache"


#: A definition whose name says "dequantise and gather K" (Triton functions, JIT classes, CuTe-DSL classes).
GATHER_DEFINITION = re.compile(
    rb"^\s*(?:def|class)\s+\w*(?:dequantize_and_gather_k|dequant_gather_k|"
    rb"DequantizeAndGatherK|DequantGatherK)\w*",
    re.MULTILINE,
)


def is_gather_candidate(member: str, text: bytes) -> bool:
    """A DeepSeek-V4 module defining a K-cache gather: extracted for discovery to read."""
    return (
        member.startswith("vllm/")
        and member.endswith(".py")
        and "deepseek_v4" in member
        and b"block_table" in text
        and GATHER_DEFINITION.search(text) is not None
    )


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


@dataclass
class CacheMiss:
    """A release the cache could not provide; ``status`` is one of the ``MISS_*`` words."""

    version: str
    status: str
    reason: str


MISS_UNKNOWN = "unknown release"
MISS_DOWNLOAD = "download failed"
MISS_BAD_WHEEL = "bad wheel"


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


def _pip_download(version: str, dest: Path, timeout_s: float) -> tuple[Path | None, str]:
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
    for platform in PLATFORMS:
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


def extract_members(wheel: Path, dest_files: Path) -> tuple[dict, str]:
    """Extract the gather candidates and helper modules of ``wheel``; each file checked against RECORD.

    Returns ``(files, error)``: ``files`` maps member -> {sha256, size, record}; ``error`` is "" or why
    the wheel cannot be trusted.
    """
    files: dict[str, dict] = {}
    with zipfile.ZipFile(wheel) as zf:
        record = _read_record(zf)
        if not record:
            return {}, "the wheel has no RECORD"
        names = set(zf.namelist())
        chosen = [n for n in HELPER_MODULES if n in names]
        chosen += sorted(n for n in names if n.endswith(".py") and n.startswith(HELPER_PACKAGES))
        for name in sorted(names):
            if name.endswith(".py") and "deepseek_v4" in name and name not in chosen:
                data = zf.read(name)
                if is_gather_candidate(name, data):
                    chosen.append(name)
        for name in chosen:
            data = zf.read(name)
            want = record.get(name)
            got = record_digest(data)
            if want != got:
                return {}, f"{name}: RECORD says {want}, the file hashes to {got}"
            target = dest_files / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            files[name] = {"sha256": sha256_hex(data), "size": len(data), "record": want}
        files_scanned = sum(1 for n in names if n.endswith(".py"))
    return files, "" if files else f"no DeepSeek-V4 gather module among {files_scanned} Python files"


def ensure_release(
    version: str,
    cache_root: Path | None = None,
    download: bool = True,
    expected_sha256: str = "",
    timeout_s: float = 900.0,
) -> CacheEntry | CacheMiss:
    """The cached entry for ``version``, downloading and extracting it once if needed."""
    cache_root = cache_root or default_cache_root()
    entry = load_entry(version, cache_root)
    if entry is not None and (entry.provenance.get("format") == CACHE_FORMAT or not download):
        return entry
    if not download:
        return CacheMiss(version, MISS_DOWNLOAD, f"not in the cache {cache_root} and downloads are off")
    with tempfile.TemporaryDirectory(prefix="vllm-wheel-") as tmp:
        wheel, error = _pip_download(version, Path(tmp), timeout_s)
        if wheel is None:
            status = MISS_UNKNOWN if "No matching distribution" in error or "from versions" in error else MISS_DOWNLOAD
            return CacheMiss(version, status, error)
        data_hash = hashlib.sha256()
        with wheel.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                data_hash.update(chunk)
        digest = data_hash.hexdigest()
        if expected_sha256 and digest != expected_sha256:
            return CacheMiss(
                version, MISS_BAD_WHEEL, f"{wheel.name} hashes to {digest}, the index says {expected_sha256}"
            )
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=_ensure_dir(cache_root)))
        try:
            files, error = extract_members(wheel, staging / "files")
            if error and not files:
                return CacheMiss(version, MISS_BAD_WHEEL if "RECORD" in error else MISS_UNKNOWN, error)
            provenance = {
                "format": CACHE_FORMAT,
                "version": version,
                "wheel": wheel.name,
                "sha256": digest,
                "size": wheel.stat().st_size,
                "fetched": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "how": "pip download --no-deps --only-binary=:all: (user's pip configuration; "
                "pip checks the index hash)",
                "files": files,
            }
            (staging / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
            final = cache_root / version
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return load_entry(version, cache_root) or CacheMiss(version, MISS_BAD_WHEEL, "the cache entry did not read back")


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


def main(argv: list[str] | None = None) -> int:
    """``python -m repro.upstream.wheelcache [VERSION ...]``: fill the cache (default: every known release)."""
    versions = (sys.argv[1:] if argv is None else argv) or list(DEFAULT_RELEASES)
    failed = 0
    for version in versions:
        got = ensure_release(version)
        if isinstance(got, CacheMiss):
            failed += 1
            print(f"{version}: {got.status}: {got.reason}")
        else:
            wheel, digest = got.provenance["wheel"], got.provenance["sha256"][:16]
            print(f"{version}: {wheel} sha256 {digest}, {len(got.members())} files")
    print(f"cache: {default_cache_root()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

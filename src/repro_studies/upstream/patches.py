"""One patch per release: PR #55109's change as a unified diff against the release's own files, applied
with the real ``patch -p1`` to a copy of them and checked.

The diff holds :func:`~repro_studies.upstream.patcher.rewrite_row_pitch`'s runtime-pitch rewrite of every module
of the release that launches a DeepSeek gather (every launch site the matrix patches, and the JIT warm-up
keys where the pitch was part of them), so the files ``patch`` writes are the matrix's patched arms'
source, byte for byte; :func:`prepare` checks exactly that. Nothing of vLLM is kept in the repository: the
diff is written into a run folder (``patches/vllm-<version>.diff``) and the patched copy lives in a
temporary folder for the regression test of :mod:`repro_studies.upstream.regression`.

A release the cache cannot provide, a rewrite that fails, a missing ``patch`` tool, a diff that does not
apply, or patched files that differ from the rewrite: a :class:`ReleasePatch` whose status says which,
never an exception.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from repro_studies.upstream.discovery import discover, launch_keywords
from repro_studies.upstream.members import GATHER
from repro_studies.upstream.patcher import PatchError, Rewrite, rewrite_row_pitch
from repro_studies.upstream.releases import is_plain_version
from repro_studies.upstream.wheelcache import CacheEntry, CacheMiss, MissStatus, ensure_release

PATCH_TOOL = "patch"
INSTALL_NOTE = "GNU patch is not on PATH; install it (Debian/Ubuntu: apt-get install patch)"


class PatchStatus(StrEnum):
    """What became of one release's patch."""

    APPLIED = "applied"  # written, applied by patch -p1, the files equal the matrix's rewrite
    NO_RELEASE = "release not available"  # the cache could not provide it (unknown release, no registry)
    REWRITE_FAILED = "rewrite failed"  # the release's source no longer has the expression the PR changes
    NO_PATCH_TOOL = "patch tool missing"
    DOES_NOT_APPLY = "does not apply"
    DIFFERS = "differs from the matrix's rewrite"


@dataclass
class ReleasePatch:
    version: str
    status: PatchStatus
    reason: str = ""
    diff_path: Path | None = None
    patched_files: Path | None = None  # root of the patched copy (``vllm/...`` below it)
    rewrites: list[Rewrite] = field(default_factory=list)
    launch_sites: int = 0
    wheel: str = ""
    wheel_sha256: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PatchStatus.APPLIED

    @property
    def members(self) -> list[str]:
        return [rw.member for rw in self.rewrites]

    def row(self) -> dict:
        """One table row (the diff as a path relative to the run folder when it sits in one)."""
        return {
            "release": self.version,
            "status": str(self.status),
            "launch_sites": self.launch_sites,
            "files": ", ".join(self.members),
            "edits": sum(len(rw.edits) for rw in self.rewrites),
            "diff": self.diff_path.name if self.diff_path else "",
            "wheel": self.wheel,
            "wheel_sha256": self.wheel_sha256[:16],
            "reason": self.reason,
        }


def diff_name(version: str) -> str:
    return f"vllm-{version}.diff"


def unified_diff(member: str, old: str, new: str) -> str:
    """``git diff``-style hunks for one file, with ``-p1`` paths; a last line without a newline is marked."""
    out = []
    for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{member}", f"b/{member}"
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def launch_sites(member: str, text: str) -> set[tuple[str, int, int]]:
    """Every launch keyword that sets a gather kernel's row pitch in ``text``, as (member, line, column);
    two kernels launched from one call (a kernel picked by platform) count once."""
    tree = ast.parse(text)
    sites = set()
    for k in discover({member: text}).kernels:
        if k.pitch_param:
            for kw in launch_keywords(tree, k.name, k.class_name, k.pitch_param):
                sites.add((member, kw.value.lineno, kw.value.col_offset))
    return sites


def release_rewrites(entry: CacheEntry) -> list[Rewrite]:
    """The runtime-pitch rewrite of every cached module of the release that launches a gather kernel."""
    sources = {m: entry.read(m) for m in entry.members_of(GATHER) if "deepseek_v4" in m}
    modules = sorted({k.module for k in discover(sources).kernels if k.pitch_param and k.launch_pitch})
    if not modules:
        raise PatchError(f"vLLM {entry.version}: no module launches a gather kernel with a row-pitch parameter")
    return [rewrite_row_pitch(sources[m], m, runtime=True) for m in modules]


def release_diff(entry: CacheEntry, rewrites: list[Rewrite]) -> str:
    """The patch file: a short header (ignored by ``patch``), then one diff per module."""
    edits = [f"  {rw.member}: {e}" for rw in rewrites for e in rw.edits]
    head = [
        f"vLLM {entry.version} ({entry.provenance.get('wheel', '')}, sha256 {entry.provenance.get('sha256', '')}):",
        "vllm-project/vllm#55109's change on every launch of a DeepSeek K-cache gather: the block table's row",
        "pitch is block_table.stride(0), a runtime argument. Apply at the root of that release's tree:",
        f"  patch -p1 < {diff_name(entry.version)}",
        "Edits:",
        *edits,
        "",
    ]
    return "\n".join(head) + "\n" + "".join(unified_diff(rw.member, rw.original, rw.rewritten) for rw in rewrites)


def apply(diff_path: Path, root: Path, timeout_s: float = 60.0) -> str:
    """``patch -p1`` of ``diff_path`` inside ``root``; "" when it applied cleanly, else why not."""
    tool = shutil.which(PATCH_TOOL)
    if tool is None:
        return INSTALL_NOTE
    proc = subprocess.run(
        [tool, "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-i", str(diff_path.resolve())],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    said = " ".join((proc.stdout + proc.stderr).split())
    if proc.returncode != 0:
        return f"patch -p1 exited with {proc.returncode}: {said[:400]}"
    if "offset" in said.lower() or "fuzz" in said.lower():
        return f"patch -p1 applied only with offsets or fuzz: {said[:400]}"
    return ""


def prepare(
    version: str,
    folder: Path,
    workdir: Path,
    cache_root: Path | None = None,
    download: bool = True,
    expected: dict[str, str] | None = None,
) -> ReleasePatch:
    """Write ``folder/vllm-<version>.diff``, apply it to a copy of the release's files under ``workdir`` and
    check every patched file against ``expected`` (member -> the matrix's rewritten text; default: the
    rewrite recomputed). The patched copy stays in ``workdir`` for the regression test."""
    entry = ensure_release(version, cache_root, download=download)
    if isinstance(entry, CacheMiss):
        return ReleasePatch(version, PatchStatus.NO_RELEASE, f"{entry.status}: {entry.reason}")
    info = dict(wheel=str(entry.provenance.get("wheel", "")), wheel_sha256=str(entry.provenance.get("sha256", "")))
    try:
        rewrites = release_rewrites(entry)
    except PatchError as exc:
        return ReleasePatch(version, PatchStatus.REWRITE_FAILED, str(exc), **info)
    sites = sum(len(launch_sites(rw.member, rw.original)) for rw in rewrites)
    folder.mkdir(parents=True, exist_ok=True)
    diff_path = folder / diff_name(version)
    diff_path.write_text(release_diff(entry, rewrites))
    result = ReleasePatch(version, PatchStatus.APPLIED, "", diff_path, None, rewrites, sites, **info)
    root = workdir / version
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(entry.files_dir, root)
    why = apply(diff_path, root)
    if why:
        result.status = PatchStatus.NO_PATCH_TOOL if why == INSTALL_NOTE else PatchStatus.DOES_NOT_APPLY
        result.reason = why
        return result
    result.patched_files = root
    wanted = expected or {rw.member: rw.rewritten for rw in rewrites}
    differing = [m for m, text in sorted(wanted.items()) if (root / m).read_text() != text]
    untouched = [
        m for m in entry.members() if m not in wanted and (root / m).read_bytes() != entry.path_of(m).read_bytes()
    ]
    if differing or untouched:
        result.status = PatchStatus.DIFFERS
        result.reason = "; ".join(
            ([f"differs from the rewrite: {', '.join(differing)}"] if differing else [])
            + ([f"changed though not rewritten: {', '.join(untouched)}"] if untouched else [])
        )
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m repro_studies.upstream.patches VERSION... [--out DIR]``: write and check each release's patch."""

    parser = argparse.ArgumentParser(prog="python -m repro_studies.upstream.patches", description=main.__doc__)
    parser.add_argument("versions", nargs="+", metavar="VERSION", help="vLLM release numbers such as 0.33.0")
    parser.add_argument("--out", default="patches", help="folder for vllm-<version>.diff (default: patches)")
    parser.add_argument("--no-download", action="store_true", help="use the cache only")
    args = parser.parse_args(argv)
    bad = [v for v in args.versions if not is_plain_version(v)]
    if bad:
        print(f"error: VERSION: {bad[0]!r} is not a release number; accepted: numbers such as 0.33.0", file=sys.stderr)
        return 2
    for version in args.versions:  # every release found before any diff is written
        got = ensure_release(version, download=not args.no_download)
        if isinstance(got, CacheMiss) and got.status == MissStatus.UNKNOWN:
            print(f"error: VERSION: {version} is not a vLLM release on the registry ({got.reason})", file=sys.stderr)
            return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="vllm-patched-") as tmp:
        for version in args.versions:
            got = prepare(version, Path(args.out), Path(tmp), download=not args.no_download)
            failed += not got.ok
            where = got.diff_path or "-"
            print(f"{version}: {got.status}, {got.launch_sites} launch sites, {where} {got.reason}".rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

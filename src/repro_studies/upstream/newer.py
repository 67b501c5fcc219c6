"""Is there a vLLM release the committed evidence does not cover? The weekly workflow's question
(``.github/workflows/new-release.yml``)::

    python -m repro_studies.upstream.newer --against data/cpu/who-is-affected \\
        --against data/h200/release-matrix-merged [--record data/release-check.json]

The evidence covers releases through the newest release that every ``--against`` run folder's tables hold
(:func:`covered_through`). The registry's answer is read with :func:`~repro_studies.upstream.releases.
releases_from_index`, so a release counts exactly when the studies could test it: a final release with an
x86_64 Linux wheel that is not yanked. Newer releases the studies cannot test yet (a pre-release, a yanked
release, one without that wheel) are named on a line of their own and not counted.

Exit 0 with ``no release newer than X``; 1 with one line per newer release; 2 with one line when a folder
holds no release table or the registry cannot be read. ``--record`` writes what was found (the date, the
release the evidence covers, the newer ones) as JSON: the value the README's "checked through" reads.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from repro_studies.upstream.releases import (
    IndexedRelease,
    fetch_index,
    is_linux_x86_64,
    is_plain_version,
    releases_from_index,
    version_key,
)

#: The committed run folders whose release tables the weekly check reads (CPU who-is-affected and H200 matrix).
EVIDENCE = ("data/cpu/who-is-affected", "data/h200/release-matrix-merged")
#: Where the check's last answer is committed.
RECORD = "data/release-check.json"
#: A table column that names the release a row is about.
RELEASE_COLUMN = "release"
_NUMERIC_PREFIX = re.compile(r"^\d+(\.\d+)*")


class EvidenceError(ValueError):
    """A folder the check cannot read releases from; the message names it and what is accepted."""


@dataclass(frozen=True)
class Skipped:
    """A release newer than the evidence that the studies cannot test (yet), and why."""

    version: str
    reason: str


@dataclass(frozen=True)
class ReleaseCheck:
    """One answer of the check."""

    checked_on: str  # ISO date
    covered_through: str
    newer: tuple[IndexedRelease, ...]
    skipped: tuple[Skipped, ...]
    newest_on_registry: str
    evidence: tuple[str, ...]

    @property
    def found(self) -> bool:
        return bool(self.newer)

    def lines(self) -> list[str]:
        """What the command prints: the answer first, then each newer release, then those not counted."""
        if not self.newer:
            head = [f"no release newer than {self.covered_through} (registry checked {self.checked_on})"]
        else:
            count = len(self.newer)
            head = [f"{count} release{'s' if count > 1 else ''} newer than {self.covered_through}:"]
            head += [f"{r.version} (uploaded {r.uploaded}, {r.wheel})" for r in self.newer]
        return head + [f"not counted: {s.version} ({s.reason})" for s in self.skipped]

    def record(self) -> dict:
        return {
            "checked_on": self.checked_on,
            "covered_through": self.covered_through,
            "newer": [r.version for r in self.newer],
            "newest_on_registry": self.newest_on_registry,
            "evidence": list(self.evidence),
        }


def releases_in(folder: Path) -> set[str]:
    """Every release number in the ``release`` column of a run folder's ``results/*.csv``."""
    found: set[str] = set()
    for table in sorted((folder / "results").glob("*.csv")):
        with table.open(newline="") as fh:
            reader = csv.DictReader(fh)
            if RELEASE_COLUMN not in (reader.fieldnames or ()):
                continue
            found.update(v for row in reader if is_plain_version(v := (row[RELEASE_COLUMN] or "").strip()))
    return found


def covered_through(folders: Iterable[Path]) -> str:
    """The newest release that every folder's tables hold: the evidence is complete through it (a release one
    folder holds and another does not is not yet covered)."""
    newest = []
    for folder in folders:
        held = releases_in(folder)
        if not held:
            raise EvidenceError(
                f"--against: {folder} holds no results/*.csv with a {RELEASE_COLUMN!r} column; "
                "accepted: a committed run folder of notebook 04 or 05"
            )
        newest.append(max(held, key=version_key))
    if not newest:
        raise EvidenceError("--against: no folder given; accepted: one or more committed run folders")
    return min(newest, key=version_key)


def _numeric_key(version: str) -> tuple[int, ...] | None:
    match = _NUMERIC_PREFIX.match(version)
    return version_key(match.group()) if match else None


def _why_not_testable(version: str, files: list[dict]) -> str:
    if not is_plain_version(version):
        return "a pre-release"
    if files and all(f.get("yanked") for f in files):
        return "yanked"
    if not any(is_linux_x86_64(f.get("filename", "")) for f in files):
        return "no x86_64 Linux wheel"
    return "its x86_64 Linux wheels are yanked"


def check(document: dict, through: str, evidence: Iterable[str] = (), on: dt.date | None = None) -> ReleaseCheck:
    """The registry's releases newer than ``through``, split into the ones the studies can test and the rest."""
    testable = [r for r in releases_from_index(document) if version_key(r.version) > version_key(through)]
    counted = {r.version for r in testable}
    skipped = []
    for version, files in document.get("releases", {}).items():
        key = _numeric_key(version)
        if version in counted or key is None or key <= version_key(through):
            continue
        skipped.append(Skipped(version, _why_not_testable(version, files)))
    listed = [v for v in document.get("releases", {}) if is_plain_version(v)]
    return ReleaseCheck(
        checked_on=(on or dt.datetime.now(dt.UTC).date()).isoformat(),
        covered_through=through,
        newer=tuple(testable),
        skipped=tuple(sorted(skipped, key=lambda s: (_numeric_key(s.version), s.version))),
        newest_on_registry=max(listed, key=version_key) if listed else "",
        evidence=tuple(evidence),
    )


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the registry has no testable vLLM release newer than the evidence, 1 when it has (each named),
    2 when the evidence or the registry cannot be read."""
    parser = argparse.ArgumentParser(prog="python -m repro_studies.upstream.newer", description=main.__doc__)
    parser.add_argument(
        "--against",
        action="append",
        type=Path,
        metavar="RUN_DIR",
        help=f"a committed run folder with release tables (repeatable; default: {', '.join(EVIDENCE)})",
    )
    parser.add_argument("--index", type=Path, metavar="JSON", help="the registry's answer from a file (default: ask)")
    parser.add_argument("--record", type=Path, metavar="JSON", help=f"write the answer here (e.g. {RECORD})")
    parser.add_argument(
        "--github-output", type=Path, metavar="FILE", help="append found=true|false and releases=A,B (GitHub Actions)"
    )
    args = parser.parse_args(argv)
    folders = args.against or [Path(p) for p in EVIDENCE]
    try:
        through = covered_through(folders)
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        document = json.loads(args.index.read_text()) if args.index else fetch_index(timeout_s=30)
    except (OSError, ValueError) as exc:
        where = f"--index: {args.index}" if args.index else "the registry"
        print(f"error: {where} could not be read ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    answer = check(document, through, [p.as_posix() for p in folders])
    print("\n".join(answer.lines()))
    if args.record:
        args.record.write_text(json.dumps(answer.record(), indent=2) + "\n")
    if args.github_output:
        with args.github_output.open("a") as fh:
            fh.write(f"found={'true' if answer.found else 'false'}\n")
            fh.write(f"releases={','.join(r.version for r in answer.newer)}\n")
    return 1 if answer.found else 0


if __name__ == "__main__":
    sys.exit(main())

"""The folders of the machine a run ran on, as a committed run names them: neutral of that machine.

A run copied into data/ from a GPU host records where it ran: its folder in the manifest's command and the run log,
the notebooks' paths in papermill's metadata and the parameter cell. Those say nothing about the evidence and name
a machine's layout, so before a run is committed its text files are rewritten in place (:func:`scrub`): the checkout
root the run ran in (read from papermill's record of each notebook's ``input_path``, ``<root>/notebooks/<file>``), or
the checkout that runs the rewrite, becomes a path relative to the checkout, a home folder (``/root/``,
``/home/<user>/``) ``~/`` and ``/tmp/`` ``$TMPDIR/``. ``tests/test_machine_paths.py`` checks that nothing under data/
still has one; the report's rerun command reads those forms as another host's folder (:func:`elsewhere`).

A result file the run recorded (rows, bytes and sha256 in its manifest, :mod:`repro.ledger`) is rewritten only when
it is still what the run wrote, and its record follows the rewrite; a file that already differs from its record is
refused (exit 2, nothing rewritten), so the rewrite never passes a changed table off as the run's.

Usage: python -m repro.machine_paths FOLDER ...   (prints each file it rewrote)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from repro.ledger import record_of

#: What a home folder and the temporary folder become.
HOME, TMP = "~/", "$TMPDIR/"
#: The checkout this module runs from (a second working tree of the same repository has its own root).
CHECKOUT = Path(__file__).resolve().parents[2].as_posix()
#: (pattern, replacement) after the checkout roots, which go first so that their files stay repository paths.
RULES = (
    (re.compile(r"/root/"), HOME),
    (re.compile(r"/home/[A-Za-z0-9_.-]+/"), HOME),
    (re.compile(r"(?<![\w.~$])/tmp/"), TMP),
)
#: Where papermill records a notebook's path; the checkout root is what stands before ``/notebooks/<file>``.
_INPUT_PATH = re.compile(r'"input_path": "(/[^"]+)/notebooks/[^"/]+\.ipynb"')
#: Text files a run folder holds.
SUFFIXES = {".json", ".log", ".md", ".csv", ".ipynb", ".html", ".txt", ".svg"}


def scrub(text: str, roots: tuple[str, ...] = ()) -> str:
    """``text`` with each checkout root (``roots`` and this checkout) made relative and every folder of :data:`RULES`
    rewritten."""
    for root in sorted({*roots, CHECKOUT}, key=len, reverse=True):
        text = re.sub(re.escape(root) + "/", "", text)
        text = re.sub(re.escape(root) + r"\b", ".", text)
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def checkout_roots(folder: Path) -> tuple[str, ...]:
    """The checkout roots the runs under ``folder`` ran in, as their executed notebooks record them."""
    found = set()
    for notebook in folder.rglob("*.ipynb"):
        found.update(_INPUT_PATH.findall(notebook.read_text(encoding="utf-8", errors="replace")))
    return tuple(sorted(found))


def elsewhere(path: str) -> bool:
    """Whether ``path`` is some machine's folder, not one relative to the checkout: absolute, or as :func:`scrub`
    writes one."""
    return path.startswith(("/", HOME, TMP))


def _records(folder: Path) -> dict[Path, dict]:
    """Every result file a run under ``folder`` recorded, with the record it holds in its manifest (by reference)."""
    out: dict[Path, dict] = {}
    for manifest in sorted(folder.rglob("manifest.json")):
        try:
            notebooks = json.loads(manifest.read_text(encoding="utf-8")).get("notebooks") or {}
        except (OSError, ValueError):
            continue
        for entry in notebooks.values():
            tables = entry.get("tables") if isinstance(entry, dict) else None
            if isinstance(tables, dict):
                out.update({(manifest.parent / rel).resolve(): rec for rel, rec in tables.items()})
    return out


def _rewrite_records(folder: Path, new_records: dict[Path, dict]) -> None:
    """Write each rewritten result file's new record into the manifest that recorded it."""
    for manifest in sorted(folder.rglob("manifest.json")):
        data = json.loads(manifest.read_text(encoding="utf-8"))
        changed = False
        for entry in (data.get("notebooks") or {}).values():
            tables = entry.get("tables") if isinstance(entry, dict) else None
            for rel in list(tables) if isinstance(tables, dict) else []:
                path = (manifest.parent / rel).resolve()
                if path in new_records:
                    tables[rel], changed = new_records[path], True
        if changed:
            manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m repro.machine_paths FOLDER ...", file=sys.stderr)
        return 2
    missing = [a for a in argv if not Path(a).is_dir()]
    if missing:
        print(f"FOLDER must be an existing folder, got {missing[0]!r}", file=sys.stderr)
        return 2
    for folder in map(Path, argv):
        records = _records(folder)
        changed = [
            p
            for p, rec in records.items()
            if p.is_file() and {k: rec.get(k) for k in ("rows", "bytes", "sha256")} != record_of(p.read_bytes(), p.name)
        ]
        if changed:
            print(f"FOLDER: {changed[0]} differs from what its run recorded; nothing rewritten", file=sys.stderr)
            return 2
        roots = checkout_roots(folder)
        new_records: dict[Path, dict] = {}
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file() or path.name == "manifest.json":
                continue
            text = path.read_text(encoding="utf-8")
            new = scrub(text, roots)
            if new != text:
                path.write_text(new, encoding="utf-8")
                if path.resolve() in records:
                    new_records[path.resolve()] = record_of(new.encode("utf-8"), path.name)
                print(path)
        _rewrite_records(folder, new_records)
        for manifest in sorted(folder.rglob("manifest.json")):  # last: its records now name the rewritten files
            text = manifest.read_text(encoding="utf-8")
            if scrub(text, roots) != text:
                manifest.write_text(scrub(text, roots), encoding="utf-8")
                print(manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The folders of the machine a run ran on, as a committed run names them: neutral of that machine.

A run copied into data/ from a GPU host records where it ran: its folder in the manifest's command and the run log,
the notebooks' paths in papermill's metadata and the parameter cell. Those say nothing about the evidence and name
a machine's layout, so before a run is committed its text files are rewritten in place (:func:`scrub`): the checkout
root of these machines (``/work/main/``), or of the checkout that runs the rewrite, becomes a path relative to the
checkout, a home folder (``/root/``,
``/home/<user>/``) ``~/`` and ``/tmp/`` ``$TMPDIR/``. ``tests/test_machine_paths.py`` checks that nothing under data/
still has one; the report's rerun command reads those forms as another host's folder (:func:`elsewhere`).

Usage: python -m repro.machine_paths FOLDER ...   (prints each file it rewrote)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: What a home folder and the temporary folder become.
HOME, TMP = "~/", "$TMPDIR/"
#: The checkout this module runs from (a second working tree of the same repository has its own root).
CHECKOUT = Path(__file__).resolve().parents[2].as_posix()
#: (pattern, replacement) in the order applied; the checkout roots first, so that their files stay repository paths.
RULES = (
    (re.compile(re.escape(CHECKOUT) + "/"), ""),
    (re.compile(re.escape(CHECKOUT) + r"\b"), "."),
    (re.compile(r"/work/main/"), ""),
    (re.compile(r"/work/main\b"), "."),
    (re.compile(r"/root/"), HOME),
    (re.compile(r"/home/[A-Za-z0-9_.-]+/"), HOME),
    (re.compile(r"(?<![\w.~$])/tmp/"), TMP),
)
#: Text files a run folder holds.
SUFFIXES = {".json", ".log", ".md", ".csv", ".ipynb", ".html", ".txt", ".svg"}


def scrub(text: str) -> str:
    """``text`` with every machine folder of :data:`RULES` rewritten."""
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def elsewhere(path: str) -> bool:
    """Whether ``path`` is some machine's folder, not one relative to the checkout: absolute, or as :func:`scrub`
    writes one."""
    return path.startswith(("/", HOME, TMP))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m repro.machine_paths FOLDER ...", file=sys.stderr)
        return 2
    missing = [a for a in argv if not Path(a).is_dir()]
    if missing:
        print(f"FOLDER must be an existing folder, got {missing[0]!r}", file=sys.stderr)
        return 2
    for folder in argv:
        for path in sorted(Path(folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            new = scrub(text)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

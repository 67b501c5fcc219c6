"""Where the checkout is: the one place that finds the repository root.

The library can be installed editable (``src/`` in a checkout) or as a plain wheel (in
site-packages). Notebooks, seeds and run folders live in the checkout, so the root is taken from
``REPRO_ROOT`` when set, else from the current directory or its parents, else from this file's
location in an editable checkout.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

#: Files that together mark a checkout of this repository.
MARKERS = ("pyproject.toml", "notebooks", "data/seeds")


class RootNotFound(RuntimeError):
    """No checkout found; the message says how to point at one."""


def _is_root(path: Path) -> bool:
    return all((path / m).exists() for m in MARKERS)


@cache
def repo_root() -> Path:
    env = os.environ.get("REPRO_ROOT")
    if env:
        root = Path(env).resolve()
        if not _is_root(root):
            raise RootNotFound(f"REPRO_ROOT={env} is not a checkout of this repository (needs {', '.join(MARKERS)})")
        return root
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents, *Path(__file__).resolve().parents):
        if _is_root(candidate):
            return candidate
    raise RootNotFound("cannot find the repository checkout: run from inside it or set REPRO_ROOT")


def package_checkout() -> Path:
    """The checkout whose ``src/repro`` this process imported (the code that runs), else :func:`repo_root` (an
    installed package): its commit and dirty state are the run's, whatever the current folder is."""
    package = Path(__file__).resolve().parent
    for candidate in package.parents:
        if (candidate / ".git").exists():
            return candidate
    return repo_root()


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def seeds_dir() -> Path:
    return repo_root() / "data" / "seeds"


def runs_dir() -> Path:
    return repo_root() / "runs"

"""Which code a run ran: the checkout's commit and dirty flag, a digest of this package's sources and of
the notebooks' cells, and each outside implementation's module hash.

``--resume`` compares what the run recorded when it started with the code it would resume with, and
refuses a difference: the finished notebooks were run by the recorded code, and a report must not credit
(or blame) another. The digest is taken from the files themselves, so it holds where ``git`` is missing,
slow or cannot tell (a copy of a checkout).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import repro
from repro.core.evidence.environment import git_revision


def package_digest(notebooks: Path) -> str:
    """sha256 over this package's ``.py`` files and every notebook's cell sources (not their outputs)."""
    h = hashlib.sha256()
    package = Path(repro.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted(notebooks.glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text())["cells"]
        except (OSError, ValueError, KeyError, TypeError):
            cells = path.read_text(errors="replace")
        sources = [c.get("source") for c in cells] if isinstance(cells, list) else cells
        h.update(path.name.encode() + b"\0" + json.dumps(sources, sort_keys=True).encode() + b"\0")
    return h.hexdigest()


def code_identity(
    root: Path, notebooks: Path, implementations: Mapping[str, Mapping[str, Any]], git: Mapping | None = None
) -> dict:
    """What the manifest records under ``code`` when a run starts (``git``: the checkout's revision when
    already read, else read here)."""
    revision = git if git is not None else git_revision(root)
    return {
        "git_sha": revision.get("git_sha"),
        "git_dirty": revision.get("git_dirty"),
        "package_sha256": package_digest(notebooks),
        "implementations": {k: v.get("module_sha256") for k, v in implementations.items()},
    }


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between the code a run recorded and the code now, in words ([] when the same).

    A value one side did not record (a dirty flag ``git`` could not tell) is not compared."""
    out = []
    if recorded.get("git_sha") != now.get("git_sha"):
        out.append(f"commit {str(recorded.get('git_sha'))[:10]} then, {str(now.get('git_sha'))[:10]} now")
    then_dirty, now_dirty = recorded.get("git_dirty"), now.get("git_dirty")
    if isinstance(then_dirty, bool) and isinstance(now_dirty, bool) and then_dirty != now_dirty:
        words = {True: "with local changes", False: "clean"}
        out.append(f"checkout {words[then_dirty]} then, {words[now_dirty]} now")
    if "package_sha256" in recorded and recorded["package_sha256"] != now.get("package_sha256"):
        out.append("this package's sources or the notebooks differ")
    then_impl = recorded.get("implementations") or {}
    now_impl = now.get("implementations") or {}
    for param in sorted(set(then_impl) | set(now_impl)):
        if then_impl.get(param) != now_impl.get(param):
            out.append(
                f"the module of {param} differs (sha256 {str(then_impl.get(param))[:12]} then, "
                f"{str(now_impl.get(param))[:12]} now)"
            )
    return out

"""Links to a run folder's files, as each page can hold them.

``report.md`` and ``report.html`` sit in the run folder, so a link relative to it works there. A posted
comment (``pr-comment.md``) has no folder: a relative link 404s. A comment links a file only as an absolute URL
into the repository that holds the run folder (``--repo-url``, by default the checkout's ``origin`` when that is
a GitHub repository, and only for a run folder git tracks there); otherwise it names the file as plain text.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The branch absolute links point at (a run folder's files are read where the repository keeps them).
LINK_REF = "main"
_GITHUB = re.compile(
    r"^(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)([\w.-]+)/([\w.-]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class Link:
    """A cell or sentence that points at a file of the run folder (``path`` relative to it, ``#L<n>`` allowed)."""

    text: str
    path: str

    def relative(self) -> str:
        return f"[{self.text}]({self.path})"

    def absolute(self, base: str | None) -> str:
        """``[text](base/path)``, or the text alone when there is no base."""
        return f"[{self.text}]({base.rstrip('/')}/{self.path})" if base else self.text

    def __str__(self) -> str:
        return self.relative()


def github_url(url: str) -> str | None:
    """``https://github.com/<owner>/<repo>`` for a GitHub remote URL (https or ssh), else None."""
    match = _GITHUB.match(url.strip())
    return f"https://github.com/{match.group(1)}/{match.group(2)}" if match else None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def origin_url(folder: Path) -> str | None:
    """The GitHub URL of the checkout's ``origin`` around ``folder`` (None without one)."""
    url = _git(folder, "remote", "get-url", "origin")
    return github_url(url) if url else None


def run_base(run_path: Path, repo_url: str | None) -> str | None:
    """The absolute URL of a run folder in ``repo_url`` (``<repo>/blob/<LINK_REF>/<path>``), when git tracks
    files of the folder in the checkout that holds it; None otherwise (an ignored ``runs/`` folder, a folder
    outside any checkout, no repository URL)."""
    if not repo_url:
        return None
    folder = run_path.resolve()
    root = _git(folder, "rev-parse", "--show-toplevel")
    if root is None or not _git(folder, "ls-files", "--", "."):
        return None
    rel = folder.relative_to(Path(root).resolve()).as_posix()
    return f"{repo_url.rstrip('/')}/blob/{LINK_REF}/{rel}"

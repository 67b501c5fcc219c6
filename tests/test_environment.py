"""What a run records about where it ran: the commit a host was sent wins over a copy's own metadata."""

import subprocess
from pathlib import Path

from repro.core.evidence.environment import git_revision

ROOT = Path(__file__).resolve().parents[1]


def test_the_sending_hosts_commit_wins(monkeypatch):
    monkeypatch.setenv("REPRO_GIT_SHA", "a" * 40)
    monkeypatch.setenv("REPRO_GIT_DIRTY", "false")
    assert git_revision(ROOT) == {"git_sha": "a" * 40, "git_dirty": False}
    monkeypatch.delenv("REPRO_GIT_DIRTY")
    assert git_revision(ROOT)["git_dirty"] == "not recorded"


def test_a_checkout_reports_its_own_commit(monkeypatch, tmp_path):
    """A small checkout of its own: `git status` there takes milliseconds whatever the machine's load (this
    repository's notebooks would each pass through the output filter, seconds apiece on a busy machine)."""
    monkeypatch.delenv("REPRO_GIT_SHA", raising=False)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert git_revision(tmp_path) == {"git_sha": head, "git_dirty": False}
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_revision(tmp_path) == {"git_sha": head, "git_dirty": True}


def test_a_folder_without_git_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv("REPRO_GIT_SHA", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert git_revision(tmp_path) == {"git_sha": "unknown", "git_dirty": "not recorded"}

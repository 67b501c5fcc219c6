"""What a run records about where it ran: the commit a host was sent wins over a copy's own metadata."""

from pathlib import Path

from repro.evidence.environment import git_revision

ROOT = Path(__file__).resolve().parents[1]


def test_the_sending_hosts_commit_wins(monkeypatch):
    monkeypatch.setenv("REPRO_GIT_SHA", "a" * 40)
    monkeypatch.setenv("REPRO_GIT_DIRTY", "false")
    assert git_revision(ROOT) == {"git_sha": "a" * 40, "git_dirty": False}
    monkeypatch.delenv("REPRO_GIT_DIRTY")
    assert git_revision(ROOT)["git_dirty"] == "not recorded"


def test_a_checkout_reports_its_own_commit(monkeypatch):
    monkeypatch.delenv("REPRO_GIT_SHA", raising=False)
    info = git_revision(ROOT)
    assert len(info["git_sha"]) == 40 and isinstance(info["git_dirty"], bool)


def test_a_folder_without_git_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv("REPRO_GIT_SHA", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert git_revision(tmp_path) == {"git_sha": "unknown", "git_dirty": "not recorded"}

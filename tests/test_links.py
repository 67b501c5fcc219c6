"""Links in a posted comment: absolute into the repository that holds the run folder, or plain text."""

import subprocess
import sys
from pathlib import Path

import pytest

from repro.report.links import Link, github_url, origin_url, run_base
from repro.report.template import Page, Target

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "url,expected",
    [
        ("https://github.com/owner/repo", "https://github.com/owner/repo"),
        ("https://github.com/owner/repo.git", "https://github.com/owner/repo"),
        ("git@github.com:owner/my.repo.git", "https://github.com/owner/my.repo"),
        ("ssh://git@github.com/owner/repo.git", "https://github.com/owner/repo"),
        ("https://gitlab.com/owner/repo", None),
        ("/srv/git/repo.git", None),
        ("https://github.com/owner", None),
    ],
)
def test_a_github_remote_becomes_its_https_url(url, expected):
    assert github_url(url) == expected


def test_each_page_holds_a_link_as_it_can():
    link = Link("latent", "results/05-runner-answers.csv#L10")
    assert Page(Target.MARKDOWN).link(link) == "[latent](results/05-runner-answers.csv#L10)"
    assert Page(Target.HTML).link(link) == "[latent](results/05-runner-answers.csv#L10)"
    assert Page(Target.COMMENT).link(link) == "latent"
    based = Page(Target.COMMENT, link_base="https://github.com/o/r/blob/main/data/cpu/w")
    assert based.link(link) == "[latent](https://github.com/o/r/blob/main/data/cpu/w/results/05-runner-answers.csv#L10)"
    assert not Page(Target.COMMENT).links and based.links and Page(Target.MARKDOWN).links


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with a GitHub origin, a committed run folder and an ignored one."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin", "git@github.com:owner/repo.git")
    (tmp_path / ".gitignore").write_text("runs/\n")
    for folder in ("data/cpu/run", "runs/mine"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "manifest.json").write_text("{}")
    git(tmp_path, "add", ".")
    return tmp_path


def test_a_committed_run_folder_is_linked_under_the_repository(checkout):
    assert origin_url(checkout / "data/cpu/run") == "https://github.com/owner/repo"
    base = run_base(checkout / "data/cpu/run", "https://github.com/owner/repo")
    assert base == "https://github.com/owner/repo/blob/main/data/cpu/run"


def test_an_ignored_or_outside_run_folder_is_not_linked(checkout, tmp_path_factory):
    assert run_base(checkout / "runs/mine", "https://github.com/owner/repo") is None
    assert run_base(checkout / "data/cpu/run", None) is None and run_base(checkout / "data/cpu/run", "") is None
    outside = tmp_path_factory.mktemp("outside")
    assert run_base(outside, "https://github.com/owner/repo") is None and origin_url(outside) is None


def test_report_refuses_a_repo_url_that_is_not_githubs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "report", str(ROOT / "data/cpu/who-is-affected"), "--repo-url", "ftp://x"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: --repo-url: 'ftp://x' is not a GitHub")
    assert len(proc.stderr.splitlines()) == 1

"""Every parameter means what it says in every notebook. ``download=false`` is a promise about the whole notebook:
whatever its code asks of the wheel cache or the registry (a helper that calls the cache with its own default, as
notebook 05's source excerpts did), nothing is fetched. A carried cache that holds what is needed works read-only,
with downloads on or off."""

from __future__ import annotations

import ast
import io
import shutil
import subprocess

import pytest
from upstream_fakes import V4_MEMBER, fake_pip, fixture_source, make_wheel

from repro.cli.runner import declared_parameters, notebooks
from repro.studies.upstream import members, releases, wheelcache
from repro.studies.upstream.wheelcache import CacheMiss
from repro.walkthrough.session import Session

DECLARED = declared_parameters(notebooks())
#: ``repro.downloads.ENV``, where a notebook's session keeps its download parameter for every process it starts.
DOWNLOADS_ENV = "REPRO_DOWNLOADS"
WITH_DOWNLOAD = sorted(DECLARED["download"])


def defaults(notebook: str) -> dict:
    values = {}
    for name, where in DECLARED.items():
        if notebook in where and name not in ("profile", "run_dir"):
            values[name] = ast.literal_eval(where[notebook])
    return values


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A registry that counts what is asked of it: wheels fetched and index documents read."""
    wheel = make_wheel(tmp_path, "0.99.0", {V4_MEMBER: fixture_source()})
    asked: list[str] = []
    fake_pip(monkeypatch, {"0.99.0": wheel}, asked)
    monkeypatch.setattr(releases.urllib.request, "urlopen", lambda *a, **k: asked.append("index") or io.BytesIO(b"{}"))
    monkeypatch.setenv(wheelcache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(DOWNLOADS_ENV, "on")  # what a notebook's session sets is put back after the test
    return asked


@pytest.mark.parametrize("notebook", WITH_DOWNLOAD)
def test_a_notebook_started_with_download_false_fetches_nothing(notebook, registry):
    Session.start(notebook, "cpu", "", **{**defaults(notebook), "download": False})
    got = wheelcache.ensure_release("0.99.0")  # as a helper calls it, with the cache's own default
    assert isinstance(got, CacheMiss) and "downloads are off" in got.reason
    with pytest.raises(OSError):
        releases.fetch_index()
    assert registry == []


def test_notebook_05s_source_excerpts_follow_its_download_parameter(registry):
    from repro.walkthrough import affected

    Session.start("05-who-is-affected", "cpu", "", **{**defaults("05-who-is-affected"), "download": False})
    text = affected.released_lines("0.99.0", V4_MEMBER, "f", "x")
    assert text == f"vLLM 0.99.0 has no {V4_MEMBER} in the cache" and registry == []


def test_notebook_06s_release_chains_and_release_list_follow_its_download_parameter(registry):
    from repro.parameters import ParameterError
    from repro.studies.upstream import reshape_chain
    from repro.walkthrough import reshape_releases

    Session.start("06-reshape-in-releases", "cpu", "", **{**defaults("06-reshape-in-releases"), "download": False})
    got = reshape_chain.load_chain("0.99.0")  # the loader's own default asks for a download
    assert isinstance(got, CacheMiss) and "downloads are off" in got.reason
    with pytest.raises(ParameterError):
        reshape_releases.resolve_releases("default", "gpu", True)  # the GPU's list asks the registry
    assert registry == []


@pytest.mark.parametrize("download", [False, True])
def test_a_read_only_cache_that_holds_the_release_works(tmp_path, registry, download):
    root = tmp_path / "cache"
    Session.start("05-who-is-affected", "cpu", "", **{**defaults("05-who-is-affected"), "download": True})
    assert not isinstance(wheelcache.ensure_release("0.99.0", root, sets=(members.GATHER,)), CacheMiss)
    fetched = list(registry)
    Session.start("05-who-is-affected", "cpu", "", **{**defaults("05-who-is-affected"), "download": download})
    with read_only(root):
        got = wheelcache.ensure_release("0.99.0", root, download=download, sets=(members.GATHER,))
    assert not isinstance(got, CacheMiss), got
    assert registry == fetched  # nothing fetched again


class read_only:
    """``folder`` and everything in it made unwritable for this user (chattr +i where root writes anyway)."""

    def __init__(self, folder):
        self.paths = [folder, *folder.rglob("*")]
        self.chattr = None

    def __enter__(self):
        if shutil.which("chattr"):
            self.chattr = subprocess.run(["chattr", "+i", *map(str, self.paths)], capture_output=True)
        if self.chattr is None or self.chattr.returncode != 0:
            self.chattr = None
            for p in reversed(self.paths):
                p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            (self.paths[0] / ".probe").touch()
        except OSError:
            return self
        (self.paths[0] / ".probe").unlink()
        self.__exit__()
        pytest.skip("this user writes into a read-only folder and chattr +i is not available here")

    def __exit__(self, *exc):
        if self.chattr is not None:
            subprocess.run(["chattr", "-i", *map(str, self.paths)], check=True)
        else:
            for p in self.paths:
                p.chmod(0o755 if p.is_dir() else 0o644)


def test_the_downloads_switch_is_the_one_this_test_restores():
    from repro import downloads

    assert downloads.ENV == DOWNLOADS_ENV

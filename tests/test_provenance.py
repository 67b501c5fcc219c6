"""Provenance of the code that ran: the commit and dirty state recorded are those of the checkout whose package was
imported (not the current folder's), and the implementation's module hash is that of the module the case process
actually loaded, read there after it loaded (not the file as a check before the run found it, nor a module of the
same name somewhere else)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from clitools import ROOT, SMALL_02, cli_env, kill_tagged, new_tag, repro_cmd
from fakerun import FakeNotebooks, writes

from repro import paths
from repro.cli import runner


def git(where: Path, *args: str) -> str:
    cmd = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def test_the_commit_recorded_is_the_checkout_whose_package_ran(tmp_path, monkeypatch):
    """Run from another checkout of the repository (its notebooks and seeds, a commit of its own), with this
    checkout's package imported: the manifest names this checkout's commit."""
    other = tmp_path / "other"
    for part in ("notebooks", "data/seeds"):
        shutil.copytree(ROOT / part, other / part)
    shutil.copy2(ROOT / "pyproject.toml", other / "pyproject.toml")
    git(other, "init", "-q")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "another checkout")
    assert git(other, "rev-parse", "HEAD") != git(ROOT, "rev-parse", "HEAD")
    monkeypatch.chdir(other)
    monkeypatch.delenv("REPRO_GIT_SHA", raising=False)
    monkeypatch.delenv("REPRO_ROOT", raising=False)
    paths.repo_root.cache_clear()
    monkeypatch.setattr(runner, "execute_notebook", FakeNotebooks({}, writes("x", "05-runner-answers", True)))
    try:
        assert runner.run("cpu", str(tmp_path / "run"), [], selection=["05"], report=False) == 0
    finally:
        paths.repo_root.cache_clear()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["code"]["git_sha"] == manifest["environment"]["git_sha"] == git(ROOT, "rev-parse", "HEAD")


#: The implementation under test, twice under one name: in the folder the command runs from (imported through a
#: relative PYTHONPATH entry) and in the checkout the notebooks run from. The first is edited two seconds after the
#: pre-run check imported it, as a module edited while the run goes would be.
TWIN = '''"""{which}"""

import subprocess
import sys

from repro.core.kernels.gather import gather_fixed

EDIT = "import sys, time; time.sleep(2); open(sys.argv[1], 'a').write('# edited while the run went on\\\\n')"
if sys.argv[0].endswith("probe.py"):  # the check before the run: two seconds later the file changes
    subprocess.Popen([sys.executable, "-c", EDIT, __file__], start_new_session=True)


def gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
    {body}
'''


@pytest.mark.notebook
def test_the_module_hash_is_the_one_the_case_process_loaded(tmp_path):
    checkout = tmp_path / "checkout"
    for part in ("src", "notebooks", "data/seeds"):
        shutil.copytree(ROOT / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    (checkout / "mods").mkdir()
    (checkout / "mods" / "twin_gather.py").write_text(
        TWIN.format(which="the twin in the checkout: always wrong", body="out.zero_()")
    )
    here = tmp_path / "here"
    (here / "mods").mkdir(parents=True)
    mine = here / "mods" / "twin_gather.py"
    mine.write_text(
        TWIN.format(
            which="the twin the command names: right",
            body="gather_fixed(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)",
        )
    )
    out = tmp_path / "run"
    tag = new_tag()
    env = cli_env(tag, PYTHONPATH=f"mods:{checkout / 'src'}", REPRO_ROOT=str(checkout))
    args = ["run", "--profile", "cpu", "--out", str(out), "--notebooks", "02", *SMALL_02]
    try:
        proc = subprocess.run(
            repro_cmd(*args, "-p", "implementation=twin_gather:gather", "-p", "sentinel_modes=[in-range]"),
            capture_output=True,
            text=True,
            env=env,
            cwd=here,
            timeout=600,
        )
    finally:
        kill_tagged(tag)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert mine.read_text().endswith("# edited while the run went on\n")
    recorded = json.loads((out / "manifest.json").read_text())
    loaded = hashlib.sha256(mine.read_bytes()).hexdigest()  # the file as the case process loaded it (edited)
    assert recorded["implementations"]["implementation"]["module_sha256"] == loaded
    assert recorded["implementations"]["implementation"]["module_file"] == str(mine.resolve())
    assert recorded["code"]["implementations"]["implementation"] == loaded
    assert recorded["implementations"]["implementation"]["probe_sha256"] != loaded  # what the check read before


def test_a_target_recorded_before_its_module_moved_names_todays_implementation():
    """The module moves the registry lists (``moved_from``) read as today's target; any other target, a function of
    the same name elsewhere included, is named as the run recorded it."""
    from repro.core.analysis.provenance import current_target, named_code
    from repro.registry import FIXED, code_of, implementation

    fast = implementation("fast").target
    moves = {
        "repro.kernels.gather:gather_fixed": FIXED.target,
        "repro.kernels.gather:gather_buggy": "repro.core.kernels.gather:gather_buggy",
        "repro.kernels.gather:gather_contiguous_copy": "repro.core.kernels.gather:gather_contiguous_copy",
        "repro.kernels.fast:gather_fast": fast,
        "repro.studies.kernels.fast:gather_fast": fast,
    }
    assert {old: current_target(old) for old in moves} == moves
    for kept in (FIXED.target, "repro.kernels.gather:gather_gone", "mine.kernels:gather_fixed", "vllm.ops:gather"):
        assert current_target(kept) == kept
    assert named_code({"target": "repro.kernels.gather:gather_fixed"}) == code_of("fixed")

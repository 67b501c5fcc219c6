"""Notebooks as committed and as a reader opens them: no outputs (a git filter strips what JupyterLab saves),
citations only of what this repository or vLLM holds, and the report notebook working as shipped."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Files of a run folder that notebooks name (not documents).
RUN_FOLDER_FILES = {"report.md"}


def _nb(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = _nb(path)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, path.name
    assert "widgets" not in nb["metadata"]


@pytest.fixture(scope="module")
def filtered(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """Copies of every committed notebook after one run of the output filter over all of them."""
    folder = tmp_path_factory.mktemp("filtered")
    for path in NOTEBOOKS:
        shutil.copy(path, folder / path.name)
    cmd = [sys.executable, "-m", "nbstripout", "--keep-id", *(str(folder / p.name) for p in NOTEBOOKS)]
    return folder, subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_output_filter_leaves_a_committed_notebook_unchanged(path, filtered):
    """The filter must be a no-op on a committed notebook, byte for byte (nbformat's layout), or every
    checkout would show it modified and every branch that touches it would conflict."""
    folder, proc = filtered
    assert proc.returncode == 0, proc.stdout + proc.stderr
    copy = folder / path.name
    assert copy.read_bytes() == path.read_bytes(), f"save {path.name} with nbformat (or JupyterLab) and commit it"


def test_gitattributes_route_notebooks_through_the_filter():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "check-attr", "filter", "notebooks/01-reshape-overrun.ipynb"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.stdout.strip().endswith("filter: nbstripout")


def test_setup_installs_a_filter_that_strips_outputs_on_git_add(tmp_path):
    """scripts/setup-nbstripout.sh in a fresh repository: a notebook saved with outputs is staged without them."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    shutil.copy(ROOT / "scripts" / "setup-nbstripout.sh", repo / "scripts")
    shutil.copy(ROOT / "scripts" / "nbstripout-filter", repo / "scripts")
    shutil.copy(ROOT / ".gitattributes", repo)
    (repo / ".venv").symlink_to(Path(sys.prefix))  # this test's environment, where nbstripout is installed
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "VENV": ".venv"}
    run = lambda *cmd: subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, check=True)  # noqa: E731
    run("git", "init", "-q")
    run("bash", "scripts/setup-nbstripout.sh")
    nb = _nb(ROOT / "notebooks" / "90-report.ipynb")
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["shown in JupyterLab\n"]}]
    code["execution_count"] = 3
    saved = repo / "notebooks" / "90-report.ipynb"
    saved.write_text(json.dumps(nb, indent=1))
    run("git", "add", "notebooks/90-report.ipynb")
    staged = json.loads(run("git", "show", ":notebooks/90-report.ipynb").stdout)
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in staged["cells"])
    assert [c.get("id") for c in staged["cells"]] == [c.get("id") for c in nb["cells"]]
    assert "shown in JupyterLab" in saved.read_text()  # the working copy keeps what was shown


def test_git_status_and_add_work_without_a_venv(tmp_path):
    """After ``make clean-venv`` (no venv, no nbstripout): ``git status`` and ``git diff`` still work on a
    checkout whose notebooks git must re-read, and ``git add`` still strips a notebook saved with outputs."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    for name in ("setup-nbstripout.sh", "nbstripout-filter"):
        shutil.copy(ROOT / "scripts" / name, repo / "scripts")
    shutil.copy(ROOT / ".gitattributes", repo)
    for path in NOTEBOOKS[:2]:
        shutil.copy(path, repo / "notebooks")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "VENV": ".venv"}
    env.pop("REPRO_VENV", None)

    def git(*args: str) -> subprocess.CompletedProcess:
        cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)

    assert git("init", "-q").returncode == 0
    subprocess.run(["bash", "scripts/setup-nbstripout.sh"], cwd=repo, env=env, check=True, capture_output=True)
    assert git("add", "-A").returncode == 0 and git("commit", "-qm", "notebooks").returncode == 0
    for path in (repo / "notebooks").glob("*.ipynb"):  # a fresh checkout's stat data: git re-reads each one
        os.utime(path, (1, 1))
    status = git("status", "--porcelain")
    assert status.returncode == 0 and status.stdout == "", status.stderr
    saved = repo / "notebooks" / NOTEBOOKS[0].name
    nb = _nb(saved)
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["shown in JupyterLab\n"]}]
    code["execution_count"] = 3
    saved.write_text(json.dumps(nb, indent=1))
    assert git("status", "--porcelain").returncode == 0
    diff = git("diff", "--stat")
    assert diff.returncode == 0 and diff.stdout == ""  # outputs alone are no change
    assert git("add", str(saved)).returncode == 0
    staged = json.loads(git("show", f":notebooks/{saved.name}").stdout)
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in staged["cells"])


def _markdown(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in _nb(path)["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_cite_only_what_the_repository_or_vllm_holds(path):
    text = _markdown(path)
    assert "dossier" not in text.lower()
    for doc in set(re.findall(r"[\w./-]+\.md\b", text)) - RUN_FOLDER_FILES:
        assert (ROOT / doc).exists(), f"{path.name} cites {doc}, not in this repository"
    for url in re.findall(r"\]\((http[^)]+)\)", text):
        assert url.startswith("https://github.com/vllm-project/vllm/"), f"{path.name} links {url}"


def _execute_as_shipped(root: Path, monkeypatch) -> str:
    """Run notebooks/90-report.ipynb unchanged, from notebooks/, the way JupyterLab does; its outputs as text."""
    import nbclient
    import nbformat

    monkeypatch.setenv("REPRO_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(ROOT / "notebooks" / "90-report.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(root / "notebooks")}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"], outputs
    return "\n".join(str(o.get("data", {})) + str(o.get("text", "")) for o in outputs)


def _checkout(tmp_path: Path) -> Path:
    """A checkout root for the kernel: the real notebooks and PR seeds, no runs/ folder yet."""
    root = tmp_path / "checkout"
    (root / "data").mkdir(parents=True)
    (root / "data" / "seeds").symlink_to(ROOT / "data" / "seeds")
    (root / "pyproject.toml").write_text("")
    (root / "notebooks").symlink_to(ROOT / "notebooks")
    return root


@pytest.mark.notebook
def test_report_notebook_without_a_run_says_how_to_make_one(tmp_path, monkeypatch):
    text = _execute_as_shipped(_checkout(tmp_path), monkeypatch)
    assert "No run yet" in text and "make run" in text


@pytest.mark.notebook
def test_report_notebook_as_shipped_shows_the_latest_run(tmp_path, monkeypatch):
    root = _checkout(tmp_path)
    (root / "runs").mkdir()
    shutil.copytree(ROOT / "data" / "h200" / "vllm-0.22.0-under-test", root / "runs" / "20260101-000000")
    (root / "runs" / "latest").symlink_to("20260101-000000")
    text = _execute_as_shipped(root, monkeypatch)
    assert "<h1>Reproduced: vllm" in text and "data:image/png;base64," in text

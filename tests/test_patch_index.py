"""data/patches/: one stable path for PR #55109's diff against each release, from the newest committed run whose
patch applied; the committed folder is what the command writes, and each diff applies to its release's files."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from repro_studies.tables import Table
from repro_studies.upstream import patch_index, patches
from repro_studies.upstream.wheelcache import load_entry

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / patch_index.INDEX_DIR
COMMITTED = sorted(p.name for p in INDEX.glob("vllm-*.diff"))


@pytest.mark.audit
def test_the_committed_index_is_what_the_command_writes():
    files = patch_index.index_files(ROOT / "data", ROOT)
    assert sorted(files) == sorted([*COMMITTED, patch_index.INDEX_FILE])
    for name, data in files.items():
        assert (INDEX / name).read_bytes() == data, f"{name}: run python -m repro_studies.upstream.patch_index"


@pytest.mark.audit
def test_every_release_the_matrix_patched_has_its_diff_in_the_index():
    merged = ROOT / "data/h200/release-matrix-merged/results" / f"{Table.PATCHES}.csv"
    applied = pd.read_csv(merged, dtype=str)
    applied = set(applied[applied["status"] == patches.PatchStatus.APPLIED]["release"])
    assert {patches.diff_name(v) for v in applied} <= set(COMMITTED)


@pytest.mark.audit
@pytest.mark.parametrize("name", COMMITTED)
def test_each_diff_applies_to_its_releases_cached_files(name, tmp_path):
    version = name.removeprefix("vllm-").removesuffix(".diff")
    entry = load_entry(version)
    if entry is None:
        pytest.skip(f"vLLM {version} is not in the module cache here")
    if shutil.which(patches.PATCH_TOOL) is None:
        pytest.skip(patches.INSTALL_NOTE)
    tree = tmp_path / version
    shutil.copytree(entry.files_dir, tree)
    assert patches.apply(INDEX / name, tree) == ""


def fake_run(data: Path, name: str, finished: str, rows: list[tuple[str, str]]) -> Path:
    run = data / "h200" / name
    (run / "results").mkdir(parents=True)
    (run / "patches").mkdir()
    (run / "manifest.json").write_text(json.dumps({"status": "complete", "finished": finished}))
    lines = ["notebook,release,status,launch_sites,files,edits,diff,wheel,wheel_sha256,reason"]
    for release, status in rows:
        lines.append(f"04,{release},{status},1,vllm/x.py,1,{patches.diff_name(release)},w-{release}.whl,ab,")
        (run / "patches" / patches.diff_name(release)).write_text(f"{name} {release}\n")
    (run / "results" / f"{Table.PATCHES}.csv").write_text("\n".join(lines) + "\n")
    return run


def test_the_newest_run_whose_patch_applied_gives_each_release_and_a_new_release_joins(tmp_path):
    data = tmp_path / "data"
    fake_run(data, "old", "2026-12-01T18:00:00+00:00", [("0.33.0", "applied"), ("0.32.0", "applied")])
    fake_run(data, "new", "2026-12-02T09:00:00+00:00", [("0.33.0", "applied"), ("0.32.0", "does not apply")])
    chosen = patch_index.newest_patches(data)
    assert {v: p.run.name for v, p in chosen.items()} == {"0.32.0": "old", "0.33.0": "new"}
    fake_run(data, "gpu-0.34", "2026-12-10T09:00:00+00:00", [("0.34.0", "applied")])
    files = patch_index.index_files(data, tmp_path)
    assert files["vllm-0.34.0.diff"] == b"gpu-0.34 0.34.0\n" and files["vllm-0.33.0.diff"] == b"new 0.33.0\n"
    index = files[patch_index.INDEX_FILE].decode()
    assert (
        "| 0.34.0 | [vllm-0.34.0.diff](vllm-0.34.0.diff) | 1 | vllm/x.py | w-0.34.0.whl | `data/h200/gpu-0.34` |"
        in index
    )
    assert list(patch_index.newest_patches(data)) == ["0.32.0", "0.33.0", "0.34.0"]


def test_the_command_rewrites_the_folder_whole_and_refuses_a_folder_without_runs(tmp_path):
    data = tmp_path / "data"
    fake_run(data, "r", "2026-12-01T18:00:00+00:00", [("0.33.0", "applied")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "vllm-0.1.0.diff").write_text("stale")
    cmd = [sys.executable, "-m", "repro_studies.upstream.patch_index", "--data", str(data), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "vllm-0.33.0.diff"]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run(cmd[:3] + ["--data", str(empty), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --data: ") and len(proc.stderr.splitlines()) == 1

"""GitHub Actions workflows, validated offline against the vendored workflow schema (no runner here)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or "check-jsonschema"
    return subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", *map(str, paths)], capture_output=True, text=True
    )


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "gpu.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_schema(path):
    proc = check_jsonschema(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_validator_rejects_a_broken_workflow(tmp_path):
    broken = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    del broken["jobs"]["cpu-profile"]["runs-on"]
    broken["jobs"]["cpu-profile"]["timeout-minutes"] = "soon"
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    assert check_jsonschema(path).returncode != 0


def test_ci_runs_the_readme_commands_and_publishes_the_report():
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    steps = ci["jobs"]["cpu-profile"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(r.strip() == "make test" for r in runs)
    assert any(r.startswith("make run") and "--profile cpu" in r for r in runs)
    assert any("GITHUB_STEP_SUMMARY" in r and "head -c 1000000" in r for r in runs)
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in steps)
    triggers = ci.get(True, ci.get("on"))
    assert "pull_request" in triggers


def test_gpu_workflow_takes_the_runner_label_as_input():
    gpu = yaml.safe_load((ROOT / ".github/workflows/gpu.yml").read_text())
    triggers = gpu.get(True, gpu.get("on"))
    assert "runner_label" in triggers["workflow_dispatch"]["inputs"]
    assert "inputs.runner_label" in str(gpu["jobs"]["gpu-profile"]["runs-on"])

"""GitHub Actions workflows, validated offline against the vendored workflow schema (no runner here)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

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


#: Contexts a dispatcher, a PR author or a commit can set: never expanded inside a shell script.
UNTRUSTED = re.compile(r"\$\{\{[^}]*\b(inputs|github\.event|github\.head_ref|env)\b[^}]*\}\}")


def run_scripts(workflow: dict) -> list[tuple[str, str]]:
    return [
        (f"{job}/{step.get('name', step.get('uses', '?'))}", step["run"])
        for job, spec in workflow["jobs"].items()
        for step in spec.get("steps", [])
        if "run" in step
    ]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_is_pasted_into_a_script(path):
    """GitHub expands ``${{ }}`` before the shell runs, so an input inside ``run:`` is shell code."""
    for where, script in run_scripts(yaml.safe_load(path.read_text())):
        assert "${{" not in script, f"{path.name} {where}: pass it through env: and quote it instead"


def test_the_injection_check_catches_the_unsafe_form():
    unsafe = {"jobs": {"j": {"steps": [{"run": 'make run ARGS="--out x ${{ inputs.params }}"'}]}}}
    scripts = run_scripts(unsafe)
    assert any("${{" in s for _, s in scripts) and UNTRUSTED.search(scripts[0][1])


def test_gpu_workflow_passes_params_through_env():
    gpu = yaml.safe_load((ROOT / ".github/workflows/gpu.yml").read_text())
    step = next(s for s in gpu["jobs"]["gpu-profile"]["steps"] if "repro run" in s.get("run", ""))
    assert UNTRUSTED.search(step["env"]["PARAMS"])
    assert '"$PARAMS"' in step["run"] and "make run" not in step["run"]


@pytest.mark.parametrize(
    "params,expected",
    [
        ("", []),
        ("seed=3", ["-p", "seed=3"]),
        ("request_counts=[1, 2]; seed=3 ;", ["-p", "request_counts=[1, 2]", "-p", "seed=3"]),
        ("x=$(touch pwned1); y=`touch pwned2`", ["-p", "x=$(touch pwned1)", "-p", "y=`touch pwned2`"]),
        ("z=' ; touch pwned3 ; '", ["-p", "z='", "-p", "touch pwned3", "-p", "'"]),
        ("a=1\nb=$HOME", ["-p", "a=1\nb=$HOME"]),
    ],
)
def test_gpu_workflow_hands_params_to_the_runner_as_data(params, expected, tmp_path):
    """The step's own script, run by bash with stand-ins for make and the venv's python: every item is
    one argument, nothing in it is executed or expanded."""
    gpu = yaml.safe_load((ROOT / ".github/workflows/gpu.yml").read_text())
    step = next(s for s in gpu["jobs"]["gpu-profile"]["steps"] if "repro run" in s.get("run", ""))
    (tmp_path / "bin").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake_make = tmp_path / "bin" / "make"
    fake_make.write_text("#!/bin/sh\nexit 0\n")
    fake_python = tmp_path / ".venv" / "bin" / "python"
    fake_python.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    for exe in (fake_make, fake_python):
        exe.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PARAMS": params}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout.strip().splitlines()[-1])
    assert argv == ["-m", "repro", "run", "--profile", "gpu", "--out", "runs/gpu", *expected]
    assert not list(tmp_path.glob("pwned*"))


def test_gpu_workflow_fans_the_release_matrix_out_and_merges_it():
    gpu = yaml.safe_load((ROOT / ".github/workflows/gpu.yml").read_text())
    inputs = gpu.get(True, gpu.get("on"))["workflow_dispatch"]["inputs"]
    assert json.loads(inputs["releases"]["default"]) == ["0.22.0", "0.28.0", "0.33.0"]
    job = gpu["jobs"]["release-matrix"]
    assert job["strategy"]["matrix"] == {
        "release": "${{ fromJSON(inputs.releases) }}",
        "runner": "${{ fromJSON(inputs.runner_labels) }}",
    }
    step = next(s for s in job["steps"] if "--notebooks 04" in s.get("run", ""))
    assert step["env"]["RELEASE"] == "${{ matrix.release }}" and '-p "releases=$RELEASE"' in step["run"]
    merge = gpu["jobs"]["merge-release-matrix"]
    assert merge["needs"] == "release-matrix"
    assert any("repro report runs/merged --merge runs/release-*" in s.get("run", "") for s in merge["steps"])

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
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "gpu.yml", "new-release.yml"}


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
    assert any(r.strip() == "make test" for r in runs) and any(r.strip() == "make audit" for r in runs)
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


# --------------------------------------------------------------------------------------------
# new-release.yml: the weekly release check


def new_release() -> dict:
    return yaml.safe_load((ROOT / ".github/workflows/new-release.yml").read_text())


def step_named(workflow: dict, name: str) -> dict:
    return next(s for s in workflow["jobs"]["new-release"]["steps"] if s.get("name") == name)


def test_the_release_check_runs_weekly_and_on_demand():
    triggers = new_release().get(True, new_release().get("on"))
    assert "workflow_dispatch" in triggers
    (cron,) = [entry["cron"] for entry in triggers["schedule"]]
    minute, hour, day, month, weekday = cron.split()
    assert (day, month) == ("*", "*") and weekday.isdigit() and minute.isdigit() and hour.isdigit()


def test_the_release_check_reads_committed_evidence_and_runs_notebooks_that_take_the_list():
    """Every evidence folder is committed, and every notebook it runs and every parameter it passes exist: the
    repro CLI refuses a parameter none of the selected notebooks declares."""
    from repro.cli.runner import declared_parameters
    from repro.studies.upstream import newer

    env = new_release()["jobs"]["new-release"]["env"]
    assert env["EVIDENCE"].split() == list(newer.EVIDENCE) and env["RECORD"] == newer.RECORD
    assert all((ROOT / folder / "results").is_dir() for folder in env["EVIDENCE"].split())
    notebooks = [next((ROOT / "notebooks").glob(f"{prefix}-*.ipynb")) for prefix in env["NOTEBOOKS"].split()]
    assert {"04", "05", "06"} <= {p.name[:2] for p in notebooks}
    declared = declared_parameters(notebooks)
    for name in env["RELEASE_PARAMETERS"].split():
        assert name in declared, f"no notebook of {env['NOTEBOOKS']} takes {name}"


def fake_venv_python(tmp_path: Path, body: str) -> None:
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!{sys.executable}\n{body}")
    python.chmod(0o755)


def run_step(step: dict, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    job_env = new_release()["jobs"]["new-release"]["env"]
    full = {
        **os.environ,
        **job_env,
        **env,
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    return subprocess.run(["bash", "-e", "-c", step["run"]], env=full, cwd=tmp_path, capture_output=True, text=True)


def next_release() -> str:
    """A release one minor version past the newest the committed evidence covers (so it stays new)."""
    from repro.studies.upstream import newer

    major, minor, *_ = newer.covered_through([ROOT / p for p in newer.EVIDENCE]).split(".")
    return f"{major}.{int(minor) + 1}.0"


@pytest.mark.parametrize("extra,rc,found", [((), 0, "false"), (("next",), 0, "true"), ("broken", 1, None)])
def test_the_check_step_passes_on_an_answer_and_fails_when_it_cannot_read_one(tmp_path, extra, rc, found):
    """The step's own script with a registry answer from a file: found or not, the step passes and hands the
    releases on; an unreadable answer fails it."""
    from test_release_check import registry_answer, wheel

    index = tmp_path / "index.json"
    new = next_release()
    if extra == "broken":
        index.write_text("{")
    else:
        index.write_text(json.dumps(registry_answer({new: [wheel(new)]} if extra else {})))
    for folder in new_release()["jobs"]["new-release"]["env"]["EVIDENCE"].split():
        shutil.copytree(ROOT / folder / "results", tmp_path / folder / "results")
    (tmp_path / "data").mkdir(exist_ok=True)
    fake_venv_python(
        tmp_path,
        "import os, sys\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:], '--index', {str(index)!r}])\n",
    )
    proc = run_step(step_named(new_release(), "ask the registry"), tmp_path)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    if found is None:
        assert not (tmp_path / "out").exists() or "found=" not in (tmp_path / "out").read_text()
        return
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out").read_text().splitlines())
    assert outputs == {"found": found, "releases": new if found == "true" else ""}
    summary = (tmp_path / "summary").read_text()
    assert summary.startswith("### vLLM releases newer than the committed evidence")
    assert ("1 release newer than" if found == "true" else "no release newer than") in summary
    assert json.loads((tmp_path / "data" / "release-check.json").read_text())["newer"] == (
        [new] if found == "true" else []
    )


def test_the_run_step_hands_the_new_releases_to_each_notebook_parameter(tmp_path):
    fake_venv_python(tmp_path, "import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    proc = run_step(
        step_named(new_release(), "run the CPU release studies on the new releases"), tmp_path, RELEASES="0.34.0,0.34.1"
    )
    assert proc.returncode == 0, proc.stderr
    argv = json.loads(proc.stdout.strip().splitlines()[-1])
    assert argv == [
        "-m",
        "repro",
        "run",
        "--profile",
        "cpu",
        "--notebooks",
        "04",
        "05",
        "06",
        "--out",
        "runs/new-release",
        "-p",
        "releases=0.34.0,0.34.1",
    ]


def test_the_release_check_fails_the_job_on_a_new_release_with_its_rows_in_the_summary():
    workflow = new_release()
    steps = workflow["jobs"]["new-release"]["steps"]
    fail = step_named(workflow, "fail on a new release")
    assert fail["if"] == "steps.check.outputs.found == 'true'" and fail["run"].rstrip().endswith("exit 1")
    summary = step_named(workflow, "the new releases' rows into the job summary")
    assert "always()" in summary["if"] and "runs/new-release/report.md" in summary["run"]
    assert steps.index(summary) < steps.index(fail)
    commit = step_named(workflow, "commit the check's answer")
    assert "github.event_name == 'schedule'" in commit["if"] and '"$RECORD"' in commit["run"]
    # the README's "checked through" line is re-written from the record it commits, so the README test holds
    from repro.report import readme

    assert "python -m repro.report.readme README.md" in commit["run"]
    assert f'git add "$RECORD" README.md {readme.DETAIL}' in commit["run"]
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["jobs"]["new-release"]["permissions"] == {"contents": "write"}

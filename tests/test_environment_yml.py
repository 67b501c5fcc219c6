"""environment.yml cannot be solved here (no conda); it is kept consistent with pyproject by parsing."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].strip().lower()


def test_environment_lists_every_dependency_with_the_same_lower_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_name(d): d for d in env["dependencies"] if isinstance(d, str)}
    for req in wanted:
        name = CONDA_NAMES.get(_name(req), _name(req))
        assert name in conda, f"{name} missing from environment.yml"
        bound = re.search(r">=\s*([\d.]+)", req)
        if bound:
            assert f">={bound.group(1)}" in conda[name].replace(" ", ""), (req, conda[name])
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert "-e ." in pip


def test_python_bound_matches():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"python{project['requires-python']}" in env["dependencies"]

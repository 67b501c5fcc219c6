"""The run's pre-flight (every notebook's parameters checked, the implementations located) imports neither torch nor
Triton: a bad ``-p`` value exits 2 in a fraction of a second, and only the run itself pays for them. Nor does the
manifest's environment on a torch built without CUDA: the run's parent never imports them there."""

from __future__ import annotations

import json
import subprocess
import sys

PREFLIGHT = """
import sys
from repro.cli.params import parse_assignments
from repro.cli.runner import ImportChecks, declared_parameters, notebook_values, notebooks
from repro.parameters import parameter_classes

paths = notebooks()
declared = declared_parameters(paths)
params = parse_assignments([], declared, None)
imports, seen = ImportChecks(), {}
for path in paths:
    values = notebook_values(declared, path.stem, params)
    seen.update(parameter_classes()[path.name].build(values, "cpu", imports).values())
assert imports.used(seen)["implementation"]["module_sha256"]
print(sorted(name for name in ("torch", "triton") if name in sys.modules))
"""


def test_checking_every_notebooks_defaults_imports_no_torch_or_triton():
    done = subprocess.run([sys.executable, "-c", PREFLIGHT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_registered_gathers_provenance_is_its_modules_hash_without_importing_it():
    probe = (
        "import hashlib, sys\n"
        "from repro.registry import FIXED, provenance\n"
        "info = provenance(FIXED.target)\n"
        "import repro.core.kernels.gather as m\n"
        "print(info['module_sha256'] == hashlib.sha256(open(m.__file__, 'rb').read()).hexdigest())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


ENVIRONMENT = """
import json, sys
from pathlib import Path
from repro.core.evidence.environment import describe

env = describe(Path("."))
imported = sorted(name for name in ("torch", "triton") if name in sys.modules)
import torch, triton
print(json.dumps([imported, env["torch"], env["triton"], env["cuda_runtime"], env["cuda_available"],
                  torch.__version__, triton.__version__, torch.version.cuda, torch.cuda.is_available()]))
"""


def test_the_environment_names_torch_and_triton_as_they_import_and_imports_them_only_for_a_cuda_build():
    done = subprocess.run([sys.executable, "-c", ENVIRONMENT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported, *recorded = json.loads(done.stdout)
    assert recorded[:4] == recorded[4:]
    assert imported == ([] if recorded[2] is None else ["torch"])

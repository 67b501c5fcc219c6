"""The layout keeps data flowing one way: imports inside ``repro`` point down the floors, and the
reporting side (analysis, report) runs without torch, triton or the evidence machinery."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "repro"

#: Floor of each part, by module prefix (longest prefix wins). A module may import its own floor or lower.
FLOORS = {
    "repro": 0,
    "repro.paths": 0,
    "repro.registry": 0,
    "repro.seeds": 0,
    "repro.profiles": 0,
    "repro.geometry": 0,
    "repro.kernels": 0,
    "repro.reshape": 1,
    "repro.evidence": 1,
    "repro.upstream": 1,
    "repro.parameters": 1,
    "repro.analysis": 2,
    "repro.walkthrough": 3,
    "repro.report": 4,
    "repro.cli": 4,
    "repro.__main__": 4,
}
#: What the reporting side may import from the library: no torch, no kernels, no evidence.
REPORTING = ("repro.analysis", "repro.report")
REPORTING_MAY_IMPORT = (
    "repro.paths",
    "repro.registry",
    "repro.outcomes",
    "repro.seeds",
    "repro.geometry.layout",
    "repro.analysis",
    "repro.report",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def floor(name: str) -> int:
    best = max((p for p in FLOORS if name == p or name.startswith(p + ".")), key=len)
    return FLOORS[best]


def repro_imports(path: Path) -> set[str]:
    """Every ``repro`` module a file imports, at any depth (function-level imports included)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("repro"):
            for alias in node.names:  # `from repro.report import plots` imports repro.report.plots
                candidate = f"{node.module}.{alias.name}"
                is_module = (SRC / Path(*candidate.split("."))).with_suffix(".py").is_file()
                found.add(candidate if is_module else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("repro"))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; use absolute `repro.` imports")
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_floors_cover_every_module():
    assert all(floor(name) is not None for name in MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    upward = sorted(m for m in repro_imports(MODULES[name]) if floor(m) > floor(name))
    assert not upward, f"{name} (floor {floor(name)}) imports {upward} from a higher floor"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith(REPORTING)))
def test_reporting_side_imports_no_evidence_or_kernels(name):
    bad = sorted(m for m in repro_imports(MODULES[name]) if not m.startswith(REPORTING_MAY_IMPORT))
    assert not bad, f"{name} imports {bad}"


@pytest.mark.notebook
def test_report_command_never_imports_torch(tmp_path):
    """``python -m repro report RUN`` on a committed GPU run, in a fresh process: torch stays unloaded."""
    source = next(p for p in sorted((SRC.parent / "data" / "h200").iterdir()) if (p / "manifest.json").is_file())
    run = tmp_path / source.name
    shutil.copytree(source, run)
    code = (
        "import sys; from repro.cli.main import main; rc = main(['report', sys.argv[1]]); "
        "print('TORCH', 'torch' in sys.modules, 'TRITON', 'triton' in sys.modules); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TORCH False TRITON False" in proc.stdout, proc.stdout


def _public_functions(path: Path):
    tree = ast.parse(path.read_text())
    nodes = list(tree.body) + [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
    for node in nodes:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            if not any("jit" in ast.dump(d) for d in node.decorator_list):  # Triton kernels take constexprs
                yield node


@pytest.mark.parametrize("name", sorted(MODULES))
def test_public_functions_have_type_hints(name):
    missing = []
    for fn in _public_functions(MODULES[name]):
        args = [a for a in fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
        if any(a.annotation is None for a in args) or fn.returns is None:
            missing.append(fn.name)
    assert not missing, f"{name}: {missing} lack type hints"


def test_a_plain_install_finds_the_checkout(tmp_path):
    """Installed as a wheel (not editable), the library still finds notebooks and seeds from the checkout."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(SRC.parent),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import repro.paths, repro.seeds; print(repro.paths.__file__); print(repro.paths.notebooks_dir()); "
        "print(repro.seeds.load(43988)['reported']['available_bytes'])"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SRC.parent, env=env)
    assert proc.returncode == 0, proc.stderr
    module_file, notebooks, pool = proc.stdout.split()
    assert module_file.startswith(str(target)) and Path(notebooks) == SRC.parent / "notebooks" and int(pool) > 0

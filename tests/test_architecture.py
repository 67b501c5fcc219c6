"""Two packages, data flowing one way through each: ``repro`` (the two bugs) and ``repro_studies`` (the studies
built on it), and beside them ``repro_audit``, the browser checks of what reviewers see. ``repro`` never imports
either, not at any depth of its code nor by a module name in a string: the studies reach it only by registration
(entry points of group ``repro.plugins``), and the audit imports nothing of the studies. Inside each, the base
layer (the shared vocabulary) sits under the kernels, evidence and analyses, and rendering, the command line and the
notebook helpers sit on top; imports point down the floors; no modules import each other in a circle; a
function-level import is one that must stay lazy and says why; and the reporting side (the analyses, the report)
runs without torch, triton or the evidence code."""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "repro"
STUDIES = SRC / "repro_studies"
AUDIT = SRC / "repro_audit"

#: The layers, bottom up, by module prefix (longest prefix wins): a layer never imports a layer above it.
LAYERS = {
    "repro": "base",  # bugs, tables, outcomes, parameters, paths, plugins, profiles, registry, seeds
    "repro.core": "core",
    "repro.walkthrough": "rendering",
    "repro.report": "rendering",
    "repro.cli": "rendering",
    "repro.__main__": "rendering",
    "repro_studies": "studies",  # its registry and notebooks, kernels, upstream, evidence, analysis
    "repro_studies.walkthrough": "rendering",
    "repro_studies.report": "rendering",
    "repro_studies.commands": "rendering",
    "repro_audit": "rendering",
}
RENDERING = (
    "repro.report",
    "repro.cli",
    "repro.walkthrough",
    "repro.__main__",
    "repro_studies.walkthrough",
    "repro_studies.report",
    "repro_studies.commands",
    "repro_audit",
)
#: What each layer never imports, at any depth of its code (function-level imports included).
NEVER_IMPORTS = {
    "base": ("repro_studies", *RENDERING),
    "core": ("repro_studies", *RENDERING),
    "studies": RENDERING,
}

#: Floor of each part, by module prefix (longest prefix wins). A module may import its own floor or lower:
#: inside the core and the studies, kernels and geometry, then the evidence that runs them, then the analyses.
FLOORS = {
    "repro": 0,
    "repro.core.geometry": 1,
    "repro.core.kernels": 1,
    "repro.core.reshape": 2,
    "repro.core.evidence": 2,
    "repro.core.analysis": 3,
    "repro.parameters": 3,
    "repro.profiles": 3,
    "repro_studies": 4,
    "repro_studies.kernels": 4,
    "repro_studies.upstream": 5,
    "repro_studies.evidence": 5,
    "repro_studies.analysis": 6,
    "repro.walkthrough": 7,
    "repro_studies.walkthrough": 7,
    "repro.report": 8,
    "repro.cli": 8,
    "repro.__main__": 8,
    "repro_studies.report": 8,
    "repro_studies.commands": 8,
    "repro_audit": 8,
}
#: What the reporting side may import from the library: no torch, no kernels, no evidence.
REPORTING = ("repro.core.analysis", "repro_studies.analysis", "repro.report", "repro_studies.report")
REPORTING_MAY_IMPORT = (
    "repro.paths",
    "repro.machine_paths",
    "repro.plugins",
    "repro.registry",
    "repro.outcomes",
    "repro.notebook_failure",
    "repro.seeds",
    "repro.tables",
    "repro.ledger",
    "repro.coverage",
    "repro.bugs",
    "repro.core.geometry.layout",
    "repro.core.analysis",
    "repro_studies.registry",
    "repro_studies.tables",
    "repro_studies.kernel_id",
    "repro_studies.analysis",
    "repro.report",
    "repro_studies.report",
    "repro_audit",
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
                where = SRC / Path(*candidate.split("."))
                is_module = where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()
                found.add(candidate if is_module else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("repro"))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; use absolute `repro.` imports")
    return found


MODULES = {module_name(p): p for p in (*PACKAGE.rglob("*.py"), *STUDIES.rglob("*.py"), *AUDIT.rglob("*.py"))}


def part(name: str) -> str:
    """The package a module belongs to (``repro.core.evidence``, ``repro.report.sections``, ...); the top-level
    modules form ``repro``."""
    return name if MODULES[name].name == "__init__.py" else name.rsplit(".", 1)[0]


def layer(name: str) -> str:
    """``base``, ``core``, ``studies`` or ``rendering``: the layer a module sits in (:data:`LAYERS`)."""
    best = max((p for p in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return LAYERS[best]


PARTS = sorted({part(name) for name in MODULES})


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the ``repro`` modules it imports at any depth (a function-level import is an edge too:
    hiding an import inside a function does not remove the dependency)."""
    return {name: {m for m in repro_imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Every set of modules that reach each other (strongly connected, more than one module)."""
    reach = {}
    for start in graph:
        seen, stack = set(), [start]
        while stack:
            for nxt in graph[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        reach[start] = seen
    found: list[set[str]] = []
    for m in graph:
        if m in reach[m] and not any(m in c for c in found):
            found.append({n for n in reach[m] if m in reach[n]} | {m})
    return found


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": {"e"}, "f": set()}
    assert sorted(map(sorted, circles(graph))) == [["a", "b", "c"], ["e", "e2"]]


@pytest.mark.parametrize("name", PARTS)
def test_no_import_circles(name):
    inside = [sorted(c) for c in circles(import_graph()) if any(part(m) == name for m in c)]
    assert not inside, f"modules that import each other in a circle: {inside}"


@pytest.mark.parametrize("name", sorted(set(LAYERS.values())))
def test_no_import_circles_inside_a_layer(name):
    """Each layer's own import graph (its modules and the imports among them) has no circle: a layer reads as a
    stack of modules too, not only as a whole below the next one."""
    graph = {m: {n for n in deps if layer(n) == name} for m, deps in import_graph().items() if layer(m) == name}
    assert graph, f"no module in layer {name!r}"
    found = [sorted(c) for c in circles(graph)]
    assert not found, f"modules of the {name} layer that import each other in a circle: {found}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if layer(n) in NEVER_IMPORTS))
def test_a_layer_never_imports_a_layer_above(name):
    """The core imports nothing of the studies and neither imports rendering, the command line or the notebook
    helpers; the base layer imports none of them. Every import counts, one inside a function too."""
    banned = NEVER_IMPORTS[layer(name)]
    bad = sorted(m for m in repro_imports(MODULES[name]) if any(m == b or m.startswith(b + ".") for b in banned))
    assert not bad, f"{name} ({layer(name)}) imports {bad}"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are a module's, class's or function's docstring."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def references(source: str, package: str = "repro_studies") -> list[str]:
    """Every place a module's code names ``package``: an import of it at any depth (a function-level one too),
    and any string constant that names it (``importlib.import_module("repro_studies...")``, ``__import__``, an
    entry point written in code); docstrings may name it, comments are not code."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == package]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if package in node.value:
                found.append(f"line {node.lineno}: string {node.value[:60]!r}")
    return found


def test_the_finder_finds_every_way_of_naming_a_package():
    source = '''"""A docstring may say repro_studies."""
import importlib
import repro_studies.registry
from repro_studies import notebooks

def f():
    """So may this one: repro_studies."""
    from repro_studies.report import plugin  # lazy: a reason does not make it allowed
    importlib.import_module("repro_studies.commands")
    return __import__("repro_studies")
'''
    found = references(source)
    assert [f.split(":")[0] for f in found] == ["line 3", "line 4", "line 8", "line 9", "line 10"], found
    assert references(source, "repro_audit") == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.split(".")[0] == "repro"))
def test_repro_never_names_the_studies_or_the_audit(name):
    """``repro`` runs without ``repro_studies`` or ``repro_audit`` installed: none of its modules imports either,
    at the top, inside a function or by a name in a string; what the studies add reaches ``repro`` through
    registration only."""
    found = references(MODULES[name].read_text()) + references(MODULES[name].read_text(), "repro_audit")
    assert not found, f"{name} names a package built on it: {found}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.split(".")[0] == "repro_audit"))
def test_the_audit_never_names_the_studies(name):
    """The studies use the browser checks (the README's first screen); the checks know nothing of the studies."""
    found = references(MODULES[name].read_text())
    assert not found, f"{name} names repro_studies: {found}"


def test_the_studies_register_through_the_entry_points_repro_reads():
    """Every entry point of group ``repro.plugins`` in pyproject.toml is a point :mod:`repro.plugins` knows and
    names an object of the type that point reads; the studies use every point."""
    from repro.plugins import GROUP, Point, registered
    from repro.registry import Registered as RegistryEntries
    from repro.report.model import Registered as ReportEntries

    declared = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    assert set(declared) == {p.value for p in Point}
    assert all(value.startswith("repro_studies.") for value in declared.values())
    from repro.cli.main import Merge
    from repro.core.geometry.records import Records
    from repro.parameters import Notebooks
    from repro.report.verdict import Findings
    from repro.tables import Names

    kinds = {
        Point.TABLES: Names,
        Point.REGISTRY: RegistryEntries,
        Point.RECORDS: Records,
        Point.NOTEBOOKS: Notebooks,
        Point.VERDICT: Findings,
        Point.REPORT: ReportEntries,
        Point.COMMANDS: Merge,
    }
    assert set(kinds) == set(Point)
    for point, kind in kinds.items():
        assert len(registered(point, kind)) == 1, point


def test_a_checkout_run_from_src_finds_the_registrations_through_the_written_metadata(tmp_path):
    """The GPU scripts run the checkout from ``src/`` without pip install: scripts/write-dist-info.py writes the
    project's entry points where Python finds them, in a process that sees no installed copy (``-S``: no site)."""
    subprocess.run([sys.executable, str(SRC.parent / "scripts" / "write-dist-info.py"), str(tmp_path)], check=True)
    code = (
        f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(SRC)!r}]\n"
        "from repro import plugins\n"
        "P = plugins.Point\n"
        "print([len(plugins._loaded(p)) for p in (P.REGISTRY, P.RECORDS, P.NOTEBOOKS, P.COMMANDS)])\n"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[1,", "1,", "1,", "1]"]


def test_every_module_has_a_layer_and_the_layers_their_modules():
    assert {layer(n) for n in MODULES} == set(LAYERS.values())
    assert {layer(n) for n in MODULES if n.startswith("repro.core.")} == {"core"}
    assert {"repro.tables", "repro.registry", "repro.parameters", "repro.plugins"} <= {
        n for n in MODULES if layer(n) == "base"
    }


def function_level_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported module, source line) of every import inside a function body."""
    lines = path.read_text().splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                module = child.module if isinstance(child, ast.ImportFrom) else child.names[0].name
                text = " ".join(lines[child.lineno - 1 : child.end_lineno])
                found.append((child.lineno, module or "", text))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


#: ``# lazy: why`` on the import line: the one-line reason a dependency is imported where it is used.
LAZY_REASON = re.compile(r"#.*\blazy: \S")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_level_imports_are_lazy_for_a_reason(name):
    """An import inside a function hides a dependency (and circles) from a reader and from the tests above:
    the standard library belongs at the top; anything else is imported late only when it must stay unloaded
    until used (torch, triton, papermill, a kernel module that must follow the profile) and says so."""
    bad = []
    for line, module, text in function_level_imports(MODULES[name]):
        if module.split(".")[0] in sys.stdlib_module_names:
            bad.append(f"line {line}: {module} is the standard library; import it at the top")
        elif not LAZY_REASON.search(text):
            bad.append(f"line {line}: {module} imported inside a function without '# lazy: <why>'")
    assert not bad, f"{name}: " + "; ".join(bad)


def defines_kernels(path: Path) -> bool:
    """Does the module define a Triton kernel (``@triton.jit`` at its top level) when imported?"""
    return any(
        isinstance(node, ast.FunctionDef) and any("jit" in ast.dump(d) for d in node.decorator_list)
        for node in ast.parse(path.read_text()).body
    )


KERNEL_MODULES = sorted(name for name, path in MODULES.items() if defines_kernels(path))


@pytest.mark.integration
def test_what_a_notebook_imports_first_defines_no_kernel():
    """A notebook imports its walk-through and the report's plots before its first line chooses the profile, and
    ``@triton.jit`` picks interpreter or compiler when a kernel is defined: none of them may define one (this is
    the reason the kernel imports inside their functions stay there)."""
    assert {"repro.core.kernels.gather", "repro.core.kernels.writer"} <= set(KERNEL_MODULES)
    first = sorted(n for n in MODULES if n.startswith(("repro.walkthrough.", "repro.report.")))
    code = "import sys\n" + "".join(f"import {n}\n" for n in first) + "print(' '.join(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not set(proc.stdout.split()) & set(KERNEL_MODULES)


def test_the_hidden_import_check_reads_reasons(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text(
        "import os\n\ndef f():\n    import json\n    import torch  # lazy: 2 s to import\n"
        "    from triton import knobs\n    return os\n"
    )
    found = function_level_imports(mod)
    assert [(line, module) for line, module, _ in found] == [(4, "json"), (5, "torch"), (6, "triton")]
    assert [bool(LAZY_REASON.search(text)) for _, _, text in found] == [False, True, False]


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


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of every module outside ``repro`` a file imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found - {"repro"}


#: What the reporting side never imports: the GPU stack (``repro report`` runs where neither is installed).
REPORTING_NEVER_IMPORTS = {"torch", "triton"}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith(REPORTING_MAY_IMPORT)))
def test_reporting_side_imports_no_torch_or_triton(name):
    """Every module the reporting side may import, at any depth of its code: with the repro imports held to
    REPORTING_MAY_IMPORT above, this covers every path ``repro report`` can take, whatever a run holds."""
    assert not third_party_imports(MODULES[name]) & REPORTING_NEVER_IMPORTS


@pytest.mark.notebook
def test_report_command_never_imports_torch(tmp_path):
    """``python -m repro report RUN`` on a committed GPU run, in a fresh process: torch stays unloaded. (The
    smallest one: the test above covers every module on every path; this one the command as it runs.)"""
    source = SRC.parent / "data" / "h200" / "vllm-0.22.0-under-test"
    run = tmp_path / source.name
    shutil.copytree(source, run)
    code = (
        "import sys; from repro.cli.main import main; rc = main(['report', sys.argv[1]]); "
        "print('TORCH', 'torch' in sys.modules, 'TRITON', 'triton' in sys.modules); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, timeout=300)
    # This run's implementation under test is vLLM 0.22.0's buggy gather: its checks fail as the bug predicts, and
    # the report's exit code is the run's verdict (1), printed as such.
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FAILED: " in proc.stdout and ": Reproduced: " in proc.stdout, proc.stdout
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

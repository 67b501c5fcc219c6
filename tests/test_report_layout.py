"""The report package walks one way: a run is read once, each section derives its tables once, and the
renderers draw from those tables without going back to the run or to the analysis; the package has no
import circles and imports inside functions only what must stay lazy, saying why."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
OWNED = sorted((SRC / "repro" / "report").rglob("*.py")) + [
    SRC / "repro" / "core" / "analysis" / "rundata.py",
    SRC / "repro" / "core" / "analysis" / "compare.py",
    SRC / "repro" / "tables.py",
]


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The ``repro`` modules a file imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("repro"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                exists = (SRC / Path(*candidate.split("."))).with_suffix(".py").is_file()
                found.add(candidate if exists else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("repro"))
    return found


def test_the_report_package_has_no_import_circle():
    graph = {_module(p): _imports(p) for p in OWNED}
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    pytest.fail(" -> ".join([*path, start]))
                if nxt in graph and nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))


def test_imports_inside_functions_are_lazy_third_party_modules_with_a_reason():
    for path in OWNED:
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            previous = -2
            for node in ast.walk(fn):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                where = f"{path.relative_to(SRC)}:{node.lineno}"
                assert not any(str(n).startswith("repro") for n in names), f"{where}: repro imported in a function"
                grouped = node.lineno == previous + 1  # the reason on the first line of a run of imports
                assert grouped or "# lazy" in lines[node.lineno - 1], f"{where}: a lazy import says why (# lazy: ...)"
                previous = node.lineno


@pytest.mark.integration
def test_renderers_draw_from_the_analysis_alone():
    """After the analysis pass, figures, report.md, pr-comment.md and the HTML fragment are drawn without
    reading one table of the run again and without calling into ``repro.core.analysis``."""
    from repro.core.analysis.rundata import load_run
    from repro.report import plots
    from repro.report.analyse import analyse, draw
    from repro.report.comment import render_comment
    from repro.report.html import fragment
    from repro.report.markdown import render_report

    run = load_run(Path(__file__).resolve().parents[1] / "data" / "cpu" / "make-run")
    analysis = analyse(run)

    class Sealed(dict):
        def __getitem__(self, key):
            raise AssertionError(f"a renderer read the run's table {key!r} again")

        get = __getitem__

    run.tables = Sealed(run.tables)
    calls: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith(("repro.core.analysis", "repro_studies.analysis")):
                calls.add(f"{name}.{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        figures = draw(analysis)
        md = render_report(analysis, figures)
        comment = render_comment(analysis)
        html = fragment(analysis, figures)
    finally:
        sys.setprofile(None)
        plots.close_all(figures)
    accessors = (".name", ".status", ".environment", ".finished", ".failed", ".correct", ".cases")  # properties
    assert not {c for c in calls if not c.endswith(accessors)}, calls
    assert md.text.startswith("# Reproduced") and comment.startswith("## Purpose") and html.tables

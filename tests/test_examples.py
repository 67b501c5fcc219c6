"""The two one-file reproducers in ``examples/`` run alone (torch and triton only) and print the bug, then the fix."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300, env=env, cwd=EXAMPLES
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("name", ["bug1_reshape_overrun.py", "bug2_strided_block_table.py"])
def test_examples_are_short_and_import_only_torch_and_triton(name):
    source = (EXAMPLES / name).read_text()
    assert len(source.splitlines()) <= 80
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"importlib", "os", "sys", "torch", "triton"}
    doc = ast.get_docstring(ast.parse(source))
    assert "Needs torch" in doc and "pip install" in doc


@pytest.mark.parametrize(
    "name,hidden,line",
    [
        ("bug1_reshape_overrun.py", ["torch"], "bug1_reshape_overrun.py needs torch: pip install torch"),
        ("bug2_strided_block_table.py", ["torch"], "bug2_strided_block_table.py needs torch: pip install torch"),
        (
            "bug2_strided_block_table.py",
            ["numpy"],
            "bug2_strided_block_table.py needs numpy: pip install numpy",
        ),
        (
            "bug2_strided_block_table.py",
            ["triton"],
            "bug2_strided_block_table.py needs triton: pip install triton",
        ),
    ],
)
def test_an_example_missing_what_it_needs_on_a_cpu_says_so_in_one_line(name, hidden, line):
    """With a module it needs not importable (``sys.modules[name] = None`` hides it from ``find_spec``), the
    example exits at once with one line naming it; on a CPU Triton's interpreter needs numpy, which neither
    torch nor triton declares."""
    hide = "; ".join(f"sys.modules[{m!r}] = None" for m in hidden)
    code = f"import runpy, sys; {hide}; runpy.run_path({str(EXAMPLES / name)!r}, run_name='__main__')"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH", "CUDA_VISIBLE_DEVICES")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU, where the interpreter runs the kernel
    cmd = [sys.executable, "-W", "ignore", "-c", code]  # torch warns on its own when numpy is missing
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [line]


@pytest.mark.integration
def test_bug1_raises_pytorchs_error_with_the_prs_figures_then_fits():
    out = run_example("bug1_reshape_overrun.py")
    buggy, fixed = out.split("\nfixed:")
    assert (
        "RuntimeError: setStorage: sizes [3944832, 2, 584], strides [1728, 584, 1], storage offset 0, and itemsize 1 "
        "requiring a storage size of 6816669136 are out of bounds for storage of size 53255232"
    ) in buggy
    assert "block_size // kernel_block_size" in buggy and "storage_block_size // kernel_block_size" in fixed
    assert "sizes [30819, 2, 584], strides [1728, 584, 1]: requires 53,254,672 of 53,255,232 bytes (fits)" in fixed


@pytest.mark.integration
def test_bug2_reads_wrong_block_ids_from_request_2_and_the_stride_matches_torch():
    out = run_example("bug2_strided_block_table.py")
    assert "shape[-1] = 3, stride(0) = 8" in out
    buggy, fixed = out.split("\nfixed:")
    lines = [ln.strip() for ln in buggy.splitlines() if ln.strip().startswith("request")]
    assert len(lines) == 4 and lines[0].endswith(": ok")
    assert all("tokens wrong" in ln for ln in lines[1:])
    assert "equal to the PyTorch gather, bitwise: False" in buggy
    fixed_lines = [ln.strip() for ln in fixed.splitlines() if ln.strip().startswith("request")]
    assert len(fixed_lines) == 4 and all(ln.endswith(": ok") for ln in fixed_lines)
    assert "equal to the PyTorch gather, bitwise: True" in fixed

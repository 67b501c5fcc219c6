"""The kernels compiled for a CUDA device (run on a GPU host: ``pytest -m gpu``; skipped elsewhere).

The rest of the suite runs kernels in Triton's interpreter (conftest sets ``TRITON_INTERPRET=1``
before any kernel is defined), so these cases run in a child process with the variable removed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CHILD = """
import torch
from repro.core.evidence.cases import run_case
from repro.core.evidence.scenarios import ScenarioSpec
from repro.registry import Expectation, implementations
for n in (1, 2, 7):
    spec = ScenarioSpec(num_reqs=n, block_size=64, seq_len_max=700, mode="in-range", max_reqs=8, device="cuda")
    for entry in implementations():
        r = run_case(spec, entry.target)
        assert r.status == "ok", (entry.label, r.error)
        wrong = r.mismatched_tokens > 0
        assert wrong == (entry.expect == Expectation.BUG and n > 1), (entry.label, n, r.mismatched_tokens)
        assert r.stray_writes == 0, (entry.label, n)
print("GPU-OK")
"""


def test_every_implementation_on_the_gpu_meets_its_expectation():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "GPU-OK" in proc.stdout, proc.stderr[-3000:]


JIT_CHILD = """
import sys, torch
sys.path.insert(0, {tests!r})
from fixtures import jit_kernels as J
from repro_studies.evidence import jit
b = torch.arange(6 * 64, dtype=torch.int32, device="cuda").reshape(6, 64)
widths = [3, 5, 8, 13, 16, 21, 32, 1]
for name, (kernel, launcher) in J.VARIANTS.items():
    inp = J.Inputs(6, device="cuda")
    for tables in (jit.narrowed_tables(b, widths), jit.contiguous_tables(b, widths)):
        launches = jit.width_launches(lambda t, launcher=launcher, inp=inp: launcher(inp, t), tables)
        rows = jit.fingerprint(kernel, launches, sync=torch.cuda.synchronize)
        assert [r["mode"] for r in rows] == ["observed"] * len(rows), name
        assert [r["observed_compiles"] for r in rows] == [r["predicted_compiles"] for r in rows], (name, rows)
        assert all(r["compile_us"] > 0 and r["disk_cache_hits"] == 0 for r in rows if r["observed_compiles"]), name
from repro_studies.kernels import stream as S
for layout in S.LAYOUTS:
    inp = S.make_stream_input(1000, layout, seed=1, device="cuda")
    out = inp.fresh_out()
    S.stream_dequant(inp, out)
    assert torch.equal(out.view(torch.int16), S.stream_reference(inp).view(torch.int16)), layout
    launch, sums = S.stream_read(inp)
    assert torch.equal(sums, S.read_reference(inp, launch)), layout
    w = inp.fresh_out()
    S.stream_write(w)
    assert torch.equal(w.view(torch.int16), S.write_reference(1000, "cuda").view(torch.int16))
print("GPU-OK")
"""


def test_jit_hooks_see_the_predicted_compilations_and_stream_kernels_are_exact():
    """Compiled on the GPU: Triton's hooks count exactly the compilations the key prediction says
    (cold caches), and the streaming ceiling kernels equal their references bitwise."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = JIT_CHILD.format(tests=os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "GPU-OK" in proc.stdout, proc.stderr[-3000:]


RELEASE_CHILD = """
import torch
from repro.core.evidence.cases import compare_bitwise, reference_output
from repro_studies.evidence.jit import JitSubject, fingerprint_subjects
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro_studies.registry import TRITON_FORMS, BlockTable, Form, upstream_bench_arms
from repro_studies.upstream.release_kernel import load_release_kernel
root = {root!r}
kernels = {{f: load_release_kernel("0.99.0", f, cache_root=root, download=False) for f in TRITON_FORMS}}
sc = build_scenario(ScenarioSpec(num_reqs=5, block_size=64, seq_len_max=700, max_reqs=8, device="cuda"))
contiguous, ref = sc.block_table.contiguous(), reference_output(sc)
fns = [kernels[Form.RELEASED].gather(), kernels[Form.PATCHED].gather(), kernels[Form.PATCHED].gather(),
       kernels[Form.RELEASED].gather(copy_table=True)]
for arm, fn in zip(upstream_bench_arms("0.99.0"), fns):
    for _ in range(2):
        out = sc.fresh_out()
        fn(*sc.args(out, sc.block_table if arm.table == BlockTable.NARROWED else contiguous))
        torch.cuda.synchronize()
        assert compare_bitwise(out, ref, sc) == (0, 0), arm.label
pitch = {{"released": "constexpr width", "patched": "runtime stride", "patched-constexpr": "constexpr stride"}}
subjects = [
    JitSubject(f, k.gather(), k.kernel, pitch[f], k.origin, *k.warm_up(32, 64, (4, 128))) for f, k in kernels.items()
]
rows = fingerprint_subjects(subjects, [1, 2, 3, 5, 16], 32, num_reqs=2, block_size=64, device="cuda",
                            tokens_per_request=lambda w: 64, window=64)
assert all(r["mode"] == "observed" for r in rows)
assert [r["observed_compiles"] for r in rows] == [r["predicted_compiles"] for r in rows], rows
infer = {{}}
for r in rows:
    if r["phase"] == "inference":
        infer[(r["variant"], r["table"])] = infer.get((r["variant"], r["table"]), 0) + r["observed_compiles"]
assert infer == {{("released", "narrowed"): 5, ("released", "contiguous"): 5, ("patched", "narrowed"): 0,
                  ("patched", "contiguous"): 2, ("patched-constexpr", "narrowed"): 0,
                  ("patched-constexpr", "contiguous"): 5}}, infer
assert all(r["compile_us"] > 0 for r in rows if r["observed_compiles"])
print("GPU-OK")
"""


def test_a_release_kernel_in_each_form_and_its_own_warm_up_on_the_gpu(tmp_path, monkeypatch):
    """A synthetic release with a JIT-warmup class (tests/fixtures/upstream, not vLLM's code), compiled on the
    GPU: notebook 03's timed callables are bitwise right, and after the class's own warm-up Triton's hooks see
    exactly the predicted compilations per form and table kind."""
    from pathlib import Path

    from upstream_fakes import cached_release

    source = (Path(__file__).parent / "fixtures" / "upstream" / "jit_class_module.py").read_text()
    root, _ = cached_release(tmp_path, monkeypatch, source=source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = RELEASE_CHILD.format(root=str(root))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "GPU-OK" in proc.stdout, proc.stderr[-3000:]

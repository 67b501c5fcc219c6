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
from repro.evidence.cases import run_case
from repro.evidence.scenarios import ScenarioSpec
from repro.registry import IMPLEMENTATIONS, EXPECT_BUG
for n in (1, 2, 7):
    spec = ScenarioSpec(num_reqs=n, block_size=64, seq_len_max=700, mode="in-range", max_reqs=8, device="cuda")
    for entry in IMPLEMENTATIONS:
        r = run_case(spec, entry.target)
        assert r.status == "ok", (entry.label, r.error)
        wrong = r.mismatched_tokens > 0
        assert wrong == (entry.expect == EXPECT_BUG and n > 1), (entry.label, n, r.mismatched_tokens)
        assert r.stray_writes == 0, (entry.label, n)
print("GPU-OK")
"""


def test_every_implementation_on_the_gpu_meets_its_expectation():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "GPU-OK" in proc.stdout, proc.stderr[-3000:]

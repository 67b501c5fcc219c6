"""How a case in its own process ended is named: only a named fault is a fault; a kill, an exit, running out
of memory, a stall before the case and a timeout are statuses of their own; the result comes through the
case's channel, never its stdout; the case's clock starts at its call. Real child processes, each running an
implementation module this test writes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from clitools import write_module

from repro.core.analysis.gather import case_ok
from repro.core.evidence.isolate import run_case_isolated
from repro.core.evidence.scenarios import ScenarioSpec
from repro.outcomes import Outcome
from repro.registry import Expectation

pytestmark = pytest.mark.integration

SPEC = ScenarioSpec(num_reqs=2, block_size=16, seq_len_max=48, seed=0, mode="poison", max_reqs=2, device="cpu")

HEADER = """import os, signal, sys, time

from repro.core.kernels.reference import dequantize_and_gather_reference

"""
#: name: (module body, status, words the error must hold)
ENDINGS = {
    "segfault": ("os.kill(os.getpid(), signal.SIGSEGV)", Outcome.FAULTED, "SIGSEGV: the case's process faulted"),
    "device_fault": (
        "raise RuntimeError('CUDA error: an illegal memory access was encountered')",
        Outcome.FAULTED,
        "illegal memory access",
    ),
    "oom_killed": ("os.kill(os.getpid(), signal.SIGKILL)", Outcome.KILLED, "SIGKILL during the case"),
    "device_oom": ("raise RuntimeError('CUDA error: out of memory')", Outcome.OUT_OF_MEMORY, "out of memory"),
    "exits": ("os._exit(0)", Outcome.EXITED, "exit code 0 during the case"),
    "sys_exit": ("sys.exit(0)", Outcome.RAISED, "SystemExit(0)"),
    "hangs": ("time.sleep(600)", Outcome.TIMEOUT, "no result within 3 s of the case's start"),
    "raises": ("raise ValueError('no')", Outcome.RAISED, "ValueError: no"),
}


SIGNATURE = "def gather(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):"


def gather_module(body: str, on_import: str = "") -> str:
    return f"{HEADER}{on_import}\n\n{SIGNATURE}\n    {body}\n"


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("modules")
    for name, (body, _, _) in ENDINGS.items():
        write_module(folder, f"ends_{name}", gather_module(body))
    in_child = "if sys.argv[0].endswith('cases.py'):  # the case's process, not the parameter check\n    "
    write_module(folder, "dies_on_import_in_child", gather_module("pass", in_child + "os._exit(1)"))
    write_module(folder, "raises_on_import_in_child", gather_module("pass", in_child + "raise ImportError('no')"))
    correct = "dequantize_and_gather_reference(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)"
    write_module(folder, "slow_start", gather_module(correct, "time.sleep(4)"))
    forged = '{"implementation": "x", "status": "ok", "total_tokens": 1, "mismatched_tokens": 0, "stray_writes": 0}'
    write_module(folder, "prints_a_result", gather_module(f"print({forged!r}, flush=True); os._exit(0)"))
    return folder


@pytest.fixture(scope="module")
def ended(modules):
    """Every module's case, in its own process, several at a time: ``{module: (CaseResult, ChildRun)}``."""
    timeouts = {"slow_start": 1.0}
    names = [p.stem for p in sorted(modules.glob("*.py"))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda name: isolated(modules, f"{name}:gather", timeouts.get(name, 3.0)), names)
        return dict(zip(names, done))


def isolated(modules, target: str, timeout_s: float):
    import os

    path = os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")])
    return run_case_isolated(SPEC, target, timeout_s, env_extra={"PYTHONPATH": path, "TRITON_INTERPRET": "1"})


def test_each_ending_is_named_and_only_a_named_fault_is_the_bugs(ended):
    for name, (_, status, words) in ENDINGS.items():
        result = ended[f"ends_{name}"][0]
        assert (result.status, words in result.error) == (status, True), (name, result.status, result.error)
        observation = {"status": result.status, "mismatched_tokens": None, "stray_writes": None}
        assert case_ok(Expectation.BUG, 2, observation) == (status == Outcome.FAULTED), name


def test_a_child_that_ends_before_its_case_did_not_start_and_one_that_cannot_import_raised(ended):
    result, child = ended["dies_on_import_in_child"]
    assert result.status == Outcome.NOT_STARTED and not child.started
    assert "ended with exit code 1 before its case started" in result.error
    result, child = ended["raises_on_import_in_child"]
    assert result.status == Outcome.RAISED and "cannot import module" in result.error and not child.started


def test_the_case_clock_starts_at_the_call_not_at_the_process_start(ended):
    """A module that takes 4 s to import and a call that takes milliseconds pass a 1 s limit."""
    result, child = ended["slow_start"]
    assert result.status == Outcome.OK and result.mismatched_tokens == 0, result.error
    assert child.started and child.seconds < 1.0


def test_a_result_line_on_stdout_is_not_read(ended):
    result, child = ended["prints_a_result"]
    assert '"status": "ok"' in child.stdout and result.status == Outcome.EXITED

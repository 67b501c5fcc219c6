"""The CLI's contract: bad input is one line naming the parameter, exit code 2, before anything runs."""

import json
import os
import subprocess
import sys
from dataclasses import fields

import pytest

from repro.cli.main import main
from repro.cli.params import parse_assignments
from repro.parameters import GatherParameters, ParameterError, ReshapeParameters

DECLARED = {  # name: {notebook: default as the parameters cell writes it}
    "request_counts": {"02": "[1, 2, 4]"},
    "cache_block_size": {"02": "64"},
    "seed": {"02": "0"},
    "sentinel_modes": {"02": '["in-range", "poison"]'},
    "implementation": {"02": '"repro.core.kernels.gather:gather_fixed"'},
    "block_size": {"01": "256"},
    "seq_len_max": {"02": "0"},
    "run_dir": {"02": '""'},
}


@pytest.mark.parametrize(
    "text,fragment",
    [
        (
            "request_counts=[0, 2]",
            "request_counts: [0, 2] is out of range; accepted: a non-empty list of distinct integers from 1 to 256",
        ),
        ("request_counts=[-1]", "request_counts: [-1] is out of range"),
        ("request_counts=[1, 257]", "request_counts: [1, 257] is out of range"),
        ("request_counts=[1.5]", "request_counts: '[1.5]' is not a decimal integer"),
        ("request_counts=[]", "request_counts: [] is out of range"),
        ("request_counts=four", "request_counts: 'four' is not a decimal integer"),
        ("request_counts=[true]", "request_counts: '[true]' is not a decimal integer"),
        ("cache_block_size=48", "cache_block_size: 48 is out of range; accepted: a power of two from 1 to 256"),
        ("block_size=100", "block_size: 100 is out of range; accepted: a positive multiple of 256"),
        ("sentinel_modes=[garbage]", "sentinel_modes: ['garbage'] is out of range"),
        ("seed=-3", "seed: -3 is out of range"),
        ("nonsense=1", "nonsense: unknown parameter; accepted: "),
        ("run_dir=x", "run_dir: set by the runner"),
    ],
)
def test_validate_names_the_parameter_and_what_is_accepted(text, fragment):
    with pytest.raises(ParameterError) as info:
        checked(text)
    assert fragment in str(info.value)


def checked(text: str) -> dict:
    """``-p text`` as the runner takes it: read by its kind, then each notebook's parameters built (checked) once."""
    params = parse_assignments([text], DECLARED)
    for cls in (ReshapeParameters, GatherParameters):
        names = {f.name for f in fields(cls)}
        cls(**{k: v for k, v in params.items() if k in names})
    return params


def test_a_value_is_checked_by_the_notebooks_parameters_not_by_reading_it():
    assert parse_assignments(["block_size=100"], DECLARED) == {"block_size": 100}  # read, not judged
    with pytest.raises(ParameterError) as info:
        ReshapeParameters(block_size=100)
    assert str(info.value).startswith("block_size: 100 ")


def test_assignment_needs_equals():
    with pytest.raises(ParameterError, match="expected NAME=VALUE"):
        parse_assignments(["request_counts"], DECLARED)


def run_cli(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["-p", "request_counts=[0]"], "error: request_counts: [0] is out of range"),
        (["-p", "bogus=1"], "error: bogus: unknown parameter"),
        (["-p", "implementation=no.such.module:fn"], "error: implementation: cannot import module 'no.such.module'"),
        (
            ["-p", "implementation=repro.core.geometry.layout:round_up"],
            "error: implementation: repro.core.geometry.layout:round_up has signature",
        ),
        (["-p", "implementation=gather_fixed"], "is not of the form 'package.module:function'"),
        (["-p", "implementation=repro.core.kernels.gather:nothing"], "has no function 'nothing'"),
        (
            ["-p", "backing_width=2", "-p", "seq_len_max=640"],
            "error: backing_width: 2 is not wider than the 10 columns",
        ),
        (
            ["-p", "request_counts=[1, 256]", "-p", "seq_len_max=65536"],
            "error: seq_len_max: 256 requests x 65,536 tokens need about 206,158,430,208 bytes of host memory",
        ),
        (["-p", "sanitizer=required"], "error: sanitizer: 'required' but compute-sanitizer is not available"),
        (["-p", "jit_widths=[8, 70]"], "error: jit_backing_width: 64 is not wider than the widest of jit_widths (70)"),
        (["-p", "stream_ceiling=maybe"], "error: stream_ceiling: 'maybe' is out of range"),
        (["-p", "vllm_releases=0.22.0,0.22.0"], "error: vllm_releases: ['0.22.0', '0.22.0'] is out of range"),
        (["-p", "vllm_releases=[latest]"], "error: vllm_releases: ['latest'] is out of range"),
        (["-p", "vllm_request_counts=[0]"], "error: vllm_request_counts: [0] is out of range"),
        (["--profile", "gpu"], "error: profile: 'gpu' needs a CUDA device"),
        (["--profile", "tpu"], "error: profile: 'tpu' is not one of auto, cpu, gpu"),
        (["--notebooks", "77"], "error: --notebooks: ['77'] does not name notebooks"),
    ],
)
def test_bad_input_exits_2_before_running(args, fragment, tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run_cli(["run", "--profile", "cpu", "--out", str(out), *args], capsys)
    assert code == 2
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists() or not any(out.iterdir())


def test_unwritable_output_folder(tmp_path, capsys):
    if os.geteuid() == 0:
        target = "/proc/repro-cannot-write-here"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "run")
    code, err = run_cli(["run", "--profile", "cpu", "--out", target, "--notebooks", "01"], capsys)
    assert code == 2 and "--out: cannot write to" in err[0]


def test_existing_run_folder_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"status": "complete"}))
    code, err = run_cli(["run", "--profile", "cpu", "--out", str(out), "--notebooks", "01"], capsys)
    assert code == 2 and "already holds a run" in err[0]
    assert json.loads((out / "manifest.json").read_text()) == {"status": "complete"}


def test_report_of_a_folder_without_manifest(tmp_path, capsys):
    code, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 2 and "holds no manifest.json" in err[0]


def test_module_entry_point_reports_usage():
    proc = subprocess.run([sys.executable, "-m", "repro", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "run" in proc.stdout and "report" in proc.stdout


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["-p", "block_size=512"], "error: block_size: at block_size 512 a C128A page is 2,880 bytes"),
        (["-p", "pool_bytes=1"], "error: pool_bytes: at block_size 256 a C128A page is 1,728 bytes"),
        (["-p", "implementation="], "error: implementation: '' is out of range"),
        (["-p", "implementation= "], "error: implementation: '' is out of range"),
        (["-p", "seed=100000000000000000000000000"], "error: seed: 100000000000000000000000000 is out of range"),
        (["-p", "seed=18446688733644"], "error: seed: 18446688733644 is out of range; accepted: an integer from 0"),
        (["-p", "backing_width=1000000000"], "error: backing_width: 1000000000 is out of range"),
        (["-p", "pool_bytes=1728000000000000"], "error: pool_bytes: 1,728,000,000,000,000 bytes do not fit"),
        (["-p", "request_counts=[2, 2]"], "error: request_counts: [2, 2] is out of range; accepted: a non-empty list "),
        (["-p", "sentinel_modes=[poison, poison]"], "error: sentinel_modes: ['poison', 'poison'] is out of range"),
        (["-p", "bench_variants=[fast, fast]"], "error: bench_variants: ['fast', 'fast'] is out of range"),
        (["-p", "seq_lens=[256, 256]"], "error: seq_lens: [256, 256] is out of range"),
        (["-p", "case_timeout_s=0.000001"], "error: case_timeout_s: 1e-06 is out of range; accepted: 0 (the profile's"),
    ],
)
def test_values_notebook_01_cannot_use_stop_before_running(args, fragment, capsys, tmp_path):
    code, err = run_cli(["run", "--profile", "cpu", "--out", str(tmp_path / "r"), *args], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(fragment), err
    assert not (tmp_path / "r").exists()


def test_notebook_machinery_logs_go_to_the_run_folder_not_stderr(tmp_path, capsys):
    """nbclient's dead-kernel warning and asyncio's orphaned-task error would add lines to a one-line outcome."""
    import logging

    from repro.cli.runner import MACHINERY_LOGGERS, keep_machinery_logs

    saved = {
        name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate) for name in MACHINERY_LOGGERS
    }
    try:
        for run in ("first", "second"):
            (tmp_path / run / "logs").mkdir(parents=True)
            keep_machinery_logs(tmp_path / run)
            logging.getLogger("nbclient").warning("Kernel died while waiting for execute reply.")
            logging.getLogger("asyncio").error("Task exception was never retrieved")
            for handler in logging.getLogger("asyncio").handlers:
                handler.flush()
        assert capsys.readouterr().err == ""
        for run in ("first", "second"):  # a second run in the same process writes only to its own folder
            text = (tmp_path / run / "logs" / "notebook-machinery.log").read_text()
            assert text.count("Kernel died") == 1 and text.count("never retrieved") == 1
    finally:
        for name, (handlers, propagate) in saved.items():
            log = logging.getLogger(name)
            for handler in log.handlers[:]:
                log.removeHandler(handler)
                handler.close()
            log.handlers[:] = handlers
            log.propagate = propagate


@pytest.mark.notebook
def test_a_notebook_that_stops_early_without_an_error_failed(tmp_path):
    """papermill takes ``SystemExit(0)`` as success and runs no further cell: a notebook counts as run only
    when every cell ran."""
    import nbformat

    from repro.cli.execute import KernelWatch, execute_notebook
    from repro.cli.runfolder import RunLock

    cells = [nbformat.v4.new_code_cell(src) for src in ("x = 1", "import sys\nsys.exit(0)", "y = 2")]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    src = tmp_path / "stops.ipynb"
    nbformat.write(nb, src)
    (tmp_path / "logs").mkdir()
    kernel = KernelWatch(tmp_path, "stops", RunLock(tmp_path, "test"))
    status = execute_notebook(src, tmp_path / "executed.ipynb", {}, False, kernel)
    assert status["status"] == "failed"
    assert status["error"] == (
        "NotebookStopped: code cell 2 of 3 ended the notebook by SystemExit: 0; 1 cell(s) after it never ran"
    )


def test_an_interrupt_dropped_inside_a_weakref_callback_is_still_received():
    """Python drops a KeyboardInterrupt raised inside a weakref callback; the runner's handler has remembered the
    signal, so the run still ends as interrupted, and the dropped exception prints nothing beside the run's line."""
    code = (
        "import gc, signal, weakref\n"
        "from repro.cli import interrupts\n"
        "interrupts.install()\n"
        "class Thing: pass\n"
        "thing = Thing()\n"
        "ref = weakref.ref(thing, lambda r: signal.raise_signal(signal.SIGINT))\n"
        "del thing\n"
        "gc.collect()\n"
        "print('went on', interrupts.received())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "went on True"  # dropped: the program went on, and the signal is remembered
    assert proc.stderr == ""

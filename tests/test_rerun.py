"""The command recorded in ``manifest.json`` and shown in the report names the run folder the way a shell at
the checkout root reads it. (That the command, pasted, reproduces a run is tested with the real run in
tests/test_runfolder.py, on the winner of two runs started together.)"""

from __future__ import annotations

from clitools import ROOT

from repro.cli.runner import rerun_command


def test_a_folder_inside_the_checkout_is_named_from_the_checkout_root():
    cmd = rerun_command("cpu", ROOT / "runs" / "x y", ["01"], {"seed": 3, "request_counts": [1, 2]})
    assert (
        cmd == "python -m repro run --profile cpu --out 'runs/x y' --notebooks 01 -p seed=3 -p 'request_counts=[1, 2]'"
    )

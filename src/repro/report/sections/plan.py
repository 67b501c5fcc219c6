"""*Test Plan*: how to run this again, with the parameters this run used; and for a run about PR #55109 the
``pytest`` command a reviewer types in a vLLM checkout to run the regression test of ``upstream-tests/`` against
the vLLM installed there (the releases a run ran it on are the studies' part of this section, registered at
:attr:`repro.report.model.Slot.TEST_PLAN_SUITE`)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from repro import machine_paths
from repro.report.model import Common, Section, TemplateFile
from repro.tables import gather_tables

#: The regression test as a reviewer runs it against the vLLM installed in a vLLM checkout.
SUITE_FILE = "upstream-tests/test_dequantize_and_gather_strided_block_table.py"


@dataclass(frozen=True)
class Plan:
    commands: tuple[str, ...]
    out_given: bool  # the manifest's command names its --out folder
    parameters: tuple[str, ...]  # `name=value` as run
    suite_file: str = ""  # the regression test's path in this repository ("" for a run not about the gather)


def derive(c: Common) -> Plan:
    """The manifest's rerun command (shell-quoted, with its ``--out``) and the report command after it; a
    manifest written before the command kept ``--out`` gets the folder's name, and an ``--out`` of some machine
    (:func:`repro.machine_paths.elsewhere`) that is not where the folder is now (another host's, before it was copied
    here) becomes ``runs/<name>``."""
    m = c.run.manifest
    cmd = str(m.get("command") or "python -m repro run")
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = []
    given = "--out" in words[:-1]
    out = words[words.index("--out") + 1] if given else c.run.name
    moved = given and machine_paths.elsewhere(out) and Path(out).resolve() != Path(c.run.path).resolve()
    if moved:  # a folder of the host that ran it (the run was copied here); any new folder under the checkout will do
        words[words.index("--out") + 1] = out = f"runs/{c.run.name}"
        cmd = shlex.join(words)
    run = cmd if given else f"{cmd} --out {c.run.name}"
    params = m.get("parameters") or {}
    listed = tuple(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in params.items())
    commands = ("make test", run, f"python -m repro report {shlex.quote(out) if given else out}")
    about_gather = any(c.run.table(t) is not None for t in gather_tables())
    return Plan(commands, given, listed, SUITE_FILE if about_gather else "")


MARKDOWN = TemplateFile("repro.report", "plan.md.j2")

SECTION = Section("test plan", derive, MARKDOWN, MARKDOWN)

"""Bad input by class, not by case: for every generated command line (``--out`` values, ``--notebooks`` selections,
and each notebook parameter's type, range and emptiness), ``python -m repro run`` either refuses it (exit 2, one
line, nothing written) or runs to a verdict; never a traceback, never a stray file.

The first property drives the real command line and runner in this process with a stand-in for papermill
(tests/fakerun.py): every accepted input runs the runner's whole bookkeeping in a fraction of a second, so many
inputs are tried. The second runs a few accepted inputs for real, notebooks and all.

Input classes: ``--out`` empty, blank, not UTF-8, over the file system's name limit, an existing file, a path
through a file, an existing run, a folder whose first write meets a full disk, a plain new folder, absent (the
default folder, with ``runs/latest`` a real folder); ``--notebooks`` empty, duplicated, ambiguous, the report
notebook, unknown, every single notebook and pairs; each parameter empty, blank, of the wrong type, a list where a
value is expected and the reverse, at and past its range, with quotes, a trailing or lone comma, an item twice,
and its default.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from clitools import cli_env, new_tag, repro_cmd
from fakerun import FakeNotebooks, check_row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repro.cli import main as cli_main
from repro.cli import runner
from repro.cli.params import format_value
from repro.cli.runner import declared_parameters, notebooks
from repro.core.evidence.results import ResultTable
from repro.parameters import RESERVED, schema
from repro.report import build
from repro.tables import tables as every_table

NOTEBOOKS = [p.stem for p in notebooks()]
DECLARED = declared_parameters(notebooks())
#: Every parameter rule: notebooks 01 and 02's and those the studies register.
SCHEMA = schema()
#: Parameters whose accepted values import a module in a child process (seconds each): drawn from cheap classes.
PROBED = ("implementation", "reference_gather")

#: Texts of every class a value may take, for any parameter.
CLASSES = [
    "",
    " ",
    ",",
    ",,",
    "[]",
    "[,]",
    "[ ]",
    "0",
    "1",
    "-1",
    "01",
    "2",
    "3",
    "256",
    "257",
    "65537",
    "1.5",
    "1e3",
    "nan",
    "true",
    "false",
    "True",
    "x",
    "'x'",
    '"x"',
    "[1",
    "[1, 2]",
    "[2, 2]",
    "[[1]]",
    "1,",
    ",1",
    "a,b",
    "0.22.0",
    "0.22.0,",
    ",0.22.0",
    "0.22.0,0.22.0",
    "default",
    "default,256",
    "default,default",
    "256,256",
    "16,1024",
    "all",
    "none",
    "off",
    "poison",
    "in-range",
    "[poison, in-range]",
    "fixed",
    "released",
    "9" * 30,
    "é",
    "a b",
]
PROBED_CLASSES = ["", " ", "x", "a:b:c", ":f", "m:", "repro.core.kernels.gather:gather_fixed", "no.such.module:f"]


def _value(name: str):
    default = next(iter(DECLARED[name].values()))
    try:
        import ast

        default = format_value(ast.literal_eval(default))
    except (ValueError, SyntaxError):
        pass
    return st.sampled_from([*(PROBED_CLASSES if name in PROBED else CLASSES), default])


PARAMETER = st.sampled_from(sorted(n for n in DECLARED if n not in RESERVED)).flatmap(
    lambda name: _value(name).map(lambda v: f"{name}={v}")
)
SELECTION = st.one_of(
    st.none(),
    st.lists(
        st.sampled_from(["", "0", "1", "01", "02", "03", "04", "05", "06", "07", "90", "99", "x", "01-"]), max_size=3
    ),
    st.lists(st.sampled_from([n[:2] for n in NOTEBOOKS]), min_size=1, max_size=2, unique=True),
)
OUT = st.sampled_from(
    ["new", "", " ", "\udcff-not-utf-8", "n" * 300, "a-file", "a-file/run", "a-run", "full-disk", None, "sub/new"]
)


class Folders:
    """A fresh folder per input: the places a run may write (``--out``'s parent and ``runs/``), and every file in
    them before the command."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="bad-input-"))
        (self.root / "a-file").write_text("mine")
        (self.root / "a-run").mkdir()
        (self.root / "a-run" / "manifest.json").write_text('{"status": "complete", "notebooks": {}}')
        (self.root / "full-disk").mkdir()
        os.symlink("/dev/full", self.root / "full-disk" / ".repro.lock")  # the first write: No space left
        (self.root / "runs" / "latest").mkdir(parents=True)  # a real folder where the link would go
        self.before = self.files()

    def files(self) -> dict[str, bytes]:
        out = {}
        for p in self.root.rglob("*"):
            rel = p.relative_to(self.root).as_posix()
            out[rel] = b"<dir>" if p.is_dir() and not p.is_symlink() else p.read_bytes() if p.is_file() else b"<link>"
        return out

    def out(self, name: str | None) -> str | None:
        if name is None or name in ("", " "):
            return name
        return os.fsdecode(os.fsencode(str(self.root)) + b"/" + os.fsencode(name))


class Passing:
    """Every notebook writes one passing row into the first table its number declares."""

    def __call__(self, run_dir: Path, tables: list, stem: str) -> dict:
        name = next(t.value for t in every_table() if t.value[:3] == stem[:3])  # a table the notebook declares
        table = ResultTable(run_dir, name, stem)
        tables.append(table)
        table.append(check_row(True))
        return {}


def resolved(parameters: dict) -> None:
    """What a notebook's start does with its parameters after validating them: the release list becomes release
    numbers (offline: ``all`` needs the registry, which a run with download=true asks) and notebook 06's block
    sizes become its choices."""
    from repro_studies.upstream.releases import resolve_releases
    from repro_studies.walkthrough.reshape_releases import resolve_block_sizes

    if parameters.get("releases") not in (None, "all"):
        resolve_releases(parameters["releases"], "cpu")
    if parameters.get("block_sizes") is not None:
        resolve_block_sizes(parameters["block_sizes"], "cpu")


class PassingNotebooks(FakeNotebooks):
    """Each notebook resolves its parameters as its start does, then writes one passing check."""

    def __init__(self):
        super().__init__({})

    def __call__(self, src, dst, parameters, progress, kernel):
        stem = Path(src).stem
        resolved(parameters)
        self.scripts[stem] = lambda run_dir, tables: Passing()(run_dir, tables, stem)
        return super().__call__(src, dst, parameters, progress, kernel)


@pytest.mark.integration  # drives the command line on 160 drawn inputs (seconds)
@settings(max_examples=160, deadline=None, suppress_health_check=list(HealthCheck))
@given(out=OUT, selection=SELECTION, params=st.lists(PARAMETER, max_size=3))
def test_every_input_is_refused_in_one_line_or_runs_to_a_verdict(out, selection, params, monkeypatch_session):
    folders = Folders()
    try:
        monkeypatch_session.setattr(runner, "runs_dir", lambda: folders.root / "runs")
        monkeypatch_session.setattr(runner, "execute_notebook", PassingNotebooks())
        monkeypatch_session.setattr(build, "write_report", lambda run: ())  # the report of fake tables: not this test's
        argv = ["run", "--profile", "cpu"]
        target = folders.out(out)
        if target is not None:
            argv += ["--out", target]
        if selection is not None:
            argv += ["--notebooks", *selection]
        for p in params:
            argv += ["-p", p]
        code, stdout, stderr = _main(argv)
        assert "Traceback" not in stdout + stderr
        after = folders.files()
        if code == 2:
            lines = stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (argv, stderr)
            assert after == folders.before, (argv, sorted(set(after) ^ set(folders.before)))
            return
        assert code == 0, (argv, code, stdout, stderr)
        assert stdout.strip().splitlines()[-1] == "all checks passed", (argv, stdout)
        new = sorted(set(after) - set(folders.before))
        if target is not None:
            assert target.strip(), argv  # an --out that names no folder is refused
            run_dir = Path(target).relative_to(folders.root).as_posix()
            inside = (n == run_dir or n.startswith(f"{run_dir}/") or run_dir.startswith(f"{n}/") for n in new)
            assert all(inside), (argv, new)  # the run folder, what is in it, and the folders above it it made
        else:
            assert all(n.startswith("runs/") and not n.startswith("runs/latest") for n in new), (argv, new)
        assert all(after[k] == v for k, v in folders.before.items()), argv
    finally:
        shutil.rmtree(folders.root, ignore_errors=True)


def _main(argv: list[str]) -> tuple[int, str, str]:
    """``python -m repro ARGV`` in this process: its exit code, stdout and stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main.main(argv)
        except SystemExit as exc:  # argparse's own exit
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def monkeypatch_session():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


# --------------------------------------------------------------------------------------------
# A few accepted inputs, run for real.

#: Accepted values of notebook 01's parameters, together (its pool must be whole pages of the block size's).
ACCEPTED_01 = [
    {"block_size": "256", "pool_bytes": "0"},
    {"block_size": "512", "pool_bytes": "2880000"},
    {"block_size": "256", "pool_bytes": "1728"},
]


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
@pytest.mark.notebook
def test_accepted_inputs_run_for_real_to_a_verdict(data):
    names = sorted(n for n in DECLARED if "01-reshape-overrun" in DECLARED[n] and n not in RESERVED)
    chosen = data.draw(st.sampled_from(ACCEPTED_01))
    params = [arg for name in names if name in chosen for arg in ("-p", f"{name}={chosen[name]}")]
    root = Path(tempfile.mkdtemp(prefix="accepted-"))
    try:
        out = root / "run"
        proc = subprocess.run(
            repro_cmd("run", "--profile", "cpu", "--out", str(out), "--notebooks", "01", *params),
            capture_output=True,
            text=True,
            env=cli_env(new_tag()),
            timeout=600,
        )
        assert "Traceback" not in proc.stdout + proc.stderr
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        last = proc.stdout.strip().splitlines()[-1]
        assert last == "all checks passed" or last.startswith("FAILED: "), proc.stdout
        assert [p.name for p in root.iterdir()] == ["run"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_schema_covers_every_parameter_of_every_notebook():
    assert sorted(n for n in DECLARED if n not in RESERVED) == sorted(SCHEMA)
    assert sys.version_info >= (3, 11)


def test_a_run_compared_against_itself_is_compared_not_refused_as_in_use(cpu_run, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(cpu_run.path, out, ignore=shutil.ignore_patterns(".repro.lock"))
    code = cli_main.main(["report", str(out), "--against", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "in use" not in captured.err and captured.out.startswith("wrote ")

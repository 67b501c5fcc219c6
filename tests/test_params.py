"""``-p NAME=VALUE`` is read by the parameter's declared kind: what the user typed is what the notebook
gets, or one line saying how to write it. No YAML guessing (``off`` -> False, ``01000`` -> 512 octal,
``4:16`` -> 256 base 60)."""

import os
import subprocess
import sys
from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repro.cli.params import format_value, parse_assignments
from repro.cli.runner import declared_parameters, notebooks
from repro.parameters import MAX_SEED, RESERVED, ParameterError, parameter_classes, schema

DECLARED = declared_parameters(notebooks())
#: Every parameter rule: notebooks 01 and 02's and those the studies register.
SCHEMA = schema()


def parse(*texts: str) -> dict:
    """``-p`` values as the runner takes them: read by their kinds, then every notebook's parameters built from them
    (where a value is checked, once)."""
    params = parse_assignments(list(texts), DECLARED)
    for cls in parameter_classes().values():
        names = {f.name for f in fields(cls)}
        cls(**{k: v for k, v in params.items() if k in names})
    return params


@pytest.mark.parametrize(
    "text,value",
    [
        ("sanitizer=off", "off"),  # YAML: False
        ("sanitizer=auto", "auto"),
        ("block_size=1024", 1024),
        ("block_size= 512 ", 512),
        ("seed=0", 0),
        ("seed=18446688733643", 18446688733643),
        ("case_timeout_s=1.5", 1.5),
        ("case_timeout_s=30", 30.0),
        ("case_timeout_s=1e2", 100.0),
        ("request_counts=[1, 2, 4]", [1, 2, 4]),
        ("request_counts=1,2,4", [1, 2, 4]),
        ("request_counts=[7]", [7]),
        ("request_counts=7", [7]),
        ("sentinel_modes=[in-range, poison]", ["in-range", "poison"]),
        ('sentinel_modes=["in-range", "poison"]', ["in-range", "poison"]),
        ("sentinel_modes=poison", ["poison"]),
        ("bench_variants=[fixed]", ["fixed"]),
        ("implementation=repro.core.kernels.gather:gather_buggy", "repro.core.kernels.gather:gather_buggy"),
        ("reference_gather=", ""),
        ("download=false", False),
        ("download=True", True),
        ("releases=0.28.0,0.33.0", "0.28.0,0.33.0"),  # a string parameter: the text as typed
        ("variants=[released, patched]", ["released", "patched"]),
    ],
)
def test_values_arrive_as_typed(text, value):
    name = text.split("=")[0]
    got = parse(text)[name]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("block_size=01000", "block_size: '01000' has a leading zero (YAML would read it as octal)"),
        ("block_size=4:16", "block_size: '4:16' is not a decimal integer; write digits only, e.g. -p block_size=256"),
        ("block_size=1_024", "is not a decimal integer"),
        ("block_size=0x100", "is not a decimal integer"),
        ("block_size=256.0", "is not a decimal integer"),
        ("block_size=1e3", "is not a decimal integer"),
        ("block_size=", "block_size: '' is not a decimal integer"),
        ("seed=true", "seed: 'true' is not a decimal integer"),
        ("seed=10**26", "seed: '10**26' is not a decimal integer"),
        ("case_timeout_s=nan", "case_timeout_s: 'nan' is not a decimal number"),
        ("case_timeout_s=inf", "is not a decimal number"),
        ("case_timeout_s=1:30", "is not a decimal number"),
        ("request_counts=[1, 2", "request_counts: '[1, 2' has an unclosed bracket"),
        ("request_counts=[1,,2]", "is not a flat comma-separated list"),
        ("request_counts=[[1], 2]", "is not a flat comma-separated list"),
        ("request_counts=[1, 4:16]", "is not a flat comma-separated list"),
        ("request_counts=[01, 2]", "has a leading zero"),
        ("request_counts={1: 2}", "is not a flat comma-separated list"),
        ("sanitizer='off'", "sanitizer: \"'off'\" keeps its quotes; the shell's quotes are enough"),
        ("sanitizer=OFF", "sanitizer: 'OFF' is out of range"),
        ("sanitizer=", "sanitizer: '' is out of range"),
        ("request_counts=[]", "request_counts: [] is out of range"),
        ("sentinel_modes=[poison, 'in-range]", "sentinel_modes: ['poison', \"'in-range\"] is out of range"),
        ("download=yes", "download: 'yes' is not true or false; write e.g. -p download=true"),
        ("download=0", "download: '0' is not true or false"),
        ("seed", "-p 'seed': expected NAME=VALUE"),
        ("=3", ": unknown parameter"),
        ("profile=gpu", "profile: set by the runner"),
        ("Seed=1", "Seed: unknown parameter"),
    ],
)
def test_ambiguous_or_wrong_forms_are_one_line_with_how_to_write_them(text, fragment):
    with pytest.raises(ParameterError) as info:
        parse(text)
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_a_parameter_given_twice_is_refused():
    with pytest.raises(ParameterError, match="seed: given twice"):
        parse("seed=1", "seed=2")


def test_every_notebook_parameter_has_a_rule():
    """A parameter without a schema entry would be read by its default's type and never range-checked."""
    assert sorted(n for n in DECLARED if n not in RESERVED) == sorted(SCHEMA)


@pytest.mark.parametrize("name", sorted(SCHEMA))
def test_each_default_reads_back_as_itself(name):
    """The notebooks' own defaults, written as -p text, parse to the same value and type."""
    import ast

    default = ast.literal_eval(next(iter(DECLARED[name].values())))
    expected = float(default) if SCHEMA[name].kind is float else default
    got = parse(f"{name}={format_value(default)}")[name]
    assert got == expected and type(got) is type(expected)


@given(st.lists(st.integers(min_value=1, max_value=256), min_size=1, max_size=12, unique=True))
def test_int_lists_round_trip(values):
    assert parse(f"request_counts={format_value(values)}")["request_counts"] == values


@given(st.integers(min_value=0, max_value=MAX_SEED))
def test_ints_round_trip(value):
    assert parse(f"seed={format_value(value)}")["seed"] == value


@given(st.floats(min_value=1, max_value=86400, allow_nan=False, allow_infinity=False))
def test_floats_round_trip(value):
    assert parse(f"case_timeout_s={format_value(value)}")["case_timeout_s"] == value


def test_help_lists_every_parameter_with_what_it_accepts_and_the_exit_codes():
    proc = subprocess.run([sys.executable, "-m", "repro", "run", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for name, spec in SCHEMA.items():
        assert f"{name} (notebook" in text, name
        assert " ".join(spec.accepted.split()) in text, name
    for code in ("0 ", "1 ", "2 ", "130 "):
        assert f" {code}" in text.split("exit codes:")[1]
    assert "--resume" in text and ".repro.lock" in text


def test_a_bad_option_is_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "repro", "run", "--profil", "cpu"], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"REPRO_GIT_SHA": "a" * 40, "REPRO_GIT_DIRTY": "no"}, "'no' is not a dirty flag"),
        ({"REPRO_GIT_DIRTY": "false"}, "without REPRO_GIT_SHA"),
    ],
)
def test_a_host_identity_the_manifest_cannot_record_is_refused_before_any_work(tmp_path, env, named):
    """A dirty flag the manifest would write as "not recorded" is one line and exit 2; no run folder appears."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "repro", "run", "--profile", "cpu", "--notebooks", "01", "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "REPRO_GIT_DIRTY: " in proc.stderr
    assert named in proc.stderr and not out.exists()


def test_a_sweep_case_that_cannot_fit_in_host_memory_is_refused_with_what_fits():
    from repro.parameters import SWEEP_HOST_BYTES_PER_TOKEN, check_sweep_memory

    gib = 2**30
    check_sweep_memory([1, 256], 1024, 24 * gib)  # the GPU profile's sweep on this size of host
    with pytest.raises(ParameterError) as err:
        check_sweep_memory([1, 256], 65536, 24 * gib)
    fits = 12 * gib // SWEEP_HOST_BYTES_PER_TOKEN // 256
    assert f"accepted: seq_len_max at most {fits:,} at 256 requests" in str(err.value)
    check_sweep_memory([256], fits, 24 * gib)  # what the message accepts is accepted
    with pytest.raises(ParameterError):
        check_sweep_memory([256], fits + 1, 24 * gib)


@pytest.mark.integration  # runs a sweep end to end (seconds)
def test_the_host_bytes_per_token_bound_holds_for_a_sweep_case():
    """Measured in a fresh process: building a case, its output and its reference stays under the bound. The
    process's own peak (VmHWM): ``ru_maxrss`` keeps the peak of the process it was forked from, here a test
    worker that may be larger than the case."""
    import subprocess
    import sys

    from repro.parameters import SWEEP_HOST_BYTES_PER_TOKEN

    code = (
        "from repro.core.evidence.scenarios import ScenarioSpec, build_scenario\n"
        "from repro.core.evidence.cases import reference_output\n"
        "def peak_kib():\n"
        "    return int(next(ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')).split()[1])\n"
        "base = peak_kib()\n"
        "n, L = 16, 4096\n"
        "sc = build_scenario(ScenarioSpec(num_reqs=n, block_size=64, seq_len_max=L, seq_lens=(L,) * n, max_reqs=n))\n"
        "out, ref = sc.fresh_out(), reference_output(sc)\n"
        "print((peak_kib() - base) * 1024 / (n * L))\n"
    )
    measured = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0 < measured <= SWEEP_HOST_BYTES_PER_TOKEN, measured

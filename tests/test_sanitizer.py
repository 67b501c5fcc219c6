"""Tests for repro.core.evidence.sanitizer: memcheck log parsing and the run-under-sanitizer plumbing.

Real logs from an H200 are in tests/fixtures/sanitizer/ (see its README.md); expected counts below
were read from those files. Variants the real logs do not cover are small SYNTHETIC logs written
here after the tool's documented wording. The runner is tested with a fake ``compute-sanitizer``
shell script, so no GPU is needed.
"""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

import repro.core.evidence.environment
from repro.core.evidence.sanitizer import (
    DEFAULT_PRINT_LIMIT,
    InvalidAccess,
    describe_access,
    log_name,
    parse_memcheck_log,
    run_many,
    run_under_sanitizer,
    sanitizer_command,
)
from repro.core.evidence.scenarios import ScenarioSpec

FIXTURES = Path(__file__).parent / "fixtures" / "sanitizer"
BUGGY = "repro.core.kernels.gather:gather_buggy"
FIXED = "repro.core.kernels.gather:gather_fixed"
KERNEL = "_dequantize_and_gather_k_kernel"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- real logs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, total, not_printed",
    [
        ("buggy-poison-2req.log", 1572, 1564),
        ("buggy-poison-4req.log", 20004, 19996),
    ],
)
def test_real_faulting_logs(name, total, not_printed):
    report = parse_memcheck_log(fixture(name))
    assert report.error_count == total  # the first ERROR SUMMARY line, not the "not printed" one
    assert report.errors_not_printed == not_printed
    assert len(report.accesses) == DEFAULT_PRINT_LIMIT == total - not_printed
    assert report.target_failed
    assert report.api_errors == [] and report.tool_errors == []
    for acc in report.accesses:  # every printed error is the same K-cache read
        assert (acc.kind, acc.memory_space, acc.size_bytes) == ("read", "__global__", 1)
        assert (acc.kernel, acc.source_file, acc.line) == (KERNEL, "gather.py", 49)
        assert acc.problem == "out of bounds" and acc.relation == "before"
        # independent check of the three numbers the log gives: address + distance = allocation
        assert acc.allocation_address - acc.address == acc.distance_bytes


def test_real_first_access_fields():
    acc = parse_memcheck_log(fixture("buggy-poison-2req.log")).first_access
    assert acc.headline == "Invalid __global__ read of size 1 bytes"
    assert acc.pc_offset == 0x480
    assert acc.thread == (32, 0, 0) and acc.block == (1, 4, 0)
    assert acc.address == 0x7F0C5AE78026
    assert acc.distance_bytes == 37_439_963_098
    assert acc.allocation_address == 0x7F1512800000
    assert acc.allocation_size_bytes == 449_280


def test_real_first_access_summary():
    report = parse_memcheck_log(fixture("buggy-poison-2req.log"))
    assert report.first_access_summary() == (
        "read of 1 byte at gather.py:49 in _dequantize_and_gather_k_kernel, "
        "37,439,963,098 bytes before a 449,280-byte allocation"
    )
    four = parse_memcheck_log(fixture("buggy-poison-4req.log"))
    acc = four.first_access
    assert (acc.relation, acc.distance_bytes, acc.allocation_size_bytes) == ("before", 37_439_962_898, 748_800)
    assert four.first_access_summary() == describe_access(acc)


@pytest.mark.parametrize("name", ["buggy-in-range-4req.log", "fixed-poison-4req.log"])
def test_real_clean_logs(name):
    report = parse_memcheck_log(fixture(name))
    assert report.error_count == 0
    assert report.errors_not_printed is None
    assert report.accesses == [] and report.first_access is None
    assert report.first_access_summary() is None
    assert not report.target_failed


# --- SYNTHETIC logs: variants the real logs do not cover ----------------------------------------

# SYNTHETIC: old cuda-memcheck wording ("Address ... is out of bounds", "at 0x.. in file:line:kernel",
# size without "bytes"), a single error, no nearest-allocation line.
SYNTH_OLD = """\
========= CUDA-MEMCHECK
========= Invalid __global__ read of size 4
=========     at 0x00000da0 in /path/to/gather.py:175:_dequantize_and_gather_k_kernel
=========     by thread (7,0,0) in block (2,0,0)
=========     Address 0x0003a0f0 is out of bounds
=========
========= ERROR SUMMARY: 1 error
"""

# SYNTHETIC: write after, shared inside+misaligned, local read, a hardware exception, an API error.
SYNTH_MIXED = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 16 bytes
=========     at void scatter<float>(float *, int)+0x1a0 in /src/scatter.cu:12
=========     by thread (3,1,0) in block (0,0,0)
=========     Access to 0x7f0000000100 is out of bounds
=========     and is 1 byte after the nearest allocation at 0x7f00000000ff of size 1 bytes
=========
========= Invalid __shared__ read of size 4 bytes
=========     at reduce_kernel+0x30 in reduce.cu:40
=========     by thread (1,0,0) in block (5,0,0)
=========     Address 0x00000401 is misaligned
=========     and is inside the nearest allocation at 0x00000400 of size 1,024 bytes
=========
========= Invalid __local__ write of size 8 bytes
=========     at spill_kernel+0x10
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0xfffcd8 is out of bounds
=========
========= Misaligned Shared or Local Address
=========     at 0x70 in other_kernel
=========     by thread (0,0,0) in block (0,0,0)
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: main [0x1234] in app
=========
========= Target application returned an error
========= ERROR SUMMARY: 5 errors
"""


def test_synthetic_old_wording_single_error():
    report = parse_memcheck_log(SYNTH_OLD)
    assert report.error_count == 1 and report.errors_not_printed is None
    (acc,) = report.accesses
    assert (acc.kind, acc.memory_space, acc.size_bytes) == ("read", "__global__", 4)
    assert acc.pc_offset == 0xDA0
    assert (acc.source_file, acc.line, acc.kernel) == ("/path/to/gather.py", 175, KERNEL)
    assert acc.thread == (7, 0, 0) and acc.block == (2, 0, 0)
    assert acc.address == 0x3A0F0 and acc.problem == "out of bounds"
    assert acc.relation is None and acc.distance_bytes is None and acc.allocation_size_bytes is None
    assert describe_access(acc) == f"read of 4 bytes at gather.py:175 in {KERNEL}, out of bounds"
    assert not report.target_failed


def test_synthetic_old_location_without_file():
    # SYNTHETIC: old wording where the tool has no line info: a bare (C++) kernel name with "::".
    text = (
        "========= Invalid __global__ read of size 4 bytes\n"
        "=========     at 0x22e20 in void ns::detail::probe<int>(int, int *)\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    (acc,) = parse_memcheck_log(text).accesses
    assert acc.kernel == "void ns::detail::probe<int>(int, int *)"
    assert acc.source_file is None and acc.line is None and acc.pc_offset == 0x22E20


def test_synthetic_write_after_inside_local_hw_and_api():
    report = parse_memcheck_log(SYNTH_MIXED)
    assert report.error_count == 5 and report.target_failed
    assert report.api_errors == [
        'Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch '
        'failure" on CUDA API call to cudaDeviceSynchronize.'
    ]
    write, shared, local, hw = report.accesses
    assert (write.kind, write.memory_space, write.size_bytes) == ("write", "__global__", 16)
    assert (write.kernel, write.source_file, write.line) == ("void scatter<float>(float *, int)", "/src/scatter.cu", 12)
    assert (write.relation, write.distance_bytes, write.allocation_size_bytes) == ("after", 1, 1)
    assert write.thread == (3, 1, 0)
    assert describe_access(write) == (
        "write of 16 bytes at scatter.cu:12 in void scatter<float>(float *, int), 1 byte after a 1-byte allocation"
    )
    assert (shared.memory_space, shared.problem, shared.relation) == ("__shared__", "misaligned", "inside")
    assert shared.distance_bytes is None and shared.allocation_size_bytes == 1024
    assert shared.allocation_address == 0x400 and shared.address == 0x401
    assert describe_access(shared) == (
        "__shared__ read of 4 bytes at reduce.cu:40 in reduce_kernel, misaligned, inside a 1,024-byte allocation"
    )
    assert (local.memory_space, local.kind, local.kernel, local.source_file) == (
        "__local__",
        "write",
        "spill_kernel",
        None,
    )
    assert local.pc_offset == 0x10
    assert hw.kind is None and hw.problem == "Misaligned Shared or Local Address"
    assert hw.kernel == "other_kernel" and hw.thread == (0, 0, 0)
    assert describe_access(hw) == "Misaligned Shared or Local Address in other_kernel"


@pytest.mark.parametrize(
    "text",
    [
        "",
        # SYNTHETIC: the tool died part-way: an error printed, no ERROR SUMMARY.
        "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 1 bytes\n"
        "=========     at k+0x10 in f.py:3\n",
        "========= COMPUTE-SANITIZER\n========= Error: Internal Sanitizer Error\n",
    ],
)
def test_no_summary_means_unknown_count(text):
    report = parse_memcheck_log(text)
    assert report.error_count is None and report.errors_not_printed is None


def test_application_output_is_ignored_when_mixed_in():
    # SYNTHETIC: tool output on stdout between the application's own lines.
    text = (
        "ERROR SUMMARY: 99 errors  <- printed by the application, not the tool\n"
        "========= COMPUTE-SANITIZER\n"
        "Invalid __global__ read of size 2 bytes\n"
        "========= ERROR SUMMARY: 0 errors\n"
    )
    report = parse_memcheck_log(text)
    assert report.error_count == 0 and report.accesses == []


def test_describe_access_truncates_long_kernel_names():
    acc = InvalidAccess(headline="h", kind="read", size_bytes=2, kernel="k" * 300)
    text = describe_access(acc)
    assert text.startswith("read of 2 bytes in kkk") and text.endswith("...") and len(text) < 120


# --- command ------------------------------------------------------------------------------------


def test_sanitizer_command(tmp_path):
    log = tmp_path / "a.log"
    cmd = sanitizer_command("/opt/cs", log, print_limit=3)
    assert cmd == ["/opt/cs", "--tool", "memcheck", "--print-limit", "3", "--log-file", str(log)]
    assert sanitizer_command("/opt/cs", log)[4] == str(DEFAULT_PRINT_LIMIT)
    assert not any("exitcode" in part for part in cmd)
    with pytest.raises(ValueError):
        sanitizer_command("/opt/cs", tmp_path / "run-%p.log")


def test_log_name():
    spec = ScenarioSpec(num_reqs=4, mode="poison")
    name = log_name(spec, BUGGY)
    assert name.startswith("buggy-poison-4req-") and name.endswith(".log")
    assert name == log_name(ScenarioSpec(num_reqs=4, mode="poison"), BUGGY)
    assert name != log_name(ScenarioSpec(num_reqs=4, mode="poison", seed=1), BUGGY)
    assert log_name(spec, FIXED).startswith("fixed-poison-4req-")
    assert log_name(spec, "my.pkg:my_gather").startswith("my_gather-poison-4req-")


# --- running, with a fake compute-sanitizer ----------------------------------------------------

FAKE = r"""#!/bin/bash
# Fake compute-sanitizer: records argv and env, writes a canned log, then runs the case (exec),
# sends a canned result through the case's channel (canned) or hangs in its case (sleep).
printf '%s\n' "$@" > "$FAKE_SAN_DIR/argv-$$"
echo "$PYTORCH_NO_CUDA_MEMORY_CACHING" > "$FAKE_SAN_DIR/env-$$"
log=""
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
  [ "$1" = "--log-file" ] && log="$2"
  shift 2
done
[ -n "$FAKE_SAN_LOG" ] && cp "$FAKE_SAN_LOG" "$log"
case "$FAKE_SAN_MODE" in
  exec) exec "$@" ;;
  sleep) touch "$REPRO_CASE_CHANNEL/started"; exec sleep 30 ;;
  fail) echo "fake sanitizer: could not attach" >&2; exit 1 ;;
  *) touch "$REPRO_CASE_CHANNEL/started"; sleep "${FAKE_SAN_SLEEP:-0}"
     echo "{\"implementation\": \"x\", \"status\": \"ok\", \"mismatched_tokens\": ${FAKE_SAN_MISMATCH:-0}}" \
       > "$REPRO_CASE_CHANNEL/result.json" ;;
esac
"""


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "record"
    record.mkdir()
    return str(path), record


def env(record, mode, log=None, **extra):
    return {"FAKE_SAN_DIR": str(record), "FAKE_SAN_MODE": mode, "FAKE_SAN_LOG": str(log or ""), **extra}


def test_unavailable_never_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(repro.core.evidence.environment, "find_compute_sanitizer", lambda: None)
    res = run_under_sanitizer(ScenarioSpec(num_reqs=2, mode="poison"), BUGGY, tmp_path / "logs")
    assert res.status == "unavailable" and "not found" in res.error
    assert res.case_status is None and res.error_count is None and res.log_path is None
    assert (res.variant, res.mode, res.num_reqs) == ("buggy", "poison", 2)
    missing = run_under_sanitizer(ScenarioSpec(num_reqs=2), BUGGY, tmp_path, sanitizer_path=str(tmp_path / "nope"))
    assert missing.status == "unavailable"


def test_real_case_through_fake_sanitizer(tmp_path, fake):
    tool, record = fake
    spec = ScenarioSpec(num_reqs=2, mode="in-range", seq_len_max=64, block_size=16)
    res = run_under_sanitizer(
        spec,
        BUGGY,
        tmp_path / "logs",
        timeout_s=60,
        sanitizer_path=tool,
        env_extra={"TRITON_INTERPRET": "1", **env(record, "exec", FIXTURES / "buggy-poison-2req.log")},
    )
    # the case really ran (Triton interpreter, in-range decoys): it finishes and misreads
    assert res.case_status == "ok", (res.case_error, res.stderr_tail)
    assert res.mismatched_tokens > 0 and res.stray_writes == 0
    # the verdict comes from the log the "tool" wrote
    assert res.status == "errors" and res.flagged
    assert (res.error_count, res.errors_not_printed, res.target_failed) == (1572, 1564, True)
    assert res.first_access == parse_memcheck_log(fixture("buggy-poison-2req.log")).first_access_summary()
    log = Path(res.log_path)
    assert log.parent == (tmp_path / "logs").resolve() and log.name == log_name(spec, BUGGY)
    assert log.read_text() == fixture("buggy-poison-2req.log")
    argv = next(record.glob("argv-*")).read_text().splitlines()
    assert argv[:6] == ["--tool", "memcheck", "--print-limit", str(DEFAULT_PRINT_LIMIT), "--log-file", str(log)]
    assert argv[7:9] == ["-m", "repro.core.evidence.cases"] and json.loads(argv[9])["implementation"] == BUGGY
    assert next(record.glob("env-*")).read_text().strip() == "1"  # PYTORCH_NO_CUDA_MEMORY_CACHING
    assert json.loads(json.dumps(res.to_dict()))["status"] == "errors"


def test_clean_verdict(tmp_path, fake):
    tool, record = fake
    res = run_under_sanitizer(
        ScenarioSpec(num_reqs=4, mode="poison"),
        FIXED,
        tmp_path,
        sanitizer_path=tool,
        env_extra=env(record, "canned", FIXTURES / "fixed-poison-4req.log"),
    )
    assert res.status == "clean" and res.error_count == 0 and not res.flagged
    assert res.first_access is None and res.case_status == "ok" and res.mismatched_tokens == 0


def test_sanitizer_failed_ignores_stale_log(tmp_path, fake):
    tool, record = fake
    spec = ScenarioSpec(num_reqs=4, mode="poison")
    stale = tmp_path / log_name(spec, BUGGY)
    stale.write_text(fixture("fixed-poison-4req.log"))  # a clean log from an earlier run
    res = run_under_sanitizer(spec, BUGGY, tmp_path, sanitizer_path=tool, env_extra=env(record, "fail"))
    assert res.status == "sanitizer-failed" and res.error_count is None
    assert "could not attach" in res.stderr_tail and "no log written" in res.error
    assert res.case_status == "did not start" and res.returncode == 1  # the tool failed before the case


def test_tool_error_with_zero_count_is_not_clean(tmp_path, fake):
    tool, record = fake
    # SYNTHETIC: the tool reports its own failure and then a zero summary.
    log = tmp_path / "canned.log"
    log.write_text(
        "========= COMPUTE-SANITIZER\n"
        "========= Error: Target application terminated before first instrumented API call\n"
        "========= ERROR SUMMARY: 0 errors\n"
    )
    res = run_under_sanitizer(
        ScenarioSpec(num_reqs=1), FIXED, tmp_path / "l", sanitizer_path=tool, env_extra=env(record, "canned", log)
    )
    assert res.status == "sanitizer-failed" and "first instrumented API call" in res.error


def test_timeout_is_a_result(tmp_path, fake):
    tool, record = fake
    t0 = time.perf_counter()
    res = run_under_sanitizer(
        ScenarioSpec(num_reqs=2, mode="poison"),
        BUGGY,
        tmp_path,
        timeout_s=1.0,
        sanitizer_path=tool,
        env_extra=env(record, "sleep", FIXTURES / "buggy-poison-2req.log"),
    )
    assert time.perf_counter() - t0 < 10
    assert res.status == "timeout" and res.case_status == "timeout"
    assert 1.0 <= res.seconds < 10
    assert res.first_access is not None  # what the log held before the kill is kept


def test_bad_log_dir_is_a_result(tmp_path, fake):
    tool, record = fake
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_under_sanitizer(
        ScenarioSpec(num_reqs=1), FIXED, blocker / "logs", sanitizer_path=tool, env_extra=env(record, "canned")
    )
    assert res.status == "sanitizer-failed" and res.error


def test_run_many_keeps_input_order(tmp_path, fake):
    tool, record = fake
    delays = [1.2, 0.7, 0.1]
    jobs = [
        {
            "spec": ScenarioSpec(num_reqs=n),
            "implementation": FIXED,
            "env_extra": env(
                record,
                "canned",
                FIXTURES / "fixed-poison-4req.log",
                FAKE_SAN_SLEEP=str(d),
                FAKE_SAN_MISMATCH=str(n * 10),
            ),
        }
        for n, d in zip([3, 2, 1], delays)
    ]
    jobs.append((ScenarioSpec(num_reqs=1), FIXED))  # tuple form, same case as the job before it
    finished = []
    t0 = time.perf_counter()
    results = run_many(
        jobs,
        max_workers=4,
        on_result=lambda i, r: finished.append(i),
        log_dir=tmp_path,
        sanitizer_path=tool,
        env_extra=env(record, "canned", FIXTURES / "fixed-poison-4req.log"),
    )
    assert time.perf_counter() - t0 < 1.9  # concurrent: one after another would take over 2.0 s
    assert [r.num_reqs for r in results] == [3, 2, 1, 1]
    assert [r.mismatched_tokens for r in results] == [30, 20, 10, 0]  # each child's own output
    assert finished.index(0) > finished.index(2)  # finished out of order, returned in order
    assert all(r.status == "clean" for r in results)
    assert len({r.log_path for r in results}) == 4  # identical cases get their own log files
    assert run_many([], max_workers=2) == []

"""One patch per release and the regression test written for vLLM's suite, on the synthetic fixture module in
fake wheels (never vLLM's code): the diff, ``patch -p1``, each failure a status; the test runner's typed
outcomes and the verdicts over them."""

import subprocess
import sys

import pandas as pd
import pytest
from upstream_fakes import V4_MEMBER, cached_release, fake_pip, fixture_source

from repro_studies.analysis import vllm_suite as suite
from repro_studies.registry import SuiteOutcome
from repro_studies.upstream import patcher, patches, regression
from repro_studies.upstream.pytest_release import Selection

JIT_SOURCE = """
from vllm.model_executor.warmup.jit_warmup_triton_helper import triton_scalar_specialization_rep
from vllm.triton_utils import tl, triton


class DequantizeAndGatherKCacheKernel:
    @staticmethod
    @triton.jit
    def kernel(block_table_ptr, max_blocks_per_seq: tl.constexpr):
        tl.load(block_table_ptr + tl.program_id(0) * max_blocks_per_seq)

    def dispatch(self, *, max_model_len, block_table_block_size, offset):
        return self.CompileKey(
            max_blocks_per_seq=(max_model_len + block_table_block_size - 1)
            // block_table_block_size,
            offset=triton_scalar_specialization_rep(offset),
        )

    def __call__(self, block_table):
        return dict(max_blocks_per_seq=block_table.shape[-1])
"""


def test_runtime_pitch_keys_the_jit_warmup_by_specialization_class():
    member = "vllm/models/deepseek_v4/common/ops/cache_utils.py"
    rw = patcher.rewrite_row_pitch(JIT_SOURCE, member, runtime=True)
    assert (
        "max_blocks_per_seq=triton_scalar_specialization_rep(\n"
        "                (max_model_len + block_table_block_size - 1) // block_table_block_size\n"
        "            ),"
    ) in rw.rewritten
    assert len(rw.edits) == 3 and "CompileKey.max_blocks_per_seq" in rw.edits[1]
    constexpr = patcher.rewrite_row_pitch(JIT_SOURCE, member, runtime=False)
    assert "triton_scalar_specialization_rep(\n" not in constexpr.rewritten  # the pitch stays a compile-time key
    bare = JIT_SOURCE.replace("from vllm.model_executor.warmup.jit_warmup_triton_helper import", "# ")
    with pytest.raises(patcher.PatchError, match="no triton_scalar_specialization_rep to key it by"):
        patcher.rewrite_row_pitch(bare, member, runtime=True)


def test_a_release_patch_applies_with_patch_and_equals_the_rewrite(tmp_path, monkeypatch):
    root, entry = cached_release(tmp_path, monkeypatch)
    got = patches.prepare("0.99.0", tmp_path / "out", tmp_path / "work", root)
    assert got.status == patches.PatchStatus.APPLIED, got.reason
    assert got.diff_path.name == "vllm-0.99.0.diff" and got.launch_sites == 1 and got.members == [V4_MEMBER]
    text = got.diff_path.read_text()
    assert "patch -p1 < vllm-0.99.0.diff" in text and f"--- a/{V4_MEMBER}" in text
    rewritten = patcher.rewrite_row_pitch(fixture_source(), V4_MEMBER).rewritten
    assert (got.patched_files / V4_MEMBER).read_text() == rewritten
    copied = sorted(str(p.relative_to(got.patched_files)) for p in got.patched_files.rglob("*.py"))
    assert copied == entry.members()
    assert got.row()["status"] == "applied"


def test_a_patch_that_does_not_match_is_a_status_never_a_pass(tmp_path, monkeypatch):
    root, entry = cached_release(tmp_path, monkeypatch)
    differs = patches.prepare("0.99.0", tmp_path / "a", tmp_path / "w", root, expected={V4_MEMBER: "x = 1\n"})
    assert differs.status == patches.PatchStatus.DIFFERS and V4_MEMBER in differs.reason
    unknown = patches.prepare("0.98.0", tmp_path / "b", tmp_path / "w", root)
    assert unknown.status == patches.PatchStatus.NO_RELEASE and "unknown release" in unknown.reason
    diff = tmp_path / "stale.diff"
    diff.write_text(patches.unified_diff(V4_MEMBER, "a\nb\n", "a\nc\n"))
    why = patches.apply(diff, entry.files_dir.parent)
    assert why.startswith("patch -p1 exited with 1") or why.startswith("patch -p1 exited with 2")
    monkeypatch.setattr(patches.shutil, "which", lambda name: None)
    missing = patches.prepare("0.99.0", tmp_path / "c", tmp_path / "w", root)
    assert missing.status == patches.PatchStatus.NO_PATCH_TOOL and "apt-get install patch" in missing.reason
    changed = fixture_source(**{"max_blocks_per_seq=block_table.shape[-1]": "max_blocks_per_seq=block_table.size(1)"})
    (tmp_path / "2").mkdir()
    root2, _ = cached_release(tmp_path / "2", monkeypatch, source=changed)
    failed = patches.prepare("0.99.0", tmp_path / "d", tmp_path / "w", root2)
    assert failed.status == patches.PatchStatus.REWRITE_FAILED and "expected exactly" in failed.reason


def test_unified_diff_marks_a_last_line_without_newline():
    text = patches.unified_diff("vllm/x.py", "a = 1", "a = 2")
    assert text.endswith("-a = 1\n\\ No newline at end of file\n+a = 2\n\\ No newline at end of file\n")


def test_patch_command_refuses_bad_input_with_one_line(tmp_path, monkeypatch):
    code = subprocess.run(
        [sys.executable, "-m", "repro_studies.upstream.patches", "v0.33.0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert code.returncode == 2 and code.stderr.count("\n") == 1 and "VERSION: 'v0.33.0'" in code.stderr
    fake_pip(monkeypatch, {})
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(tmp_path / "cache"))
    assert patches.main(["0.98.0", "--out", str(tmp_path / "p")]) == 2
    assert not (tmp_path / "p").exists()


def _event(when, outcome="passed", exception="", fault=False, oob=0, message=""):
    return dict(
        when=when,
        outcome=outcome,
        exception=exception,
        fault=fault,
        out_of_bounds_lanes=oob,
        out_of_view_lanes=0,
        message=message,
        seconds=0.1,
    )


@pytest.mark.parametrize(
    "events,outcome",
    [
        ([_event("setup"), _event("call"), _event("teardown")], SuiteOutcome.PASSED),
        ([_event("setup"), _event("call", "failed", "AssertionError"), _event("teardown")], SuiteOutcome.MISMATCH),
        ([_event("setup"), _event("call", "failed", "AssertionError", oob=12)], SuiteOutcome.OUT_OF_BOUNDS),
        ([_event("setup"), _event("call", "failed", "AcceleratorError", fault=True)], SuiteOutcome.FAULT),
        ([_event("setup"), _event("call", "failed", "ModuleNotFoundError")], SuiteOutcome.OTHER),
        ([_event("setup", "failed", "ImportError")], SuiteOutcome.ERROR),
        ([_event("setup", "skipped")], SuiteOutcome.SKIPPED),
        ([], SuiteOutcome.NOT_RUN),
    ],
)
def test_each_test_gets_the_outcome_of_the_phase_that_decided_it(events, outcome):
    assert regression.classify(events)["outcome"] == outcome


def _rows(form, outcomes):
    return [
        {"release": "0.99.0", "form": form, "test": f"t{i}", "num_reqs": n, "outcome": o.value, "message": "m"}
        for i, (n, o) in enumerate(outcomes)
    ]


def test_released_must_fail_on_its_assertion_and_patched_must_pass():
    good = pd.DataFrame(
        _rows("released", [(1, SuiteOutcome.PASSED), (2, SuiteOutcome.MISMATCH), (2, SuiteOutcome.OUT_OF_BOUNDS)])
        + _rows("patched", [(1, SuiteOutcome.PASSED), (2, SuiteOutcome.PASSED), (2, SuiteOutcome.SKIPPED)])
    )
    s = suite.summary(good)
    assert (
        list(s["outcome"]) == [suite.SuiteRunStatus.FAILS, suite.SuiteRunStatus.PASSES] and s[suite.AS_EXPECTED].all()
    )
    assert [r["ok"] for r in suite.check_rows(s)] == [True, True]
    released = s.iloc[0]
    assert [released[c] for c in ("tests", "passed", "mismatch", "out of bounds", "errors")] == [3, 1, 1, 1, 0]
    table = suite.release_outcomes(s)
    assert table.iloc[0]["as released"].startswith(f"{suite.SuiteRunStatus.FAILS}: 1/3 passed, 2 failed (")
    bad = pd.DataFrame(
        _rows("released", [(1, SuiteOutcome.PASSED), (2, SuiteOutcome.ERROR)])
        + _rows("patched", [(2, SuiteOutcome.MISMATCH)])
        + [{"release": "0.98.0", "form": "released", "test": "t", "num_reqs": 2, "outcome": "skipped", "message": ""}]
    )
    s = suite.summary(bad)
    assert list(s["outcome"]) == [suite.SuiteRunStatus.ERRORS, suite.SuiteRunStatus.FAILS, suite.SuiteRunStatus.NOTHING]
    assert not s[suite.AS_EXPECTED].any()
    assert "unexpected: t1" in suite.check_rows(s)[0]["observed"]


def test_a_selection_takes_cases_by_parameter_value():
    sel = Selection(every={"num_reqs": (1, 2), "entry": ("dispatcher",)}, per_test={"t_b": {"entry": ("triton",)}})
    assert sel.takes("t_a", {"num_reqs": 2, "entry": "dispatcher", "record": "v4-584"})
    assert not sel.takes("t_a", {"num_reqs": 3, "entry": "dispatcher"})
    assert not sel.takes("t_b", {"num_reqs": 1, "entry": "dispatcher"}) and sel.takes(
        "t_b", {"num_reqs": 1, "entry": "triton"}
    )
    assert sel.takes("t_c", {"record": "v4-584"})  # a parameter the test does not take constrains nothing
    assert Selection.from_json(sel.to_json()) == sel and Selection.from_json("") == Selection()
    assert Selection().takes("t", {"num_reqs": 256})


def test_the_test_file_has_no_size_switch_and_parametrizes_request_counts_from_1_to_256():
    """What a vLLM reviewer reads: request counts as a parametrize list from 1 to 256, no environment variable
    choosing sizes, no multi-release import shim in the test file (it is in conftest.py beside it)."""
    text = regression.suite_path().read_text()
    assert '@pytest.mark.parametrize("num_reqs", [1, 2, 3, 16, 127, 256])' in text
    assert "os.environ" not in text.replace('os.environ.get("TRITON_INTERPRET")', "")
    assert (
        "deepseek_v4_ops" not in text
        and "deepseek_v4_ops" in (regression.suite_path().parent / "conftest.py").read_text()
    )


@pytest.mark.integration
def test_the_upstream_test_file_runs_against_a_release_as_released_and_patched(tmp_path, monkeypatch):
    """The file in upstream-tests/, unchanged, against the fixture release: fails from two requests as released
    (a bitwise mismatch with stale ids, reads outside every tensor with invalid ids), passes patched."""
    root, _ = cached_release(tmp_path, monkeypatch)
    monkeypatch.setenv("REPRO_VLLM_CACHE", str(root))
    patch = patches.prepare("0.99.0", tmp_path / "p", tmp_path / "w", root)
    released = regression.run_suite("0.99.0", "released", None, cache_root=root)
    patched = regression.run_suite("0.99.0", "patched", patch.patched_files, cache_root=root)
    assert len(released.rows) == len(patched.rows) == 20  # the CPU selection: 5 records x 2 request counts x 2 tests
    ran = {r["test"]: r["outcome"] for r in released.rows if r["outcome"] != SuiteOutcome.SKIPPED}
    assert ran == {
        "test_dequantize_and_gather_k_cache_narrowed_block_table[v4-584-dispatcher-16-3-8-1]": "passed",
        "test_dequantize_and_gather_k_cache_narrowed_block_table[v4-584-dispatcher-16-3-8-2]": SuiteOutcome.MISMATCH,
        "test_dequantize_and_gather_k_cache_narrowed_block_table_invalid_ids[v4-584-dispatcher-1]": "passed",
        "test_dequantize_and_gather_k_cache_narrowed_block_table_invalid_ids[v4-584-dispatcher-2]": (
            SuiteOutcome.OUT_OF_BOUNDS
        ),
    }
    assert {r["outcome"] for r in patched.rows} == {"passed", "skipped"}
    assert patched.loaded["rewritten"] == [V4_MEMBER] and released.loaded["rewritten"] == []
    frame = pd.DataFrame(
        [{"release": "0.99.0", "form": run.form, **r} for run in (released, patched) for r in run.rows]
    )
    assert suite.summary(frame)[suite.AS_EXPECTED].all()


def test_the_first_run_names_the_wheels_it_downloads_with_their_sizes(tmp_path, monkeypatch, capsys):
    from upstream_fakes import make_wheel

    from repro_studies.upstream.releases import IndexedRelease
    from repro_studies.walkthrough.downloads import fetch_missing

    wheel = make_wheel(tmp_path, "0.99.0", {V4_MEMBER: fixture_source()})
    fake_pip(monkeypatch, {"0.99.0": wheel})
    root = tmp_path / "cache"
    listed = {"0.99.0": IndexedRelease("0.99.0", wheel.name, 412_000_000, "", "2026-11-02")}
    said = []
    got = fetch_missing(["0.99.0"], root, True, listed, said.append)
    assert said[0].startswith("Downloading 1 vLLM wheel (412 MB in all) into ") and said[1] == f"  {wheel.name}  412 MB"
    assert got["0.99.0"].version == "0.99.0" and "vLLM wheels" in capsys.readouterr().err
    assert fetch_missing(["0.99.0"], root, True, listed, said.append) == {} and len(said) == 2  # cached: silent


FAULTING_FILE = """
import os

import pytest


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_gather(n):
    import vllm.models.deepseek_v4.common.ops.cache_utils as m  # the release's own module

    assert callable(m.dequantize_and_gather_k_cache)
    if n == 2:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if n == 3:
        os._exit(7)  # the process dies inside the test
    assert n != 4, "Tensor-likes are not equal!"
"""


@pytest.mark.integration
def test_a_device_fault_or_a_dead_process_ends_that_test_and_the_rest_run_in_a_fresh_process(tmp_path, monkeypatch):
    """What a GPU does to the regression test, played on the CPU: the fault stops the session, a process that
    dies mid-test is a fault too, and every later test still runs (in the next process)."""
    root, _ = cached_release(tmp_path, monkeypatch)
    path = tmp_path / "test_faulting.py"
    path.write_text(FAULTING_FILE)
    got = regression.run_suite("0.99.0", "released", None, cache_root=root, interpreted=False, test_file=path)
    outcomes = {r["test"]: r["outcome"] for r in got.rows}
    assert outcomes == {
        "test_gather[1]": SuiteOutcome.PASSED,
        "test_gather[2]": SuiteOutcome.FAULT,
        "test_gather[3]": SuiteOutcome.FAULT,
        "test_gather[4]": SuiteOutcome.MISMATCH,
        "test_gather[5]": SuiteOutcome.PASSED,
    }
    assert got.processes == 3 and got.loaded["release"] == "0.99.0"
    assert "exited with 7" in next(r["message"] for r in got.rows if r["test"] == "test_gather[3]")
    capped = regression.run_suite(
        "0.99.0", "released", None, cache_root=root, interpreted=False, test_file=path, max_restarts=1
    )
    assert [r["outcome"] for r in capped.rows][-2:] == [SuiteOutcome.NOT_RUN] * 2 and "restart budget" in capped.note


@pytest.mark.integration
def test_an_import_error_is_its_own_outcome_not_a_failure_of_the_bug(tmp_path, monkeypatch):
    root, _ = cached_release(tmp_path, monkeypatch)
    path = tmp_path / "test_imports.py"
    path.write_text("import vllm.distributed\n\n\ndef test_x():\n    pass\n")
    got = regression.run_suite("0.99.0", "released", None, cache_root=root, interpreted=False, test_file=path)
    assert [r["outcome"] for r in got.rows] == [SuiteOutcome.ERROR]
    assert "vllm.distributed is neither in vLLM 0.99.0's cache nor stubbed" in got.rows[0]["message"]


def test_the_report_shows_the_test_per_release_and_links_each_patch(tmp_path):
    from pathlib import Path

    from repro.core.analysis.rundata import RunData, load_run
    from repro.report.build import render_run

    run = load_run(Path(__file__).resolve().parents[1] / "data" / "h200" / "vllm-0.22.0-under-test")
    tests = pd.DataFrame(
        _rows("released", [(1, SuiteOutcome.PASSED), (2, SuiteOutcome.FAULT)])
        + _rows("patched", [(1, SuiteOutcome.PASSED), (2, SuiteOutcome.ERROR)])
    )
    patch = {"release": "0.99.0", "status": "applied", "launch_sites": 4, "diff": "vllm-0.99.0.diff", "reason": ""}
    tables = {
        **run.tables,
        suite.TEST_TABLE: tests,
        suite.SUMMARY_TABLE: suite.summary(tests),
        suite.PATCH_TABLE: pd.DataFrame([patch]),
    }
    report = render_run(RunData(tmp_path, run.manifest, tables, run.facts, run.files))
    report.close()
    md = report.markdown.text
    section = md[md.index("## vLLM's regression test and one patch per release") :]
    assert "| 0.99.0 | fails on its assertions: 1/2 passed, 1 failed (1 device fault) | errors: 1/2 passed" in section
    assert "| applied, 4 launch sites | no |" in section
    assert "[vllm-0.99.0.diff](patches/vllm-0.99.0.diff)" in section
    assert "Tests that did not do what they had to (1)" in section

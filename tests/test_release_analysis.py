"""Release-matrix verdicts, patch effect, run merging (pandas only), the figure, and the interpreter shim."""

import pandas as pd
import pytest

from repro_studies.analysis import releases as rel
from repro_studies.upstream.matrix import row


def case(release, kernel, variant, mode, n, mism=0, total=10, status="ok", oob=0, **kw):
    return row(
        release=release,
        kernel=kernel,
        variant=variant,
        mode=mode,
        num_reqs=n,
        status=status,
        mismatched_tokens=mism if status == "ok" else None,
        total_tokens=total,
        stray_writes=0,
        out_of_view_lanes=0,
        out_of_bounds_lanes=oob,
        **kw,
    )


def sample() -> pd.DataFrame:
    k = "v4:_dequantize_and_gather_k_kernel"
    rows = [
        case("0.22.0", k, "released", "in-range", 1),
        case("0.22.0", k, "released", "in-range", 2, mism=4),
        case("0.22.0", k, "released", "in-range", 4, mism=8),
        case("0.22.0", k, "released", "poison", 4, status="crashed"),
        case("0.22.0", k, "patched", "in-range", 1),
        case("0.22.0", k, "patched", "in-range", 2),
        case("0.33.0", k, "released", "in-range", 1),
        case("0.33.0", k, "released", "in-range", 2, mism=1),
        case("0.33.0", k, "patched", "in-range", 2, mism=1),
        row(release="0.33.0", kernel="cutedsl:v4:v4", variant="released", status="not run", reason="no GPU"),
        row(release="0.21.0", kernel=k, variant="released", status="could not load", reason="ImportError: x"),
        row(release="9.9.9", status="unknown release", reason="No matching distribution"),
    ]
    return pd.DataFrame(rows)


def test_verdicts_follow_the_rules():
    v = rel.verdicts(sample()).set_index(["release", "kernel", "variant"])["verdict"].to_dict()
    k = "v4:_dequantize_and_gather_k_kernel"
    assert v[("0.22.0", k, "released")] == "faults from 4 requests"
    assert v[("0.22.0", k, "patched")] == "correct"
    assert v[("0.33.0", k, "released")] == "wrong from 2 requests"
    assert v[("0.33.0", k, "patched")] == "wrong from 2 requests"
    assert v[("0.33.0", "cutedsl:v4:v4", "released")] == "not run"
    assert v[("0.21.0", k, "released")] == "could not load"
    assert v[("9.9.9", "", "")] == "unknown release"
    table = rel.verdicts(sample())
    first = table[(table.release == "0.22.0") & (table.variant == "released")].iloc[0]
    assert first.first_wrong == 2 and first.first_fault == 4 and first.mismatch_fraction == pytest.approx(12 / 30)
    assert list(table.release.unique())[:3] == ["0.21.0", "0.22.0", "0.33.0"]


def test_interpreter_reads_outside_every_argument_count_as_faults():
    k = "v41:_dequantize_and_gather_k_mxfp8_kernel"
    frame = pd.DataFrame(
        [case("0.33.0", k, "released", "poison", 1), case("0.33.0", k, "released", "poison", 2, mism=3, oob=100)]
    )
    assert rel.verdicts(frame).iloc[0].verdict == "faults from 2 requests"


def test_patch_effect_and_completion():
    v = rel.complete_matrix(rel.verdicts(sample()))
    effect = rel.patch_effect(v).set_index(["release", "kernel"])["patch"].to_dict()
    k = "v4:_dequantize_and_gather_k_kernel"
    assert effect[("0.22.0", k)] == "fixed" and effect[("0.33.0", k)] == "not fixed"
    assert effect[("0.33.0", "cutedsl:v4:v4")] == "-"
    filled = v[(v.release == "0.22.0") & (v.kernel == "cutedsl:v4:v4")]
    assert set(filled.verdict) == {"not present"} and len(filled) == 2
    assert rel.first_release_with(v, "v4:") == "0.21.0"  # present there, though it could not load
    assert rel.first_release_with(v, "cutedsl:") == "0.33.0"
    grid = rel.matrix_table(v)
    assert grid.loc["0.22.0", k] == "faults from 4 requests"


def test_a_run_without_the_patched_variant_verifies_no_fix_and_flags_no_problem():
    """-p variants=[released] (the CuTe-DSL runs): the released kernels' verdicts stand, the fix is neither
    verified nor failed, and the sample's own patched rows still decide it when present."""
    only_released = sample()[lambda f: f.variant != "patched"]
    finding = rel.releases_finding(only_released)
    assert finding.outcomes == ["reproduced"] and finding.problems == []
    assert "did not run on 2 of them" in finding.text
    both = rel.releases_finding(sample())
    assert both.outcomes == ["reproduced", "fix not verified"]
    assert both.problems == ["v4:_dequantize_and_gather_k_kernel in vLLM 0.33.0: wrong from 2 requests with the change"]


def test_merge_keeps_agreeing_rows_once_and_disagreeing_rows_all():
    frame = sample()
    merged = rel.merge_matrices(
        [
            ("job-a", frame.iloc[:6]),
            ("job-b", frame.iloc[4:]),
            ("job-c", frame.iloc[:1].assign(mismatched_tokens=5)),
            ("no-table", None),
        ]
    )
    assert len(merged) == len(frame) + 1
    assert set(merged.run) == {"job-a", "job-b", "job-c"}
    v = rel.verdicts(merged)
    assert v[(v.release == "0.22.0") & (v.variant == "released")].iloc[0].first_wrong == 1
    assert rel.merge_matrices([("no-table", None)]).empty


def test_merge_takes_a_measured_arm_over_one_another_run_could_not_try():
    """0.33.0's CuTe-DSL gather: "not run" on a host without the package, measured correct on one with it."""
    frame = sample()
    measured = pd.DataFrame(
        [case("0.33.0", "cutedsl:v4:v4", "released", mode, n) for mode in ("in-range", "poison") for n in (1, 2)]
    )
    offline = pd.DataFrame([row(release="0.22.0", status="download failed", reason="no registry")])
    merged = rel.merge_matrices([("no-gpu", frame), ("with-cutedsl", measured), ("offline", offline)])
    cute = merged[merged.kernel == "cutedsl:v4:v4"]
    assert set(cute.run) == {"with-cutedsl"} and set(cute.status) == {"ok"}
    v = rel.verdicts(merged).set_index(["release", "kernel", "variant"])["verdict"]
    assert v[("0.33.0", "cutedsl:v4:v4", "released")] == "correct"
    # a release-level "download failed" names no kernel: no measured arm has its key, so it stays
    assert (merged.status == "download failed").sum() == 1
    # "could not load" is what the code does, not what the host lacked: it is never superseded
    assert (rel.merge_matrices([("a", frame), ("b", frame.assign(status="ok"))]).status == "could not load").sum() == 1
    inputs = rel.merge_inputs(
        [("no-gpu", "complete", frame), ("with-cutedsl", "running", measured), ("none", "complete", None)], merged
    ).set_index("run")
    assert inputs.loc["no-gpu", "rows"] == len(frame) and inputs.loc["no-gpu", "rows kept"] == len(frame) - 1
    assert inputs.loc["with-cutedsl", "rows kept"] == 4 and inputs.loc["with-cutedsl", "status"] == "running"
    assert inputs.loc["none", "releases"] == "no matrix table" and inputs.loc["none", "rows kept"] == 0


def test_figure_draws_each_variant_as_one_half_of_every_cell():
    import matplotlib

    matplotlib.use("Agg")
    from repro_studies.report.releases import release_matrix

    v = rel.complete_matrix(rel.verdicts(sample()))
    fig = release_matrix(v)
    (ax,) = fig.axes
    assert ax.get_title(loc="left") == "left half: as released, right half: with PR #55109"
    cells = v["release"].nunique() * len([k for k in v["kernel"].unique() if k])
    halves = [p for p in ax.patches if p.get_width() == 0.5]
    assert len(halves) == 2 * cells  # released on the left, patched on the right, in every cell


def test_analysis_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, repro_studies.analysis.releases; print('torch' in sys.modules, 'triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_loop_bound_shim_runs_a_loaded_bound_and_is_undone():
    import torch
    import triton
    import triton.language as tl

    from repro_studies.upstream.interp_compat import loaded_scalar_loop_bounds, needed

    @triton.jit
    def count(n_ptr, out_ptr):
        acc = 0
        for i in range(tl.program_id(0), tl.load(n_ptr), 1):
            acc += i
        tl.store(out_ptr, acc)

    n, out = torch.tensor([5], dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with loaded_scalar_loop_bounds():
        count[(1,)](n, out)
    assert out.item() == 10
    if needed():
        with pytest.raises(Exception, match="0-dimensional"):
            count[(1,)](n, out)


def _matrix_run(folder, frame, status="failed"):
    import json

    (folder / "results").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"status": status}))
    if frame is not None:
        frame.to_csv(folder / "results" / "04-release-matrix.csv", index=False)
    return str(folder)


def test_report_merge_writes_one_table_section_and_figure(tmp_path, capsys):
    import json

    from repro.cli.main import main

    frame = sample()
    a = _matrix_run(tmp_path / "a", frame.iloc[:6])
    b = _matrix_run(tmp_path / "b", frame.iloc[6:], status="running")
    out = tmp_path / "merged"
    assert main(["report", str(out), "--merge", a, b]) == 0
    merged = pd.read_csv(out / "results" / "04-release-matrix.csv")
    assert len(merged) == len(frame) and set(merged.run) == {"a", "b"}
    section = (out / "releases.md").read_text()
    assert "## Affected releases and kernels" in section
    assert "| v4 per-block | 0.22.0 | faults ≥4 | ok | fixed |" in section
    assert "| v4 per-block | 0.33.0 | wrong ≥2 | wrong ≥2 | not fixed |" in section
    assert "**Did not finish:** b (status running)" in section
    assert [i["run"] for i in json.loads((out / "merge.json").read_text())["inputs"]] == ["a", "b"]
    assert (out / "plots" / "04-release-matrix.png").stat().st_size > 0
    assert main(["report", str(out), "--merge", a, b]) == 0  # an earlier merge's folder is rewritten
    capsys.readouterr()


@pytest.mark.parametrize(
    "damage, fragment",
    [
        ("no table", "none of"),
        ("no folder", "no such run folder"),
        ("not a run", "holds no manifest.json"),
        ("truncated table", "04-release-matrix.csv: the last row is cut off"),
        ("out is a run", "holds a run (its manifest.json)"),
    ],
)
def test_report_merge_refuses_bad_inputs_before_writing(tmp_path, capsys, damage, fragment):
    from repro.cli.main import main

    good = _matrix_run(tmp_path / "good", sample())
    out = tmp_path / "merged"
    if damage == "no table":
        args = [_matrix_run(tmp_path / "bad", None)]
        good = None
    elif damage == "no folder":
        args = [str(tmp_path / "missing")]
    elif damage == "not a run":
        (tmp_path / "bad").mkdir()
        args = [str(tmp_path / "bad")]
    elif damage == "truncated table":
        bad = _matrix_run(tmp_path / "bad", sample())
        table = tmp_path / "bad" / "results" / "04-release-matrix.csv"
        table.write_text(table.read_text()[:-20])
        args = [bad]
    else:
        out = tmp_path / "good"
        args = []
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["report", str(out), "--merge", *([good] if good else []), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _verdict(release, kernel, variant, verdict, first_wrong=None, first_fault=None):
    return {
        "release": release,
        "kernel": kernel,
        "variant": variant,
        "verdict": verdict,
        "first_wrong": first_wrong,
        "first_fault": first_fault,
        "mismatch_fraction": 0.0,
        "cases": 4,
        "reason": "",
        "shared_from": "",
    }


@pytest.mark.parametrize(
    "kernel,variant,verdict,first,ok",
    [
        ("triton", "released", "faults from 2 requests", 2, True),
        ("triton", "released", "wrong from 4 requests", 4, False),  # request 1 is the first that can misread
        ("triton", "released", "correct", None, False),  # the bug stopped reproducing
        ("triton", "patched", "correct", None, True),
        ("triton", "patched", "wrong from 2 requests", 2, False),
        ("cute", "released", "correct", None, True),  # no row pitch: nothing for the PR to fix
        ("cute", "released", "wrong from 2 requests", 2, False),
        ("cute", "patched", "not applicable", None, True),
    ],
)
def test_check_rows_expect_a_misread_only_from_kernels_launched_with_a_row_pitch(kernel, variant, verdict, first, ok):
    inventory = pd.DataFrame(
        [
            {"release": "0.33.0", "kernel": "triton", "pitch_parameter": "max_blocks_per_seq: tl.constexpr"},
            {"release": "0.33.0", "kernel": "cutedsl:Kernel", "pitch_parameter": ""},
        ]
    )
    v = pd.DataFrame([_verdict("0.33.0", kernel, variant, verdict, first_wrong=first)])
    (check,) = rel.check_rows(v, rel.pitched_kernels(inventory), [1, 2, 4])
    assert check["ok"] is ok


@pytest.mark.parametrize(
    "released,patched,effect",
    [
        ("faults from 2 requests", "correct", "fixed"),
        ("wrong from 2 requests", "wrong from 2 requests", "not fixed"),
        ("correct", "correct", "not needed"),
        ("correct", "not applicable", "not reached (correct as released)"),
        ("correct", "wrong from 2 requests", "patch breaks it"),
    ],
)
def test_patch_effect(released, patched, effect):
    v = pd.DataFrame([_verdict("0.33.0", "k", "released", released), _verdict("0.33.0", "k", "patched", patched)])
    assert rel.patch_effect(v)["patch"].tolist() == [effect]


@pytest.mark.parametrize("status", ["timeout", "killed", "exited", "error"])
def test_a_case_that_ends_without_a_result_could_not_run_and_is_no_fault(status):
    k = "v4:_dequantize_and_gather_k_kernel"
    frame = pd.DataFrame(
        [
            case("0.22.0", k, "released", "in-range", 1),
            case("0.22.0", k, "released", "poison", 2, status=status, error=f"{status} here"),
        ]
    )
    verdict = rel.verdicts(frame).iloc[0]
    assert verdict.verdict == "could not run" and verdict.reason == f"{status}: {status} here"
    assert verdict.first_fault is None and rel.verdict_class(verdict.verdict) == "could not run"
    (check,) = rel.check_rows(rel.verdicts(frame), {("0.22.0", k)}, [1, 2])
    assert not check["ok"]

"""Release-matrix verdicts, patch effect, run merging (pandas only), the figure, and the interpreter shim."""

import pandas as pd
import pytest

from repro_studies.analysis import releases as rel
from repro_studies.analysis.release_verdict import Verdict
from repro_studies.registry import PatchOutcome, VerdictClass
from repro_studies.report import phrases
from repro_studies.upstream.matrix import row

W, F, C = VerdictClass.WRONG, VerdictClass.FAULTS, VerdictClass.CORRECT


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


def by_arm(table: pd.DataFrame) -> dict:
    """(release, kernel, variant) -> the row's Verdict."""
    return {(r["release"], r["kernel"], r["variant"]): Verdict.of(r) for r in table.to_dict("records")}


def test_verdicts_follow_the_rules():
    v = by_arm(rel.verdicts(sample()))
    k = "v4:_dequantize_and_gather_k_kernel"
    assert v[("0.22.0", k, "released")] == Verdict(F, first_wrong=2, first_fault=4)
    assert v[("0.22.0", k, "patched")] == Verdict(C)
    assert v[("0.33.0", k, "released")] == Verdict(W, first_wrong=2)
    assert v[("0.33.0", k, "patched")] == Verdict(W, first_wrong=2)
    assert v[("0.33.0", "cutedsl:v4:v4", "released")] == Verdict(VerdictClass.NOT_RUN)
    assert v[("0.21.0", k, "released")] == Verdict(VerdictClass.COULD_NOT_LOAD)
    assert v[("9.9.9", "", "")] == Verdict(VerdictClass.UNKNOWN_RELEASE)
    table = rel.verdicts(sample())
    first = table[(table.release == "0.22.0") & (table.variant == "released")].iloc[0]
    assert first.first_wrong == 2 and first.first_fault == 4 and first.mismatch_fraction == pytest.approx(12 / 30)
    assert list(table.release.unique())[:3] == ["0.21.0", "0.22.0", "0.33.0"]


def test_interpreter_reads_outside_every_argument_count_as_faults():
    k = "v41:_dequantize_and_gather_k_mxfp8_kernel"
    frame = pd.DataFrame(
        [case("0.33.0", k, "released", "poison", 1), case("0.33.0", k, "released", "poison", 2, mism=3, oob=100)]
    )
    assert Verdict.of(rel.verdicts(frame).iloc[0]) == Verdict(F, first_wrong=2, first_fault=2)


def test_a_verdict_is_written_from_its_class_and_numbers_and_the_table_stores_no_sentence(tmp_path):
    """The one test of the words: the sentence and the cell of each kind of verdict; the CSV holds the class and
    integer counts, and reads back to the same values."""
    assert [Verdict(F, 2, 4).text(), Verdict(F, 2, 4).cell()] == ["faults from 4 requests", "faults ≥4"]
    assert [Verdict(W, 2).text(), Verdict(W, 2).cell(), str(Verdict(W, 2))] == ["wrong from 2 requests", "wrong ≥2"] + [
        "wrong from 2 requests"
    ]
    assert [Verdict(C).text(), Verdict(C).cell()] == ["correct", "ok"]
    assert [Verdict(VerdictClass.NOT_PRESENT).cell(), Verdict(VerdictClass.NOT_APPLICABLE).cell()] == ["", "n/a"]
    assert Verdict(VerdictClass.NOT_RUN).cell() == Verdict(VerdictClass.NOT_RUN).text() == "not run"
    table = rel.complete_matrix(rel.verdicts(sample()))
    path = tmp_path / "04-release-verdicts.csv"
    table.to_csv(path, index=False)
    back = pd.read_csv(path, keep_default_na=False, na_values=[""]).fillna({"kernel": "", "variant": ""})
    assert set(back["verdict"]) <= set(VerdictClass) and "faults,2,4," in path.read_text()
    assert by_arm(back) == by_arm(table)


def test_patch_effect_and_completion():
    v = rel.complete_matrix(rel.verdicts(sample()))
    effect = rel.patch_effect(v).set_index(["release", "kernel"])
    k = "v4:_dequantize_and_gather_k_kernel"
    assert effect.loc[("0.22.0", k), "patch"] == PatchOutcome.FIXED
    assert effect.loc[("0.33.0", k), "patch"] == PatchOutcome.NOT_FIXED
    assert effect.loc[("0.33.0", k), "patched"] == Verdict(W, first_wrong=2)
    assert effect.loc[("0.33.0", "cutedsl:v4:v4"), "patch"] == PatchOutcome.NO_VERDICT
    filled = v[(v.release == "0.22.0") & (v.kernel == "cutedsl:v4:v4")]
    assert set(filled.verdict) == {VerdictClass.NOT_PRESENT} and len(filled) == 2
    grid = rel.matrix_table(v)
    assert grid.loc["0.22.0", k] == F and grid.loc["0.21.0", k] == VerdictClass.COULD_NOT_LOAD


def test_a_run_without_the_patched_variant_verifies_no_fix_and_flags_no_problem():
    """-p variants=[released] (the CuTe-DSL runs): the released kernels' verdicts stand, the fix is neither
    verified nor failed, and the sample's own patched rows still decide it when present."""
    only_released = sample()[lambda f: f.variant != "patched"]
    finding = rel.releases_finding(only_released)
    assert finding.outcomes == ("reproduced",) and finding.not_fixed == ()
    split = rel.split_effect(only_released)
    assert (len(split.bad), len(split.tried)) == (2, 0)  # the change ran on none of the 2 that misread
    both = rel.releases_finding(sample())
    assert both.outcomes == ("reproduced", "fix not verified")
    wrong = Verdict(W, first_wrong=2)
    assert both.not_fixed == (rel.NotFixed("v4:_dequantize_and_gather_k_kernel", "0.33.0", wrong),)
    assert (
        phrases.not_fixed(both.not_fixed[0])
        == f"v4:_dequantize_and_gather_k_kernel in vLLM 0.33.0: {wrong} with the change"
    )


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
    assert v[("0.33.0", "cutedsl:v4:v4", "released")] == C
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
    cells = {
        release: f"| v4 per-block | {release} | {released.cell()} | {patched.cell()} | {effect} |"
        for release, released, patched, effect in (
            ("0.22.0", Verdict(F, 2, 4), Verdict(C), PatchOutcome.FIXED),
            ("0.33.0", Verdict(W, 2), Verdict(W, 2), PatchOutcome.NOT_FIXED),
        )
    }
    assert all(line in section for line in cells.values()), section
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


def _verdict(release, kernel, variant, verdict: Verdict):
    return {
        "release": release,
        "kernel": kernel,
        "variant": variant,
        "verdict": verdict.klass,
        "first_wrong": verdict.first_wrong,
        "first_fault": verdict.first_fault,
        "mismatch_fraction": 0.0,
        "cases": 4,
        "reason": "",
        "shared_from": "",
    }


@pytest.mark.parametrize(
    "kernel,variant,verdict,ok",
    [
        ("triton", "released", Verdict(F, first_wrong=2, first_fault=2), True),
        ("triton", "released", Verdict(W, first_wrong=4), False),  # request 1 is the first that can misread
        ("triton", "released", Verdict(C), False),  # the bug stopped reproducing
        ("triton", "patched", Verdict(C), True),
        ("triton", "patched", Verdict(W, first_wrong=2), False),
        ("cute", "released", Verdict(C), True),  # no row pitch: nothing for the PR to fix
        ("cute", "released", Verdict(W, first_wrong=2), False),
        ("cute", "patched", Verdict(VerdictClass.NOT_APPLICABLE), True),
    ],
)
def test_check_rows_expect_a_misread_only_from_kernels_launched_with_a_row_pitch(kernel, variant, verdict, ok):
    inventory = pd.DataFrame(
        [
            {"release": "0.33.0", "kernel": "triton", "pitch_parameter": "max_blocks_per_seq: tl.constexpr"},
            {"release": "0.33.0", "kernel": "cutedsl:Kernel", "pitch_parameter": ""},
        ]
    )
    v = pd.DataFrame([_verdict("0.33.0", kernel, variant, verdict)])
    (check,) = rel.check_rows(v, rel.pitched_kernels(inventory), [1, 2, 4])
    assert check["ok"] is ok


@pytest.mark.parametrize(
    "released,patched,effect",
    [
        (Verdict(F, 2, 2), Verdict(C), PatchOutcome.FIXED),
        (Verdict(W, 2), Verdict(W, 2), PatchOutcome.NOT_FIXED),
        (Verdict(W, 2), Verdict(VerdictClass.NOT_RUN), PatchOutcome.NOT_TESTED),
        (Verdict(C), Verdict(C), PatchOutcome.NOT_NEEDED),
        (Verdict(C), Verdict(VerdictClass.NOT_APPLICABLE), PatchOutcome.NOT_REACHED),
        (Verdict(C), Verdict(W, 2), PatchOutcome.BREAKS),
        (Verdict(VerdictClass.COULD_NOT_LOAD), Verdict(C), PatchOutcome.NO_VERDICT),
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
    assert Verdict.of(verdict) == Verdict(VerdictClass.COULD_NOT_RUN)
    assert verdict.reason == f"{status}: {status} here"
    (check,) = rel.check_rows(rel.verdicts(frame), {("0.22.0", k)}, [1, 2])
    assert not check["ok"]


def test_every_arm_level_status_the_matrix_writes_is_a_verdict_class():
    """A release the wheel cache cannot provide is one row whose status is the cache's miss: that status must be a
    verdict class, or the verdict of the release would not parse."""
    from repro_studies.registry import VERDICT_ARM_LEVEL
    from repro_studies.upstream import wheelcache

    misses = {wheelcache.MissStatus.UNKNOWN, wheelcache.MissStatus.DOWNLOAD, wheelcache.MissStatus.BAD_WHEEL}
    assert misses <= set(VERDICT_ARM_LEVEL) and set(rel.ARM_STATUSES) == set(VERDICT_ARM_LEVEL)

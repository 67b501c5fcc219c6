"""The who-is-affected analysis on hand-made frames: runner answers, default paths, verdict words, ranges of
releases with one outcome, families merged, the rows behind each cell, and where a deployer meets each bug class
(platform, cutlass state, tensor-parallel size)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from repro_studies.analysis import affected as rules
from repro_studies.analysis.release_verdict import Verdict
from repro_studies.kernel_id import KernelId, KernelKind
from repro_studies.registry import Bug2Answer, DispatchStatus, KernelBugClass, TableStage, TableStatus, VerdictClass

ROOT = Path(__file__).resolve().parents[1]
#: What the hand-made dispatch rows' ``gather_kernel`` cells (``triton:k``, ``CuTe-DSL entry``) name.
TRITON_K = KernelId(KernelKind.TRITON, None, "k")
CUTE_ENTRY = KernelId(KernelKind.CUTEDSL, None, "entry")


def table(release, runner, config, stage=TableStage.CALL, narrowed=False, status=TableStatus.RAN, how="", group="C4A"):
    return {
        "release": release,
        "runner": runner,
        "config": config,
        "group": group,
        "stage": stage,
        "site": "flashmla.py:Attention._forward_prefill line 9",
        "shape": "(3, 32)",
        "stride0": 64 if narrowed else 32,
        "narrowed": narrowed,
        "status": status,
        "how": how,
    }


def test_a_release_reaches_the_bug_when_one_call_site_table_is_narrowed():
    rows = [
        table("1.0.0", "V1", "default"),
        table("1.0.0", "V1", "kernel blocks", narrowed=True),
        table("1.0.0", "V2", "default"),
        table("1.0.0", "V2", "micro-batches", stage=TableStage.RUNNER, narrowed=True),  # not a call site
        table("1.1.0", "V1", "default"),
        table("1.1.0", "V1", "micro-batches", status=TableStatus.NOT_RUN, how="NotRun: no ubatch_utils"),
    ]
    answers = rules.runner_answers(pd.DataFrame(rows)).set_index(["release", "runner"])
    assert answers.loc[("1.0.0", "V1"), "answer"] == Bug2Answer.REACHED
    assert answers.loc[("1.0.0", "V1"), "reached_by"].startswith("kernel blocks: C4A at flashmla.py")
    assert answers.loc[("1.0.0", "V1"), "narrowed_tables"] == 1
    assert answers.loc[("1.0.0", "V2"), "answer"] == Bug2Answer.LATENT
    assert answers.loc[("1.1.0", "V1"), "answer"] == Bug2Answer.UNDECIDED
    assert "no ubatch_utils" in answers.loc[("1.1.0", "V1"), "reason"]
    assert answers.loc[("1.1.0", "V1"), "configs_run"] == 1


def test_a_runner_the_release_does_not_ship_answers_nothing():
    rows = [
        table(
            "2.0.0", "V1", "—", stage="", status=TableStatus.NOT_SHIPPED, how="vLLM 2.0.0 ships no gpu_model_runner.py"
        ),
        table("2.0.0", "V2", "default"),
    ]
    answers = rules.runner_answers(pd.DataFrame(rows))
    assert answers[["release", "runner", "answer"]].values.tolist() == [["2.0.0", "V2", Bug2Answer.LATENT]]
    assert rules.stock_answer(answers, "2.0.0") == Bug2Answer.LATENT


def test_the_stock_answer_needs_both_runners_latent_and_one_reached_wins():
    answers = pd.DataFrame(
        [
            {"release": "1.0.0", "runner": "V1", "answer": Bug2Answer.LATENT},
            {"release": "1.0.0", "runner": "V2", "answer": Bug2Answer.UNDECIDED},
            {"release": "1.1.0", "runner": "V1", "answer": Bug2Answer.LATENT},
            {"release": "1.1.0", "runner": "V2", "answer": Bug2Answer.REACHED},
            {"release": "1.2.0", "runner": "V1", "answer": Bug2Answer.LATENT},
            {"release": "1.2.0", "runner": "V2", "answer": Bug2Answer.LATENT},
        ]
    )
    assert [rules.stock_answer(answers, r) for r in ("1.0.0", "1.1.0", "1.2.0", "9.9.9")] == [
        Bug2Answer.UNDECIDED,
        Bug2Answer.REACHED,
        Bug2Answer.LATENT,
        Bug2Answer.UNDECIDED,
    ]


#: A released kernel that faults from 2 requests, and the who-is-affected cells they give.
FAULTS_AT_2 = Verdict(VerdictClass.FAULTS, first_wrong=2, first_fault=2)
PRESENT_FAULTS = rules.KernelBug(KernelBugClass.PRESENT, Verdict(VerdictClass.FAULTS, first_fault=2))
ABSENT_CORRECT = rules.KernelBug(KernelBugClass.ABSENT, Verdict(VerdictClass.CORRECT))


def verdict(release, kernel, value: Verdict | VerdictClass, variant="released"):
    v = value if isinstance(value, Verdict) else Verdict(value)
    return {
        "release": release,
        "kernel": kernel,
        "variant": variant,
        "verdict": v.klass,
        "first_wrong": v.first_wrong,
        "first_fault": v.first_fault,
    }


def test_the_bug_column_is_the_released_kernels_verdict():
    v = pd.DataFrame(
        [
            verdict("1.0.0", "v4:k", FAULTS_AT_2),
            verdict("1.0.0", "v4:k", VerdictClass.CORRECT, variant="patched"),
            verdict("1.0.0", "cutedsl:v4:v4", VerdictClass.CORRECT),
            verdict("1.0.0", "v41:m", VerdictClass.NOT_RUN),
        ]
    )
    assert rules.kernel_bug(v, "1.0.0", "v4:k") == (PRESENT_FAULTS, 0)
    assert rules.kernel_bug(v, "1.0.0", "cutedsl:v4:v4") == (ABSENT_CORRECT, 2)
    not_run = rules.KernelBug(KernelBugClass.NOT_MEASURED, Verdict(VerdictClass.NOT_RUN))
    assert rules.kernel_bug(v, "1.0.0", "v41:m") == (not_run, 3)
    assert rules.kernel_bug(v, "1.1.0", "v4:k") == (rules.KernelBug(KernelBugClass.NOT_MEASURED), None)


def test_a_bug_cell_is_written_from_its_class_and_verdict():
    assert [str(PRESENT_FAULTS), str(ABSENT_CORRECT)] == ["present (faults from 2 requests)", "absent (correct)"]
    assert [str(rules.KernelBug(KernelBugClass.NOT_MEASURED)), str(rules.NO_KERNEL)] == ["not measured", "—"]


def dispatch(release, family, model, record, kernel, matrix, stored="compressed + SWA", status=DispatchStatus.RAN):
    return {
        "release": release,
        "gpu_family": family,
        "model": model,
        "record": record,
        "backend": "Attention",
        "gather_kernel": kernel,
        "default_record_for": stored,
        "status": status,
        "matrix_kernel": matrix,
        "how": "",
    }


@pytest.fixture
def frames():
    rows = []
    for release in ("1.0.0", "1.1.0", "1.2.0"):
        cute = release != "1.0.0"  # 1.0.0 has no CuTe-DSL gather
        for family in ("sm90", "sm100", "rocm"):
            uses_cute = cute and family != "rocm"
            kernel, matrix = ("CuTe-DSL entry", "cutedsl:v4:v4") if uses_cute else ("triton:k", "v4:k")
            rows.append(dispatch(release, family, "V4", 584, kernel, matrix))
            rows.append(dispatch(release, family, "V4", 288, "", "", stored="", status=DispatchStatus.NO_KERNEL))
            rows.append(dispatch(release, family, "V4.1", 584, "", "", stored="", status=DispatchStatus.NOT_SHIPPED))
    rows.append(dispatch("1.2.0", "sm100", "V4.1", 288, "", "", stored="compressed", status=DispatchStatus.RAISED))
    d = pd.DataFrame(rows)
    answers = pd.DataFrame(
        [
            {"release": r, "runner": n, "answer": Bug2Answer.LATENT}
            for r in ("1.0.0", "1.1.0", "1.2.0")
            for n in ("V1", "V2")
        ]
    )
    v = pd.DataFrame(
        [verdict(r, "v4:k", FAULTS_AT_2) for r in ("1.0.0", "1.1.0", "1.2.0")]
        + [verdict(r, "cutedsl:v4:v4", VerdictClass.CORRECT) for r in ("1.1.0", "1.2.0")]
    )
    return d, answers, v


def test_who_is_affected_merges_releases_and_families_with_one_outcome(frames):
    d, answers, v = frames
    table = rules.who_is_affected(d, answers, v)
    cells = table[["releases", "gpu_family", "model", "record", "kernel", "bug", "stock_vllm"]].values.tolist()
    assert cells == [
        ["1.0.0", "sm90+sm100", "V4", 584, TRITON_K, PRESENT_FAULTS, Bug2Answer.LATENT],
        ["1.0.0 – 1.2.0", "rocm", "V4", 584, TRITON_K, PRESENT_FAULTS, Bug2Answer.LATENT],
        ["1.1.0 – 1.2.0", "sm90+sm100", "V4", 584, CUTE_ENTRY, ABSENT_CORRECT, Bug2Answer.LATENT],
        ["1.2.0", "sm100", "V4.1", 288, rules.NoGather.RAISED, rules.NO_KERNEL, Bug2Answer.LATENT],
    ]


def test_each_cell_keeps_the_rows_behind_it(frames):
    d, answers, v = frames
    table = rules.who_is_affected(d, answers, v)
    rocm = table[table.gpu_family == "rocm"].iloc[0]
    assert [d.loc[i, "release"] for i in rocm["dispatch_rows"]] == ["1.0.0", "1.1.0", "1.2.0"]
    assert set(d.loc[rocm["dispatch_rows"], "gpu_family"]) == {"rocm"}
    assert [(v.loc[i, "release"], v.loc[i, "kernel"]) for i in rocm["matrix_rows"]] == [
        ("1.0.0", "v4:k"),
        ("1.1.0", "v4:k"),
        ("1.2.0", "v4:k"),
    ]
    assert sorted(answers.loc[rocm["runner_rows"], "release"].unique()) == ["1.0.0", "1.1.0", "1.2.0"]


def test_without_verdicts_the_bug_is_not_measured(frames):
    d, answers, _ = frames
    table = rules.who_is_affected(d, answers, None)
    ran = table[table.kernel.map(lambda k: isinstance(k, KernelId))]
    assert len(ran) == 3
    assert set(ran.bug) == {rules.KernelBug(KernelBugClass.NOT_MEASURED)}


def cutlass_frames():
    """One model on SM90 in three cutlass states and ROCm over three releases: the Triton gather runs everywhere in
    1.0.0; from 1.1.0 SM90 runs it only without cutlass (CuTe-DSL with it), and from 1.2.0 also when cutlass fails
    to import; SM100 with cutlass runs it at TP 1-8 only (TP 16 takes CuTe-DSL)."""
    rows = []
    for release in ("1.0.0", "1.1.0", "1.2.0"):
        for family in ("sm90", "sm90-no-cutlass", "sm90-cutlass-fails", "rocm"):
            triton = (
                release == "1.0.0"
                or family in ("sm90-no-cutlass", "rocm")
                or (family == "sm90-cutlass-fails" and release == "1.2.0")
            )
            kernel, matrix = ("triton:k", "v4:k") if triton else ("CuTe-DSL entry", "cutedsl:v4:v4")
            rows.append(dispatch(release, family, "V4", 584, kernel, matrix))
        for tp, triton in (("TP 1, 2, 4, 8", True), ("TP 16", False)):
            kernel, matrix = ("triton:k", "v4:k") if triton else ("CuTe-DSL entry", "cutedsl:v4:v4")
            rows.append({**dispatch(release, "sm100", "V4", 584, kernel, matrix), "topology": tp})
    d = pd.DataFrame(rows)
    d["topology"] = d["topology"].fillna("any TP (not read)")
    answers = pd.DataFrame(
        [{"release": r, "runner": "V1", "answer": Bug2Answer.LATENT} for r in ("1.0.0", "1.1.0", "1.2.0")]
    )
    v = pd.DataFrame(
        [verdict(r, "v4:k", FAULTS_AT_2) for r in ("1.0.0", "1.1.0", "1.2.0")]
        + [verdict(r, "cutedsl:v4:v4", VerdictClass.CORRECT) for r in ("1.0.0", "1.1.0", "1.2.0")]
    )
    return d, rules.who_is_affected(d, answers, v)


def test_exposure_names_each_platform_with_the_releases_that_run_the_bug_whatever_the_setting():
    from repro_studies.registry import Cutlass

    d, frame = cutlass_frames()
    found = {e.platforms: e for e in rules.exposure(frame, d)}
    assert set(found) == {("SM90",), ("ROCm",), ("SM100",)}
    sm90 = found[("SM90",)]
    assert sm90.always == ("1.0.0",)  # every cutlass state runs it
    assert [(s.cutlass, s.topologies, s.releases) for s in sm90.settings] == [
        ((Cutlass.ABSENT,), (), ("1.1.0", "1.2.0")),
        ((Cutlass.IMPORT_FAILS,), (), ("1.2.0",)),
    ]
    assert found[("ROCm",)].always == ("1.0.0", "1.1.0", "1.2.0") and found[("ROCm",)].settings == ()
    sm100 = found[("SM100",)]  # one family: no cutlass state to name; TP 16 takes the other kernel
    assert sm100.always == () and [(s.cutlass, s.topologies) for s in sm100.settings] == [((), ("TP 1, 2, 4, 8",))]
    assert sm100.releases == ("1.0.0", "1.1.0", "1.2.0")
    # the CuTe-DSL gather is absent everywhere it runs; nothing is unmeasured
    absent = rules.exposure(frame, d, rules.ABSENT)
    assert {e.platforms for e in absent} == {("SM90",), ("SM100",)}
    assert rules.exposure(frame, d, rules.NO_VERDICT) == []


def test_platforms_with_the_same_answer_share_one_exposure_and_states_with_the_same_releases_merge(frames):
    from repro_studies.registry import Cutlass

    d, answers, v = frames
    found = rules.exposure(rules.who_is_affected(d, answers, v), d)
    assert [(e.model, e.platforms, e.always) for e in found] == [
        ("V4", ("SM90", "SM100"), ("1.0.0",)),
        ("V4", ("ROCm",), ("1.0.0", "1.1.0", "1.2.0")),
    ]
    d2, frame = cutlass_frames()
    d2 = d2[d2.release != "1.1.0"]  # no-cutlass and failing cutlass now run it in the same releases
    frame = rules.who_is_affected(d2, pd.DataFrame(columns=["release", "runner", "answer"]), None)
    frame["bug"] = frame["bug"].where(frame["kernel"].map(lambda k: k != TRITON_K), PRESENT_FAULTS)
    (sm90,) = [e for e in rules.exposure(frame, d2) if e.platforms == ("SM90",)]
    assert [(s.cutlass, s.releases) for s in sm90.settings] == [((Cutlass.ABSENT, Cutlass.IMPORT_FAILS), ("1.2.0",))]


def test_stock_answers_list_the_releases_of_each_answer():
    answers = pd.DataFrame(
        [
            {"release": "1.0.0", "runner": "V1", "answer": Bug2Answer.LATENT},
            {"release": "1.0.0", "runner": "V2", "answer": Bug2Answer.LATENT},
            {"release": "1.1.0", "runner": "V1", "answer": Bug2Answer.REACHED},
            {"release": "1.1.0", "runner": "V2", "answer": Bug2Answer.LATENT},
        ]
    )
    got = rules.stock_answers(answers, ["1.0.0", "1.1.0", "1.2.0"])
    assert got == {Bug2Answer.LATENT: ["1.0.0"], Bug2Answer.REACHED: ["1.1.0"], Bug2Answer.UNDECIDED: ["1.2.0"]}


def test_a_release_span_merges_three_or_more_neighbours_in_the_order_read():
    order = ["0.20.0", "0.20.1", "0.21.0", "0.22.0", "0.23.0"]
    assert rules.release_span(["0.20.0", "0.20.1", "0.21.0", "0.23.0"], order) == "0.20.0 – 0.21.0, 0.23.0"
    assert rules.release_span(["0.21.0", "0.22.0"], order) == "0.21.0, 0.22.0"


def test_the_compact_table_merges_rows_with_one_outcome(frames):
    d, answers, v = frames
    table = rules.who_is_affected(d, answers, v)
    compact = rules.compact(table, ["1.0.0", "1.1.0", "1.2.0"])
    cells = compact[["bug", "kernels", "models", "where"]].values.tolist()
    assert cells == [
        [
            KernelBugClass.PRESENT,
            [TRITON_K],
            ["V4"],
            [("V4", ["sm90", "sm100"], "1.0.0"), ("V4", ["rocm"], "1.0.0 – 1.2.0")],
        ],
        [KernelBugClass.ABSENT, [CUTE_ENTRY], ["V4"], [("V4", ["sm90", "sm100"], "1.1.0, 1.2.0")]],
        [KernelBugClass.NO_KERNEL, [rules.NoGather.RAISED], ["V4.1"], [("V4.1", ["sm100"], "1.2.0")]],
    ]
    assert sorted(i for cell in compact["rows"] for i in cell) == list(range(len(table)))


def test_the_compact_table_coarsens_its_outcome_key_until_it_fits(frames):
    d, answers, v = frames
    table = rules.who_is_affected(d, answers, v)
    other_kernel = KernelId(KernelKind.TRITON, None, "other")
    triton = table[table.kernel.map(lambda k: k == TRITON_K)]
    other = triton.assign(kernel=[other_kernel] * len(triton), model="V4.1")
    table = pd.concat([table, other], ignore_index=True)
    assert len(rules.compact(table)) == 4  # (model, kernel) fits ten rows
    by_kind = rules.compact(table, limit=3)  # kernels of one kind merge, the models named in one cell
    assert by_kind[["bug", "kernels", "models"]].values.tolist()[0] == [
        KernelBugClass.PRESENT,
        [TRITON_K, other_kernel],
        ["V4", "V4.1"],
    ]
    assert len(by_kind) == 3
    # Outcomes a deployer acts on never merge: three bug classes stay three rows under any limit.
    assert set(rules.compact(table, limit=1)["bug"]) == {
        KernelBugClass.PRESENT,
        KernelBugClass.ABSENT,
        KernelBugClass.NO_KERNEL,
    }


def test_platforms_a_release_cannot_serve_the_model_on_are_ranges_with_the_releases_reason():
    rows = [
        dispatch(r, "xpu", "V4", rec, "", "", stored="", status=DispatchStatus.NOT_SERVED) | {"refused_by": why}
        for r, why in (("1.0.0", "op: RuntimeError: no"), ("1.1.0", "op: RuntimeError: no"), ("1.2.0", "no branch"))
        for rec in (584, 288)
    ]
    rows.append(dispatch("1.3.0", "xpu", "V4", 584, "triton:k", "v4:k"))
    table = rules.not_served(pd.DataFrame(rows))
    assert table[["releases", "gpu_family", "refused_by"]].values.tolist() == [
        ["1.0.0 – 1.1.0", "xpu", "op: RuntimeError: no"],
        ["1.2.0", "xpu", "no branch"],
    ]
    assert table["dispatch_rows"].tolist() == [[0, 2], [4]]
    assert rules.who_is_affected(pd.DataFrame(rows), None, None)["releases"].tolist() == ["1.3.0"]


def warm(release, family, model, kind, registered):
    return {"release": release, "gpu_family": family, "model": model, "kind": kind, "registered": registered}


def test_the_warm_ups_say_where_the_triton_gather_is_warmed_up():
    rows = [warm(r, f, "V4", "", "no") for r in ("1.0.0", "1.1.0") for f in ("sm90", "rocm", "nocut")]
    for r in ("1.2.0", "1.3.0", "1.4.0"):
        rows += [warm(r, "sm90", "V4", "CuTe-DSL", "yes"), warm(r, "sm90", "V4", "Triton", "no")]
        rows += [warm(r, "rocm", "V4", "Triton", "no"), warm(r, "nocut", "V4", "Triton", "yes")]
        rows += [warm(r, "sm90", "V4.1", "", "no")]
    w = rules.warmups(pd.DataFrame(rows), {"nocut": "CUDA without cutlass"})
    assert w == rules.Warmups(
        "1.0.0-1.4.0",
        (
            rules.ModelWarmups("V4", (("CUDA without cutlass", "1.2.0-1.4.0"),), ("sm90", "rocm")),
            rules.ModelWarmups("V4.1", read="1.2.0-1.4.0"),
        ),
    )
    assert rules.warmups(pd.DataFrame()) is None


def test_the_warmups_phrase_renders_the_families_and_releases_it_is_given():
    from repro_studies.report import phrases

    w = rules.Warmups(
        "1.0-1.9", (rules.ModelWarmups("V4", (("a", "1.2"), ("b", "1.3")), ("c",)), rules.ModelWarmups("X", read="1.5"))
    )
    text = phrases.warmups(w)
    for figure in ("(1.0-1.9)", "V4's", " a in 1.2;", " b in 1.3", "(never on c)", "X's", "(1.5)"):
        assert figure in text, figure
    assert phrases.warmups(None) == ""


def test_the_root_cause_says_what_the_log_is_consistent_with_not_proof():
    from repro_studies.report import phrases

    story = {
        "vLLM 9.9.9": {
            "forms": {},
            "mode": "predicted",
            "warm_up": {"kind": "full-width launch"},
            "kernel_name": "k",
            "names_the_logged_kernel": True,
        }
    }
    facts = {"releases": story, "logged_kernel": "k"}
    w = rules.Warmups("9.9.9", (rules.ModelWarmups("V4", read="9.9.9"),))
    text = phrases.root_cause(facts, 64, w)
    assert "consistent with" in text and "not proof" in text
    assert phrases.warmups(w) + " A gather" in text
    assert phrases.warmups(w) not in phrases.root_cause(facts, 64)


def test_the_sweep_table_holds_each_runner_configurations_numbers():
    import types

    from repro_studies.upstream import blocktables as bt
    from repro_studies.walkthrough import affected as w

    ctx = types.SimpleNamespace(sweep=(bt.Config("a"), bt.Config("b", kernel_block_size=64, num_spec_tokens=2, dcp=2)))
    rows = w.sweep(ctx).to_dict("records")
    assert [r["configuration"] for r in rows] == ["a", "b"]
    assert (rows[0]["block"], rows[0]["kernel block"], rows[1]["kernel block"]) == (256, 256, 64)
    assert (rows[1]["speculative tokens"], rows[1]["DCP"], rows[1]["micro-batches"]) == (2, 2, 1)

"""Fingerprint tables from hand-made rows: pandas only, no kernels."""

import pandas as pd

from repro_studies.analysis import jit as A


def rows(observed: bool) -> pd.DataFrame:
    data = []
    for variant, compiles in (("width", [1, 1, 0, 1]), ("stride", [1, 0, 0, 0])):
        widths = [4, 7, 4, 9]
        seen = []
        for i, (w, c) in enumerate(zip(widths, compiles)):
            seen.append(w)
            data.append(
                {
                    "variant": variant,
                    "table": "view",
                    "call": i,
                    "phase": "warm-up" if i == 0 else "inference",
                    "width": w,
                    "first_call_of_width": w not in seen[:-1],
                    "distinct_widths": len(set(seen)),
                    "predicted_compiles": c,
                    "observed_compiles": c if observed else None,
                    "compile_us": 1000 * c if observed else None,
                    "call_us": (5000.0 if c else 10.0) if observed else None,
                }
            )
    return pd.DataFrame(data)


def test_summary_counts_and_latencies():
    s = A.compile_summary(rows(True)).set_index("variant")
    assert s.loc["width", "predicted_compiles"] == 3 and s.loc["stride", "observed_compiles"] == 1
    assert s.loc["width", "distinct_widths"] == 3 and s.loc["width", "compile_ms"] == 3.0
    assert s.loc["width", "first_call_us_median"] == 5000.0 and s.loc["width", "cached_call_us_median"] == 10.0


def test_summary_without_observations_has_no_times():
    s = A.compile_summary(rows(False)).set_index("variant")
    assert s.loc["width", "predicted_compiles"] == 3
    assert pd.isna(s.loc["width", "observed_compiles"]) and pd.isna(s.loc["width", "compile_ms"])


def test_cumulative_by_width_one_point_per_width_count():
    c = A.cumulative_by_width(rows(True))
    w = c[c.variant == "width"]
    assert w["distinct_widths"].tolist() == [1, 2, 3] and w["compilations"].tolist() == [1, 2, 3]
    assert w["compile_ms"].tolist() == [1.0, 2.0, 3.0]
    s = c[c.variant == "stride"]
    assert s["compilations"].tolist() == [1, 1, 1]


def test_inference_compiles_skip_the_warm_up():
    got = A.inference_compiles(rows(False)).set_index("variant")["inference_compiles"].to_dict()
    assert got == {"width": 2, "stride": 0}


def test_plot_has_a_time_panel_only_when_times_were_measured():
    import matplotlib

    matplotlib.use("Agg")
    from repro_studies.report import timing_plots

    assert len(timing_plots.jit_fingerprint(A.cumulative_by_width(rows(True))).axes) == 2
    assert len(timing_plots.jit_fingerprint(A.cumulative_by_width(rows(False))).axes) == 1


def test_analysis_imports_neither_torch_nor_triton():
    import subprocess
    import sys

    code = (
        "import sys, repro_studies.analysis.jit, repro_studies.analysis.ceiling; "
        "print([m for m in ('torch', 'triton') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_int_classes_follow_triton():
    assert [A.int_class(v) for v in (1, 16, 0, 3, -1, 2**31, 2**31 + 1)] == [
        "1",
        "i32:D",
        "i32:D",
        "i32",
        "i32",
        "i64:D",
        "i64",
    ]


def test_expected_compiles_rules():
    w = [3, 16, 1, 3]
    assert A.expected_compiles(A.Pitch.CONSTEXPR_WIDTH, "narrowed", w, 64) == 3
    assert A.expected_compiles(A.Pitch.RUNTIME_STRIDE, "narrowed", w, 64) == 0
    assert A.expected_compiles(A.Pitch.RUNTIME_STRIDE, "contiguous", w, 64) == 2  # i32 and 1; 16 shares 64's class
    assert A.expected_compiles(A.Pitch.RUNTIME_STRIDE, "contiguous", w, 64, warm_up=False) == 3
    assert A.expected_compiles(A.Pitch.CONSTEXPR_STRIDE, "contiguous", w, 64) == 3
    assert A.expected_compiles(A.Pitch.RUNTIME_STRIDE_UNSPECIALIZED, "contiguous", w, 64) == 0


def test_bad_pitch_form_names_the_parameter():
    import pytest

    with pytest.raises(ValueError, match="pitch must be one of"):
        A.expected_compiles("width", "narrowed", [1], 4)


def test_hook_check_flags_a_difference():
    r = rows(True).assign(pitch=A.Pitch.RUNTIME_STRIDE)
    r.loc[1, "observed_compiles"] = 0  # hooks missed one
    checks = [
        c
        for c in A.fingerprint_checks(r, [4, 7, 9], 64, warm_up=False)
        if c["check"].startswith("Triton's compile hooks")
    ]
    assert {c["variant"]: c["ok"] for c in checks} == {"width": False, "stride": True}

"""Tables over JIT-fingerprint rows (``repro.evidence.jit.fingerprint``): pandas only.

A row is one launcher call: ``variant``, ``table``, ``phase``, ``width``, ``first_call_of_width``,
``distinct_widths``, ``predicted_compiles``, and on a GPU ``observed_compiles``, ``compile_us``
(Triton's own ``CompileTimes``) and ``call_us`` (the call's latency, compile included).
"""

from __future__ import annotations

import pandas as pd

GROUP = ["variant", "table"]


def _num(frame: pd.DataFrame, col: str) -> pd.Series:
    if col not in frame:
        return pd.Series(float("nan"), index=frame.index)
    return pd.to_numeric(frame[col], errors="coerce")


def _compiles(frame: pd.DataFrame) -> pd.Series:
    """Observed compilations where observed, else predicted."""
    observed = _num(frame, "observed_compiles")
    return observed.where(observed.notna(), _num(frame, "predicted_compiles"))


def compile_summary(rows: pd.DataFrame, phase: str | None = None) -> pd.DataFrame:
    """Per variant and table kind: calls, distinct widths, compilations (predicted / observed), total
    compile time, and the median latency of calls that compiled against calls that did not."""
    frame = rows if phase is None else rows[rows["phase"] == phase]
    out = []
    for (variant, table), g in frame.groupby(GROUP, sort=False):
        compiled = _compiles(g) > 0
        call = _num(g, "call_us")
        observed = _num(g, "observed_compiles")
        out.append(
            {
                "variant": variant,
                "table": table,
                "calls": len(g),
                "distinct_widths": int(g["width"].nunique()),
                "predicted_compiles": int(_num(g, "predicted_compiles").sum()),
                "observed_compiles": int(observed.sum()) if observed.notna().any() else None,
                "compile_ms": round(float(_num(g, "compile_us").sum()) / 1e3, 2)
                if _num(g, "compile_us").notna().any()
                else None,
                "first_call_us_median": float(call[compiled].median()) if call[compiled].notna().any() else None,
                "cached_call_us_median": float(call[~compiled].median()) if call[~compiled].notna().any() else None,
            }
        )
    return pd.DataFrame(out)


def cumulative_by_width(rows: pd.DataFrame, phase: str | None = None) -> pd.DataFrame:
    """Per variant and table kind, after each new width: compilations so far and compile time so far
    (the fingerprint's plot data). Calls repeating a width add to the totals of the width before."""
    frame = rows if phase is None else rows[rows["phase"] == phase]
    out = []
    for (variant, table), g in frame.groupby(GROUP, sort=False):
        g = g.sort_values("call")
        compiles = _compiles(g).cumsum()
        predicted = _num(g, "predicted_compiles").cumsum()
        ms = _num(g, "compile_us").fillna(0).cumsum() / 1e3
        has_time = _num(g, "compile_us").notna().any()
        counts = (~g["width"].duplicated()).cumsum().astype(int).tolist()  # widths of this phase only
        for i in range(len(g)):
            if i == len(g) - 1 or counts[i + 1] != counts[i]:  # the last call before the next new width
                out.append(
                    {
                        "variant": variant,
                        "table": table,
                        "distinct_widths": counts[i],
                        "compilations": int(compiles.iloc[i]),
                        "predicted_compilations": int(predicted.iloc[i]),
                        "compile_ms": round(float(ms.iloc[i]), 2) if has_time else None,
                        "mode": "observed" if _num(g, "observed_compiles").notna().any() else "predicted",
                    }
                )
    return pd.DataFrame(out)


def inference_compiles(rows: pd.DataFrame, warm_up_phase: str = "warm-up") -> pd.DataFrame:
    """Per variant and table kind: compilations after the warm-up, i.e. on the inference path."""
    after = rows[rows["phase"] != warm_up_phase]
    frame = after.assign(compiles=_compiles(after))
    return frame.groupby(GROUP, sort=False)["compiles"].sum().astype(int).reset_index(name="inference_compiles")


#: How a kernel's row pitch reaches it, the rows' ``pitch`` column.
CONSTEXPR_WIDTH = "constexpr width"
RUNTIME_STRIDE = "runtime stride"
RUNTIME_STRIDE_UNSPECIALIZED = "runtime stride (do_not_specialize)"
CONSTEXPR_STRIDE = "constexpr stride"
PITCH_FORMS = (CONSTEXPR_WIDTH, RUNTIME_STRIDE, RUNTIME_STRIDE_UNSPECIALIZED, CONSTEXPR_STRIDE)


def int_class(value: int) -> str:
    """Triton's specialisation class of a plain int argument: ``1``, divisible by 16, other; and its width."""
    kind = "i64" if not -(2**31) <= value < 2**31 else "i32"
    return "1" if value == 1 else f"{kind}:D" if value % 16 == 0 else kind


def expected_compiles(pitch: str, table: str, widths: list[int], backing_width: int, warm_up: bool = True) -> int:
    """Compilations after the warm-up if only the row pitch varies, by Triton's specialisation rules:
    a constexpr's value is in the key, a plain int only its class, a ``do_not_specialize`` int nothing.

    ``table``: ``narrowed`` (views of one ``backing_width`` table: ``stride(0) = backing_width``) or
    ``contiguous`` (``stride(0) = width``). The warm-up is one launch on the full contiguous table.
    """
    if pitch not in PITCH_FORMS:
        raise ValueError(f"pitch must be one of {PITCH_FORMS}, got {pitch!r}")
    strides = [backing_width if table == "narrowed" else w for w in widths]
    key = {
        CONSTEXPR_WIDTH: list(widths),
        CONSTEXPR_STRIDE: strides,
        RUNTIME_STRIDE: [int_class(s) for s in strides],
        RUNTIME_STRIDE_UNSPECIALIZED: [0 for _ in strides],
    }[pitch]
    warm = {
        CONSTEXPR_WIDTH: backing_width,
        CONSTEXPR_STRIDE: backing_width,
        RUNTIME_STRIDE: int_class(backing_width),
        RUNTIME_STRIDE_UNSPECIALIZED: 0,
    }[pitch]
    seen = {warm} if warm_up else set()
    return len(set(key) - seen)


def fingerprint_checks(rows: pd.DataFrame, widths: list[int], backing_width: int, warm_up: bool = True) -> list[dict]:
    """Check rows per subject and table kind: inference-path compilations equal what the pitch form
    predicts, and (where observed on a GPU) Triton's hooks saw exactly the predicted compilations."""
    out = []
    for (variant, table), g in rows.groupby(GROUP, sort=False):
        pitch = g["pitch"].iloc[0]
        infer = g[g["phase"] != "warm-up"]
        got = int(_compiles(infer).sum())
        want = expected_compiles(pitch, table, widths, backing_width, warm_up)
        out.append(
            {
                "check": "inference-path compilations follow from the row pitch's form",
                "variant": variant,
                "num_reqs": None,
                "table": table,
                "pitch": pitch,
                "expected": f"{want} ({pitch}, {len(set(widths))} widths)",
                "observed": str(got),
                "ok": got == want,
            }
        )
        observed = _num(g, "observed_compiles")
        if observed.notna().any():
            predicted = _num(g, "predicted_compiles")
            same = bool((observed == predicted).all())
            out.append(
                {
                    "check": "Triton's compile hooks saw the predicted compilations",
                    "variant": variant,
                    "num_reqs": None,
                    "table": table,
                    "pitch": pitch,
                    "expected": f"{int(predicted.sum())} (predicted per call)",
                    "observed": f"{int(observed.sum())}",
                    "ok": same,
                }
            )
    return out

"""Tables over JIT-fingerprint rows (``repro_studies.evidence.jit.fingerprint``): pandas only.

A row is one launcher call: ``variant``, ``table``, ``phase``, ``width``, ``first_call_of_width``,
``distinct_widths``, ``predicted_compiles``, and on a GPU ``observed_compiles``, ``compile_us``
(Triton's own ``CompileTimes``) and ``call_us`` (the call's latency, compile included).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import pandas as pd

from repro_studies.analysis.releases import version_key

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
                        "code": str(g["code"].iloc[0]) if "code" in g else "",
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


class Pitch(StrEnum):
    """How a kernel's row pitch reaches it, the rows' ``pitch`` column."""

    CONSTEXPR_WIDTH = "constexpr width"
    RUNTIME_STRIDE = "runtime stride"
    RUNTIME_STRIDE_UNSPECIALIZED = "runtime stride (do_not_specialize)"
    CONSTEXPR_STRIDE = "constexpr stride"


def int_class(value: int) -> str:
    """Triton's specialisation class of a plain int argument: ``1``, divisible by 16, other; and its width."""
    kind = "i64" if not -(2**31) <= value < 2**31 else "i32"
    return "1" if value == 1 else f"{kind}:D" if value % 16 == 0 else kind


def expected_compiles(pitch: Pitch, table: str, widths: list[int], backing_width: int, warm_up: bool = True) -> int:
    """Compilations after the warm-up if only the row pitch varies, by Triton's specialisation rules:
    a constexpr's value is in the key, a plain int only its class, a ``do_not_specialize`` int nothing.

    ``table``: ``narrowed`` (views of one ``backing_width`` table: ``stride(0) = backing_width``) or
    ``contiguous`` (``stride(0) = width``). The warm-up is one launch on the full contiguous table.
    """
    if pitch not in tuple(Pitch):
        raise ValueError(f"pitch must be one of {tuple(p.value for p in Pitch)}, got {pitch!r}")
    strides = [backing_width if table == "narrowed" else w for w in widths]
    key = {
        Pitch.CONSTEXPR_WIDTH: list(widths),
        Pitch.CONSTEXPR_STRIDE: strides,
        Pitch.RUNTIME_STRIDE: [int_class(s) for s in strides],
        Pitch.RUNTIME_STRIDE_UNSPECIALIZED: [0 for _ in strides],
    }[pitch]
    warm = {
        Pitch.CONSTEXPR_WIDTH: backing_width,
        Pitch.CONSTEXPR_STRIDE: backing_width,
        Pitch.RUNTIME_STRIDE: int_class(backing_width),
        Pitch.RUNTIME_STRIDE_UNSPECIALIZED: 0,
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


# --------------------------------------------------------------------------------------------
# vLLM's own kernels (each loaded release's ``code``, ``vLLM <version>``) and the PR's production log.


def loaded_releases(vllm_facts: Mapping | None) -> dict[str, str]:
    """The vLLM releases a run loaded, as its ``03-vllm`` facts record them: each one's ``code`` (the rows'
    ``code`` of its kernels) and release number, read from the wheel at run time."""
    return {str(code): str(info["release"]) for code, info in ((vllm_facts or {}).get("releases") or {}).items()}


def split_by_code(rows: pd.DataFrame, releases: Mapping[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the repository's subjects' rows, the rows of the loaded vLLM releases' kernels: their ``code`` is one of
    ``releases`` (:func:`loaded_releases`)); old runs without ``code`` are all the former."""
    if "code" not in rows:
        return rows, rows.iloc[0:0]
    mask = rows["code"].isin(list(releases))
    return rows[~mask], rows[mask]


def release_variants(rows: pd.DataFrame | None, releases: Mapping[str, str]) -> set[str]:
    """The ``variant`` of every fingerprint row of a loaded release's kernel (what the summary rows name)."""
    if rows is None or not len(rows):
        return set()
    return set(split_by_code(rows, releases)[1]["variant"])


#: The fingerprint rows' columns of the warm-up (``repro_studies.upstream.warm_up.WarmUp.columns``), by story key.
WARM_UP_COLUMNS = {
    "kind": "warm_up",
    "class": "warm_up_class",
    "max_model_len": "warm_up_max_model_len",
    "block_size": "warm_up_block_size",
    "width": "warm_up_width",
    "compress_ratios": "warm_up_compress_ratios",
}


def _warm_up(g: pd.DataFrame) -> dict | None:
    """The warm-up the rows of one subject record (None: none recorded). Rows written before the warm-up was
    recorded as numbers hold only a label in ``warm_up``: that label is kept as recorded (``recorded``)."""
    if "warm_up" not in g or not g["warm_up"].notna().any() or not str(g["warm_up"].dropna().iloc[0]):
        return None
    first = g[g["warm_up"].notna()].iloc[0]
    if "warm_up_class" not in g:
        return {"recorded": str(first["warm_up"])}
    out: dict = {}
    for key, col in WARM_UP_COLUMNS.items():
        value = first.get(col)
        if key in ("max_model_len", "block_size", "width"):
            out[key] = None if value is None or pd.isna(value) else int(value)
        else:
            out[key] = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return out


def release_story(rows: pd.DataFrame, releases: Mapping[str, str], seed_kernel: str = "") -> dict:
    """Per vLLM release in the fingerprint (``releases``: :func:`loaded_releases`), oldest first: its warm-up,
    Triton's name for the kernel (what vLLM's JIT monitor prints), inference-path compilations per pitch form and
    table kind, and, where observed, what the first launch at a new width cost against a launch that found its
    binary. ``seed_kernel``: the name in the PR's log, compared with Triton's name."""
    _, mine = split_by_code(rows, releases)
    out: dict = {}
    for code in sorted(set(mine["code"]), key=lambda code: version_key(releases[code])):
        g = mine[mine["code"] == code]
        infer = g[g["phase"] != "warm-up"].assign(compiles=_compiles(g[g["phase"] != "warm-up"]))
        forms = {}
        for pitch, by_pitch in infer.groupby("pitch", sort=False):
            entry: dict = {"variant": str(by_pitch["variant"].iloc[0])}
            for table, t in by_pitch.groupby("table", sort=False):
                entry[f"{table}_compiles"] = int(t["compiles"].sum())
                entry[f"{table}_widths"] = int(t["width"].nunique())
                if table == "narrowed":
                    call = _num(t, "call_us")
                    compiled = t["compiles"] > 0
                    if call.notna().any():
                        first = call[compiled]
                        cached = call[~compiled]
                        entry["first_call_ms"] = round(float(first.median()) / 1e3, 2) if len(first) else None
                        entry["cached_call_us"] = round(float(cached.median()), 1) if len(cached) else None
                    ms = _num(t, "compile_us")
                    entry["compile_ms"] = round(float(ms.sum()) / 1e3, 1) if ms.notna().any() else None
            forms[str(pitch)] = entry
        names = [n for n in dict.fromkeys(g.get("kernel_name", pd.Series(dtype=str)).dropna()) if n]
        warm = g[(g["phase"] == "warm-up") & (g["pitch"] == Pitch.CONSTEXPR_WIDTH)]
        warm = warm[warm["table"] == warm["table"].iloc[0]] if len(warm) else warm  # each table kind warms up anew
        out[code] = {
            "kernel_name": names[0] if names else "",
            "names_the_logged_kernel": bool(seed_kernel) and bool(names) and names[0] == seed_kernel,
            "warm_up": _warm_up(g),
            "warm_up_compiles": int(_compiles(warm).sum()),
            "mode": "observed" if _num(g, "observed_compiles").notna().any() else "predicted",
            "forms": forms,
        }
    return out

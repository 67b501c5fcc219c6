"""Every gather against the streaming ceiling, and what the remaining gap is made of: pandas only.

Input: notebook 03's median tables, one row per arm x shape x launch mode with ``median_us``,
``tokens`` and, where recorded, ``kernel`` (``stream``, ``read-only``, ``write-only`` or a gather),
``code``, ``table`` (``narrowed``, ``contiguous``, ``none``), ``requests`` (``equal``, ``one``,
``ragged``, ``none``), ``layout``, ``block_t``, ``bytes_read`` and ``bytes_written``: the gathers'
medians (``03-performance-medians``: each row records its arm, whose ``implementation`` is the gather's
``kernel``; :func:`normalise` fills what a row leaves out), the streaming arms measured at every shape
(``03-performance-ceiling``) and the gap arms measured at a few shapes in the same rounds as those
(``03-performance-decomposition``).

The streaming kernel moves the gather's bytes (584 read + 1,024 written per token) with the same
dtype work and no block table, so ``of_stream`` = streaming time / gather time is the fraction of
the right ceiling. The gap is split into steps, each the ratio of two measured arms at one shape;
the chained steps multiply to gather / best streaming arm exactly.
"""

from __future__ import annotations

import math

import pandas as pd

from repro.core.geometry.layout import GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN
from repro_studies.registry import FAST, Arm, StreamKind, arm_of

#: Kernels whose fastest arm at a shape is the ceiling: the streaming kernels (the gather's traffic and dtype
#: work) and the byte movers (the gather's traffic as flat runs, no dtype work).
CEILING_KERNELS = (StreamKind.STREAM, StreamKind.MOVE)
BYTES_READ_PER_TOKEN = GATHER_READ_BYTES_PER_TOKEN
BYTES_WRITTEN_PER_TOKEN = GATHER_WRITE_BYTES_PER_TOKEN
SHAPE = ["seq_len", "num_reqs", "launch"]


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Fill ``kernel``, ``table``, ``requests``, ``code`` and byte counts where a run did not record them.

    A gather's row records its arm (:data:`repro_studies.registry.ARM_FIELDS`): its ``kernel`` is the arm's
    ``implementation``; the streaming arms record their ``kernel``.
    """
    f = frame.reset_index(drop=True)
    if "kernel" not in f:
        f["kernel"] = pd.Series(None, index=f.index, dtype=object)
    if "implementation" in f:
        f["kernel"] = f["kernel"].where(f["kernel"].notna(), f["implementation"])
    if f["kernel"].isna().any():
        raise ValueError("timing rows that record neither their kernel nor their arm's implementation")
    defaults = {
        "table": pd.Series("none", index=f.index),
        "requests": pd.Series("equal", index=f.index),
        "code": pd.Series("", index=f.index),
        "layout": pd.Series("", index=f.index),
        "block_t": pd.Series(float("nan"), index=f.index),
    }
    for col, fill in defaults.items():
        f[col] = f[col].where(f[col].notna(), fill) if col in f else fill
    gather = ~f["kernel"].isin(tuple(StreamKind))
    read = f["tokens"] * BYTES_READ_PER_TOKEN * (f["kernel"] != StreamKind.WRITE)
    written = f["tokens"] * BYTES_WRITTEN_PER_TOKEN * (f["kernel"] != StreamKind.READ)
    for col, fill in (("bytes_read", read), ("bytes_written", written)):
        f[col] = pd.to_numeric(f[col], errors="coerce").where(lambda v: v.notna(), fill) if col in f else fill
    f["median_us"] = pd.to_numeric(f["median_us"], errors="coerce")
    f["is_gather"] = gather
    return f


def gather_arms(vs: pd.DataFrame) -> dict[str, Arm]:
    """Each gather arm of a :func:`ceiling_table` by its label, rebuilt from the row's ``kernel`` (the arm's
    implementation: the repository's or an outside kernel) and ``table``."""
    return {r["arm"]: arm_of(r["kernel"], r["table"]) for r in vs.drop_duplicates("arm").to_dict("records")}


def _tbps(nbytes, us) -> float:
    return float(nbytes) / (float(us) * 1e-6) / 1e12


def ceiling_table(gathers: pd.DataFrame, ceiling: pd.DataFrame, copy_tbps: float | None = None) -> pd.DataFrame:
    """One row per gather arm (of ``gathers``), shape and launch mode: its time and bandwidth,
    ``of_stream`` (the best streaming arm of ``ceiling`` at the same shape, time over the gather's:
    the fraction of the right ceiling), ``of_copy`` (bandwidth over the copy ceiling), ``vs_fast``
    (time over gather_fast's on the same table and requests), and the shape's read-only and
    write-only rates and the serial model ``bytes_read / read rate + bytes_written / write rate``."""
    g_rows = normalise(gathers)
    c_rows = normalise(ceiling)
    f = pd.concat([g_rows[g_rows["is_gather"]], c_rows[~c_rows["is_gather"]]], ignore_index=True)
    out = []
    for (L, n, mode), g in f.groupby(SHAPE, sort=True):
        streams = g[g["kernel"].isin(CEILING_KERNELS)]
        best = streams.iloc[int(streams["median_us"].to_numpy().argmin())] if len(streams) else None
        read = g[g["kernel"] == StreamKind.READ]
        write = g[g["kernel"] == StreamKind.WRITE]
        read_rate = _tbps(read["bytes_read"].iloc[0], read["median_us"].iloc[0]) if len(read) else math.nan
        write_rate = _tbps(write["bytes_written"].iloc[0], write["median_us"].iloc[0]) if len(write) else math.nan
        fast = {(r.table, r.requests): r.median_us for r in g[g["kernel"] == FAST.label].itertuples()}
        for r in g[g["is_gather"]].itertuples():
            tb = _tbps(r.bytes_read + r.bytes_written, r.median_us)
            serial = (r.bytes_read / (read_rate * 1e12) + r.bytes_written / (write_rate * 1e12)) * 1e6
            out.append(
                {
                    "seq_len": L,
                    "num_reqs": n,
                    "launch": mode,
                    "arm": r.arm,
                    "code": r.code,
                    "kernel": r.kernel,
                    "table": r.table,
                    "requests": r.requests,
                    "median_us": r.median_us,
                    "tbps": round(tb, 4),
                    "stream_us": None if best is None else float(best["median_us"]),
                    "stream_arm": None if best is None else best["arm"],
                    "stream_arms": len(streams),
                    "copy_equiv_us": round((r.bytes_read + r.bytes_written) / (copy_tbps * 1e12) * 1e6, 3)
                    if copy_tbps
                    else None,
                    "of_stream_fraction": None if best is None else round(float(best["median_us"]) / r.median_us, 4),
                    "of_copy_fraction": round(tb / copy_tbps, 4) if copy_tbps else None,
                    "vs_fast_ratio": round(r.median_us / fast[(r.table, r.requests)], 4)
                    if (r.table, r.requests) in fast
                    else None,
                    "read_only_tbps": round(read_rate, 4),
                    "write_only_tbps": round(write_rate, 4),
                    "serial_model_us": round(serial, 3),
                }
            )
    return pd.DataFrame(out)


def stream_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Per shape and launch mode, every streaming arm's time and rate (the ceiling and its spread)."""
    f = normalise(frame)
    s = f[~f["is_gather"]].copy()
    s["tbps"] = [round(_tbps(r + w, us), 4) for r, w, us in zip(s["bytes_read"], s["bytes_written"], s["median_us"])]
    cols = SHAPE + ["arm", "kernel", "layout", "block_t", "median_us", "tbps"]
    return s[[c for c in cols if c in s]].sort_values(SHAPE + ["kernel", "median_us"]).reset_index(drop=True)


def _pick(g: pd.DataFrame, **where) -> pd.Series | None:
    sel = g
    for col, value in where.items():
        sel = sel[sel[col] == value]
    if not len(sel):
        return None
    return sel.iloc[int(sel["median_us"].to_numpy().argmin())]


def gap_decomposition(
    frame: pd.DataFrame, num_reqs: int, seq_len: int, launch: str = "graph", gather: str = "fast"
) -> pd.DataFrame:
    """What separates ``gather`` (narrowed view, ``num_reqs`` equal requests) from the best streaming
    arm at one shape, as a chain of measured ratios (``in_chain``; they multiply to the total).
    ``frame``: arms timed in the same rounds (the ceiling and decomposition rows of one shape).

    1. streaming in the cache's layout (``split``) at the gather's tile, over the best streaming arm;
    2. indirection: the gather on ONE request holding all tokens (contiguous table) over 1.;
    3. requests: ``num_reqs`` equal requests over one request (contiguous tables);
    4. the narrowed view over the contiguous table.

    Plus, outside the chain: ragged request lengths (same total) over equal ones. A step whose arms
    were not measured has no ratio.
    """
    f = normalise(frame)
    g = f[(f["num_reqs"] == num_reqs) & (f["seq_len"] == seq_len) & (f["launch"] == launch)]
    if not len(g):
        raise ValueError(
            f"no rows for num_reqs={num_reqs}, seq_len={seq_len}, launch={launch!r}; "
            f"measured shapes: {sorted(set(zip(f['num_reqs'], f['seq_len'])))}"
        )
    ceil = g[g["kernel"].isin(CEILING_KERNELS)]
    best = ceil.iloc[int(ceil["median_us"].to_numpy().argmin())] if len(ceil) else None
    view = _pick(g, kernel=gather, table="narrowed", requests="equal")
    contig = _pick(g, kernel=gather, table="contiguous", requests="equal")
    one = _pick(g, kernel=gather, requests="one")
    ragged = _pick(g, kernel=gather, requests="ragged")
    tile = one["block_t"] if one is not None else (contig["block_t"] if contig is not None else None)
    like = None
    for layout in ("split", "records"):
        like = _pick(g[g["block_t"] == tile], kernel=StreamKind.STREAM, layout=layout) if tile is not None else None
        if like is not None:
            break
    steps = [
        ("streaming: cache layout at the gather's tile", like, best, True),
        ("indirection: block-table load per token (one request, contiguous table)", one, like, True),
        (f"requests: {num_reqs} equal requests instead of one", contig, one, True),
        ("narrowed view instead of a contiguous table", view, contig, True),
        ("ragged request lengths (same tokens) instead of equal", ragged, contig, False),
    ]
    total = (view["median_us"] / best["median_us"]) if (view is not None and best is not None) else math.nan
    rows = []
    for step, num, den, in_chain in steps:
        ratio = num["median_us"] / den["median_us"] if (num is not None and den is not None) else math.nan
        rows.append(
            {
                "step": step,
                "numerator": None if num is None else num["arm"],
                "denominator": None if den is None else den["arm"],
                "numerator_us": None if num is None else float(num["median_us"]),
                "denominator_us": None if den is None else float(den["median_us"]),
                "ratio": round(float(ratio), 4) if not math.isnan(ratio) else None,
                "added_us": None if math.isnan(ratio) else round(float(num["median_us"] - den["median_us"]), 3),
                "share_of_gap": round(math.log(ratio) / math.log(total), 3)
                if in_chain and not math.isnan(ratio) and not math.isnan(total) and total > 1
                else None,
                "in_chain": in_chain,
            }
        )
    rows.append(
        {
            "step": f"total: {gather} on the narrowed view over the best streaming arm",
            "numerator": None if view is None else view["arm"],
            "denominator": None if best is None else best["arm"],
            "numerator_us": None if view is None else float(view["median_us"]),
            "denominator_us": None if best is None else float(best["median_us"]),
            "ratio": None if math.isnan(total) else round(float(total), 4),
            "added_us": None if math.isnan(total) else round(float(view["median_us"] - best["median_us"]), 3),
            "share_of_gap": 1.0 if not math.isnan(total) and total > 1 else None,
            "in_chain": False,
        }
    )
    return pd.DataFrame(rows)


def largest_gap(gaps: pd.DataFrame | None) -> pd.DataFrame | None:
    """The gap decomposition's rows (``GAP``: one chain per ``num_reqs`` x ``seq_len``) at the most tokens."""
    if gaps is None or not len(gaps):
        return None
    tokens = gaps["num_reqs"] * gaps["seq_len"]
    return gaps[tokens == tokens.max()]


def ceiling_facts(ceiling: pd.DataFrame, gaps: pd.DataFrame | None = None, launch: str = "graph") -> dict:
    """The figures a report leads with, at the largest shape of a :func:`ceiling_table`: the streaming ceiling
    (its arm, time, the copy-equivalent time), the read-only and write-only rates, each gather's time and
    fractions of the streaming and copy ceilings, and the steps of the gap decomposition (``gaps``, every
    shape's; the largest shape's are kept). Numbers only: the report's ``phrases.md.j2`` words them
    (``ceiling``). Without rows of ``launch``, only ``launch``."""
    c = ceiling[ceiling["launch"] == launch]
    if not len(c):
        return {"launch": launch}
    L, n = int(c["seq_len"].max()), int(c[c["seq_len"] == c["seq_len"].max()]["num_reqs"].max())
    at = c[(c["seq_len"] == L) & (c["num_reqs"] == n) & (c["requests"] == "equal")]
    facts: dict = {"shape": [n, L], "launch": launch}
    first = at.iloc[0]
    facts["stream_us"] = float(first["stream_us"])
    facts["stream_arm"] = first["stream_arm"]
    facts["stream_arms"] = (
        int(first["stream_arms"]) if "stream_arms" in first and pd.notna(first["stream_arms"]) else None
    )
    copy_equiv = first["copy_equiv_us"] if "copy_equiv_us" in first else None
    facts["copy_equiv_us"] = None if copy_equiv is None or pd.isna(copy_equiv) else float(copy_equiv)
    facts["read_only_tbps"] = float(first["read_only_tbps"])
    facts["write_only_tbps"] = float(first["write_only_tbps"])
    facts["median_us"] = {r.arm: float(r.median_us) for r in at.itertuples()}
    facts["of_stream"] = {r.arm: _figure(r.of_stream_fraction) for r in at.itertuples()}
    facts["of_copy"] = {r.arm: _figure(r.of_copy_fraction) for r in at.itertuples()}
    decomposition = largest_gap(gaps)
    if decomposition is not None:
        facts["gap_steps"] = {r.step: _figure(r.ratio) for r in decomposition.itertuples()}
    return facts


def _figure(value) -> float | None:
    """A recorded figure as a float, or None where none was recorded (None or NaN)."""
    return None if value is None or pd.isna(value) else float(value)


def ceiling_check_row(
    arm: str, num_reqs: int, seq_len: int, mismatched: int, stray: int, total: int, unit: str
) -> dict:
    """The verdict on one ceiling or gap arm's bitwise check before timing."""
    return {
        "check": "timed arm equals the reference",
        "variant": arm,
        "num_reqs": num_reqs,
        "seq_len": seq_len,
        "expected": f"0 {unit} differ",
        "observed": f"{mismatched}/{total} {unit} differ, {stray} stray",
        "ok": mismatched == 0 and stray == 0,
    }

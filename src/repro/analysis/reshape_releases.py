"""What bug 1 on vLLM's own ``_reshape_kv_cache`` means: check rows and a verdict per release.

Each observation row (one release x cache group x kernel block size handed in) carries what the
release's function did and, beside it, what the repository's model predicts for the same spec and
pool: the buggy view (``block_size // kernel_block_size`` kernel blocks per logical block) and the fixed
one. A check passes only on the outcome it names: a raise must be PyTorch's own ``setStorage`` error
with the buggy model's figures (and, for the reported cache, every figure PR #43988 quotes); a view
must be the fixed model's view, need the fixed model's bytes, leave the last page's padding unused and
alias exactly the right bytes. Anything else (another exception, another view) fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from repro.registry import (
    KBS_NOT_A_PARAMETER,
    KBS_SELECTED,
    KBS_STORAGE,
    OUTCOME_RAISED,
    OUTCOME_VIEW,
    RESHAPE_BUGGY,
    RESHAPE_FIXED,
    RESHAPE_NO_COMPRESSED_PATH,
    RESHAPE_NO_FUNCTION,
    RESHAPE_RAN,
    RESHAPE_SELECTION_NOT_RUN,
)

#: Columns of a check row (the release checks table).
CHECK_COLUMNS = ("code", "release", "cache group", "kbs input", "check", "variant", "expected", "observed", "ok")
#: Statuses that are findings about the release, not failures to run it.
FINDINGS = (RESHAPE_RAN, RESHAPE_NO_FUNCTION, RESHAPE_NO_COMPRESSED_PATH)

_STORAGE_ERROR = re.compile(
    r"setStorage: sizes \[(?P<sizes>[\d, ]*)\], strides \[(?P<strides>[\d, ]*)\].*?"
    r"requiring a storage size of (?P<required>\d+) are out of bounds for storage of size (?P<available>\d+)",
    re.S,
)


def parse_storage_error(error_type: str, text: str) -> dict[str, Any] | None:
    """The figures of PyTorch's ``setStorage ... out of bounds`` RuntimeError; None for any other error."""
    m = _STORAGE_ERROR.search(text or "") if error_type == "RuntimeError" else None
    if m is None:
        return None

    def ints(s: str) -> list[int]:
        return [int(x) for x in s.replace(" ", "").split(",") if x]

    return {
        "sizes": ints(m["sizes"]),
        "strides": ints(m["strides"]),
        "required_bytes": int(m["required"]),
        "available_bytes": int(m["available"]),
    }


def _ints(value: Any) -> list[int] | None:
    """A list of ints from a list or its JSON text (how a CSV cell holds it); None when empty."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value == "":
        return None
    return [int(v) for v in (json.loads(value) if isinstance(value, str) else value)]


def _int(value: Any) -> int | None:
    """An int from a number or its text (a CSV cell of a column with blanks reads back as ``"560.0"``)."""
    if value is None or value == "" or (isinstance(value, float) and pd.isna(value)):
        return None
    return int(float(value)) if isinstance(value, str) else int(value)


def kernel_block_cell(value: Any) -> str:
    """A kernel block size cell as shown: ``256``, or "none" when none was handed in."""
    v = _int(value)
    return "none" if v is None else str(v)


def _check(row: Mapping, check: str, variant: str, expected: str, observed: str, ok: bool) -> dict:
    return {
        "code": row["code"],
        "release": row["release"],
        "cache group": row["cache group"],
        "kbs input": row["kbs input"],
        "check": check,
        "variant": variant,
        "expected": expected,
        "observed": observed,
        "ok": bool(ok),
    }


def _figures(sizes, strides, required, available) -> str:
    return f"sizes {sizes}, strides {strides}, {required:,} of {available:,} bytes"


def kernel_block_source_check(row: Mapping) -> dict:
    """The kernel block size handed in came from the code the row names: the release's own selection (its
    function named, a value), the group's storage rows, or nothing (not a parameter). Never the model."""
    kbs, label, by = _int(row["kernel_block_size"]), row["kbs input"], str(row.get("kbs chosen by") or "")
    own = f"vLLM {row['release']} "
    if label == KBS_SELECTED:
        expected, ok = f"a size chosen by {own}<function>", kbs is not None and by.startswith(own)
    elif label == KBS_STORAGE:
        expected, ok = f"the storage rows ({_int(row['storage_block_size'])})", kbs == _int(row["storage_block_size"])
    elif label == KBS_NOT_A_PARAMETER:
        expected, ok = "none handed in", kbs is None
    else:
        expected, ok = f"one of {KBS_SELECTED!r}, {KBS_STORAGE!r}, {KBS_NOT_A_PARAMETER!r}", False
    observed = f"{kbs if kbs is not None else 'none'}, chosen by: {by or '(nobody named)'}"
    return _check(row, "the kernel block size came from the code the row names", "", expected, observed, ok)


def observation_checks(row: Mapping) -> list[dict]:
    """The checks of one observation row (none for a release that did not run the function)."""
    status = row["status"]
    source = [kernel_block_source_check(row)] if status in (RESHAPE_RAN, RESHAPE_SELECTION_NOT_RUN) else []
    if status != RESHAPE_RAN:
        return [
            _check(
                row,
                "the release's function was reached",
                "",
                "ran, or a finding (no _reshape_kv_cache, no compressed-spec path)",
                f"{status}: {row.get('reason') or ''}".strip(": "),
                status in FINDINGS,
            )
        ] + source
    checks = source + [
        _check(
            row,
            "the release's spec class computes the catalogue's page",
            "",
            f"page {_int(row['model_page_bytes'])}, payload {_int(row['model_real_page_bytes'])}",
            f"page {_int(row['spec_page_bytes'])}, payload {_int(row['spec_real_page_bytes'])}",
            _int(row["spec_page_bytes"]) == _int(row["model_page_bytes"])
            and _int(row["spec_real_page_bytes"]) == _int(row["model_real_page_bytes"]),
        )
    ]
    available = _int(row["available_bytes"])
    if row["outcome"] == OUTCOME_RAISED:
        want = (_ints(row["model_buggy_sizes"]), _ints(row["model_buggy_strides"]), _int(row["model_buggy_required"]))
        got = parse_storage_error(row["error_type"], row["error"])
        observed = (
            _figures(got["sizes"], got["strides"], got["required_bytes"], got["available_bytes"])
            if got
            else f"{row['error_type']}: {str(row['error'])[:160]}"
        )
        ok = got is not None and (got["sizes"], got["strides"], got["required_bytes"]) == want
        ok = ok and got["available_bytes"] == available
        checks.append(
            _check(
                row,
                "raises PyTorch's setStorage error with the buggy model's figures",
                RESHAPE_BUGGY,
                "setStorage: " + _figures(*want, available),
                observed,
                ok,
            )
        )
        return checks
    if row["outcome"] != OUTCOME_VIEW:
        checks.append(_check(row, "returns a view or raises", "", "a view or an exception", str(row["outcome"]), False))
        return checks
    want_sizes, want_strides = _ints(row["model_fixed_sizes"]), _ints(row["model_fixed_strides"])
    sizes, strides = _ints(row["sizes"]), _ints(row["strides"])
    required, want_required = _int(row["required_bytes"]), _int(row["model_fixed_required"])
    tail, page_tail = _int(row["unused_tail_bytes"]), _int(row["page_tail_bytes"])
    mism, changed = _int(row["payload_mismatches"]), _int(row["padding_bytes_changed"])
    checks += [
        _check(
            row,
            "returns the fixed model's view",
            RESHAPE_FIXED,
            f"sizes {want_sizes}, strides {want_strides}",
            f"sizes {sizes}, strides {strides}",
            (sizes, strides) == (want_sizes, want_strides),
        ),
        _check(
            row,
            "the view fits: required bytes",
            RESHAPE_FIXED,
            f"{want_required:,} of {available:,}",
            f"{required:,} of {available:,}",
            required == want_required and required <= available,
        ),
        _check(
            row,
            "unused tail is the last page's padding",
            RESHAPE_FIXED,
            str(page_tail),
            str(tail),
            tail == page_tail,
        ),
        _check(
            row,
            "the view aliases exactly the right bytes (written through the view, read from the raw pool)",
            RESHAPE_FIXED,
            "0 payload mismatches, 0 padding bytes changed",
            f"{mism} mismatches, {changed} padding changed",
            mism == 0 and changed == 0,
        ),
    ]
    return checks


def pr_figure_checks(row: Mapping, seed: Mapping[str, Any]) -> list[dict]:
    """For the reported cache at the PR's pool: a raise carries every figure PR #43988 quotes, a view
    needs exactly the PR's fixed byte count."""
    rep = seed["reported"]
    if row["status"] != RESHAPE_RAN:
        return []
    if row["outcome"] == OUTCOME_VIEW:
        required = _int(row["required_bytes"])
        return [
            _check(
                row,
                "PR #43988's figure: fixed required bytes",
                RESHAPE_FIXED,
                f"{rep['fixed_required_bytes']:,}",
                f"{required:,}",
                required == rep["fixed_required_bytes"],
            )
        ]
    got = parse_storage_error(row["error_type"], row["error"]) or {}
    pairs = [
        ("sizes", got.get("sizes"), rep["sizes"]),
        ("strides", got.get("strides"), rep["strides"]),
        ("required bytes", got.get("required_bytes"), rep["required_bytes"]),
        ("available bytes", got.get("available_bytes"), rep["available_bytes"]),
    ]
    return [
        _check(row, f"PR #43988's error: {what}", RESHAPE_BUGGY, str(want), str(value), value == want)
        for what, value, want in pairs
    ]


def release_checks(frame: pd.DataFrame, seed: Mapping[str, Any], reported_group: str) -> list[dict]:
    """Every check of every observation row; the reported group's rows also against the PR's figures."""
    rows = []
    for _, r in frame.iterrows():
        rows += observation_checks(r)
        if r["cache group"] == reported_group and r["pr_geometry"] in (True, "True", "true"):
            rows += pr_figure_checks(r, seed)
    return rows


def matched_variant(row: Mapping) -> str:
    """Which model variant one observation reproduced: buggy (raised as the buggy model says), fixed (the
    fixed model's view), or "" (neither, or not run)."""
    if row["status"] != RESHAPE_RAN:
        return ""
    if row["outcome"] == OUTCOME_RAISED:
        got = parse_storage_error(row["error_type"], row["error"])
        want = [_ints(row["model_buggy_sizes"]), _ints(row["model_buggy_strides"])]
        return RESHAPE_BUGGY if got and [got["sizes"], got["strides"]] == want else ""
    same = [_ints(row["sizes"]), _ints(row["strides"])] == [
        _ints(row["model_fixed_sizes"]),
        _ints(row["model_fixed_strides"]),
    ]
    return RESHAPE_FIXED if row["outcome"] == OUTCOME_VIEW and same else ""


def release_verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per release: what its function does with the compressed groups, per kernel block size input.

    ``overruns with`` lists the inputs under which a compressed group's view raised as the buggy model
    says; ``fits with`` the inputs under which every group got the fixed model's view.
    """
    rows = []
    for (code, release), g in frame.groupby(["code", "release"], sort=False):
        statuses = set(g["status"])
        if statuses != {RESHAPE_RAN}:
            reason = "; ".join(sorted({str(x) for x in g["reason"] if str(x) not in ("", "nan", "None")}))
            rows.append({"code": code, "release": release, "verdict": " / ".join(sorted(statuses)), "reason": reason})
            continue
        variants = g.assign(matched=[matched_variant(r) for _, r in g.iterrows()])
        overruns, fits, other = [], [], []
        for kbs_input, h in variants.groupby("kbs input", sort=False):
            if (h.matched == "").any():
                other.append(kbs_input)
            elif (h.matched == RESHAPE_BUGGY).any():
                overruns.append(kbs_input)
            else:
                fits.append(kbs_input)
        groups = sorted(set(variants[variants.matched == RESHAPE_BUGGY]["cache group"]))
        stock = variants[variants["kbs input"] == KBS_SELECTED]
        if other:
            verdict = "does what neither model variant does"
        elif overruns:
            verdict = "bug 1: overruns"
        else:
            verdict = "fits"
        rows.append(
            {
                "code": code,
                "release": release,
                "verdict": verdict,
                "overruns with": ", ".join(overruns),
                "fits with": ", ".join(fits),
                "groups that overrun": ", ".join(groups),
                "stock runner's selection": stock_runner(stock),
                "count expression": next((str(x) for x in g["count expression"] if str(x) not in ("", "nan")), ""),
            }
        )
    return pd.DataFrame(rows)


def stock_runner(selected: pd.DataFrame) -> str:
    """Does the release's own runner selection hand the function a kernel block size that overruns? From its
    rows (``matched`` per row); "" when the function takes no kernel block size."""
    if not len(selected):
        return ""
    by = ", ".join(sorted({str(x) for x in selected["kbs chosen by"]}))
    if (selected.matched == RESHAPE_BUGGY).any():
        return f"overruns ({by})"
    if (selected.matched == RESHAPE_FIXED).all():
        return f"fits ({by})"
    return f"neither model variant ({by})"


def verdict_sentence(verdicts: pd.DataFrame) -> str:
    """One sentence per verdict kind, naming the releases (derived from the table, nothing typed about vLLM)."""
    if verdicts is None or not len(verdicts):
        return ""
    parts = []
    for verdict, g in verdicts.groupby("verdict", sort=False):
        names = ", ".join(g["release"].astype(str))
        if verdict == "bug 1: overruns":
            hows = set()
            for _, r in g.iterrows():
                how = f"overruns with the {r['overruns with']} kernel block size"
                stock = r.get("stock runner's selection", "")
                hows.add(how + (f"; with the release's own runner selection it {stock}" if stock else ""))
            parts.append(f"vLLM {names}: bug 1 ({'; '.join(sorted(hows))})")
        elif verdict == "fits":
            takes = g[g["stock runner's selection"].astype(bool)] if "stock runner's selection" in g else g.iloc[:0]
            none = g[~g["release"].isin(takes["release"])]
            if len(none):
                parts.append(
                    f"vLLM {', '.join(none['release'].astype(str))}: every group fits "
                    "(the function takes no kernel block size)"
                )
            if len(takes):
                parts.append(
                    f"vLLM {', '.join(takes['release'].astype(str))}: every group fits with every kernel block size "
                    "handed in, the release's own runner selection included"
                )
        else:
            parts.append(f"vLLM {names}: {verdict}")
    return "; ".join(parts) + "."

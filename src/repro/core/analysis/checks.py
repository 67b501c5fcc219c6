"""Check rows and their verdicts: the columns every check table has, and which rows failed.

A check row is ``notebook, check, variant, num_reqs, expected, observed, ok`` plus measured
columns (design contract). These functions read such tables; they never run anything.
"""

from __future__ import annotations

import pandas as pd


class ChecksFailed(AssertionError):
    """Raised at the end of a notebook when any check row is not ok; names every failing check."""


def truthy(value: object) -> bool:
    """``ok`` as written to CSV (``True``/``true``/``1``) or as a Python bool."""
    return value is True or str(value).strip().lower() in ("true", "1")


def is_check_table(frame: pd.DataFrame) -> bool:
    return {"check", "ok"} <= set(frame.columns)


def failed_checks(frame: pd.DataFrame | None, with_notebook: bool = True) -> list[str]:
    """``"notebook: check [variant, mode, n=...]: observed (expected ...)"`` for every row not ok (without the
    notebook where ``with_notebook`` is False)."""
    if frame is None or frame.empty or "ok" not in frame:
        return []
    ok = frame["ok"].map(truthy)
    failed = []
    for _, row in frame[~ok].iterrows():
        where = ", ".join(
            str(row[c]) if c != "num_reqs" else f"n={row[c]}"
            for c in ("variant", "mode", "num_reqs")
            if c in row and str(row[c]) not in ("", "nan")
        )
        line = f"{row['check']} [{where}]: observed {row['observed']} (expected {row['expected']})"
        failed.append(f"{row.get('notebook', '?')}: {line}" if with_notebook else line)
    return failed


def assert_all_ok(*frames: pd.DataFrame) -> None:
    """End-of-notebook gate: papermill then fails the notebook, naming every failed check."""
    failed = [f for fr in frames for f in failed_checks(fr)]
    if failed:
        raise ChecksFailed(f"{len(failed)} failed check(s):\n" + "\n".join(failed))


def check_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Checks grouped by notebook, check and variant: passed, total and a PASS/FAIL verdict."""
    frames = [t for t in tables.values() if is_check_table(t)]
    if not frames:
        return pd.DataFrame(columns=["notebook", "check", "variant", "passed", "total", "verdict"])
    allc = pd.concat(frames, ignore_index=True)
    allc["passed"] = allc["ok"].map(truthy)
    allc["variant"] = allc.get("variant", pd.Series("", index=allc.index)).fillna("")
    g = allc.groupby(["notebook", "check", "variant"], sort=False)["passed"].agg(["sum", "count"]).reset_index()
    g = g.rename(columns={"sum": "passed", "count": "total"})
    g["verdict"] = g.apply(lambda r: "PASS" if r.passed == r.total else "FAIL", axis=1)
    return g

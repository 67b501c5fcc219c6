"""The regression test written for vLLM's suite, run against each release as released and patched: what each
test was expected to do, whether it did, and one summary row per (release, form).

As released, a test with two or more requests must fail on its own assertion (a bitwise mismatch; in
Triton's interpreter, lanes aimed outside every tensor; on a GPU, the device fault) and a test with one
request must pass; patched, every test must pass. A skipped test (the release has no such gather) is
neither; an error, another exception or a test that did not run fails its check.
"""

from __future__ import annotations

from enum import StrEnum

import pandas as pd

from repro_studies.analysis.releases import version_key
from repro_studies.registry import SUITE_ASSERTION_FAILURES, Form, SuiteOutcome
from repro_studies.tables import Table

#: The tables notebook 04 writes for this study (``results/<name>.csv``): the patches, every test, the summary.
PATCH_TABLE, TEST_TABLE, SUMMARY_TABLE = Table.PATCHES, Table.UPSTREAM_TEST, Table.UPSTREAM_TEST_SUMMARY
CHECK = "vLLM's regression test: fails as released from two requests, passes patched"


class SuiteExpectation(StrEnum):
    """What one of vLLM's regression tests must do (a test row's ``expected``)."""

    FAILS = "fails on its assertion"
    PASSES = "passes"


class SuiteRunStatus(StrEnum):
    """What one (release, form) run came to, in the order a reader asks (the summary's ``outcome``)."""

    ERRORS = "errors"
    INCOMPLETE = "incomplete"
    NOTHING = "nothing ran"
    FAILS = "fails on its assertions"
    PASSES = "passes"


FAILED = tuple(o.value for o in SUITE_ASSERTION_FAILURES)
#: The summary's verdict column (not ``ok``: the summary is a table of runs, its check rows are separate).
AS_EXPECTED = "as expected"
#: Columns of a test row (the test file's parameters the analysis reads, then the outcome).
TEST_COLUMNS = (
    "test",
    "record",
    "entry",
    "width",
    "backing_width",
    "num_reqs",
    "outcome",
    "message",
    "out_of_view_lanes",
    "out_of_bounds_lanes",
    "seconds",
    "params",
    "processes",
    "note",
    "shared_from",
)


def expected(form: str, num_reqs: object) -> SuiteExpectation:
    """What a test must do: fail as released from two requests, pass otherwise."""
    many = num_reqs is not None and not pd.isna(num_reqs) and int(num_reqs) >= 2
    return SuiteExpectation.FAILS if form == Form.RELEASED and many else SuiteExpectation.PASSES


def test_ok(form: str, num_reqs: object, outcome: str) -> bool:
    if outcome == SuiteOutcome.SKIPPED:
        return True
    if expected(form, num_reqs) == SuiteExpectation.FAILS:
        return outcome in FAILED
    return outcome == SuiteOutcome.PASSED


def with_expectations(rows: pd.DataFrame) -> pd.DataFrame:
    """Each test row with its expectation and whether it held."""
    if not len(rows):
        return rows.assign(expected=[], ok=[])
    num = rows["num_reqs"] if "num_reqs" in rows else pd.Series([None] * len(rows), index=rows.index)
    exp = [expected(f, n) for f, n in zip(rows["form"], num)]
    ok = [test_ok(f, n, o) for f, n, o in zip(rows["form"], num, rows["outcome"])]
    return rows.assign(expected=exp, ok=ok)


def _status(counts: dict[str, int]) -> SuiteRunStatus:
    if counts[SuiteOutcome.ERROR] or counts[SuiteOutcome.OTHER]:
        return SuiteRunStatus.ERRORS
    if counts[SuiteOutcome.NOT_RUN]:
        return SuiteRunStatus.INCOMPLETE
    if sum(counts[o] for o in FAILED):
        return SuiteRunStatus.FAILS
    if counts[SuiteOutcome.PASSED]:
        return SuiteRunStatus.PASSES
    return SuiteRunStatus.NOTHING


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (release, form): counts per outcome, what the run came to, the first failure, and
    whether every test did what it had to."""
    if not len(rows):
        return pd.DataFrame(columns=["release", "form", "outcome", AS_EXPECTED])
    checked = with_expectations(rows)
    out = []
    for (release, form), group in checked.groupby(["release", "form"], sort=False):
        counts = {o: int((group["outcome"] == o).sum()) for o in SuiteOutcome}
        bad = group[~group["ok"]]
        failures = group[group["outcome"].isin(FAILED + (SuiteOutcome.ERROR, SuiteOutcome.OTHER))]
        first = failures.iloc[0] if len(failures) else None
        out.append(
            {
                "release": release,
                "form": form,
                "outcome": _status(counts),
                "tests": len(group),
                "passed": counts[SuiteOutcome.PASSED],
                "mismatch": counts[SuiteOutcome.MISMATCH],
                "out of bounds": counts[SuiteOutcome.OUT_OF_BOUNDS],
                "device fault": counts[SuiteOutcome.FAULT],
                "errors": counts[SuiteOutcome.ERROR] + counts[SuiteOutcome.OTHER],
                "skipped": counts[SuiteOutcome.SKIPPED],
                "not run": counts[SuiteOutcome.NOT_RUN],
                "first failure": "" if first is None else f"{first['test']}: {_first_line(first['message'])}",
                "shared_from": _shared(group),
                AS_EXPECTED: bool(len(group) > counts[SuiteOutcome.SKIPPED] and not len(bad)),
                "unexpected": ", ".join(bad["test"].head(3)),
            }
        )
    return pd.DataFrame(out)


def _shared(group: pd.DataFrame) -> str:
    if "shared_from" not in group:
        return ""
    found = group["shared_from"].dropna().astype(str)
    return found.iloc[0] if len(found) else ""


def _first_line(text: object) -> str:
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    return " ".join(lines[:2])[:240]


def check_rows(summary_frame: pd.DataFrame) -> list[dict]:
    """One check row per (release, form)."""
    rows = []
    for r in summary_frame.to_dict("records"):
        want = SuiteRunStatus.FAILS if r["form"] == Form.RELEASED else SuiteRunStatus.PASSES
        seen = f"{r['outcome']}: {r['passed']} passed, {r['mismatch'] + r['out of bounds'] + r['device fault']} failed"
        seen += f" on their assertion, {r['errors']} errors, {r['skipped']} skipped, {r['not run']} not run"
        rows.append(
            {
                "check": CHECK,
                "variant": r["form"],
                "num_reqs": None,
                "expected": f"{want} (one request passes)" if want == SuiteRunStatus.FAILS else want,
                "observed": seen + (f"; unexpected: {r['unexpected']}" if r["unexpected"] else ""),
                "ok": bool(r[AS_EXPECTED]),
                "release": r["release"],
            }
        )
    return rows


def _in_words(r: dict) -> str:
    ran = int(r["tests"]) - int(r["skipped"])
    failed = int(r["mismatch"]) + int(r["out of bounds"]) + int(r["device fault"])
    kinds = [f"{int(r[k])} {k}" for k in ("mismatch", "out of bounds", "device fault") if int(r[k])]
    text = f"{r['outcome']}: {r['passed']}/{ran} passed"
    if failed:
        text += f", {failed} failed ({', '.join(kinds)})"
    if int(r["errors"]) or int(r["not run"]):
        text += f", {int(r['errors'])} errors, {int(r['not run'])} not run"
    shared = r.get("shared_from")
    return text + (f" (shared with {shared})" if isinstance(shared, str) and shared else "")


def _sites(n: int) -> str:
    return f"{n} launch site{'s' * (n != 1)}"


def release_outcomes(summary_frame: pd.DataFrame, patches: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per release: the test as released and patched, the patch's status, and whether all held."""
    if summary_frame is None or not len(summary_frame):
        return pd.DataFrame()
    patch_status = {}
    if patches is not None and len(patches):
        patch_status = {
            str(p["release"]): f"{p['status']}, {_sites(int(p['launch_sites']))}" for p in patches.to_dict("records")
        }
    rows = []
    for release, group in summary_frame.groupby("release", sort=False):
        by = {r["form"]: r for r in group.to_dict("records")}
        rows.append(
            {
                "release": release,
                "as released": _in_words(by[Form.RELEASED]) if Form.RELEASED in by else "",
                "patched": _in_words(by[Form.PATCHED]) if Form.PATCHED in by else "",
                "patch": patch_status.get(str(release), ""),
                AS_EXPECTED: all(bool(r[AS_EXPECTED]) for r in by.values()),
            }
        )
    return pd.DataFrame(rows)


def outcomes_per_run(summary: pd.DataFrame, patches: pd.DataFrame) -> pd.DataFrame:
    """:func:`release_outcomes` over the stacked tables of merged runs (each with ``run``), one row per (release,
    run) in release order, with the run's diff file in ``diff`` (blank where the run wrote none)."""
    if not len(summary):
        return pd.DataFrame()
    frames = []
    for run, run_summary in summary.groupby("run", sort=False):
        run_patches = patches[patches["run"] == run] if len(patches) else patches
        diffs = dict(zip(run_patches["release"].astype(str), run_patches["diff"].fillna(""))) if len(patches) else {}
        frame = release_outcomes(run_summary, run_patches)
        frames.append(frame.assign(diff=frame["release"].astype(str).map(diffs).fillna(""), run=run))
    return pd.concat(frames, ignore_index=True).sort_values(
        "release", key=lambda r: r.astype(str).map(version_key), kind="stable"
    )

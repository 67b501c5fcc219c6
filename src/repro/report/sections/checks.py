"""*Test Result*, second part: every check of the run, grouped, and each failure named."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from repro.core.analysis.checks import check_summary, failed_checks
from repro.report.model import Common, Section, TemplateFile

#: Failed checks listed in full; the rest are counted (``results/*.csv`` hold them all).
LISTED_FAILURES = 60


@dataclass(frozen=True)
class Checks:
    summary: pd.DataFrame  # notebook, check, variant, passed, total, verdict
    failures: tuple[str, ...]


def _merge_passing_variants(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per check whose every variant passed (variants listed, or counted when many); a check
    with a failing variant keeps one row per variant."""
    rows = []
    for (notebook, check), g in summary.groupby(["notebook", "check"], sort=False):
        if (g["verdict"] == "PASS").all() and len(g) > 1:
            names = list(g["variant"])
            variants = ", ".join(names) if len(names) <= 3 else f"{len(names)} variants"
            rows.append(
                {
                    "notebook": notebook,
                    "check": check,
                    "variant": variants,
                    "passed": int(g["passed"].sum()),
                    "total": int(g["total"].sum()),
                    "verdict": "PASS",
                }
            )
        else:
            rows += g.to_dict("records")
    return pd.DataFrame(rows, columns=list(summary.columns))


def derive(c: Common) -> Checks | None:
    summary = check_summary(c.run.tables)
    if not len(summary):
        return None
    summary = _merge_passing_variants(summary)
    summary = summary.assign(notebook=summary["notebook"].str[:2])
    failures = [" ".join(f.split()) for t in c.run.check_tables().values() for f in failed_checks(t)]
    return Checks(summary, tuple(failures))


MARKDOWN = TemplateFile("repro.report", "checks.md.j2")


def per_notebook(summary: pd.DataFrame) -> pd.DataFrame:
    """The comment's check table: a notebook whose every check passed in one row (its checks counted, their
    counts summed), any other notebook's rows as they are; ``report.md`` keeps one row per check."""
    rows = []
    for notebook, g in summary.groupby("notebook", sort=False):
        if (g["verdict"] == "PASS").all() and len(g) > 1:
            rows.append(
                {
                    "notebook": notebook,
                    "check": f"all {len(g)} checks (report.md lists them)",
                    "variant": "",
                    "passed": int(g["passed"].sum()),
                    "total": int(g["total"].sum()),
                    "verdict": "PASS",
                }
            )
        else:
            rows += g.to_dict("records")
    return pd.DataFrame(rows, columns=list(summary.columns))


#: The comment's version is the same file: there the table has a row per notebook where every check passed.
COMMENT = MARKDOWN
SECTION = Section(
    "checks", derive, MARKDOWN, COMMENT, helpers={"per_notebook": per_notebook, "LISTED_FAILURES": LISTED_FAILURES}
)

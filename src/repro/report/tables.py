"""Tables as a reader sees them: every cell a display string (fixed decimals, one line), rendered as
compact GitHub Markdown (no padding) or as HTML with numbers right-aligned and text left-aligned.

A table reaches the renderers already formatted, so ``report.md`` and ``report.html`` show the same
digits.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

import pandas as pd

#: A cell that reads as a number (thousands separators, a sign, a unit suffix): right-aligned. A
#: leading zero before a digit (``01``, a notebook's number) is a name, not a number.
NUMBER = re.compile(r"^(?!0\d)[-+]?[\d,]*\.?\d+(e[-+]?\d+)?\s?(x|%|us|ms|s|TB/s)?$")

#: An inline code span in a cell's text.
#: A Markdown link inside a cell (the Who-is-affected table links the rows behind each cell).
MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`]+)`")


def cell_text(value: object) -> str:
    """One line of display text: empty for missing values, whitespace (newlines included) collapsed."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())


def formatted(frame: pd.DataFrame, decimals: Mapping[str, int] | int = 3, thousands: bool = False) -> pd.DataFrame:
    """Every cell as display text; float columns with fixed decimals (per column, or one for all)."""
    out = {}
    for col in frame.columns:
        digits = decimals if isinstance(decimals, int) else decimals.get(col)
        values = frame[col]
        if digits is not None and pd.api.types.is_float_dtype(values):
            out[col] = values.map(
                lambda v, d=digits: "" if pd.isna(v) else f"{v:,.{d}f}" if thousands else f"{v:.{d}f}"
            )
        elif thousands and pd.api.types.is_integer_dtype(values):
            out[col] = values.map(lambda v: f"{v:,}")
        else:
            out[col] = values.map(cell_text)
    return pd.DataFrame(out, columns=list(frame.columns)).reset_index(drop=True)


def numeric_columns(frame: pd.DataFrame) -> list[bool]:
    """Per column: every non-empty cell reads as a number."""
    flags = []
    for col in frame.columns:
        cells = [c for c in frame[col].map(cell_text) if c]
        flags.append(bool(cells) and all(NUMBER.match(c) for c in cells))
    return flags


def markdown_table(frame: pd.DataFrame) -> str:
    """GitHub-flavoured Markdown, no padding; ``|`` escaped, each cell one line."""

    def esc(text: str) -> str:
        one = cell_text(text).replace("|", "\\|")
        return one.replace("`", "\\`") if one.count("`") % 2 else one  # a lone backtick stays a backtick

    numeric = numeric_columns(frame)
    lines = ["| " + " | ".join(esc(c) for c in frame.columns) + " |"]
    lines.append("|" + "|".join("--:" if n else "---" for n in numeric) + "|")
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(esc(v) for v in row) + " |")
    return "\n".join(lines)


def html_table(frame: pd.DataFrame) -> str:
    """A plain ``<table>``; numeric columns carry ``class="num"`` (right-aligned by the stylesheet)."""
    numeric = numeric_columns(frame)

    def td(tag: str, text: object, num: bool) -> str:
        shown = CODE_SPAN.sub(r"<code>\1</code>", html.escape(cell_text(text)))  # `x` as GitHub shows it
        shown = MD_LINK.sub(r'<a href="\2">\1</a>', shown)  # [text](url) as GitHub shows it
        return f"<{tag}{' class=num' if num else ''}>{shown}</{tag}>"

    head = "".join(td("th", c, n) for c, n in zip(frame.columns, numeric))
    body = "".join(
        "<tr>" + "".join(td("td", v, n) for v, n in zip(row, numeric)) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

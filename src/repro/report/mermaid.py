"""Charts for a PR comment: Mermaid ``xychart-beta`` blocks, which GitHub renders in comments (a comment
cannot show the run folder's PNGs), and a strict check of the subset of the grammar written here.

The browser check (:mod:`repro_audit.browser`) also parses and draws every block with Mermaid itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

#: The diagram keyword GitHub's Mermaid understands for line and bar charts.
KIND = "xychart-beta"
#: Mermaid draws a chart 700 px wide and never wraps its title: a longer one is cut off at the edges.
TITLE_CHARS = 72
SERIES = ("bar", "line")
_QUOTED = r'"[^"\n]*"'
_NUMBER = r"-?\d+(?:\.\d+)?"
_LIST = rf"\[\s*(?:{_NUMBER}|{_QUOTED})(?:\s*,\s*(?:{_NUMBER}|{_QUOTED}))*\s*\]"
_LINES = {
    "title": re.compile(rf"^title {_QUOTED}$"),
    "x-axis": re.compile(rf"^x-axis {_QUOTED} (?P<list>{_LIST})$"),
    "y-axis": re.compile(rf"^y-axis {_QUOTED} (?P<lo>{_NUMBER}) --> (?P<hi>{_NUMBER})$"),
    "bar": re.compile(rf"^bar (?P<list>{_LIST})$"),
    "line": re.compile(rf"^line (?P<list>{_LIST})$"),
}


def _quote(text: str) -> str:
    if '"' in text or "\n" in text:
        raise ValueError(f"a Mermaid label holds no double quote or line break: {text!r}")
    return f'"{text}"'


def _number(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e15 else f"{value:.0f}"


def xychart(
    title: str,
    x_label: str,
    categories: Sequence[str],
    y_label: str,
    y_range: tuple[float, float],
    series: Sequence[tuple[str, Sequence[float]]],
    colours: Sequence[str] = (),
) -> str:
    """An ``xychart-beta`` over categorical x values; ``series`` is ``(bar|line, values)`` per series, drawn
    in ``colours`` (an init directive; Mermaid draws no legend: say in ``title`` which series is which)."""
    if len(title) > TITLE_CHARS:
        raise ValueError(f"title of {len(title)} characters; Mermaid shows {TITLE_CHARS} in a 700-px chart: {title!r}")
    lines = [f"%%{{init: {json.dumps(_palette(colours))}}}%%"] if colours else []
    lines += [
        KIND,
        f"    title {_quote(title)}",
        f"    x-axis {_quote(x_label)} [{', '.join(_quote(c) for c in categories)}]",
        f"    y-axis {_quote(y_label)} {_number(y_range[0])} --> {_number(y_range[1])}",
    ]
    for kind, values in series:
        if kind not in SERIES:
            raise ValueError(f"series kind {kind!r} is not one of {', '.join(SERIES)}")
        lines.append(f"    {kind} [{', '.join(_number(v) for v in values)}]")
    text = "\n".join(lines)
    problems = check_xychart(text)
    if problems:
        raise ValueError("; ".join(problems))
    return text


def _palette(colours: Sequence[str]) -> dict:
    for c in colours:
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", c):
            raise ValueError(f"colour {c!r} is not #rrggbb")
    return {"themeVariables": {"xyChart": {"plotColorPalette": ", ".join(colours)}}}


def _items(listed: str) -> list[str]:
    return [item.strip() for item in re.findall(rf"{_NUMBER}|{_QUOTED}", listed)]


def check_xychart(text: str) -> list[str]:
    """What is wrong with an ``xychart-beta`` block (empty when it is well formed): the keyword first, one
    title and one of each axis, series of numbers as long as the x axis, values inside the y range."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    problems: list[str] = []
    if lines and lines[0].startswith("%%{init:"):
        directive = re.fullmatch(r"%%\{init: (\{.*\})\}%%", lines[0])
        try:
            config = json.loads(directive[1]) if directive else None
        except json.JSONDecodeError:
            config = None
        if not isinstance(config, dict):
            problems.append(f"the init directive is not %%{{init: <JSON object>}}%%: {lines[0]!r}")
        lines = lines[1:]
    if not lines or lines[0] != KIND:
        return [*problems, f"the first line is {lines[0] if lines else ''!r}, not {KIND!r}"]
    seen, categories, y_range, series = [], None, None, []
    for number, line in enumerate(lines[1:], start=2):
        word = line.split(" ", 1)[0]
        pattern = _LINES.get(word)
        match = pattern.match(line) if pattern else None
        if not match:
            problems.append(f"line {number} is not a well-formed {KIND} statement: {line!r}")
            continue
        seen.append(word)
        if word == "x-axis":
            categories = _items(match["list"])
        elif word == "y-axis":
            y_range = (float(match["lo"]), float(match["hi"]))
        elif word in SERIES:
            values = _items(match["list"])
            if any(v.startswith('"') for v in values):
                problems.append(f"line {number}: a {word} series holds numbers only")
            else:
                series.append((number, [float(v) for v in values]))
    for word in ("title", "x-axis", "y-axis"):
        if seen.count(word) != 1:
            problems.append(f"{seen.count(word)} {word} statements; a chart has one")
    if not series:
        problems.append("no bar or line series")
    for number, values in series:
        if categories is not None and len(values) != len(categories):
            problems.append(f"line {number}: {len(values)} values for {len(categories)} x-axis categories")
        if y_range is not None and not all(y_range[0] <= v <= y_range[1] for v in values):
            problems.append(f"line {number}: a value outside the y axis {y_range[0]:g} --> {y_range[1]:g}")
    if y_range is not None and not y_range[0] < y_range[1]:
        problems.append(f"the y axis runs {y_range[0]:g} --> {y_range[1]:g}: not increasing")
    return problems


def blocks(markdown: str) -> list[str]:
    """The body of every fenced ``mermaid`` block of a Markdown text."""
    return re.findall(r"^```mermaid\n(.*?)\n```$", markdown, flags=re.S | re.M)

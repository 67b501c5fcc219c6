"""Code for a notebook to show: a function's or a kernel's own lines, and the diff between two functions.

A walk-through reads best when the lines that carry a bug are on the page. These helpers take them
from the objects the notebook runs (``inspect``, never a copy typed into the notebook), so what is
shown is what runs. Each result renders as highlighted HTML in JupyterLab and as the plain lines in
a terminal or a notebook's text output.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from dataclasses import dataclass

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name


@dataclass(frozen=True)
class Source:
    """Lines of code, numbered from ``first_line`` (0: not numbered), some of them marked (1-based in ``text``)."""

    text: str
    language: str = "python"
    marked: tuple[int, ...] = ()
    title: str = ""
    first_line: int = 0

    def _repr_html_(self) -> str:
        numbers = {"linenos": "inline", "linenostart": self.first_line} if self.first_line else {}
        formatter = HtmlFormatter(noclasses=True, hl_lines=list(self.marked), **numbers)
        caption = f"<p><code>{self.title}</code></p>" if self.title else ""
        return caption + highlight(self.text, get_lexer_by_name(self.language), formatter)

    def __str__(self) -> str:
        lines = self.text.splitlines()
        if self.first_line:
            width = len(str(self.first_line + len(lines)))
            lines = [
                f"{'>' if k in self.marked else ' '} {self.first_line + k - 1:{width}d}  {line}"
                for k, line in enumerate(lines, start=1)
            ]
        return "\n".join(([f"# {self.title}"] if self.title else []) + lines)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text/plain
        printer.text(str(self))


def _function(obj: object):
    """The Python function behind ``obj``: itself, or the one a ``@triton.jit`` decorator wraps."""
    return getattr(obj, "fn", obj)


def source_of(obj: object, mark: str = "", first: str = "", last: str = "") -> Source:
    """The source of ``obj`` (a function or a Triton kernel), lines containing ``mark`` marked.

    ``first``/``last``: show only the lines from the first one containing ``first`` through the first
    one after it containing ``last`` (the whole definition when empty).
    """
    fn = _function(obj)
    lines, first_line = inspect.getsourcelines(fn)
    lines = [line.rstrip("\n") for line in lines]
    start = next((k for k, line in enumerate(lines) if first and first in line), 0)
    stop = next((k for k in range(start, len(lines)) if last and last in lines[k]), len(lines) - 1)
    shown = lines[start : stop + 1]
    if not shown or (first and first not in shown[0]) or (last and last not in shown[-1]):
        raise ValueError(f"{fn.__qualname__}: no lines from {first!r} to {last!r}")
    marked = tuple(k for k, line in enumerate(shown, start=1) if mark and mark in line)
    if mark and not marked:
        raise ValueError(f"{fn.__qualname__}: no line contains {mark!r}")
    where = fn.__module__.replace(".", "/") + ".py"
    text = textwrap.dedent("\n".join(shown))
    return Source(text, "python", marked, f"{where}: {fn.__qualname__}", first_line + start)


def _body_without_docstring(fn) -> list[str]:
    """The statements of ``fn``'s body as source lines, its docstring left out."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    lines = source.splitlines()
    return textwrap.dedent("\n".join(lines[body[0].lineno - 1 : body[-1].end_lineno])).splitlines()


def diff_of(a: object, b: object) -> Source:
    """The unified diff of two functions' bodies (docstrings left out): what one changes of the other."""
    fa, fb = _function(a), _function(b)
    diff = difflib.unified_diff(
        _body_without_docstring(fa), _body_without_docstring(fb), fa.__qualname__, fb.__qualname__, n=0, lineterm=""
    )
    text = "\n".join(diff)
    if not text:
        raise ValueError(f"{fa.__qualname__} and {fb.__qualname__} have the same body")
    return Source(text, "diff", title=f"{fa.__module__.replace('.', '/')}.py: {fa.__qualname__} -> {fb.__qualname__}")

"""The report's sentences are Jinja2 templates over the analysed run; this module renders them for one
target: ``report.md``, ``report.html`` or ``pr-comment.md``.

Every template is a file under a package's ``templates/`` folder (:class:`TemplateFile`), all read by one
Jinja2 loader (:class:`PackageTemplates`): a wording change touches one file, never the code or stored results.
A template writes Markdown and calls three functions: ``table(frame, digits)`` (a compact GitHub table, or
an HTML table for ``report.html``), ``image(name)`` (a figure: a relative PNG link in ``report.md``, the
PNG embedded in ``report.html``; a comment holds no image) and ``fold(summary)`` as a call block (a
``<details>`` GitHub renders folded). Paragraphs may be wrapped in the template's source; the rendered
text has one line per paragraph, because GitHub renders a line break inside a comment's paragraph as a
line break.
"""

from __future__ import annotations

import base64
import html
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import pandas as pd

from repro.bugs import Bug
from repro.coverage import DECIDING_REQUESTS
from repro.registry import CodeRan, Whose
from repro.report.links import Link
from repro.report.model import TEMPLATES, Analysis, Section, Slot, Source, TemplateFile
from repro.report.plots import CSS_PX_PER_INCH, DPI
from repro.report.tables import formatted, html_table, markdown_table

#: What ``{{ row }}`` renders to in a template: where a row of a ``grid`` table starts (the ASCII record separator).
ROW = "\x1e"


class PackageTemplates(jinja2.BaseLoader):
    """One loader for every package's templates: ``package:name`` is ``templates/name`` of that installed package
    (read through :mod:`importlib.resources`, so it works from a wheel as from a checkout)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        package, _, name = template.partition(":")
        try:
            path = resources.files(package) / TEMPLATES / name
            source = path.read_text(encoding="utf-8")
        except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError) as exc:
            raise jinja2.TemplateNotFound(template) from exc
        return source, str(path), lambda: True


class Target(StrEnum):
    """What a render is for."""

    MARKDOWN = "md"
    HTML = "html"
    COMMENT = "comment"


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels, from the PNG header."""
    return struct.unpack(">II", png[16:24])


def _ran(code: CodeRan) -> str:
    """Whose code a result row ran, short enough for a table cell: a vLLM release (``vLLM 0.22.0``), this
    repository's replica of vLLM's code (``replica `gather_buggy` ``), its own kernel, or a function the user named
    (``vllm's `function` ``). ``ran_path`` gives what a sentence beside the table names: the import path, or the
    release's function or kernel."""
    function = code.name.rsplit(":", 1)[-1]
    if code.whose is Whose.RELEASE:
        return code.source
    if code.whose is Whose.REPLICA:
        return f"replica `{function}`"
    if code.whose is Whose.OWN:
        return f"this repository's `{function}`"
    return f"{code.source}'s `{function}`"


def _ran_path(code: CodeRan) -> str:
    return f"{code.source}'s `{code.name}`" if code.whose is Whose.RELEASE else f"`{code.name}`"


@dataclass
class Page:
    """One render in progress: its target, the figures it may show (name -> caption, and for HTML the
    PNG bytes), where a comment's links to the run folder's files point (``link_base``: the folder's absolute
    URL; None: such links become plain text), and every table and figure it rendered, in order (what a reader's
    browser should find)."""

    target: Target
    captions: Mapping[str, str] = field(default_factory=dict)
    pngs: Mapping[str, bytes] = field(default_factory=dict)
    tables: list[pd.DataFrame] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    link_base: str | None = None

    @property
    def links(self) -> bool:
        """Whether a link to the run folder's files works on this page."""
        return self.target is not Target.COMMENT or self.link_base is not None

    def link(self, link: Link) -> str:
        """A :class:`~repro.report.links.Link` as this page can hold it: relative in the run folder's own pages,
        absolute or plain text in a comment."""
        return link.absolute(self.link_base) if self.target is Target.COMMENT else link.relative()

    def cell(self, value: object) -> object:
        """A typed cell as this page shows it: a link to the run folder's files, whose code ran; else as it is."""
        if isinstance(value, Link):
            return self.link(value)
        if isinstance(value, CodeRan):
            return _ran(value)
        return value

    def table(self, frame: pd.DataFrame, digits: Mapping[str, int] | int = 3, thousands: bool = False) -> str:
        if any(isinstance(v, (Link, CodeRan)) for v in frame.to_numpy().ravel()):
            frame = frame.map(self.cell)
        shown = formatted(frame, digits, thousands)
        self.tables.append(shown)
        text = html_table(shown) if self.target is Target.HTML else markdown_table(shown)
        return f"\n\n{text}\n\n"

    def image(self, name: str) -> str:
        if self.target is Target.COMMENT:
            raise ValueError(f"image {name!r} in a comment template: a posted comment cannot show a relative image")
        if name not in self.captions:
            return ""  # a figure this run did not draw is left out with its caption
        self.images.append(name)
        caption = self.captions[name]
        if self.target is Target.MARKDOWN:
            return f"\n\n![{caption}](plots/{name}.png)\n\n"
        png = self.pngs[name]
        width = round(png_size(png)[0] * CSS_PX_PER_INCH / DPI)
        data = base64.b64encode(png).decode()
        return (
            f'\n\n<figure><img src="data:image/png;base64,{data}" width="{width}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>\n\n"
        )

    def grid(self, *columns: str, caller: Callable[[], str]) -> str:
        """A table written in the template: each row starts with ``{{ row }}`` and may run on over several
        lines; its cells are apart by `` | ``. Rendered as :meth:`table` renders a frame."""
        head, *rows = caller().split(ROW)
        if head.strip():
            raise ValueError(f"text before the first {{{{ row }}}} of a table: {head.strip()!r}")
        cells = [[cell.strip() for cell in f" {' '.join(r.split())} ".split(" | ")] for r in rows]
        for row in cells:
            if len(row) != len(columns):
                raise ValueError(f"a row of {len(row)} cells under {len(columns)} columns {columns}: {row!r}")
        return self.table(pd.DataFrame(cells, columns=list(columns)))

    def fold(self, summary: str, caller: Callable[[], str]) -> str:
        # GitHub shows a summary's text as is (no Markdown there); the body is Markdown again after a blank line
        body = caller().strip()
        return f"\n\n<details><summary>{html.escape(summary)}</summary>\n\n{body}\n\n</details>\n\n"


def _thousands(value: object) -> str:
    return f"{int(value):,}"


def _capital(text: object) -> str:
    text = str(text)
    return text[:1].upper() + text[1:]


def _short(text: object, limit: int = 140) -> str:
    one = " ".join(str(text).split()) if not (isinstance(text, float) and pd.isna(text)) else ""
    return one if len(one) <= limit else one[: limit - 1] + "…"


ENV = jinja2.Environment(
    loader=PackageTemplates(),
    undefined=jinja2.StrictUndefined,  # a name the template misspells is an error, not an empty string
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,  # Markdown, not HTML: cells are escaped by the table renderers, summaries by fold()
    keep_trailing_newline=False,
)
ENV.filters.update(thousands=_thousands, capital=_capital, short=_short, ran=_ran, ran_path=_ran_path)
# `x is measured`: a figure was recorded (neither None nor NaN)
ENV.tests["measured"] = lambda v: v is not None and not (isinstance(v, float) and math.isnan(v))
# names every template may use: the two bugs' and the open follow-up's references, the slots of this package's sections
ENV.globals.update(Bug=Bug, DECIDING_REQUESTS=DECIDING_REQUESTS, Slot=Slot)


@cache
def compile_template(template: Source) -> jinja2.Template:
    if isinstance(template, TemplateFile):
        return ENV.get_template(template.key)
    return ENV.from_string(template)


#: A line that starts a Markdown block of its own (never joined to the line before it).
_BLOCK_START = re.compile(r"^(\s*([-*+>|#<]|\d+\.\s|```)|\s{4})")


def unwrap(text: str) -> str:
    """Join each paragraph's (and list item's) source lines into one line; tables, headings, HTML lines and
    fenced code stay as they are, headings and fenced code set apart by blank lines. Runs of blank lines
    become one."""
    out: list[str] = []
    fenced = False

    def blank() -> None:
        if out and out[-1] != "":
            out.append("")

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if not fenced:
                blank()
            out.append(line.rstrip())
            fenced = not fenced
            if not fenced:
                out.append("")
            continue
        if fenced:
            out.append(line)
            continue
        if not line.strip():
            blank()
            continue
        prev = out[-1] if out else ""
        if line.startswith("#"):
            blank()
            out += [line.rstrip(), ""]
            continue
        joinable = prev.strip() and not prev.lstrip().startswith(("|", "<"))
        if joinable and not _BLOCK_START.match(line):
            out[-1] = prev.rstrip() + " " + line.strip()
        else:
            out.append(line.rstrip())
    return "\n".join(out).strip() + "\n"


def phrase(template: TemplateFile, macro: str, *args: Any) -> str:
    """One macro of a template file of phrases, called with ``args`` (what a notebook cell prints in the report's
    words)."""
    return str(getattr(compile_template(template).module, macro)(*args))


def _raw(template: Source, page: Page, **context: Any) -> str:
    return compile_template(template).render(
        table=page.table,
        grid=page.grid,
        row=ROW,
        image=page.image,
        fold=page.fold,
        link=page.link,
        links=page.links,
        target=str(page.target),
        **context,
    )


def render(template: Source, page: Page, **context: Any) -> str:
    """One template rendered for ``page`` (its ``table``, ``image`` and ``fold`` in reach), unwrapped."""
    return unwrap(_raw(template, page, **context))


def render_section(section: Section, template: Source, data: Any, analysis: Analysis, page: Page) -> str:
    """One section's template for ``page``; where it calls ``slot("...")`` (a :class:`~repro.report.model.Slot`'s
    value), the registered parts there (:class:`~repro.report.model.Insert`) render in its place, in order."""

    def slot(name: str) -> str:
        where = Slot(name)
        return "\n".join(_raw(i.template, page, d=d, c=analysis.common) for i, d in analysis.inserts if i.slot is where)

    return render(template, page, d=data, c=analysis.common, slot=slot, **section.helpers)


@dataclass
class Rendered:
    """A rendered page: its text, and every table (as shown) and figure it holds, in order."""

    text: str
    tables: list[pd.DataFrame]
    images: list[str]


def render_page(analysis: Analysis, page: Page) -> Rendered:
    """Every section of ``analysis`` through its template for ``page``'s target, in order."""
    parts = []
    for section, data in analysis:
        template = section.comment if page.target is Target.COMMENT else section.markdown
        if template:
            parts.append(render_section(section, template, data, analysis, page).strip())
    return Rendered("\n\n".join(p for p in parts if p) + "\n", page.tables, page.images)

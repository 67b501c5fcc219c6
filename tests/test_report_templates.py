"""The report's templates render as GitHub reads them: one line per paragraph, tables written in a template
become real tables, folds fold, a comment holds no image, and a chart is a well-formed Mermaid xychart."""

from __future__ import annotations

from importlib import resources

import jinja2
import pandas as pd
import pytest

from repro.report import mermaid
from repro.report.model import TEMPLATES, TemplateFile
from repro.report.template import Page, Target, render, unwrap


def test_paragraphs_become_one_line_and_blocks_stay():
    text = "A paragraph\nwrapped.\n\n- an item\n  continued\n- another\n\n| a |\n|---|\n| 1 |\n## Head\nnext"
    want = "A paragraph wrapped.\n\n- an item continued\n- another\n\n| a |\n|---|\n| 1 |\n\n## Head\n\nnext\n"
    assert unwrap(text) == want


def test_fenced_code_is_kept_line_for_line_and_set_apart():
    assert unwrap("text\n```diff\n-a\n\n+b\n```\nmore") == "text\n\n```diff\n-a\n\n+b\n```\n\nmore\n"


def test_a_grid_is_a_table_of_rows_written_in_the_template():
    page = Page(Target.MARKDOWN)
    text = render(
        '{% call grid("bug", "shown") %}\n{{ row }}one |\nwrapped cell\n{% if x %}{{ row }}two | {{ x }}{% endif %}'
        "{% endcall %}",
        page,
        x="2",
    )
    assert "| bug | shown |\n|---|---|\n| one | wrapped cell |\n| two | 2 |" in text
    assert [list(t.columns) for t in page.tables] == [["bug", "shown"]]


def test_a_grid_row_with_the_wrong_number_of_cells_is_an_error():
    with pytest.raises(ValueError, match="a row of 3 cells under 2 columns"):
        render('{% call grid("a", "b") %}{{ row }}x | y | z{% endcall %}', Page(Target.MARKDOWN))


def test_a_misspelt_name_is_an_error_not_an_empty_string():
    import jinja2

    with pytest.raises(jinja2.UndefinedError, match="no attribute 'nothing'"):
        render("{{ d.nothing }}", Page(Target.MARKDOWN), d={})


def test_folds_and_tables_per_target():
    frame = pd.DataFrame({"n": [1.23456], "name": ["a <b>"]})
    template = '{% call fold("Sum & more") %}{{ table(frame, 2) }}{% endcall %}'
    md = render(template, Page(Target.MARKDOWN), frame=frame)
    assert md.startswith("<details><summary>Sum &amp; more</summary>\n\n| n | name |") and "| 1.23 | a <b> |" in md
    html = render(template, Page(Target.HTML), frame=frame)
    assert "<td class=num>1.23</td><td>a &lt;b&gt;</td>" in html


def test_a_comment_holds_no_image():
    page = Page(Target.COMMENT, captions={"fig": "a figure"})
    with pytest.raises(ValueError, match="cannot show a relative image"):
        render('{{ image("fig") }}', page)
    assert render('{{ image("fig") }}', Page(Target.MARKDOWN, captions={"fig": "cap"})) == "![cap](plots/fig.png)\n"
    assert render('{{ image("other") }}', Page(Target.MARKDOWN)) == "\n"  # not drawn: left out


def test_an_xychart_is_written_and_checked():
    text = mermaid.xychart("t", "requests", ["1", "2"], "% wrong", (0, 100), [("bar", [0, 50.5]), ("line", [0, 0])])
    assert text.splitlines()[0] == "xychart-beta" and mermaid.check_xychart(text) == []
    coloured = mermaid.xychart("t", "x", ["1"], "y", (0, 1), [("line", [1])], ["#c0392b"])
    assert coloured.startswith('%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#c0392b"}}}}%%\n')
    assert mermaid.blocks(f"a\n```mermaid\n{text}\n```\nb") == [text]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("graph TD\n A-->B", "not 'xychart-beta'"),
        ('xychart-beta\n title "t"\n x-axis "x" [1, 2]\n y-axis "y" 0 --> 1\n bar [1]', "1 values for 2 x-axis"),
        ('xychart-beta\n title "t"\n x-axis "x" [1]\n y-axis "y" 0 --> 1\n bar [2]', "outside the y axis"),
        ('xychart-beta\n title t\n x-axis "x" [1]\n y-axis "y" 0 --> 1\n bar [1]', "not a well-formed"),
        ('xychart-beta\n title "t"\n x-axis "x" [1]\n y-axis "y" 1 --> 0\n line [1]', "not increasing"),
        ('xychart-beta\n title "t"\n x-axis "x" [1]\n y-axis "y" 0 --> 1', "no bar or line series"),
        ('%%{init: nope}%%\nxychart-beta\n title "t"\n x-axis "x" [1]\n y-axis "y" 0 --> 1\n bar [1]', "init"),
    ],
)
def test_a_malformed_xychart_is_named(text, problem):
    assert any(problem in p for p in mermaid.check_xychart(text)), mermaid.check_xychart(text)


def test_a_chart_refuses_what_mermaid_would_cut_or_misread():
    with pytest.raises(ValueError, match="double quote"):
        mermaid.xychart('say "x"', "x", ["1"], "y", (0, 1), [("bar", [1])])
    with pytest.raises(ValueError, match="Mermaid shows"):
        mermaid.xychart("t" * 100, "x", ["1"], "y", (0, 1), [("bar", [1])])


def _named_templates() -> set[str]:
    """Every template file the report's sections and registered parts name, and every file those include."""
    from jinja2 import meta

    from repro.report import comparison, phrases
    from repro.report.sections import report_registered, sections
    from repro.report.template import ENV

    named = [s.markdown for s in sections()] + [s.comment for s in sections() if s.comment]
    named += [i.template for r in report_registered() for i in r.inserts] + [comparison.COMPARISON, phrases.PHRASES]
    assert all(isinstance(t, TemplateFile) for t in named), [t for t in named if not isinstance(t, TemplateFile)]
    keys, todo = set(), [t.key for t in named]
    while todo:
        key = todo.pop()
        if key not in keys:
            keys.add(key)
            todo += meta.find_referenced_templates(ENV.parse(ENV.loader.get_source(ENV, key)[0]))
    return keys


def test_every_section_reads_its_words_from_a_template_file_and_every_file_of_this_package_is_read():
    keys = _named_templates()
    shipped = {f"repro.report:{f.name}" for f in (resources.files("repro.report") / TEMPLATES).iterdir()}
    assert {k for k in keys if k.startswith("repro.report:")} == shipped  # no file left over, none missing


def test_a_template_file_is_found_by_package_and_name_and_a_missing_one_is_named():
    assert "## Raw data" in render(TemplateFile("repro.report", "raw-data.md.j2"), Page(Target.MARKDOWN), d=["a.csv"])
    with pytest.raises(jinja2.TemplateNotFound, match=r"repro\.report:no-such\.md\.j2"):
        render(TemplateFile("repro.report", "no-such.md.j2"), Page(Target.MARKDOWN))


def test_the_first_line_names_the_run_device_time_and_commit():
    from types import SimpleNamespace

    from repro.report.sections.summary import RunLine

    def first_line(line: RunLine) -> str:
        return render(
            TemplateFile("repro.report", "run-line.md.j2"), Page(Target.MARKDOWN), d=SimpleNamespace(run_line=line)
        )

    line = RunLine("r1", "gpu", "NVIDIA H200", "2026-05-01 10:00-10:42", "abcdef0123", True)
    assert first_line(line) == (
        "Run `r1`, profile gpu on NVIDIA H200, 2026-05-01 10:00-10:42 UTC, commit `abcdef0123` with local changes.\n"
    )
    assert first_line(RunLine("r2", "cpu", "cpu", "", "", False)) == "Run `r2`, profile cpu on cpu.\n"

"""What notebooks show of the code: the kernel's own lines and the one-expression diff, taken from the objects
that run (so a change to the kernel changes what the reader sees)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repro.core.kernels import gather
from repro.walkthrough.source import Source, diff_of, source_of

GATHER_PY = Path(gather.__file__)
#: The load that carries bug 2: the block id of request b's logical block, one row pitch per request.
ROW_PITCH_LOAD = "tl.load(block_table_ptr + b * block_table_row_pitch + logical"


def kernel_excerpt() -> Source:
    kernel = gather._dequantize_and_gather_k_kernel
    return source_of(kernel, mark="block_table_row_pitch", first="for i0", last="other=0)")


def test_the_kernel_excerpt_is_the_file_s_own_lines_with_the_row_pitch_marked():
    shown = kernel_excerpt()
    file_lines = GATHER_PY.read_text().splitlines()
    lines = shown.text.splitlines()
    assert lines[0].startswith("for i0 in range(") and lines[-1].endswith("other=0)")
    assert [k for k, line in enumerate(lines, start=1) if ROW_PITCH_LOAD in line] == list(shown.marked)
    for k, line in enumerate(lines):  # numbered as in the file, indentation removed
        assert file_lines[shown.first_line - 1 + k].strip() == line.strip()
    text = str(shown)
    assert shown.title == "repro/core/kernels/gather.py: _dequantize_and_gather_k_kernel"
    (marked,) = [line for line in text.splitlines() if line.startswith(">")]
    assert ROW_PITCH_LOAD in marked and re.match(rf">\s+{shown.first_line + shown.marked[0] - 1}\s", marked)


def test_the_html_highlights_the_marked_line():
    shown = kernel_excerpt()
    html = shown._repr_html_()
    highlighted = re.findall(r'<span style="background-color: #ffffcc">(.*?)\n</span>', html, re.S)
    assert len(highlighted) == 1 and "block_table_row_pitch" in re.sub(r"<[^>]+>", "", highlighted[0])


def test_the_diff_between_the_buggy_and_the_fixed_gather_is_one_expression():
    diff = diff_of(gather.gather_buggy, gather.gather_fixed)
    changed = [line for line in diff.text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert len(changed) == 2
    minus, plus = changed
    assert minus.endswith("row_pitch=block_table.shape[-1])") and plus.endswith("row_pitch=block_table.stride(0))")
    assert minus[1:].replace("shape[-1]", "stride(0)") == plus[1:]
    assert diff.language == "diff" and "gather_buggy -> gather_fixed" in diff.title


def test_asking_for_lines_that_are_not_there_is_an_error():
    with pytest.raises(ValueError, match="no line contains"):
        source_of(gather.gather_fixed, mark="as_strided")
    with pytest.raises(ValueError, match="no lines from"):
        source_of(gather.gather_fixed, first="no such line")
    with pytest.raises(ValueError, match="same body"):
        diff_of(gather.gather_fixed, gather.gather_fixed)


def test_plain_text_has_no_numbers_when_not_asked():
    assert str(Source("a\nb", "python", (2,), "t")) == "# t\na\nb"

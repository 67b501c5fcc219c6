"""Notebooks 01 and 02's first cell prints what it runs on through the report's phrases (templates/phrases.md.j2)."""

from __future__ import annotations

from repro.report import phrases
from repro.walkthrough.session import Setup


def test_the_setup_phrase_renders_the_pool_or_the_implementation():
    assert phrases.setup(Setup("cpu", "cpu", pool_bytes=1_153_863_360)) == (
        "profile cpu, device cpu, pool 1,153,863,360 bytes"
    )
    gather = phrases.setup(Setup("gpu", "cuda", implementation="pkg.mod:fn"))
    assert gather.startswith("profile gpu on cuda;") and gather.endswith(": pkg.mod:fn") and "\n" not in gather

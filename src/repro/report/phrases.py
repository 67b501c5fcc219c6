"""Short phrases notebooks 01 and 02's cells print, in the report's words: macros of ``templates/phrases.md.j2``,
callable from Python where a cell prints one."""

from __future__ import annotations

from typing import Any

from repro.report.model import TemplateFile
from repro.report.template import phrase

PHRASES = TemplateFile("repro.report", "phrases.md.j2")


def setup(setup: Any) -> str:
    """What a notebook runs on (a walkthrough's ``setup()``: profile, device, and its pool or implementation)."""
    return phrase(PHRASES, "setup", setup)

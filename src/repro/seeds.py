"""The figures the two pull requests report, kept in ``data/seeds/`` as the targets to compare with."""

from __future__ import annotations

import json
from functools import cache

from repro.paths import seeds_dir


@cache
def load(pr: int) -> dict:
    """``load(43988)`` or ``load(55109)``."""
    return json.loads((seeds_dir() / f"pr-{pr}.json").read_text())

"""Short phrases the studies' templates and notebook 03's cells word alike: macros of ``templates/phrases.md.j2``,
callable from Python where a notebook cell prints one."""

from __future__ import annotations

import pandas as pd

from repro.core.geometry.layout import GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN
from repro.report.model import TemplateFile
from repro.report.template import phrase
from repro_studies.analysis.affected import Warmups
from repro_studies.analysis.performance import NotTimed
from repro_studies.analysis.releases import NotFixed
from repro_studies.analysis.reshape_chain import Unexplained
from repro_studies.analysis.upstream_cost import cuda_path_rows

PHRASES = TemplateFile("repro_studies.report", "phrases.md.j2")


def performance_setup(profile: str) -> str:
    """Notebook 03's first line: the profile it runs and the bytes each gathered token moves."""
    return phrase(PHRASES, "performance_setup", profile, GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN)


def not_timed(reason: NotTimed) -> str:
    """Why notebook 03 timed nothing, in the report's words."""
    return phrase(PHRASES, "not_timed", reason)


def not_fixed(gather: NotFixed) -> str:
    """A released gather the row-pitch change did not fix, as the verdict names it."""
    return phrase(PHRASES, "not_fixed", gather)


def unexplained(runner: Unexplained) -> str:
    """A release's runner whose view failed otherwise than by bug 1's count, as the verdict names it."""
    return phrase(PHRASES, "unexplained", runner)


def cutedsl(facts: dict) -> str:
    """vLLM's CuTe-DSL gather per release, from notebook 03's facts (``results/03-cutedsl.json``)."""
    return phrase(PHRASES, "cutedsl", facts)


def vllm_cost(facts: dict) -> str:
    """PR #55109's cost on each release's own kernel, from notebook 03's facts (``results/03-vllm-cost.json``)."""
    return phrase(PHRASES, "vllm_cost", facts)


def ceiling(facts: dict) -> str:
    """The streaming ceiling and each gather against it at the largest shape, from notebook 03's facts
    (``results/03-performance-ceiling.json``)."""
    return phrase(PHRASES, "ceiling", facts)


def v41(facts: dict) -> str:
    """The V4.1 gathers at the largest shape, from notebook 03's facts (``results/03-v41.json``)."""
    return phrase(PHRASES, "v41", facts)


def timing(facts: dict, names: dict[str, str] | None = None) -> str:
    """What the fix costs on this repository's kernel and gather_fast's figures, from notebook 03's facts
    (``results/03-performance.json``); ``names``: the outside arms' names in a sentence."""
    return phrase(PHRASES, "timing", facts, names or {})


def warmups(w: Warmups | None) -> str:
    """Which releases warm their Triton gather up, where and for which model (notebook 05's warm-up table)."""
    return phrase(PHRASES, "warmups", w)


def root_cause(facts: dict, backing_width: int | None = None, w: Warmups | None = None) -> str:
    """What PR #55109's log line is consistent with, from notebook 03's JIT story (``results/03-vllm-jit.json``:
    ``logged_kernel``, ``releases``) and the warm-up's table width."""
    return phrase(PHRASES, "root_cause", facts.get("releases") or {}, facts.get("logged_kernel", ""), backing_width, w)


def production_path(summary: pd.DataFrame | None) -> str:
    """Where each release's CUDA path calls the gather and how it runs, from notebook 03's production-path summary."""
    return phrase(PHRASES, "production_path", cuda_path_rows(summary))

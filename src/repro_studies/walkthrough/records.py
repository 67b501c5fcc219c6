"""Notebook 03's DeepSeek V4.1 section: the repository's V4.1 gathers (:mod:`repro_studies.kernels.fast_v41`) beside
each requested release's own V4.1 Triton kernels with PR #55109's row pitch.

Each release in ``vllm_releases`` that ships V4.1 kernels has its MXFP8 and NVFP4 gathers loaded from the
module cache and patched (:func:`repro_studies.evidence.records_perf.load_release_gather`); the repository's gather
of the same page layout (:data:`repro.registry.RECORD_GATHERS`) is checked bitwise against the reference
decoders and against the release's kernel on a column-narrowed table (both profiles), then both are timed
as CUDA-graph replays at ``vllm_request_counts`` x the longest of ``seq_lens`` tokens, checked again at every
timed shape, beside the copy rate notebook 03 measured (GPU). Only graph replays are reported: an eager call
of a release's kernel here also pays the release's import scope.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from repro.registry import Origin
from repro.walkthrough.session import Session
from repro_studies.analysis import records as rules
from repro_studies.evidence.records_perf import (
    KINDS,
    Candidate,
    Shape,
    bitwise_rows,
    check_scenario,
    layout_word,
    load_release_gather,
    run_out,
    time_shape,
)
from repro_studies.registry import RECORD_GATHERS
from repro_studies.tables import Facts, Table
from repro_studies.upstream.cases import reference_for

LOADS, CHECKS, MEDIANS, VS_COPY = Table.V41_LOADS, Table.V41_CHECKS, Table.V41_MEDIANS, Table.V41_VS_COPY
FACTS = Facts.V41


@dataclass
class RecordGathers:
    session: Session
    releases: list = field(default_factory=list)  # loaded release kernels (records_perf.Candidate)

    @property
    def device(self) -> str:
        return self.session.profile.device

    def _ours(self, kind: str, interleaved: bool):

        entry = RECORD_GATHERS[interleaved]
        return Candidate(kind, interleaved, entry.label, Origin.REPO, entry.loader(), {})

    def load(self) -> pd.DataFrame:
        """One row per (release, record): the kernel loaded and patched, or why not."""

        p = self.session.params
        table = self.session.table(LOADS)
        for release in p.vllm_releases:
            for kind in KINDS:
                cand, why = load_release_gather(release, kind, self.device, p.download)
                if cand is not None:
                    self.releases.append(cand)
                table.append(
                    {
                        "release": release,
                        "record": kind,
                        "layout": layout_word(cand.interleaved) if cand else "",
                        "kernel": cand.settings["kernel"] if cand else "",
                        "code": cand.code if cand else "",
                        "status": "loaded, row pitch block_table.stride(0)" if cand else why,
                    }
                )
        return table.frame() if table.rows else pd.DataFrame(columns=["release", "record", "status"])

    def check(self) -> pd.DataFrame:
        """Both records in both layouts on a narrowed table (ragged requests, ``gather_lens``, an ``offset``):
        the repository's gather against the reference decoder, and against each loaded release's kernel of that
        layout (whose own output is checked against the reference too)."""

        table = self.session.table(CHECKS)
        tiny = self.session.profile.interpret
        for interleaved in (True, False):
            for kind in KINDS:
                scenario = check_scenario(kind, interleaved, self.device, tiny)
                ref = reference_for(scenario)
                theirs = [c for c in self.releases if (c.kind, c.interleaved) == (kind, interleaved)]
                raw = bitwise_rows(scenario, [self._ours(kind, interleaved), *theirs], None, ref, "")
                for release in theirs:
                    mine = self._ours(kind, interleaved)
                    theirs_out = run_out(release, scenario)
                    raw += bitwise_rows(scenario, [mine], theirs_out, None, "", release.negative_zero)
                for row in rules.check_rows(raw, "narrowed, ragged, gather_lens, offset"):
                    table.append(row)
        return table.frame()

    def measure(self, copy_tbps: float | None) -> pd.DataFrame:
        """Each loaded release kernel and the repository's gather of its layout, at every request count (GPU)."""

        p = self.session.params
        counts = sorted(p.vllm_request_counts or p.request_counts)
        seq_len = max(p.seq_lens)
        medians, checks = self.session.table(MEDIANS), self.session.table(CHECKS)
        for release in self.releases:
            for n in counts:
                raw_checks: list[dict] = []
                timings: list[dict] = []
                shape = Shape(release.kind, release.interleaved, n, seq_len)
                arms = [release, self._ours(release.kind, release.interleaved)]
                time_shape(shape, arms, p.cache_block_size, self.device, 2, 50, raw_checks, timings)
                for row in rules.check_rows(raw_checks, f"timed {n} x {seq_len}"):
                    checks.append(row)
                for row in timings:
                    medians.append({**row, "launch": "graph"})
        table = rules.vs_copy(medians.frame() if medians.rows else None, copy_tbps)
        if len(table):
            self.session.record(VS_COPY, table.to_dict("records"))
        return table

    def largest(self) -> dict:
        """The largest shape's figures (written for the report, which words them: ``phrases.v41``)."""
        table = self.session.table(VS_COPY)
        facts = rules.largest_facts(table.frame() if table.rows else None)
        self.session.write_facts(FACTS, facts)
        return facts

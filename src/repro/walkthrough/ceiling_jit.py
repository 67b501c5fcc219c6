"""Notebook 03's two later sections, one function per cell: the streaming ceiling with the gap
decomposition (GPU), and the JIT fingerprint (GPU: observed and predicted; CPU: predicted only).

Each function runs the evidence, applies the analysis rules, appends the check rows and returns
what the cell shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from repro.analysis import ceiling as ceiling_rules
from repro.analysis import jit as jit_rules
from repro.evidence.results import ResultTable, write_facts

NOTEBOOK = "03-performance"
CEILING = "03-performance-ceiling"
DECOMPOSITION = "03-performance-decomposition"
VS_CEILING = "03-performance-vs-ceiling"
GAP = "03-performance-gap"
CEILING_CHECKS = "03-performance-ceiling-checks"
JIT = "03-jit-fingerprint"
JIT_SUMMARY = "03-jit-summary"
JIT_CHECKS = "03-jit-checks"


@dataclass
class CeilingSection:
    run_dir: str
    tables: dict = field(default_factory=dict)

    def table(self, name: str) -> ResultTable:
        if name not in self.tables:
            self.tables[name] = ResultTable(self.run_dir, name, NOTEBOOK)
        return self.tables[name]

    def measure(self, request_counts, seq_lens, block_size: int, decompose_at=None, rounds: int = 2,
                rep_ms: int = 50) -> pd.DataFrame:
        """Streaming, read-only and write-only arms at every shape; the gap arms at ``decompose_at``."""
        from repro.evidence.ceiling import run_ceiling

        checks = self.table(CEILING_CHECKS)

        def on_check(c) -> None:
            checks.append(ceiling_rules.ceiling_check_row(c.arm, c.num_reqs, c.seq_len, c.mismatched, c.stray,
                                                          c.total, c.unit))

        run_ceiling(request_counts, seq_lens, block_size, on_check, self.table(CEILING).append,
                    self.table(DECOMPOSITION).append, decompose_at=decompose_at, rounds=rounds, rep_ms=rep_ms)
        return self.table(CEILING).frame()

    def against_gathers(self, gather_medians: pd.DataFrame, copy_tbps: float | None) -> pd.DataFrame:
        """Every gather arm of the sweep against the streaming ceiling at its shape (recorded)."""
        rows = ceiling_rules.ceiling_table(gather_medians, self.table(CEILING).frame(), copy_tbps)
        for r in rows.to_dict("records"):
            self.table(VS_CEILING).append(r)
        return rows

    def gaps(self) -> pd.DataFrame:
        """The gap decomposition at every decomposition shape, graph replays (recorded)."""
        dec = self.table(DECOMPOSITION).frame()
        if not len(dec):
            return pd.DataFrame()
        same_rounds = pd.concat([self.table(CEILING).frame(), dec], ignore_index=True)
        out = []
        for (n, L) in sorted(set(zip(dec["num_reqs"], dec["seq_len"]))):
            steps = ceiling_rules.gap_decomposition(same_rounds, int(n), int(L))
            out.append(steps.assign(num_reqs=int(n), seq_len=int(L)))
        gaps = pd.concat(out, ignore_index=True)
        for r in gaps.to_dict("records"):
            self.table(GAP).append(r)
        return gaps

    def finish(self, vs_ceiling: pd.DataFrame, gaps: pd.DataFrame) -> str:
        """Headline (written for the report); the bitwise checks must all pass."""
        at = None
        if len(gaps):
            big = gaps[gaps["num_reqs"] * gaps["seq_len"] == (gaps["num_reqs"] * gaps["seq_len"]).max()]
            at = big.drop(columns=["num_reqs", "seq_len"])
        facts = ceiling_rules.ceiling_headline(vs_ceiling, at)
        write_facts(self.run_dir, "03-performance-ceiling", facts)
        from repro.evidence.results import assert_all_ok

        assert_all_ok(self.table(CEILING_CHECKS).frame())
        return facts["headline"]


def repo_jit_subjects() -> list:
    """The repository's own gathers: every row pitch is a runtime int in ``do_not_specialize``."""
    from repro.analysis.jit import RUNTIME_STRIDE_UNSPECIALIZED
    from repro.evidence.jit import JitSubject
    from repro.kernels import fast, gather

    return [
        JitSubject("buggy (shape[-1], runtime)", gather.gather_buggy, gather._dequantize_and_gather_k_kernel,
                   RUNTIME_STRIDE_UNSPECIALIZED, "repro"),
        JitSubject("fixed (stride(0), runtime)", gather.gather_fixed, gather._dequantize_and_gather_k_kernel,
                   RUNTIME_STRIDE_UNSPECIALIZED, "repro"),
        JitSubject("fast (stride(0), runtime)", fast.gather_fast, fast._gather_fast_kernel,
                   RUNTIME_STRIDE_UNSPECIALIZED, "repro"),
    ]


@dataclass
class JitSection:
    run_dir: str
    device: str
    tables: dict = field(default_factory=dict)

    def table(self, name: str) -> ResultTable:
        if name not in self.tables:
            self.tables[name] = ResultTable(self.run_dir, name, NOTEBOOK)
        return self.tables[name]

    def measure(self, subjects, widths: list[int], backing_width: int, block_size: int = 64,
                execute: bool = True) -> pd.DataFrame:
        """Warm-up at full width, then one launch per width, narrowed views and contiguous tables.

        Every request holds one cache block whatever the width, so the table alone changes between
        calls (the interpreter sizes the repository's token tile from the longest request).
        """
        from repro.evidence.jit import fingerprint_subjects

        fingerprint_subjects(subjects, widths, backing_width, block_size=block_size, device=self.device,
                             execute=execute, sink=self.table(JIT).append, tokens_per_request=lambda w: block_size)
        rows = self.table(JIT).frame()
        for c in jit_rules.fingerprint_checks(rows, widths, backing_width):
            self.table(JIT_CHECKS).append(c)
        return rows

    def summary(self) -> pd.DataFrame:
        rows = self.table(JIT).frame()
        out = jit_rules.compile_summary(rows, phase="inference")
        for r in out.to_dict("records"):
            self.table(JIT_SUMMARY).append(r)
        return out

    def figure(self):
        from repro.report import plots

        return plots.jit_fingerprint(jit_rules.cumulative_by_width(self.table(JIT).frame(), phase="inference"))

    def finish(self) -> pd.DataFrame:
        from repro.evidence.results import assert_all_ok

        checks = self.table(JIT_CHECKS).frame()
        write_facts(self.run_dir, "03-jit", {"mode": "observed" if self.device.startswith("cuda") else "predicted",
                                             "inference_compiles": jit_rules.inference_compiles(
                                                 self.table(JIT).frame()).to_dict("records")})
        assert_all_ok(checks)
        return checks

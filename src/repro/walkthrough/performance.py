"""Notebook 03, step by step: what the stride fix costs (GPU), against a contiguous table and the
rejected ``.contiguous()`` copy, against the copy ceiling and the streaming ceiling measured in the
same run, what separates the gather from that ceiling, and the JIT fingerprint of each kernel.

On the CPU profile kernels run in Triton's interpreter, whose time per program says nothing about
a GPU; the timing steps then record why they were skipped, and the JIT fingerprint is predicted
with Triton's own cache-key function instead of observed (the interpreter compiles nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from repro.analysis import ceiling as ceiling_rules
from repro.analysis import jit as jit_rules
from repro.analysis import performance as rules
from repro.geometry.layout import GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN
from repro.registry import OUTSIDE_ARM, bench_arms, load_implementation, provenance, provenance_name
from repro.walkthrough.session import Session

NOTEBOOK = "03-performance"
MEDIANS = "03-performance-medians"
CHECKS = "03-performance-checks"
RATIOS = "03-performance-ratios"
CEILING = "03-performance-ceiling"
DECOMPOSITION = "03-performance-decomposition"
VS_CEILING = "03-performance-vs-ceiling"
GAP = "03-performance-gap"
CEILING_CHECKS = "03-performance-ceiling-checks"
JIT = "03-jit-fingerprint"
JIT_SUMMARY = "03-jit-summary"
JIT_CHECKS = "03-jit-checks"
SKIPPED = "timing skipped: the CPU profile runs kernels in the interpreter"


@dataclass
class PerformanceWalkthrough:
    session: Session
    ceiling_tbps: float | None = None
    ratios: pd.DataFrame | None = None
    facts: dict = field(default_factory=dict)
    outside_names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, profile: str = "auto", run_dir: str = "", **params) -> PerformanceWalkthrough:
        return cls(Session.start(NOTEBOOK, profile, run_dir, **params))

    @property
    def on_gpu(self) -> bool:
        return self.session.profile.device == "cuda"

    def describe(self) -> str:
        return (
            f"profile {self.session.profile.name}; bytes per gathered token: {GATHER_READ_BYTES_PER_TOKEN} read + "
            f"{GATHER_WRITE_BYTES_PER_TOKEN} written"
        )

    def skip_reason(self) -> str | None:
        """None on a GPU; on the CPU, why nothing is timed (also recorded for the report)."""
        if self.on_gpu:
            return None
        self.session.write_facts(NOTEBOOK, {"headline": SKIPPED})
        return SKIPPED

    def measure(self) -> pd.DataFrame:
        """The copy ceiling, then every arm at every shape (bitwise-checked first); the ratio table."""
        from repro.evidence import timing
        from repro.evidence.perf import ArmCheck, TimedArm, run_perf

        p = self.session.params
        ceiling = timing.copy_ceiling()
        self.ceiling_tbps = ceiling.tbps
        arms = [TimedArm(a, load_implementation(_target(a.implementation))) for a in bench_arms(p["bench_variants"])]
        if p["reference_gather"]:
            arms.append(TimedArm(OUTSIDE_ARM, load_implementation(p["reference_gather"], "reference_gather")))
            self.outside_names[OUTSIDE_ARM.label] = provenance_name(provenance(p["reference_gather"]))
        checks, medians = self.session.table(CHECKS), self.session.table(MEDIANS)

        def on_check(c: ArmCheck) -> None:
            checks.append(
                rules.arm_check_row(c.arm.label, c.num_reqs, c.seq_len, c.mismatched_tokens, c.stray_writes, c.tokens)
            )

        run_perf(p["request_counts"], p["seq_lens"], p["cache_block_size"], arms, on_check, medians.append)
        ratios = rules.ratio_rows(medians.frame(), ceiling.tbps)
        ratios["copy_ceiling_tbps"] = round(ceiling.tbps, 4)
        self.ratios = self.session.record(RATIOS, ratios.to_dict("records"))
        return self.ratios

    def medians(self) -> pd.DataFrame:
        return self.session.table(MEDIANS).frame()

    def outside_band(self) -> pd.DataFrame:
        return rules.outside_band(self.ratios)

    def finish(self) -> str:
        """The headline figures (written for the report) as one paragraph."""
        self.facts = rules.headline(self.medians(), self.ratios, self.outside_names)
        self.session.write_facts(NOTEBOOK, self.facts)
        return self.facts["headline"]

    # -- the streaming ceiling (GPU) ---------------------------------------------------------------

    def measure_ceiling(self) -> pd.DataFrame:
        """Streaming, read-only and write-only arms at every shape; the gap arms at the largest request
        count of each sequence length, timed in the same rounds; each checked bitwise first."""
        from repro.evidence.ceiling import run_ceiling

        p = self.session.params
        checks = self.session.table(CEILING_CHECKS)

        def on_check(c) -> None:
            checks.append(
                ceiling_rules.ceiling_check_row(c.arm, c.num_reqs, c.seq_len, c.mismatched, c.stray, c.total, c.unit)
            )

        run_ceiling(
            p["request_counts"],
            p["seq_lens"],
            p["cache_block_size"],
            on_check,
            self.session.table(CEILING).append,
            self.session.table(DECOMPOSITION).append,
        )
        return self.session.table(CEILING).frame()

    def vs_ceiling(self) -> pd.DataFrame:
        """Every gather arm of the sweep against the streaming ceiling at its shape (recorded)."""
        rows = ceiling_rules.ceiling_table(self.medians(), self.session.table(CEILING).frame(), self.ceiling_tbps)
        return self.session.record(VS_CEILING, rows.to_dict("records"))

    def gaps(self) -> pd.DataFrame:
        """The gap decomposition (graph replays) at every decomposition shape (recorded)."""
        dec = self.session.table(DECOMPOSITION).frame()
        same_rounds = pd.concat([self.session.table(CEILING).frame(), dec], ignore_index=True)
        out = [
            ceiling_rules.gap_decomposition(same_rounds, int(n), int(L)).assign(num_reqs=int(n), seq_len=int(L))
            for n, L in sorted(set(zip(dec["num_reqs"], dec["seq_len"])))
        ]
        return self.session.record(GAP, pd.concat(out, ignore_index=True).to_dict("records")) if out else dec

    def ceiling_headline(self) -> str:
        """The streaming-ceiling figures at the largest shape (written for the report)."""
        gaps = self.session.table(GAP).frame()
        at = None
        if len(gaps):
            tokens = gaps["num_reqs"] * gaps["seq_len"]
            at = gaps[tokens == tokens.max()]
        facts = ceiling_rules.ceiling_headline(self.session.table(VS_CEILING).frame(), at)
        self.session.write_facts(CEILING, facts)
        return facts["headline"]

    # -- the JIT fingerprint (GPU: observed; CPU: predicted) ----------------------------------------

    def jit_fingerprint(self, subjects: list | None = None, execute: bool = True) -> pd.DataFrame:
        """Each subject warmed up on the full-width table, then launched once per width, on narrowed views
        and on contiguous tables; every request holds one cache block, so only the table changes."""
        from repro.evidence.jit import fingerprint_subjects

        p = self.session.params
        block = p["cache_block_size"]
        fingerprint_subjects(
            subjects if subjects is not None else repo_jit_subjects(),
            p["jit_widths"],
            p["jit_backing_width"],
            block_size=block,
            device=self.session.profile.device,
            execute=execute,
            sink=self.session.table(JIT).append,
            tokens_per_request=lambda w: block,
        )
        rows = self.session.table(JIT).frame()
        self.session.record(JIT_CHECKS, jit_rules.fingerprint_checks(rows, p["jit_widths"], p["jit_backing_width"]))
        return rows

    def jit_summary(self) -> pd.DataFrame:
        """Per kernel and table kind: inference-path compilations, compile time, first-call latency."""
        summary = jit_rules.compile_summary(self.session.table(JIT).frame(), phase="inference")
        self.session.write_facts(
            "03-jit",
            {
                "mode": "observed" if self.on_gpu else "predicted",
                "summary": summary.to_dict("records"),
            },
        )
        return self.session.record(JIT_SUMMARY, summary.to_dict("records"))

    def jit_cumulative(self) -> pd.DataFrame:
        """Compilations and compile time so far, after each new width (the fingerprint's plot data)."""
        return jit_rules.cumulative_by_width(self.session.table(JIT).frame(), phase="inference")


def repo_jit_subjects() -> list:
    """The repository's own gathers: every row pitch is a runtime int in ``do_not_specialize``."""
    from repro.analysis.jit import RUNTIME_STRIDE_UNSPECIALIZED
    from repro.evidence.jit import JitSubject
    from repro.kernels import fast, gather

    form = RUNTIME_STRIDE_UNSPECIALIZED
    return [
        JitSubject(
            "repro buggy (shape[-1])", gather.gather_buggy, gather._dequantize_and_gather_k_kernel, form, "repro"
        ),
        JitSubject(
            "repro fixed (stride(0))", gather.gather_fixed, gather._dequantize_and_gather_k_kernel, form, "repro"
        ),
        JitSubject("repro fast (stride(0))", fast.gather_fast, fast._gather_fast_kernel, form, "repro"),
    ]


def _target(label: str) -> str:
    from repro.registry import implementation

    return implementation(label).target

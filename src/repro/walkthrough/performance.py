"""Notebook 03, step by step: what the stride fix costs (GPU), against a contiguous table and the
rejected ``.contiguous()`` copy, against the copy ceiling measured in the same run.

On the CPU profile kernels run in Triton's interpreter, whose time per program says nothing about
a GPU; the steps then record why timing was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from repro.analysis import performance as rules
from repro.geometry.layout import GATHER_READ_BYTES_PER_TOKEN, GATHER_WRITE_BYTES_PER_TOKEN
from repro.registry import OUTSIDE_ARM, bench_arms, load_implementation, provenance, provenance_name
from repro.walkthrough.session import Session

NOTEBOOK = "03-performance"
MEDIANS = "03-performance-medians"
CHECKS = "03-performance-checks"
RATIOS = "03-performance-ratios"
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


def _target(label: str) -> str:
    from repro.registry import implementation

    return implementation(label).target

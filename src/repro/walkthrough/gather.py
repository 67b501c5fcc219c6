"""Notebook 02, step by step: the K-cache gather through a column-narrowed block table (vLLM PR #55109).

Each method is what one notebook cell calls: it runs the evidence (scenarios, cases, sweeps,
memcheck), turns each observation into a check row with :mod:`repro.core.analysis.gather`, records the
rows as they finish, and returns the table the cell shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from repro.core.analysis import gather as rules
from repro.core.evidence.cases import CaseResult
from repro.core.evidence.environment import find_compute_sanitizer
from repro.core.evidence.sanitizer import SanitizerResult
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.evidence.sweep import SweepCase, Workers, run_sanitizer_sweep, run_sweep, sweep_cases
from repro.core.evidence.vllm_cases import ContiguousObservation, run_vllm_cases
from repro.core.geometry.layout import DSV4, FLASHMLA_ALIGNMENT, block_layout_rows
from repro.core.kernels.own import kernel_of
from repro.coverage import Geometry, SentinelMode
from repro.parameters import GatherParameters
from repro.profiles import PROFILES
from repro.registry import Expectation, Implementation, is_outside, sweep_implementations, under_test
from repro.tables import Facts, Notebook, Table
from repro.walkthrough.session import Progress, Session, Setup

NOTEBOOK = Notebook.GATHER
CONTIGUOUS = Table.CONTIGUOUS_CHECKS
SWEEP = Table.SWEEP
SAFETY = Table.MEMORY_SAFETY
MEMCHECK = Table.SANITIZER
#: The small example of section 3: requests, rows of the backing table, blocks per request.
EXAMPLE_REQUESTS, EXAMPLE_ROWS, EXAMPLE_BLOCKS = 3, 4, 3


@dataclass
class GatherWalkthrough:
    session: Session
    implementations: tuple[Implementation, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    workers: Workers | None = None  # the case processes of the implementation under test, while cases run
    loaded: list[dict] = field(default_factory=list)  # the modules it was loaded from, as its processes read them

    @classmethod
    def start(
        cls, profile: str = "auto", run_dir: str = "", params: GatherParameters | None = None
    ) -> GatherWalkthrough:
        """Check the parameters; an implementation from outside is imported and checked in its case process,
        never in this one (its import-time code runs only where it runs)."""
        params = params or GatherParameters()
        workers = Workers(params.case_timeout_s or PROFILES["cpu"].case_timeout_s)

        def import_check(path: str, param: str) -> object:
            entry = under_test(path) if isinstance(path, str) else None
            if entry is None or not is_outside(entry):  # this repository's own kernel: imported here, as the controls
                return kernel_of(path, param)
            return workers.of(entry).check(path, param)

        try:
            session = Session.start(NOTEBOOK, profile, run_dir, params, import_check=import_check)
        except BaseException:
            workers.close()
            raise
        p = session.params = params.resolved(session.profile)
        workers.timeout_s = p.case_timeout_s
        for worker in workers.held.values():
            worker.timeout_s = p.case_timeout_s
        return cls(session, (*sweep_implementations(), under_test(p.implementation)), workers=workers)

    @property
    def p(self) -> GatherParameters:
        return self.session.params  # type: ignore[return-value]  (start() sets notebook 02's)

    def setup(self) -> Setup:
        """The profile, its device and the implementation under test (``phrases.setup`` words it)."""
        prof = self.session.profile
        return Setup(prof.name, str(prof.device), implementation=self.p.implementation)

    def block_layout(self) -> tuple[pd.DataFrame, str]:
        B = self.p.cache_block_size
        text = (
            f"block stride: unpadded {DSV4.block_stride(B)} bytes, padded "
            f"{DSV4.block_stride(B, FLASHMLA_ALIGNMENT)} bytes (B = {B})"
        )
        return pd.DataFrame(block_layout_rows(B, FLASHMLA_ALIGNMENT)), text

    def contiguous_cases(self) -> pd.DataFrame:
        """vLLM's two test cases, unpadded and padded: the writer byte for byte, every gather bitwise."""
        self.session.cell("contiguous_cases")
        table = self.session.table(CONTIGUOUS)

        def on_writer(case: str, n: int, differ: int, total: int) -> None:
            table.append(rules.writer_row(case, n, differ, total))

        def on_gather(entry: Implementation, o: ContiguousObservation) -> None:
            table.append(
                rules.contiguous_case_row(
                    entry.label,
                    o.case,
                    o.num_reqs,
                    o.mismatched_tokens,
                    o.stray_writes,
                    o.whole_equal,
                    o.total_tokens,
                    o.error,
                    o.changed_inputs,
                    o.out_repointed,
                    entry.target,
                )
            )

        try:
            run_vllm_cases(
                self.session.profile.device,
                self.implementations,
                on_writer,
                on_gather,
                self.p.case_timeout_s,
                lambda entry: self.case_processes().of(entry) if is_outside(entry) else None,
            )
        finally:
            self.end_case_processes()
        return table.frame()[["check", "variant", "case", "observed", "ok"]]

    def case_processes(self) -> Workers:
        if self.workers is None:
            self.workers = Workers(self.p.case_timeout_s)
        return self.workers

    def end_case_processes(self) -> None:
        """End the case processes, recording every module the implementation under test was loaded from (read in
        the process that ran it, right after it loaded it): ``results/02-implementation.json``."""
        if self.workers is None:
            return
        modules = self.workers.modules().get(self.p.implementation, [])
        self.workers.close()
        self.workers = None
        new = [m for m in modules if m not in self.loaded]
        if new:
            self.loaded += new
            self.session.write_facts(Facts.IMPLEMENTATION, {"implementation": self.loaded[0], "loaded": self.loaded})

    def narrowed_view_example(self) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        """A 3-request view of a 4-row table: its shape and strides (the two row pitches), the backing entries,
        and which entry each request's blocks are read from with the buggy pitch."""
        B = self.p.cache_block_size
        small = build_scenario(
            ScenarioSpec(
                num_reqs=EXAMPLE_REQUESTS,
                block_size=B,
                seq_len_max=EXAMPLE_BLOCKS * B,
                seed=self.p.seed,
                mode=SentinelMode.IN_RANGE,
                max_reqs=EXAMPLE_ROWS,
                device="cpu",
            )
        )
        view = small.block_table
        text = (
            f"block_table = backing[:{view.shape[0]}, :{view.shape[1]}]: shape {tuple(view.shape)}, "
            f"stride {view.stride()}\n"
            f"  gather_buggy's row pitch: block_table.shape[-1] = {view.shape[-1]}\n"
            f"  gather_fixed's row pitch: block_table.stride(0) = {view.stride(0)}\n"
            f"seq_lens {small.seq_lens.tolist()}, {B} tokens per block"
        )
        reads = rules.buggy_reads(view.shape[-1], view.stride(0), view.shape[0], small.seq_lens.tolist(), B)
        return text, pd.DataFrame(small.backing.tolist()), reads

    def cases(self) -> list[SweepCase]:
        """The sweep's cases: every request count in each mode, and the other geometries (repro.coverage)."""
        return sweep_cases(
            self.p.request_counts,
            self.p.sentinel_modes,
            self.base_spec(),
            self.session.profile.high_block_id,
            self.p.geometries,
        )

    def case_count(self) -> int:
        """Cases in one sweep: its cases x implementations."""
        return len(self.cases()) * len(self.implementations)

    def progress(self, what: str) -> Progress:
        """A progress bar over one sweep's cases, for :meth:`sweep` and :meth:`memcheck`."""
        return Progress(self.case_count(), what)

    def base_spec(self) -> ScenarioSpec:
        p = self.p
        return ScenarioSpec(
            num_reqs=1,
            block_size=p.cache_block_size,
            seq_len_max=p.seq_len_max,
            seed=p.seed,
            max_reqs=max(p.request_counts),
            backing_width=p.backing_width,
            device=self.session.profile.device,
        )

    def sweep(
        self, progress: Callable[[Implementation, str, int, CaseResult], None] | bool | None = None
    ) -> pd.DataFrame:
        """Every implementation at every request count in both sentinel modes; one row per case.

        ``progress``: a callback per finished case, or True for a progress bar."""
        self.session.cell("sweep")
        if progress is True:
            progress = self.progress("sweep")
        prof = self.session.profile
        cases = self.session.table(SWEEP)
        safety = self.session.table(SAFETY) if prof.interpret else None

        def sink(entry: Implementation, case: SweepCase, result: CaseResult) -> None:
            obs = result.to_dict()
            where = case.columns()
            cases.append(rules.sweep_row(entry.label, entry.expect, case.mode, case.num_reqs, obs, where))
            if safety is not None:
                row = rules.memory_row(entry.label, entry.expect, case.mode, case.num_reqs, obs, where)
                if row is not None:
                    safety.append(row)
            if progress is not None:
                progress(entry, case, result)

        t0 = time.perf_counter()
        try:
            run_sweep(
                self.cases(),
                self.implementations,
                sink,
                self.case_processes(),
                on_gpu=prof.device == "cuda",
                interpreted=prof.interpret,
                timeout_s=self.p.case_timeout_s,
            )
        finally:
            self.end_case_processes()
        self.seconds["sweep"] = time.perf_counter() - t0
        return cases.frame()

    def sweep_pivot(self) -> pd.DataFrame:
        """Tokens differing per request count and mode at the default geometry (the other geometries: the table)."""
        return rules.mismatch_pivot(rules.default_geometry(self.session.table(SWEEP).frame()))

    def other_geometries(self) -> pd.DataFrame:
        """The cases of the other geometries: one row per case, one column per variant."""
        frame = self.session.table(SWEEP).frame()
        return rules.geometry_pivot(frame[frame["geometry"] != Geometry.DEFAULT])

    def memory_safety(self) -> tuple[pd.DataFrame, str]:
        """CPU: flagged lanes per case and the kernel lines they came from. GPU: the faulting cases."""
        if SAFETY in self.session.tables:
            mem = rules.default_geometry(self.session.table(SAFETY).frame())
            pivot = mem.pivot_table(
                index=["mode", "num_reqs"],
                columns="variant",
                values=["out_of_view_lanes", "out_of_bounds_lanes"],
                aggfunc="first",
            )
            buggy = mem[
                mem.variant.map(lambda v: v in {e.label for e in self.implementations if e.expect == Expectation.BUG})
            ]
            lines = buggy.sort_values("num_reqs").iloc[-1]["lines"] if len(buggy) else ""
            return pivot, lines
        sweep = self.session.table(SWEEP).frame()
        return sweep[sweep.status != "ok"][["variant", "mode", "num_reqs", "status", "error"]], ""

    def memcheck(
        self, progress: Callable[[Implementation, str, int, SanitizerResult], None] | bool | None = None
    ) -> tuple[pd.DataFrame | None, str]:
        """Every case again under compute-sanitizer memcheck (GPU); why not, where it cannot run.

        ``progress``: a callback per finished case, or True for a progress bar (only when memcheck runs)."""
        self.session.cell("memcheck")
        prof, policy = self.session.profile, self.p.sanitizer
        if prof.device != "cuda":
            return (
                None,
                "compute-sanitizer applies to GPU runs; the bounds-checked interpreter above is the CPU evidence",
            )
        if policy == "off":
            return None, "compute-sanitizer: off (sanitizer='off')"
        if find_compute_sanitizer() is None:
            self.session.write_facts(Facts.SANITIZER, {"status": "unavailable"})
            return None, "compute-sanitizer: unavailable on this machine; memcheck evidence not recorded"
        table = self.session.table(MEMCHECK)
        if progress is True:
            progress = self.progress("memcheck")
        log_dir = f"{self.session.run_dir}/logs/sanitizer" if self.session.run_dir else "sanitizer-logs"

        def sink(entry: Implementation, case: SweepCase, res: SanitizerResult) -> None:
            name = res.log_path.rsplit("/", 1)[-1] if res.log_path else ""
            row = rules.memcheck_row(entry.label, entry.expect, case.mode, case.num_reqs, res.to_dict(), name)
            table.append({**row, **case.columns()})
            if progress is not None:
                progress(entry, case, res)

        t0 = time.perf_counter()
        run_sanitizer_sweep(self.cases(), self.implementations, log_dir, sink)
        self.seconds["memcheck"] = time.perf_counter() - t0
        san = table.frame()
        first = rules.first_memcheck_access(san)
        return rules.memcheck_pivot(san), (
            f"memcheck: {len(san)} cases in {self.seconds['memcheck']:.1f} s; first access: {first['first_access']}"
            if first
            else ""
        )

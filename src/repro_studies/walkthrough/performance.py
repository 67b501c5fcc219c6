"""Notebook 03, step by step: what the stride fix costs (GPU), against a contiguous table and the
rejected ``.contiguous()`` copy, against the copy ceiling and the streaming ceiling measured in the
same run, what separates the gather from that ceiling, the same questions asked of vLLM's own kernel
(each requested release's, as shipped and with PR #55109's change, loaded by ``repro_studies.upstream``), and
the JIT fingerprint of every kernel.

On the CPU profile kernels run in Triton's interpreter, whose time per program says nothing about
a GPU; the timing steps then record why they were skipped, and the JIT fingerprint is predicted
with Triton's own cache-key function instead of observed (the interpreter compiles nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from repro import seeds
from repro.core.analysis.provenance import provenance_name
from repro.core.kernels.own import kernel_of
from repro.registry import implementation, load_implementation, provenance
from repro.walkthrough.session import Session
from repro_studies.analysis import ceiling as ceiling_rules
from repro_studies.analysis import cutedsl as cutedsl_rules
from repro_studies.analysis import jit as jit_rules
from repro_studies.analysis import performance as rules
from repro_studies.analysis import upstream_cost
from repro_studies.analysis.jit import Pitch
from repro_studies.evidence import perf, timing
from repro_studies.evidence.ceiling import run_ceiling
from repro_studies.evidence.jit import JitSubject, fingerprint_subjects
from repro_studies.registry import (
    OUTSIDE_ARM,
    TRITON_FORMS,
    Form,
    bench_arms,
    code_label,
    cutedsl_bench_arms,
    upstream_bench_arms,
)
from repro_studies.tables import Facts, Notebook, Table
from repro_studies.upstream import callsites
from repro_studies.upstream.cutedsl import cutedsl_callable
from repro_studies.upstream.members import PRODUCTION_PATH as MODEL_FILES
from repro_studies.upstream.patcher import rewrite_file
from repro_studies.upstream.release_kernel import ReleaseUnavailable, load_release_kernel, origin_of
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release
from repro_studies.walkthrough import session as study_session

NOTEBOOK = Notebook.PERFORMANCE
MEDIANS = Table.PERF_MEDIANS
CHECKS = Table.PERF_CHECKS
RATIOS = Table.PERF_RATIOS
CEILING = Table.CEILING
DECOMPOSITION = Table.DECOMPOSITION
VS_CEILING = Table.VS_CEILING
GAP = Table.GAP
CEILING_CHECKS = Table.CEILING_CHECKS
JIT = Table.JIT
JIT_SUMMARY = Table.JIT_SUMMARY
JIT_CHECKS = Table.JIT_CHECKS
VLLM_LOADS = Table.VLLM_LOADS
VLLM_CHECKS = Table.VLLM_CHECKS
VLLM_MEDIANS = Table.VLLM_MEDIANS
VLLM_RATIOS = Table.VLLM_RATIOS
#: vLLM's CuTe-DSL gather beside gather_fast: one status row per release, its checks, medians, the table.
CUTEDSL, CUTEDSL_CHECKS, CUTEDSL_MEDIANS, CUTEDSL_VS_FAST = (
    Table.CUTEDSL,
    Table.CUTEDSL_CHECKS,
    Table.CUTEDSL_MEDIANS,
    Table.CUTEDSL_VS_FAST,
)
#: Where each release's model calls the gather and how its default CUDA-graph setup runs those calls.
PRODUCTION_PATH, PRODUCTION_SUMMARY = Table.PRODUCTION_PATH, Table.PRODUCTION_SUMMARY
#: Host and device time per eager call of every timed arm (``eager_costs``).
EAGER_COSTS = Table.EAGER_COSTS
#: Facts: each release's provenance and exact rewrites (``releases``), the cost headline, the JIT story.
VLLM_FACTS, VLLM_COST, VLLM_JIT = Facts.VLLM, Facts.VLLM_COST, Facts.VLLM_JIT
#: DeepSeek-V4's compressed layer kinds, which a release's JIT warm-up reads from the model config.
DSV4_COMPRESS_RATIOS = (4, 128)


@dataclass
class PerformanceWalkthrough:
    session: Session
    ceiling_tbps: float | None = None
    ratios: pd.DataFrame | None = None
    facts: dict = field(default_factory=dict)
    outside_names: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)  # "vLLM <version>" -> form -> ReleaseKernel
    cutedsl_facts: dict = field(default_factory=dict)
    production_summary: pd.DataFrame | None = None

    @classmethod
    def start(cls, profile: str = "auto", run_dir: str = "", **params) -> PerformanceWalkthrough:
        return cls(study_session.start(NOTEBOOK, profile, run_dir, **params))

    @property
    def on_gpu(self) -> bool:
        return self.session.profile.device == "cuda"

    def skip_reason(self) -> rules.NotTimed | None:
        """None on a GPU; on the CPU, why nothing is timed (also recorded for the report, which words it)."""
        if self.on_gpu:
            return None
        self.session.write_facts(Facts.PERFORMANCE, {"not_timed": rules.NotTimed.CPU_INTERPRETER})
        return rules.NotTimed.CPU_INTERPRETER

    def measure(self) -> pd.DataFrame:
        """The copy ceiling, then every arm at every shape (bitwise-checked first); the ratio table."""
        p = self.session.params
        ceiling = timing.copy_ceiling()
        self.ceiling_tbps = ceiling.tbps
        arms = [perf.TimedArm(a, kernel_of(_target(a.implementation))) for a in bench_arms(p.bench_variants)]
        if p.reference_gather:
            arms.append(perf.TimedArm(OUTSIDE_ARM, load_implementation(p.reference_gather, "reference_gather")))
            self.outside_names[OUTSIDE_ARM.label] = provenance_name(provenance(p.reference_gather))
        checks, medians = self.session.table(CHECKS), self.session.table(MEDIANS)

        def on_check(c: perf.ArmCheck) -> None:
            checks.append(
                rules.arm_check_row(c.arm, c.num_reqs, c.seq_len, c.mismatched_tokens, c.stray_writes, c.tokens)
            )

        perf.run_perf(p.request_counts, p.seq_lens, p.cache_block_size, arms, on_check, medians.append)
        ratios = rules.ratio_rows(medians.frame(), ceiling.tbps)
        ratios["copy_ceiling_tbps"] = round(ceiling.tbps, 4)
        self.ratios = self.session.record(RATIOS, ratios.to_dict("records"))
        return self.ratios

    def medians(self) -> pd.DataFrame:
        return self.session.table(MEDIANS).frame()

    def outside_band(self) -> pd.DataFrame:
        return rules.outside_band(self.ratios)

    def finish(self) -> dict:
        """The headline figures (written for the report, numbers only: it words them, ``phrases.timing``)."""
        self.facts = rules.timing_facts(self.medians(), self.ratios)
        self.session.write_facts(Facts.PERFORMANCE, self.facts)
        return self.facts

    # -- the streaming ceiling (GPU) ---------------------------------------------------------------

    def measure_ceiling(self) -> pd.DataFrame:
        """Streaming, read-only and write-only arms at every shape; the gap arms at the largest request
        count of each sequence length, timed in the same rounds; each checked bitwise first."""
        p = self.session.params
        checks = self.session.table(CEILING_CHECKS)

        def on_check(c) -> None:
            checks.append(
                ceiling_rules.ceiling_check_row(c.arm, c.num_reqs, c.seq_len, c.mismatched, c.stray, c.total, c.unit)
            )

        run_ceiling(
            p.request_counts,
            p.seq_lens,
            p.cache_block_size,
            on_check,
            self.session.table(CEILING).append,
            self.session.table(DECOMPOSITION).append,
        )
        return self.session.table(CEILING).frame()

    def eager_costs(self) -> pd.DataFrame:
        """Host time per eager call beside the eager and graph device times, for every arm this run timed
        (the repository's kernels, vLLM's Triton and CuTe-DSL gathers, the streaming kernels); recorded,
        and summarised per arm (returned)."""
        names = (MEDIANS, VLLM_MEDIANS, CUTEDSL_MEDIANS, CEILING, DECOMPOSITION)
        tables = [self.session.table(n).frame() if self.session.table(n).rows else None for n in names]
        costs = rules.eager_costs(tables)
        self.session.record(EAGER_COSTS, costs.to_dict("records"))
        summary = rules.eager_cost_summary(costs)
        self.session.write_facts(Facts.EAGER_COSTS, {"summary": summary.to_dict("records")})
        return summary

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

    def ceiling_facts(self) -> dict:
        """The streaming-ceiling figures at the largest shape (written for the report, which words them:
        ``phrases.ceiling``)."""
        gaps = self.session.table(GAP)
        facts = ceiling_rules.ceiling_facts(self.session.table(VS_CEILING).frame(), gaps.frame() if gaps.rows else None)
        self.session.write_facts(Facts.CEILING, facts)
        return facts

    # -- vLLM's own kernel, as shipped and with PR #55109's change --------------------------------

    def load_vllm(self) -> pd.DataFrame:
        """Each requested release's V4 gather in every form (shipped, PR #55109, stride left constexpr),
        imported from the module cache; one check row per load; provenance and the exact rewrites recorded
        (``results/03-vllm.json``, and ``rewrites/<release>/<form>/*.diff`` in the run folder)."""
        p = self.session.params
        table = self.session.table(VLLM_LOADS)
        facts: dict = {"releases": {}}
        for version in p.vllm_releases:
            for form in TRITON_FORMS:
                row = {"check": "vLLM's gather loads from its wheel, as shipped or rewritten", "variant": form}
                try:
                    rk = load_release_kernel(version, form, download=p.download)
                except ReleaseUnavailable as exc:
                    table.append(
                        {**row, "release": version, "expected": "loaded", "observed": str(exc), "ok": False}
                        | {"code": "", "kernel": "", "wheel_sha256": ""}
                    )
                    continue
                self.kernels.setdefault(rk.origin, {})[form] = rk
                prov = rk.provenance()
                diff = rk.rewrite.diff if rk.rewrite else ""
                if diff and self.session.run_dir:
                    path = rewrite_file(Path(self.session.run_dir) / "rewrites", version, form, rk.info.module)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(diff)
                entry = facts["releases"].setdefault(
                    rk.origin,
                    {k: prov[k] for k in ("release", "wheel", "wheel_sha256", "kernel", "module", "wrapper")}
                    | {"kernel_sha256": prov["kernel_sha256"], "forms": {}},
                )
                entry["forms"][form] = {"edits": prov["edits"], "diff": diff, "stubs": prov["stubs"]}
                table.append(
                    {
                        **row,
                        "release": version,
                        "expected": "loaded" + (", the row pitch rewritten" if form != Form.RELEASED else ""),
                        "observed": f"{rk.origin}: {rk.info.qualname} through {rk.info.wrapper}"
                        + (f" ({'; '.join(prov['edits'])})" if prov["edits"] else ""),
                        "ok": True,
                        "code": rk.origin,
                        "kernel": rk.label,
                        "wheel_sha256": prov["wheel_sha256"],
                    }
                )
        self.session.write_facts(VLLM_FACTS, facts)
        return table.frame() if table.rows else pd.DataFrame(columns=["release", "variant", "observed", "ok"])

    def production_path(self) -> pd.DataFrame:
        """Each requested release's own model code, read with ``ast`` from its wheel (the cache's study files):
        every call of the gather, the loop and condition around it, what reaches it, and whether the release's
        default CUDA-graph setup for DeepSeek-V4 replays it in a graph or runs it eagerly (recorded; the
        per-function summary is returned)."""
        p = self.session.params
        sites = self.session.table(PRODUCTION_PATH)
        for version in p.vllm_releases:
            entry = ensure_release(version, download=p.download, sets=(MODEL_FILES,))
            if isinstance(entry, CacheMiss):
                sites.append(_not_read(f"vLLM {version}", entry.status, entry.reason))
                continue
            try:
                origin = origin_of(entry)
            except ReleaseUnavailable as exc:
                sites.append(_not_read(f"vLLM {version}", callsites.NotRead.UNAVAILABLE, str(exc)))
                continue
            sources = callsites.release_sources(entry)
            if not sources:
                sites.append(_not_read(origin, callsites.NotRead.NO_STUDY_FILES))
                continue
            for row in callsites.production_path(sources, origin):
                sites.append(row)
        frame = sites.frame() if sites.rows else pd.DataFrame()
        summary = upstream_cost.production_path_summary(
            frame[frame["function"].notna()] if "function" in frame else None
        )
        if len(summary):
            self.session.record(PRODUCTION_SUMMARY, summary.to_dict("records"))
        self.production_summary = summary  # the report's phrases word it (phrases.production_path)
        return summary if len(summary) else frame

    def rewrites(self) -> pd.DataFrame:
        """The exact rewrite of each patched form: the edits and the unified diff (also in ``rewrites/``)."""
        rows = [
            {"code": origin, "form": form, "module": rk.info.module, "edits": "; ".join(rk.rewrite.edits)}
            for origin, forms in self.kernels.items()
            for form, rk in forms.items()
            if rk.rewrite
        ]
        return pd.DataFrame(rows)

    def measure_vllm(self) -> pd.DataFrame:
        """vLLM's kernel of every loaded release: shipped on a contiguous table, PR #55109's on the narrowed
        view and on the contiguous table, shipped after ``.contiguous()``; every arm at every shape, checked
        bitwise first, eager and graph-replayed, in alternating rounds; the ratio table."""
        arms = []
        for forms in self.kernels.values():
            if Form.RELEASED not in forms or Form.PATCHED not in forms:
                continue
            released, patched = forms[Form.RELEASED], forms[Form.PATCHED]
            shipped, patched_view, patched_contig, copied = upstream_bench_arms(released.release)
            arms += [
                (shipped, released.gather()),
                (patched_view, patched.gather()),
                (patched_contig, patched.gather()),
                (copied, released.gather(copy_table=True)),
            ]
        if not arms:
            return pd.DataFrame()
        self._time_arms(arms, VLLM_CHECKS, VLLM_MEDIANS)
        ratios = upstream_cost.ratio_rows(self.session.table(VLLM_MEDIANS).frame())
        return self.session.record(VLLM_RATIOS, ratios.to_dict("records"))

    def vllm_cost(self) -> dict:
        """PR #55109's cost on vLLM's own kernel, per release: each ratio's spread (written for the report, which
        words it: ``phrases.vllm_cost``)."""
        facts = upstream_cost.cost_facts(self.session.table(VLLM_RATIOS).frame())
        self.session.write_facts(VLLM_COST, facts)
        return facts

    # -- vLLM's CuTe-DSL gather, gather_fast's real peer ---------------------------------------------

    def measure_cutedsl(self) -> pd.DataFrame:
        """Each requested release's CuTe-DSL gather (called through the release's own dispatcher with
        ``has_cutedsl()`` true, as the release matrix calls it) timed on the narrowed view and its contiguous
        copy, checked bitwise first, at notebook 03's shapes; beside gather_fast's arms and the streaming
        ceiling of this run. A release that cannot run it (no GPU, no package, not shipped) or fails while
        timed gets a status row saying why; what was timed before a failure is kept."""
        p = self.session.params
        status = self.session.table(CUTEDSL)
        for version in p.vllm_releases:
            release, fn, why_not = cutedsl_callable(version, self.session.profile.device, p.download)
            origin = code_label(release)
            if fn is None:
                status.append(cutedsl_rules.status_row(origin, cutedsl_rules.CuteDslStatus.NOT_RUN, why_not))
                continue
            view, contig = cutedsl_bench_arms(release)
            try:
                self._time_arms([(view, fn), (contig, fn)], CUTEDSL_CHECKS, CUTEDSL_MEDIANS)
            except Exception as exc:  # a compile or launch error of vLLM's code: a result, not a crash
                status.append(
                    cutedsl_rules.status_row(origin, cutedsl_rules.CuteDslStatus.FAILED, f"{type(exc).__name__}: {exc}")
                )
                continue
            status.append(cutedsl_rules.status_row(origin, cutedsl_rules.CuteDslStatus.TIMED))
        cute = self.session.table(CUTEDSL_MEDIANS).frame() if self.session.table(CUTEDSL_MEDIANS).rows else None
        ceiling = self.session.table(CEILING).frame() if self.session.table(CEILING).rows else None
        table = cutedsl_rules.beside_fast(cute, self.medians() if self.on_gpu else None, ceiling, self.ceiling_tbps)
        if len(table):
            self.session.record(CUTEDSL_VS_FAST, table.to_dict("records"))
        self.cutedsl_facts = cutedsl_rules.release_facts(status.frame(), table)
        self.session.write_facts(Facts.CUTEDSL, self.cutedsl_facts)
        return table if len(table) else status.frame()

    def _time_arms(self, arms: list, checks_table: str, medians_table: str) -> None:
        """Time ``(registry arm, fn)`` pairs at notebook 03's shapes; check rows and medians into the tables."""
        p = self.session.params
        checks = self.session.table(checks_table)

        def on_check(c: perf.ArmCheck) -> None:
            row = rules.arm_check_row(c.arm, c.num_reqs, c.seq_len, c.mismatched_tokens, c.stray_writes, c.tokens)
            checks.append({**row, "code": c.arm.origin})

        counts = p.vllm_request_counts or p.request_counts
        timed = [perf.TimedArm(arm, fn, getattr(fn, "scope", None)) for arm, fn in arms]
        medians = self.session.table(medians_table)
        perf.run_perf(counts, p.seq_lens, p.cache_block_size, timed, on_check, medians.append)

    def vllm_jit_subjects(self) -> list:
        """Each loaded release's kernel in every form, with the release's own JIT warm-up where it has one."""
        p = self.session.params
        pitch = {
            Form.RELEASED: Pitch.CONSTEXPR_WIDTH,
            Form.PATCHED: Pitch.RUNTIME_STRIDE,
            Form.PATCHED_CONSTEXPR: Pitch.CONSTEXPR_STRIDE,
        }
        subjects = []
        for origin, forms in self.kernels.items():
            for form, rk in forms.items():
                warm = rk.warm_up(p.jit_backing_width, p.cache_block_size, DSV4_COMPRESS_RATIOS)
                subjects.append(
                    JitSubject(f"{origin} {form}", rk.gather(), rk.kernel, pitch[form], origin, *(warm or (None, None)))
                )
        return subjects

    # -- the JIT fingerprint (GPU: observed; CPU: predicted) ----------------------------------------

    def jit_fingerprint(self, subjects: list | None = None, execute: bool = True) -> pd.DataFrame:
        """Each subject warmed up at the full width (a vLLM release with its own JIT warm-up, others with one
        full-width launch), then launched once per width, on narrowed views and on contiguous tables; every
        request holds one cache block, gathered whole as ``gather_lens`` (as vLLM's SWA path passes them, the
        case its warm-up compiles), so only the table changes. The repository's kernels and, unless
        ``subjects`` is given, every loaded vLLM release's: executed on a GPU, predicted without launching on
        the CPU (vLLM's kernels in the interpreter would take minutes)."""
        p = self.session.params
        block = p.cache_block_size
        runs = [(subjects, execute)] if subjects is not None else [(repo_jit_subjects(), execute)]
        if subjects is None and self.kernels:
            runs.append((self.vllm_jit_subjects(), self.on_gpu))
        for chosen, run_them in runs:
            fingerprint_subjects(
                chosen,
                p.jit_widths,
                p.jit_backing_width,
                block_size=block,
                device=self.session.profile.device,
                execute=run_them,
                sink=self.session.table(JIT).append,
                tokens_per_request=lambda w: block,
                window=block,
            )
        rows = self.session.table(JIT).frame()
        self.session.record(JIT_CHECKS, jit_rules.fingerprint_checks(rows, p.jit_widths, p.jit_backing_width))
        return rows

    def jit_summary(self) -> pd.DataFrame:
        """Per kernel and table kind: inference-path compilations, compile time, first-call latency."""
        summary = jit_rules.compile_summary(self.session.table(JIT).frame(), phase="inference")
        self.session.write_facts(
            Facts.JIT,
            {
                "mode": "observed" if self.on_gpu else "predicted",
                "summary": summary.to_dict("records"),
            },
        )
        return self.session.record(JIT_SUMMARY, summary.to_dict("records"))

    def loaded_releases(self) -> dict[str, str]:
        """Each loaded release's ``code`` and release number, as read from its wheel."""
        return {origin: next(iter(forms.values())).release for origin, forms in self.kernels.items() if forms}

    def jit_cumulative(self, releases: bool = False) -> pd.DataFrame:
        """Compilations and compile time so far, after each new width (the fingerprint's plot data): the
        repository's kernels, or with ``releases`` vLLM's."""
        ours, theirs = jit_rules.split_by_code(self.session.table(JIT).frame(), self.loaded_releases())
        return jit_rules.cumulative_by_width(theirs if releases else ours, phase="inference")

    def jit_story(self) -> dict:
        """This run's measurements of vLLM's kernels that tell why PR #55109's log shows a JIT compilation right
        before the illegal access (written for the report, which tells the root cause from them:
        ``phrases.root_cause``)."""
        logged = seeds.load(55109)["reported_jit_kernel"]
        story = jit_rules.release_story(self.session.table(JIT).frame(), self.loaded_releases(), logged)
        facts = {"logged_kernel": logged, "releases": story}
        self.session.write_facts(VLLM_JIT, facts)
        return facts


def repo_jit_subjects() -> list:
    """The repository's own gathers: every row pitch is a runtime int in ``do_not_specialize``."""
    from repro.core.kernels import gather  # lazy: kernel modules, defined under the profile start() activates
    from repro_studies.kernels import fast  # lazy: kernel modules, defined under the profile start() activates

    form = Pitch.RUNTIME_STRIDE_UNSPECIALIZED
    return [
        JitSubject(
            "repro buggy (shape[-1])", gather.gather_buggy, gather._dequantize_and_gather_k_kernel, form, "repro"
        ),
        JitSubject(
            "repro fixed (stride(0))", gather.gather_fixed, gather._dequantize_and_gather_k_kernel, form, "repro"
        ),
        JitSubject("repro fast (stride(0))", fast.gather_fast, fast._gather_fast_kernel, form, "repro"),
    ]


def _not_read(release: str, status: str, reason: str = "") -> dict:
    """A production-path row of a release whose model code was not read: the class and why."""
    return {"release": release, "runs": callsites.Runs.NOT_READ, "status": status, "reason": reason}


def _target(label: str) -> str:
    return implementation(label).target

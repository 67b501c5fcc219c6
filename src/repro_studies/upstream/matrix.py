"""The release matrix: every gather kernel of every asked release, released and patched, over the sweep.

For each release: the cache provides its modules (or a row says why not), discovery lists its
kernels, and each (kernel, variant) arm runs the request-count sweep on column-narrowed tables in both
sentinel modes. ``in-range`` cases run in this process; ``poison`` cases, which can fault on a GPU, each run in a
child process there. In the interpreter every launch is bounds-checked (lanes outside every tensor are counted,
not dereferenced), so no case can fault and every case runs in this process, as the child would run it. Every
observation is handed to ``sink`` as one row with the columns of :data:`ROW_COLUMNS`; nothing here decides a verdict.

Arms whose launch path (kernel, wrapper and everything it reaches, stubs, helpers, switches) has the
same source text as an arm already run share its rows, marked with ``shared_from`` and the
``source_key``; a kernel a release does not ship gets a ``not present`` row, an arm that cannot run
a ``could not load`` / ``not run`` row with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from repro.core.evidence.cases import CaseResult, run_case
from repro.core.evidence.isolate import run_isolated_case
from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
from repro.core.kernels.own import kernel_of
from repro.coverage import SentinelMode
from repro_studies.kernel_id import KernelId, family_of
from repro_studies.kernels.records_reference import decoded_negative_zero
from repro_studies.registry import Form, VerdictClass
from repro_studies.upstream import cutedsl_stack as stack
from repro_studies.upstream.arms import Arm, make_callable
from repro_studies.upstream.cases import case_command, reference_for, run_arm_case
from repro_studies.upstream.discovery import DISPATCHER, Discovery, discover, launch_path_source
from repro_studies.upstream.members import GATHER
from repro_studies.upstream.patcher import PatchError, rewrite_file, rewrite_row_pitch
from repro_studies.upstream.stubs import STUBS, stub_digest
from repro_studies.upstream.wheelcache import CacheEntry, CacheMiss, ensure_release

ROW_COLUMNS = (
    "release",
    "kernel",
    "variant",
    "record",
    "layout",
    "how",
    "mode",
    "num_reqs",
    "status",
    "mismatched_tokens",
    "total_tokens",
    "stray_writes",
    "out_of_view_lanes",
    "out_of_bounds_lanes",
    "error",
    "reason",
    "source_key",
    "shared_from",
    "module",
    "wheel_sha256",
    "block_size",
    "seq_len_max",
    "cutedsl_stack",
)


@dataclass
class MatrixConfig:
    request_counts: list[int]
    modes: list[str]
    block_size: int = 16
    seq_len_max: int = 48
    seed: int = 0
    device: str = "cpu"
    interpreted: bool = True
    variants: tuple = (Form.RELEASED, Form.PATCHED)
    timeout_s: float = 300.0
    max_workers: int = 2
    share_identical: bool = True
    cache_root: Path | None = None
    download: bool = True


@dataclass
class ReleasePlan:
    version: str
    entry: CacheEntry | None
    miss: CacheMiss | None
    discovery: Discovery | None
    arms: list[Arm] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # arm-level rows (not run, not applicable)
    rewrites: dict = field(default_factory=dict)  # (member, variant) -> Rewrite or error text
    cutedsl_stack: str = ""  # the CuTe-DSL stack installed here and the one the release pins


def row(**fields) -> dict:
    """A row with every column of :data:`ROW_COLUMNS` (missing ones empty)."""
    unknown = set(fields) - set(ROW_COLUMNS)
    if unknown:
        raise ValueError(f"unknown row columns {sorted(unknown)}")
    return {c: fields.get(c) for c in ROW_COLUMNS}


def _layout_word(record: str, interleaved: bool) -> str:
    return "v4 page" if record == "v4" else ("interleaved" if interleaved else "page-split")


def cutedsl_status(device: str) -> str:
    """ "" when the CuTe-DSL gather can run here, else why not."""
    if not device.startswith("cuda"):
        return "the CuTe-DSL gather compiles for a CUDA GPU; this run has none"
    try:
        import cutlass  # noqa: F401  lazy: optional CUDA-only packages, probed only for the CuTe-DSL arm
        import quack  # noqa: F401  lazy: as cutlass
    except Exception as exc:
        return f"nvidia-cutlass-dsl / quack-kernels not importable here ({type(exc).__name__}: {exc})"[:300]
    return ""


def plan_release(version: str, cfg: MatrixConfig) -> ReleasePlan:
    got = ensure_release(version, cfg.cache_root, download=cfg.download)
    if isinstance(got, CacheMiss):
        return ReleasePlan(version, None, got, None)
    sources = {m: got.read(m) for m in got.members_of(GATHER) if "deepseek_v4" in m}
    disc = discover(sources)
    plan = ReleasePlan(version, got, None, disc)
    root = str(cfg.cache_root or "")
    for variant in cfg.variants:
        for k in disc.kernels:
            if variant != Form.RELEASED and (k.module, variant) not in plan.rewrites:
                try:
                    plan.rewrites[(k.module, variant)] = rewrite_row_pitch(
                        sources[k.module], k.module, runtime=variant == Form.PATCHED
                    )
                except PatchError as exc:
                    plan.rewrites[(k.module, variant)] = f"patch failed: {exc}"
            plan.arms.append(
                Arm(
                    version,
                    k.label,
                    variant,
                    k.module,
                    k.wrapper,
                    k.record,
                    k.interleaved,
                    kernel_name=k.name,
                    class_name=k.class_name,
                    rocm="one_pass" in k.name,
                    cache_root=root,
                )
            )
    why_not = cutedsl_status(cfg.device)
    if disc.cute:
        ran = None if why_not else stack.installed()
        plan.cutedsl_stack = stack.describe(version, ran, stack.pinned(version, cfg.cache_root, cfg.download))
    for c in disc.cute:
        for member in c.dispatchers:
            family = family_of(member)
            records = ["v4"] + (["mxfp8"] if family == "v41" and "V41_BYTES_PER_TOKEN" in sources[member] else [])
            for record in records:
                label = KernelId.cutedsl(family, record).matrix_label
                interleaved = record != "v4" and any(k.record == record and k.interleaved for k in disc.kernels)
                arm = Arm(
                    version,
                    label,
                    Form.RELEASED,
                    member,
                    DISPATCHER,
                    record,
                    interleaved,
                    cutedsl=True,
                    cache_root=root,
                )
                for variant in cfg.variants:
                    if variant == Form.RELEASED and not why_not:
                        plan.arms.append(arm)
                        continue
                    status, reason = (
                        (VerdictClass.NOT_RUN, why_not)
                        if variant == Form.RELEASED
                        else (VerdictClass.NOT_APPLICABLE, "PR #55109 changes the Triton launch only")
                    )
                    plan.skipped.append(
                        row(
                            release=version,
                            kernel=label,
                            variant=variant,
                            record=record,
                            status=status,
                            module=c.module,
                            reason=reason,
                            cutedsl_stack=plan.cutedsl_stack if variant == Form.RELEASED else None,
                        )
                    )
    return plan


def _source_key(plan: ReleasePlan, arm: Arm) -> str:
    text = plan.entry.read(arm.module)
    rw = plan.rewrites.get((arm.module, arm.variant))
    if rw is not None and not isinstance(rw, str):
        text = rw.rewritten
    h = hashlib.sha256()
    h.update(launch_path_source(text, arm.wrapper).encode())
    for member in used_helpers(plan.entry, text):
        h.update(member.encode() + plan.entry.provenance["files"][member]["sha256"].encode())
    h.update(stub_digest(STUBS).encode())
    h.update(json.dumps([arm.kernel, arm.record, arm.interleaved, arm.rocm, arm.cutedsl, arm.variant]).encode())
    return h.hexdigest()[:16]


def used_helpers(entry: CacheEntry, text: str) -> list[str]:
    """Cached helper modules a source imports, directly or through another helper (by dotted name)."""
    helpers = {m[:-3].replace("/", "."): m for m in entry.members_of(GATHER) if "deepseek_v4" not in m}
    used, texts = set(), [text]
    while texts:
        t = texts.pop()
        for name, member in helpers.items():
            if member not in used and name in t:
                used.add(member)
                texts.append(entry.read(member))
    return sorted(used)


def _result_fields(r: CaseResult) -> dict:
    return dict(
        status=r.status,
        mismatched_tokens=r.mismatched_tokens,
        total_tokens=r.total_tokens,
        stray_writes=r.stray_writes,
        out_of_view_lanes=r.out_of_view_lanes,
        out_of_bounds_lanes=r.out_of_bounds_lanes,
        error=r.error,
    )


def run_isolated(arm: Arm, spec: ScenarioSpec, checked: bool, timeout_s: float) -> CaseResult:
    """One case in a child process; a fault or a hang becomes a result."""
    label = f"vllm=={arm.release}:{arm.kernel}:{arm.variant}"
    return run_isolated_case(case_command(arm, spec, checked), label, timeout_s, dict(os.environ))[0]


def sweep_spec(cfg: MatrixConfig, record: str, interleaved: bool) -> ScenarioSpec:
    """The sweep's scenario at one request (``replace`` sets the count and the sentinel mode)."""
    return ScenarioSpec(
        num_reqs=1,
        block_size=cfg.block_size,
        seq_len_max=cfg.seq_len_max,
        seed=cfg.seed,
        max_reqs=max(cfg.request_counts),
        device=cfg.device,
        record=record,
        interleaved=interleaved,
    )


def run_arm(plan: ReleasePlan, arm: Arm, cfg: MatrixConfig, base: dict, emit: Callable[[dict], None]) -> list[dict]:
    """The sweep of one arm; returns its rows (also emitted)."""
    rows = []

    def out(fields: dict) -> None:
        r = row(**base, **fields)
        rows.append(r)
        emit(r)

    rw = plan.rewrites.get((arm.module, arm.variant))
    if isinstance(rw, str):
        out(dict(status=VerdictClass.COULD_NOT_LOAD, reason=rw))
        return rows
    try:
        fn = make_callable(arm, cfg.interpreted)
    except Exception as exc:
        out(dict(status=VerdictClass.COULD_NOT_LOAD, reason=f"{type(exc).__name__}: {exc}"[:400]))
        return rows
    spec0 = sweep_spec(cfg, arm.record, arm.interleaved)
    if arm.record == "nvfp4":
        spec0, note = _zero_convention(spec0, fn, arm.interleaved, cfg.device)
        base = {**base, "how": f"{base['how']}; {note}" if base.get("how") else note}
    for mode in cfg.modes:
        isolated = []
        for n in cfg.request_counts:
            spec = replace(spec0, num_reqs=n, mode=mode)
            if mode == SentinelMode.POISON and not cfg.interpreted:
                isolated.append(spec)
                continue
            scenario = build_scenario(spec)
            r = run_arm_case(
                arm, spec, fn, checked=cfg.interpreted, scenario=scenario, reference=reference_for(scenario)
            )
            out(dict(mode=mode, num_reqs=n, **_result_fields(r)))
        with ThreadPoolExecutor(max_workers=max(1, cfg.max_workers)) as pool:
            futures = [pool.submit(run_isolated, arm, spec, cfg.interpreted, cfg.timeout_s) for spec in isolated]
            for spec, future in zip(isolated, futures):
                out(dict(mode=mode, num_reqs=spec.num_reqs, **_result_fields(future.result())))
    return rows


def _zero_convention(spec: ScenarioSpec, fn: Callable[..., None], interleaved: bool, device: str):
    """The spec whose reference decodes NVFP4's code 8 as ``fn`` does, and a note saying so (the gather decoded
    one token of every code first; a gather that decodes it to neither zero keeps the +0 reference)."""
    try:
        negative = decoded_negative_zero(fn, interleaved, device)
    except Exception as exc:  # the sweep's own cases will show the failure
        return spec, f"reference: code 8 as +0 (the one-token probe raised {type(exc).__name__})"
    if negative is None:
        return spec, "reference: code 8 as +0 (the one-token probe decoded it to neither zero)"
    word = "-0" if negative else "+0"
    return replace(spec, negative_zero=negative), f"reference: e2m1 code 8 as {word}, as this gather decodes it"


def run_matrix(
    releases: list[str],
    cfg: MatrixConfig,
    sink: Callable[[dict], None],
    progress: Callable[[str], None] | None = None,
    arm_done: Callable[[Arm], None] | None = None,
) -> list[ReleasePlan]:
    """Plan every release, then run every arm; rows go to ``sink``, each finished (or shared) arm to
    ``arm_done``. Returns the plans (rewrites, discovery)."""
    say = progress or (lambda text: None)
    finished = arm_done or (lambda arm: None)
    plans = [plan_release(v, cfg) for v in releases]
    labels: dict[str, str] = {}
    for p in plans:
        for a in p.arms:
            labels.setdefault(a.kernel, a.record)
        for s in p.skipped:
            labels.setdefault(s["kernel"], s["record"])
    done: dict[str, tuple[str, list[dict]]] = {}
    for p in plans:
        if p.miss is not None:
            sink(row(release=p.version, status=p.miss.status, reason=p.miss.reason))
            say(f"{p.version}: {p.miss.status}: {p.miss.reason}")
            continue
        present = {a.kernel for a in p.arms} | {s["kernel"] for s in p.skipped}
        for label in sorted(set(labels) - present):
            for variant in cfg.variants:
                sink(
                    row(
                        release=p.version,
                        kernel=label,
                        variant=variant,
                        record=labels[label],
                        status=VerdictClass.NOT_PRESENT,
                        reason=f"vLLM {p.version} ships no {label}",
                        wheel_sha256=p.entry.provenance["sha256"],
                    )
                )
        for s in p.skipped:
            sink({**s, "wheel_sha256": p.entry.provenance["sha256"]})
        for arm in p.arms:
            key = _source_key(p, arm)
            base = dict(
                release=arm.release,
                kernel=arm.kernel,
                variant=arm.variant,
                record=arm.record,
                layout=_layout_word(arm.record, arm.interleaved),
                how=arm.how,
                module=arm.module,
                wheel_sha256=p.entry.provenance["sha256"],
                block_size=cfg.block_size,
                seq_len_max=cfg.seq_len_max,
                source_key=key,
                cutedsl_stack=p.cutedsl_stack if arm.cutedsl else None,
            )
            if cfg.share_identical and key in done:
                origin, rows = done[key]
                for r in rows:
                    sink({**r, **base, "shared_from": origin})
                say(f"{arm.release} {arm.kernel} {arm.variant}: same launch-path source as {origin}, rows shared")
                finished(arm)
                continue
            say(f"{arm.release} {arm.kernel} {arm.variant}: running")
            rows = run_arm(p, arm, cfg, base, sink)
            done[key] = (arm.release, rows)
            finished(arm)
    return plans


#: The ``variant`` of a repository gather's rows: it is under test on the release's records, not the release's code.
UNDER_TEST = "under test"


def record_layouts(plan: ReleasePlan) -> list[tuple[str, bool]]:
    """(record, interleaved) of every V4.1 record the release's own gathers read, in discovery order."""
    if plan.discovery is None:
        return []
    found = [(k.record, k.interleaved) for k in plan.discovery.kernels if k.record != "v4"]
    return list(dict.fromkeys(found))


def run_record_gather(
    version: str, label: str, target: str, record: str, interleaved: bool, cfg: MatrixConfig
) -> list[dict]:
    """A repository gather (``"package.module:function"``, correct by its registry entry, so every case runs in
    this process, bounds-checked in the interpreter) over the matrix's sweep on release ``version``'s
    ``record`` pages: rows with :data:`ROW_COLUMNS`, ``variant`` :data:`UNDER_TEST`."""

    base = dict(
        release=version,
        kernel=label,
        variant=UNDER_TEST,
        record=record,
        layout=_layout_word(record, interleaved),
        how=f"this repository's {target}",
        block_size=cfg.block_size,
        seq_len_max=cfg.seq_len_max,
    )
    spec0 = sweep_spec(cfg, record, interleaved)
    if record == "nvfp4":
        spec0, note = _zero_convention(spec0, kernel_of(target), interleaved, cfg.device)
        base["how"] = f"{base['how']}; {note}"
    rows = []
    for mode in cfg.modes:
        for n in cfg.request_counts:
            spec = replace(spec0, num_reqs=n, mode=mode)
            scenario = build_scenario(spec)
            r = run_case(spec, target, cfg.interpreted, scenario, reference_for(scenario), cfg.timeout_s)
            rows.append(row(**base, mode=mode, num_reqs=n, **_result_fields(r)))
    return rows


def write_rewrites(plans: list[ReleasePlan], folder: Path) -> list[Path]:
    """Each rewrite's exact unified diff (or why it failed) under ``folder/<release>/<variant>/``."""
    written = []
    for p in plans:
        for (member, variant), rw in p.rewrites.items():
            path = rewrite_file(folder, p.version, variant, member)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rw if isinstance(rw, str) else rw.diff)
            written.append(path)
    return written

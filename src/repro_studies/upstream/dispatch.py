"""Which gather a release runs: per GPU family, model and record, decided by the release's own code.

For one release and one :class:`~repro_studies.upstream.platforms.GpuFamily` the chain is run, link by link, with
:class:`~repro_studies.upstream.released_code.ReleasedCode` (each link the release's own definition; the family's
facts are the only stand-ins):

1. the model package's ``__init__`` picks a platform implementation (its ``if`` tests evaluated);
2. that implementation's attention selector (``_select_dsv4_attn_cls``, ``_select_v4_sparse_impl``) is
   called with a default configuration; without one, the implementation's only class calling the gather
   dispatcher is the backend. A selector that reads the tensor-parallel size (SM100's mega-attention check)
   is run for every size of :data:`~repro_studies.upstream.topology.TOPOLOGIES`, and each class it returns is a
   path of its own, labelled with the sizes and with what the release's check read and returned;
3. the ops the class calls on the family's branch are called (:mod:`repro_studies.upstream.serving`): a package
   without a branch for the platform, or an op that raises there, is a row "model not served on this
   platform" with the release's own error;
4. DeepSeek-V4.1's record widths are computed by the statements of its attention ``__init__`` that assign
   them (the default ``--kv-cache-dtype`` read from ``CacheConfig``); DeepSeek-V4's gather module reads
   one record only;
5. the dispatcher the backend calls (``dequantize_and_gather_k_cache``) is called with a K cache of each
   record width, ``has_cutedsl()`` being the release's own function on the family's ``importlib``; every
   Triton gather's ``run`` and the CuTe-DSL entry are intercepted, so what launches is observed and nothing
   runs (no GPU needed).

A link that cannot run ends the path in a row saying which definition and why, never a guess.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

from repro_studies.kernel_id import KernelFamily, KernelId, family_of
from repro_studies.registry import ANY_TOPOLOGY, DispatchStatus, WarmUpRegistered
from repro_studies.upstream import platforms as pf
from repro_studies.upstream import serving, warmups
from repro_studies.upstream import topology as tp
from repro_studies.upstream.discovery import CUTEDSL_MODULE_SUFFIX, discover
from repro_studies.upstream.members import DISPATCH
from repro_studies.upstream.released_code import ClassRef, NotProvided, ReleasedCode, StatementFailed
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release

DISPATCHER = "dequantize_and_gather_k_cache"
IMPORT_UTILS = "vllm/utils/import_utils.py"
CACHE_CONFIG = "vllm/config/cache.py"
SELECTOR = re.compile(r"^_select_\w*(attn|impl)\w*$")


@dataclass(frozen=True)
class Model:
    name: str
    package: str  # vllm/models/<package>
    legacy_module: str = ""  # the single-module layout before the package existed


@dataclass(frozen=True)
class Record:
    bytes: int
    kind: str  # discovery's record kind: v4 | mxfp8 | nvfp4
    display: str


V4 = Model("DeepSeek-V4", "deepseek_v4", "vllm/model_executor/models/deepseek_v4.py")
V41 = Model("DeepSeek-V4.1", "deepseek_v41")
MODELS = (V4, V41)
FP8_DS_MLA = Record(584, "v4", "584 B fp8_ds_mla")
MXFP8 = Record(528, "mxfp8", "528 B MXFP8")
NVFP4 = Record(288, "nvfp4", "288 B NVFP4")
RECORDS = (FP8_DS_MLA, MXFP8, NVFP4)

COLUMNS = (
    "release",
    "gpu_family",
    "model",
    "record",
    "topology",
    "backend",
    "gather_kernel",
    "default_record_for",
    "status",
    "matrix_kernel",
    "condition",
    "refused_by",
    "how",
)


class PathNotDecided(RuntimeError):
    """A link of the chain could not run; the message names the release's definition and the reason."""


class NotServed(RuntimeError):
    """The release's model code cannot serve the model on the family; the message is the release's reason."""


@dataclass
class Path:
    """What one release decides for one family and model, before the per-record dispatch."""

    backend: str = ""
    backend_member: str = ""
    gather_sites: list[str] = field(default_factory=list)  # "Class.method" calling the dispatcher
    dispatcher_member: str = ""
    records: dict[int, str] = field(default_factory=dict)  # record bytes -> "compressed + SWA" etc.
    how: list[str] = field(default_factory=list)
    topology: str = ANY_TOPOLOGY  # the tensor-parallel sizes the selection gives this class for
    condition: str = ""  # the released checks that read the topology


def released_code(
    read: Callable[[str], str], members: Iterable[str], release: str, family: pf.GpuFamily, parsed: dict | None = None
) -> ReleasedCode:
    code = ReleasedCode(read, list(members), label=f"vLLM {release}", parsed=parsed)
    pf.install(code, family)
    code.standins["vllm.triton_utils"] = triton_utils()
    return code


def triton_utils() -> types.ModuleType:
    """``vllm.triton_utils`` re-exports Triton (and probes GPU drivers, which a study host has none of)."""

    module = types.ModuleType("vllm.triton_utils")
    module.triton, module.tl, module.HAS_TRITON = triton, tl, True
    return module


def default_config(code: ReleasedCode, topology: tp.Topology = tp.DEFAULT) -> Any:
    """The engine configuration a selector reads, at vLLM's defaults and ``topology``
    (:func:`repro_studies.upstream.topology.default_config`)."""
    return tp.default_config(default_cache_dtype(code), topology)


def default_cache_dtype(code: ReleasedCode) -> str:
    """``--kv-cache-dtype``'s default: the release's ``CacheConfig.cache_dtype``."""
    if CACHE_CONFIG not in code.members:
        return "auto"
    try:
        value = code.value(CACHE_CONFIG, "CacheConfig").cache_dtype
    except (AttributeError, NotProvided):
        return "auto"
    return value if isinstance(value, str) else "auto"


# ---- link 1: platform implementation ---------------------------------------------------------------------
def implementation(code: ReleasedCode, model: Model) -> tuple[str, str]:
    """(directory of the platform implementation, evidence); ("", why) when the model is not shipped;
    :class:`NotServed` when the package has no branch for the platform."""
    init = f"vllm/models/{model.package}/__init__.py"
    if init in code.members:
        imports = code.taken_imports(init)
        causal = [m for m, n in imports if n.endswith("ForCausalLM") and "DSpark" not in n]
        if not causal:
            raise NotServed(f"{init} has no branch for this platform: no ...ForCausalLM import on the taken branch")
        module = causal[0]
        sub = module.rsplit(".", 1)[0].replace(".", "/")
        return sub + "/", f"{init} imports {module} on this platform"
    if model.legacy_module and model.legacy_module in code.members:
        return "vllm/", f"{model.legacy_module}: one implementation for every platform"
    return "", f"vLLM {code.label} ships no vllm/models/{model.package}"


# ---- link 2: attention backend ---------------------------------------------------------------------------
def _functions(code: ReleasedCode, member: str) -> list[str]:
    return [n.name for n in code.tree(member).body if isinstance(n, ast.FunctionDef)]


def _calls_dispatcher(node: ast.AST) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == DISPATCHER for c in ast.walk(node)
    )


def gather_callers(code: ReleasedCode, directory: str) -> list[tuple[str, str]]:
    """(member, class) of every class under ``directory`` with a method calling the dispatcher."""
    found = []
    for member in sorted(m for m in code.members if m.startswith(directory)):
        if "/ops/" in member or member.endswith("cache_utils.py"):
            continue
        for node in code.tree(member).body:
            if isinstance(node, ast.ClassDef) and _calls_dispatcher(node):
                found.append((member, node.name))
    return found


@dataclass
class Selection:
    """One class a release's selection gives, and the topologies it gives it for."""

    cls: ClassRef
    how: list[str]
    topologies: tuple[tp.Topology, ...] = (tp.DEFAULT,)
    read_topology: bool = False
    condition: str = ""  # the released checks that read the topology, their values and answers

    @property
    def topology(self) -> str:
        return tp.label(self.topologies) if self.read_topology else ANY_TOPOLOGY


def selections(code: ReleasedCode, model: Model, directory: str) -> list[Selection]:
    """The attention classes the release selects by default, per topology, and how each was found."""
    root = f"vllm/models/{model.package}/"
    candidates = [f"{directory}model.py", f"{root}attention.py"] if directory != "vllm/" else []
    for member in candidates:
        if member not in code.members:
            continue
        for name in _functions(code, member):
            if not SELECTOR.match(name):
                continue
            return _run_selector(code, member, name)
    scope = directory if directory != "vllm/" else "vllm/"
    callers = gather_callers(code, scope)
    if len(callers) == 1:
        member, name = callers[0]
        cls = code.value(member, name)
        return [Selection(cls, [f"no selector; {member}:{name} is the only class under {scope} calling {DISPATCHER}"])]
    if not callers:
        raise PathNotDecided(f"no selector and no class under {scope} calls {DISPATCHER}")
    names = ", ".join(f"{m}:{n}" for m, n in callers)
    raise PathNotDecided(f"no selector and several classes under {scope} call {DISPATCHER}: {names}")


def _run_selector(code: ReleasedCode, member: str, name: str) -> list[Selection]:
    """Run the selector at the default topology, and at every topology when it read the tensor-parallel size;
    one :class:`Selection` per class returned."""
    fn = code.function(member, name)
    takes_config = bool(code.toplevel(member, name).args.args)
    cache_dtype = default_cache_dtype(code)
    runs: list[tuple[tp.Topology, tp.Traced]] = []
    for topology in tp.TOPOLOGIES:
        try:
            run = tp.traced(code, fn, takes_config, cache_dtype, topology)
        except Exception as exc:  # the row says which definition and why
            raise PathNotDecided(f"{member}:{name} raised {type(exc).__name__}: {exc}") from None
        if not isinstance(run.chosen, ClassRef):
            raise PathNotDecided(f"{member}:{name} returned {run.chosen!r}, not a released class")
        runs.append((topology, run))
        if not runs[0][1].read_topology():
            break
    read = runs[0][1].read_topology()
    out: list[Selection] = []
    for cls in dict.fromkeys(run.chosen for _, run in runs):
        mine = [(t, run) for t, run in runs if run.chosen is cls]
        topologies = tuple(t for t, _ in mine)
        condition = tp.checks(code, [run for _, run in mine]) if read else ""
        where = f" with {tp.label(topologies)}" if read else ""
        how = [f"{member}:{name}(){where} -> {cls.__name__}" + (f" ({condition})" if condition else "")]
        out.append(Selection(cls, how, topologies, read, condition))
    return out


def gather_sites(cls: ClassRef) -> tuple[list[str], ClassRef | None]:
    """``Class.method`` names along the class's bases that call the dispatcher, and the class holding them."""
    for c in cls.lineage():
        methods = [
            f"{c.__name__}.{n.name}" for n in c._node.body if isinstance(n, ast.FunctionDef) and _calls_dispatcher(n)
        ]
        if methods:
            return methods, c
    return [], None


# ---- link 3: records -------------------------------------------------------------------------------------
RECORD_TARGETS = (
    "kv_cache_dtype",
    "kv_mxfp8",
    "kv_bytes_per_token",
    "swa_bytes_per_token",
    "compressed_bytes_per_token",
)


def _assigns_self(stmt: ast.stmt, names: Iterable[str]) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    flat = []
    for t in targets:
        flat.extend(t.elts if isinstance(t, ast.Tuple) else [t])
    return any(
        isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and t.attr in names
        for t in flat
    )


def record_widths(
    code: ReleasedCode, cls: ClassRef, topology: tp.Topology = tp.DEFAULT
) -> tuple[dict[str, int], list[str]]:
    """The record widths the class's ``__init__`` assigns, by running those statements as released."""
    for owner in cls.lineage():
        init = owner.own("__init__")
        if init is None:
            continue
        stmts = [s for s in init.body if _assigns_self(s, RECORD_TARGETS)]
        if not stmts:
            continue
        cfg = default_config(code, topology)
        asked = cfg.cache_config.cache_dtype
        self_obj = cls.instance()
        local = {"self": self_obj, "cache_config": cfg.cache_config, "vllm_config": cfg}
        try:
            code.execute_all(owner._member, stmts, local, f"{owner.__name__}.__init__")
        except StatementFailed as exc:
            raise PathNotDecided(str(exc)) from None
        attrs = object.__getattribute__(self_obj, "_attrs")
        swa = attrs.get("swa_bytes_per_token", attrs.get("kv_bytes_per_token"))
        compressed = attrs.get("compressed_bytes_per_token", swa)
        lines = ", ".join(str(s.lineno) for s in stmts)
        how = (
            f"{owner._member}:{owner.__name__}.__init__ lines {lines} (kv-cache dtype "
            f"{asked!r} -> {attrs.get('kv_cache_dtype')!r}): compressed {compressed} B, SWA {swa} B"
        )
        return {"compressed": compressed, "SWA": swa}, [how]
    raise PathNotDecided(f"no __init__ along {cls.__name__}'s bases assigns the record widths")


def uses_of(widths: dict[str, int]) -> dict[int, str]:
    out: dict[int, list[str]] = {}
    for cache, width in widths.items():
        out.setdefault(width, []).append(cache)
    return {w: " + ".join(caches) for w, caches in out.items()}


# ---- link 4: the dispatcher ------------------------------------------------------------------------------
class _Recorder:
    """Stands for the CuTe-DSL gather module: any entry it is asked for records the launch (the CuTe-DSL gather of
    ``record`` reached through the ``family`` dispatcher, named by the entry called)."""

    def __init__(self, family: KernelFamily, record: str, launched: list[KernelId]):
        self._family, self._record, self._launched = family, record, launched

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        launched, family, record = self._launched, self._family, self._record

        class Entry:
            def __call__(self, *args: Any, **kwargs: Any) -> None:
                launched.append(KernelId.cutedsl(family, record, name))

            def __getattr__(self, attr: str) -> Any:
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return lambda *a, **k: launched.append(KernelId.cutedsl(family, record, f"{name}.{attr}"))

        return Entry()


def dispatch(code: ReleasedCode, dispatcher_member: str, record: Record, launched: list[KernelId]) -> KernelId:
    """Call the release's dispatcher with a K cache of ``record``'s width; the kernel that launched."""

    for k in kernels_of(code, dispatcher_member):
        owner = code.value(dispatcher_member, k.class_name) if k.class_name else None
        jit = getattr(owner, k.name) if owner is not None else code.value(dispatcher_member, k.name)
        if isinstance(owner, ClassRef):
            raise PathNotDecided(f"{dispatcher_member}: class {k.class_name} could not be executed as released")

        def recording(*args: Any, _id: KernelId = k.id, **kwargs: Any) -> None:
            launched.append(_id)

        jit.run = recording
    fn = code.value(dispatcher_member, DISPATCHER)
    num_reqs, block_size, blocks = 2, 16, 8
    out = torch.zeros((num_reqs, 64, 512), dtype=torch.bfloat16)
    k_cache = torch.zeros((blocks, block_size, record.bytes), dtype=torch.uint8)
    seq_lens = torch.tensor([20, 33], dtype=torch.int32)
    gather_lens = torch.tensor([20, 33], dtype=torch.int32)
    table = torch.arange(num_reqs * 4, dtype=torch.int32).reshape(num_reqs, 4)
    fn(out, k_cache, seq_lens, gather_lens, table, block_size, 0)
    if len(launched) != 1:
        raise PathNotDecided(
            f"{dispatcher_member}:{DISPATCHER} launched {[k.matrix_label for k in launched] or 'nothing'}"
        )
    return launched[0]


def cutedsl_module(code: ReleasedCode) -> str:
    return next((m for m in sorted(code.members) if m.endswith(CUTEDSL_MODULE_SUFFIX)), "")


# ---- the study -------------------------------------------------------------------------------------------
def study_release(
    release: str,
    read: Callable[[str], str],
    members: Iterable[str],
    families: Iterable[pf.GpuFamily] = pf.FAMILIES,
    warmup_rows: list[dict] | None = None,
) -> list[dict]:
    """Every (family, model, record) row of one release (warm-up registrations appended to ``warmup_rows``)."""
    members = list(members)
    rows: list[dict] = []
    parsed: dict = {}
    for family in families:
        for model in MODELS:
            rows.extend(study_path(release, read, members, family, model, parsed, warmup_rows))
    return rows


def _row(release: str, family: pf.GpuFamily, model: Model, record: Record, **kw: Any) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update(release=release, gpu_family=family.key, model=model.name, record=record.bytes)
    row.update(kw)
    return row


def study_path(
    release: str,
    read: Callable[[str], str],
    members: list[str],
    family: pf.GpuFamily,
    model: Model,
    parsed: dict | None = None,
    warmup_rows: list[dict] | None = None,
) -> list[dict]:
    """The rows of one (family, model), per class the selection gives; the warm-up registrations each served
    class would run are appended to ``warmup_rows``."""
    code = released_code(read, members, release, family, parsed)
    try:
        directory, how = implementation(code, model)
        if not directory:
            return [_row(release, family, model, r, status=DispatchStatus.NOT_SHIPPED, how=how) for r in RECORDS]
        chosen = selections(code, model, directory)
    except NotServed as exc:
        refusal = {"status": DispatchStatus.NOT_SERVED, "refused_by": str(exc), "how": str(exc)}
        return [_row(release, family, model, r, **refusal) for r in RECORDS]
    except PathNotDecided as exc:
        return [_row(release, family, model, r, status=DispatchStatus.NOT_DECIDED, how=str(exc)) for r in RECORDS]
    rows: list[dict] = []
    for selection in chosen:
        rows += _selection_rows(release, code, family, model, Path(how=[how]), selection, warmup_rows)
    return rows


def _selection_rows(
    release: str,
    code: ReleasedCode,
    family: pf.GpuFamily,
    model: Model,
    path: Path,
    selection: Selection,
    warmup_rows: list[dict] | None,
) -> list[dict]:
    cls = selection.cls
    path.backend, path.backend_member = cls.__name__, cls._member
    path.topology, path.condition = selection.topology, selection.condition
    path.how += selection.how
    try:
        probes = serving.probes(code, cls)
        refusals = [p for p in probes if p.refuses]
        if refusals:
            path.how += [p.describe() for p in refusals]
            first = refusals[0]
            refusal = {"status": DispatchStatus.NOT_SERVED, "refused_by": f"{first.op.name}: {first.error}"}
            return [_path_row(release, family, model, r, path, **refusal) for r in RECORDS]
        if probes:
            ops = ", ".join(f"{p.op.name} -> {p.bound_to}" for p in probes)
            path.how.append(f"attention ops on this branch: {ops}")
        if warmup_rows is not None:
            warmup_rows += [
                {**w, "topology": selection.topology}
                for w in _warmups(code, release, family, model, cls, selection.topologies[0])
            ]
        sites, holder = gather_sites(cls)
        if not sites:
            path.how.append(f"{cls.__name__} and its bases never call {DISPATCHER}")
            return [_path_row(release, family, model, r, path, status=DispatchStatus.NOT_GATHERED) for r in RECORDS]
        dispatcher_fn = code.value(holder._member, DISPATCHER)
        location = getattr(dispatcher_fn, "__code__", None)
        path.dispatcher_member = _member_of_function(code, dispatcher_fn) or ""
        if not path.dispatcher_member:
            raise PathNotDecided(f"{holder._member}: {DISPATCHER} resolves to {dispatcher_fn!r} ({location})")
        path.gather_sites = sites
        path.how.append(f"{', '.join(sites)} call {path.dispatcher_member}:{DISPATCHER}")
        if model is V41:
            widths, how_records = record_widths(code, cls, selection.topologies[0])
            path.records = uses_of(widths)
            path.how += how_records
        else:
            kinds = {k.record for k in kernels_of(code, path.dispatcher_member)}
            if kinds != {FP8_DS_MLA.kind}:
                raise PathNotDecided(f"{path.dispatcher_member} reads records {sorted(kinds)}, expected one")
            path.records = {FP8_DS_MLA.bytes: "compressed + SWA"}
            path.how.append(f"{path.dispatcher_member} reads one record (584 B) for every cache")
    except PathNotDecided as exc:
        path.how.append(str(exc))
        return [_path_row(release, family, model, r, path, status=DispatchStatus.NOT_DECIDED) for r in RECORDS]
    return [_record_row(release, code, family, model, path, r) for r in RECORDS]


def _path_row(release: str, family: pf.GpuFamily, model: Model, record: Record, path: Path, **kw: Any) -> dict:
    """A row of one record on a path whose class is known (``kw``: the status and what the dispatcher did)."""
    fields = {"backend": path.backend, "topology": path.topology, "condition": path.condition}
    fields["how"] = "; ".join(x for x in path.how if x)
    return _row(release, family, model, record, **{**fields, **kw})


def kernels_of(code: ReleasedCode, member: str) -> list:
    """The gather kernels discovery finds in one module (scanned once per release)."""
    key = f"kernels:{member}"
    if key not in code._trees:
        code._trees[key] = discover({member: code.source(member)}).kernels
    return code._trees[key]


def _warmups(
    code: ReleasedCode, release: str, family: pf.GpuFamily, model: Model, cls: ClassRef, topology: tp.Topology
) -> list[dict]:
    dirs = (
        (f"vllm/models/{model.package}/", "vllm/model_executor/layers/")
        if not model.legacy_module
        else (
            f"vllm/models/{model.package}/",
            "vllm/model_executor/layers/deepseek_v4",
        )
    )
    base = {"release": release, "gpu_family": family.key, "model": model.name}
    found = warmups.registrations(code, cls, default_config(code, topology), dirs)
    if not found:
        none = f"no register_warmup() of a gather under {', '.join(dirs)}"
        return [{**base, "instance": "", "kind": "", "registered": WarmUpRegistered.NO, "condition": none, "site": ""}]
    return [{**base, **row} for row in found]


def _member_of_function(code: ReleasedCode, fn: Any) -> str | None:
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
    prefix = f"{code.label}/" if code.label else ""
    member = filename[len(prefix) :] if filename.startswith(prefix) else filename
    return member if member in code.members else None


def _record_row(
    release: str, code: ReleasedCode, family: pf.GpuFamily, model: Model, path: Path, record: Record
) -> dict:
    base = {"topology": path.topology, "condition": path.condition, "backend": path.backend}
    base["default_record_for"] = path.records.get(record.bytes, "")
    kinds = {k.record for k in kernels_of(code, path.dispatcher_member)}
    if record.kind not in kinds:
        how = f"{path.dispatcher_member} has no gather kernel for the {record.display} record"
        return _row(release, family, model, record, status=DispatchStatus.NO_KERNEL, how=how, **base)
    launched: list[KernelId] = []
    cute = cutedsl_module(code)
    if cute and family.cutlass == pf.CUTLASS_IMPORTS:
        code.standins[cute[:-3].replace("/", ".")] = _Recorder(family_of(path.dispatcher_member), record.kind, launched)
    cute_answer = ""
    asks = "has_cutedsl" in code.source(path.dispatcher_member)
    if asks and IMPORT_UTILS in code.members and code.toplevel(IMPORT_UTILS, "has_cutedsl") is not None:
        cute_answer = f"{IMPORT_UTILS}:has_cutedsl() -> {code.function(IMPORT_UTILS, 'has_cutedsl')()}"
    try:
        launch = dispatch(code, path.dispatcher_member, record, launched)
    except PathNotDecided as exc:
        return _row(
            release,
            family,
            model,
            record,
            status=DispatchStatus.NOT_DECIDED,
            how="; ".join([*path.how, str(exc)]),
            **base,
        )
    except Exception as exc:  # what the dispatcher raises is the finding
        how = "; ".join([*path.how, cute_answer, f"{DISPATCHER} raised {type(exc).__name__}: {exc}"])
        return _row(release, family, model, record, gather_kernel="", status=DispatchStatus.RAISED, how=how, **base)
    kernel, matrix = launch.launch_label, launch.matrix_label
    how = "; ".join(x for x in [*path.how, cute_answer, f"launched {kernel}"] if x)
    return _row(
        release,
        family,
        model,
        record,
        gather_kernel=kernel,
        matrix_kernel=matrix,
        status=DispatchStatus.RAN,
        how=how,
        **base,
    )


# ---- releases from the wheel cache ------------------------------------------------------------------------
def study(
    versions: Iterable[str],
    cache_root: Any = None,
    download: bool = True,
    families: Iterable[pf.GpuFamily] = pf.FAMILIES,
    warmup_rows: list[dict] | None = None,
) -> list[dict]:
    """The dispatch rows of every release; a release the cache cannot provide is one row per path saying why.
    The warm-up registrations each path would run are appended to ``warmup_rows``."""
    rows: list[dict] = []
    families = list(families)
    for version in versions:
        entry = ensure_release(version, cache_root, download=download, sets=(DISPATCH,))
        if isinstance(entry, CacheMiss):
            how = f"{entry.status}: {entry.reason}"
            for family in families:
                for model in MODELS:
                    rows += [
                        _row(version, family, model, r, status=DispatchStatus.NOT_LOADED, how=how) for r in RECORDS
                    ]
            continue
        rows += study_release(version, entry.read, entry.members_of(DISPATCH), families, warmup_rows)
    return rows

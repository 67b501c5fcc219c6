"""Does stock vLLM hand a gather a column-narrowed block table? Each release's runner code, executed.

For one release and one configuration (block size, kernel block size, ``max_model_len``, ``max_num_seqs``,
speculative tokens, micro-batches, decode context parallelism) the DeepSeek-V4 cache groups (SWA, C4A and
C128A, built with the release's own spec classes) go through the release's own table code:

- V1 runner: the statements of ``GPUModelRunner.may_reinitialize_input_batch`` that size the input batch,
  the statement of ``InputBatch.__init__`` that builds its ``MultiGroupBlockTable``, and
  ``BlockTable.get_device_tensor``, as the runner's ``_get_block_table`` calls it;
- V2 runner: the statements of the runner method that build ``BlockTables`` and
  ``BlockTables.gather_block_tables`` (its Triton copy kernel intercepted: the shapes are Python's);
- where the release has it, ``AttentionGroup.create_metadata_builders`` and ``map_to_kernel_block_table``
  (``vllm/v1/worker/utils.py``), per micro-batch, the rows split as ``ubatch_utils`` slices them;
- every gather call site's ``block_table=`` expression (and the assignments it reads), evaluated on the
  table the metadata builder passes through.

Every table is recorded with its shape, ``stride(0)`` and whether ``stride(0) != shape[-1]`` (narrowed).
Whether a release reaches the bug is :mod:`repro_studies.analysis.affected`'s reading of these rows.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from repro_studies.registry import Runner, TableStage, TableStatus
from repro_studies.upstream import platforms as pf
from repro_studies.upstream.dispatch import DISPATCHER, triton_utils
from repro_studies.upstream.members import BLOCK_TABLES
from repro_studies.upstream.released_code import (
    ClassRef,
    ReleasedCode,
    ReleasedDefaults,
    StatementFailed,
    backward_slice,
    statement_binding,
)
from repro_studies.upstream.wheelcache import CacheMiss, ensure_release

RUNNERS = (Runner.V1, Runner.V2)

COLUMNS = (
    "release",
    "runner",
    "config",
    "group",
    "stage",
    "site",
    "shape",
    "stride0",
    "narrowed",
    "status",
    "how",
)

V1_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
INPUT_BATCH = "vllm/v1/worker/gpu_input_batch.py"
V2_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
V2_TABLES = "vllm/v1/worker/gpu/block_table.py"
WORKER_UTILS = "vllm/v1/worker/utils.py"
UBATCH_UTILS = "vllm/v1/worker/ubatch_utils.py"
V2_UBATCH_UTILS = "vllm/v1/worker/gpu/ubatch_utils.py"
SPECS = "vllm/v1/kv_cache_interface.py"
#: The modules whose presence means the release ships a runner.
RUNNER_MEMBERS = {Runner.V1: (V1_RUNNER,), Runner.V2: (V2_RUNNER, V2_TABLES)}
#: DeepSeek-V4's sliding window (tokens) and its two compress ratios.
SLIDING_WINDOW = 128
C4, C128 = 4, 128


@dataclass(frozen=True)
class Config:
    """One engine configuration of the sweep; ``kernel_block_size`` 0 means the block size itself."""

    name: str
    block_size: int = 256
    kernel_block_size: int = 0
    max_model_len: int = 8192
    max_num_seqs: int = 256
    num_spec_tokens: int = 0
    ubatches: int = 1
    dcp: int = 1

    @property
    def kernel(self) -> int:
        return self.kernel_block_size or self.block_size


#: The sweep: a default engine, then one knob at a time, then the combinations that stress alignment.
SWEEP = (
    Config("default"),
    Config("max_model_len not a multiple of 128", max_model_len=8000),
    Config("short max_model_len", max_model_len=1000),
    Config("kernel blocks of 64 tokens", kernel_block_size=64),
    Config("kernel blocks, unaligned max_model_len", kernel_block_size=64, max_model_len=8000),
    Config("block size 512", block_size=512),
    Config("one sequence", max_num_seqs=1),
    Config("speculative decoding", num_spec_tokens=2),
    Config("micro-batches", ubatches=2),
    Config("micro-batches, kernel blocks", ubatches=2, kernel_block_size=64, max_model_len=8000),
    Config("decode context parallel 2", dcp=2, max_model_len=8000),
)
SHORT_SWEEP = tuple(
    c for c in SWEEP if c.name in ("default", "kernel blocks, unaligned max_model_len", "micro-batches")
)


@dataclass(frozen=True)
class Group:
    """One DeepSeek-V4 cache group whose table reaches a gather."""

    name: str
    spec_class: str
    ratio: int  # tokens per stored row

    def block_size(self, cfg: Config) -> int:
        return cfg.block_size // C4 if self.spec_class == "SlidingWindowMLASpec" else cfg.block_size

    def kernel_block_size(self, cfg: Config) -> int:
        """The attention kernel's block: the configuration's, never larger than the group's own block."""
        return min(cfg.kernel, self.block_size(cfg))


GROUPS = (
    Group("SWA", "SlidingWindowMLASpec", 1),
    Group("C4A", "MLAAttentionSpec", C4),
    Group("C128A", "MLAAttentionSpec", C128),
)


class NotRun(RuntimeError):
    """A step of the release's code could not run; the message names it."""


def released_code(read: Callable[[str], str], members: Iterable[str], release: str, parsed: dict) -> ReleasedCode:
    code = ReleasedCode(read, list(members), label=f"vLLM {release}", parsed=parsed)
    pf.install(code, pf.SM90)  # the sweep is per release and configuration; the runners see the SM90 facts
    code.standins["vllm.triton_utils"] = triton_utils()
    platform = code.standins["vllm.platforms.current_platform"]
    type(platform).device_type = "cpu"  # the tables live in this host's memory; their shapes are the point
    for name in ("vllm.utils.platform_utils.is_uva_available", "vllm.utils.platform_utils.is_pin_memory_available"):
        code.standins[name] = lambda: False
    code.standins["vllm.utils.torch_utils.PIN_MEMORY"] = False  # this host pins no memory
    code.standins["vllm.utils.platform_utils.is_uva_available"] = lambda: True
    if "vllm/v1/worker/gpu/buffer_utils.py" in code.members:
        with contextlib.suppress(Exception):
            code.standins["vllm.v1.worker.gpu.buffer_utils.UvaBuffer"] = host_buffer(code)
    return code


def host_buffer(code: ReleasedCode) -> type:
    """vLLM's ``UvaBuffer`` is pinned host memory the GPU reads through a view of the same shape; on this
    host it is host memory, and its view the tensor itself (shapes and strides are what the study reads).
    The class keeps the release's interface: ``uva`` a method or an attribute, as its ``UvaBuffer`` has it."""

    released = code.class_ref("vllm/v1/worker/gpu/buffer_utils.py", "UvaBuffer")
    uva_is_method = isinstance(released.own("uva"), ast.FunctionDef)

    class HostBuffer:
        def __init__(self, size: Any, dtype: Any):
            self.cpu = torch.zeros(size, dtype=dtype, device="cpu")
            self.np = self.cpu.numpy()
            if uva_is_method:
                self._uva = self.cpu
            else:
                self.uva = self.cpu

        def _view(self, n: int | None = None) -> Any:
            return self._uva[:n] if n is not None else self._uva

    if uva_is_method:
        HostBuffer.uva = HostBuffer._view
    return HostBuffer


# ---- configuration objects ------------------------------------------------------------------------------
def vllm_config(code: ReleasedCode, cfg: Config) -> Any:
    """The engine configuration: the sweep's values, every other field at the release's own default."""
    ns = types.SimpleNamespace
    return ns(
        model_config=ns(max_model_len=cfg.max_model_len, hf_config=ns(), get_vocab_size=lambda: 129280),
        scheduler_config=ReleasedDefaults(
            code,
            "vllm/config/scheduler.py",
            "SchedulerConfig",
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=max(8192, cfg.max_num_seqs * (1 + cfg.num_spec_tokens)),
            max_num_encoder_input_tokens=0,
        ),
        parallel_config=ReleasedDefaults(
            code,
            "vllm/config/parallel.py",
            "ParallelConfig",
            decode_context_parallel_size=cfg.dcp,
            use_ubatching=cfg.ubatches > 1,
        ),
        cache_config=ReleasedDefaults(code, "vllm/config/cache.py", "CacheConfig", block_size=cfg.block_size),
        speculative_config=ns(num_speculative_tokens=cfg.num_spec_tokens) if cfg.num_spec_tokens else None,
        reasoning_config=None,
        kernel_config=ns(enable_jit_warmup=False),
    )


def make_spec(code: ReleasedCode, group: Group, cfg: Config) -> Any:
    """The group's spec, an instance of the release's own spec class (fields the class has are set)."""

    cls = code.value(SPECS, group.spec_class)
    if not isinstance(cls, type):
        raise NotRun(f"{SPECS}: {group.spec_class} could not be executed as released ({code.not_executed.get(SPECS)})")
    wanted = {
        "block_size": group.block_size(cfg),
        "num_kv_heads": 1,
        "head_size": 584,
        "dtype": torch.uint8,
        "sliding_window": SLIDING_WINDOW,
        "compress_ratio": group.ratio,
        "tokens_per_state": group.ratio,
        "cache_dtype_str": "fp8_ds_mla",
    }
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in wanted.items() if k in names})


def kv_cache_config(specs: list[Any]) -> Any:
    ns = types.SimpleNamespace
    groups = [ns(kv_cache_spec=s, layer_names=[f"model.layers.{i}.attn"]) for i, s in enumerate(specs)]
    return ns(kv_cache_groups=groups, kv_cache_tensors=[], num_blocks=1024)


# ---- running slices of released methods ------------------------------------------------------------------
def _method(cls: ClassRef, name: str) -> tuple[ClassRef, ast.FunctionDef]:
    owner, node = cls.lookup(name)
    if not isinstance(node, ast.FunctionDef):
        raise NotRun(f"{cls.__name__}.{name} is not in this release")
    return owner, node


def run_slice(
    code: ReleasedCode, cls: ClassRef, method: str, binds: str, local: dict, given: Iterable[str] = ()
) -> dict:
    """Run the statements of ``cls.method`` that ``binds`` (e.g. ``self.block_tables``) depends on; the
    names in ``given`` (locals, or ``self.x``) are the study's configuration and are not recomputed."""
    owner, node = _method(cls, method)
    target = statement_binding(node.body, binds)
    if target is None:
        raise NotRun(f"{owner.__name__}.{method} binds no {binds}")
    for param, default in _defaults(code, owner._member, node).items():
        local.setdefault(param, default)
    try:
        code.execute_all(owner._member, backward_slice(node.body, target, given), local, f"{owner.__name__}.{method}")
    except StatementFailed as exc:
        raise NotRun(str(exc)) from exc
    return local


def _defaults(code: ReleasedCode, member: str, node: ast.FunctionDef) -> dict:
    args = node.args.args
    out = {}
    for arg, default in zip(args[len(args) - len(node.args.defaults) :], node.args.defaults, strict=True):
        with contextlib.suppress(Exception):
            out[arg.arg] = code.evaluate(member, ast.unparse(default))
    for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
        if default is not None:
            with contextlib.suppress(Exception):
                out[arg.arg] = code.evaluate(member, ast.unparse(default))
    return out


def _input_batch(code: ReleasedCode) -> Callable[..., Any]:
    """``InputBatch(**kwargs)`` reduced to the statement of its ``__init__`` that builds the block table."""

    def build(**kwargs: Any) -> Any:
        cls = code.class_ref(INPUT_BATCH, "InputBatch")
        obj = types.SimpleNamespace()
        run_slice(code, cls, "__init__", "self.block_table", {"self": obj, **kwargs})
        return obj

    return build


def _tensor(t: Any) -> dict:
    return {"shape": tuple(t.shape), "stride0": t.stride(0), "narrowed": bool(t.stride(0) != t.shape[-1])}


# ---- the runners ----------------------------------------------------------------------------------------
def runner_tables_v1(code: ReleasedCode, cfg: Config, specs: list[Any], num_reqs: int) -> tuple[list[Any], str]:

    if V1_RUNNER not in code.members:
        raise NotRun(f"{V1_RUNNER} is not in this release")
    code.standins["vllm.v1.worker.gpu_input_batch.InputBatch"] = _input_batch(code)
    code.standins["vllm.distributed.parallel_state.get_dcp_group"] = _group(cfg.dcp)
    code.standins["vllm.distributed.get_dcp_group"] = _group(cfg.dcp)
    code.standins["vllm.distributed.get_pcp_group"] = _group(1)
    code.standins["vllm.distributed.parallel_state.get_pcp_group"] = _group(1)
    code.standins["vllm.v1.worker.cp_utils.get_total_cp_world_size"] = lambda: cfg.dcp
    runner = code.class_ref(V1_RUNNER, "GPUModelRunner")
    ns = types.SimpleNamespace
    self_obj = runner.instance(
        **_runner_attributes(code, cfg),
        max_encoder_len=0,
        pin_memory=False,
        num_spec_tokens=cfg.num_spec_tokens,
        input_batch=ns(logitsprocs=None, logitsprocs_need_output_token_ids=False),
        is_pooling_model=False,
        _init_block_sizes=None,
        _init_kernel_block_sizes=None,
        _init_max_num_blocks=None,
        _init_slot_mapping_modes=None,
        cp_kv_cache_interleave_size=1,
        dcp_world_size=cfg.dcp,
        jit_warmup_registry=ns(activate=contextlib.nullcontext),
    )
    local = {"self": self_obj, "kv_cache_config": kv_cache_config(specs)}
    local["kernel_block_sizes"] = [g.kernel_block_size(cfg) for g in GROUPS]
    run_slice(code, runner, "may_reinitialize_input_batch", "self.input_batch", local)
    batch = self_obj.input_batch
    tables = [batch.block_table[g].get_device_tensor(num_reqs) for g in range(len(specs))]
    return (
        tables,
        "GPUModelRunner.may_reinitialize_input_batch -> InputBatch.block_table[g].get_device_tensor(num_reqs)",
    )


def _runner_attributes(code: ReleasedCode, cfg: Config) -> dict[str, Any]:
    """What both runners read from ``self`` before their tables exist: the configuration and its sizes."""

    vc = vllm_config(code, cfg)
    return {
        "vllm_config": vc,
        "model_config": vc.model_config,
        "cache_config": vc.cache_config,
        "parallel_config": vc.parallel_config,
        "scheduler_config": vc.scheduler_config,
        "max_model_len": cfg.max_model_len,
        "max_num_reqs": cfg.max_num_seqs,
        "max_num_tokens": vc.scheduler_config.max_num_batched_tokens,
        "device": torch.device("cpu"),
    }


def _group(size: int) -> Callable[[], Any]:
    return lambda: types.SimpleNamespace(world_size=size, rank_in_group=0)


def _find_v2_builder(code: ReleasedCode) -> tuple[ClassRef, str]:
    runner = code.class_ref(V2_RUNNER, "GPUModelRunner")
    for node in runner._node.body:
        if isinstance(node, ast.FunctionDef) and statement_binding(node.body, "self.block_tables") is not None:
            return runner, node.name
    raise NotRun(f"{V2_RUNNER}: no GPUModelRunner method binds self.block_tables")


@contextlib.contextmanager
def _intercepted(kernel: Any) -> Iterator[list]:
    calls: list = []
    had = "run" in vars(kernel)
    previous = kernel.run
    kernel.run = lambda *a, **k: calls.append(k.get("grid"))
    try:
        yield calls
    finally:
        if had:
            kernel.run = previous
        else:
            del kernel.run


def runner_tables_v2(code: ReleasedCode, cfg: Config, specs: list[Any], num_reqs: int) -> tuple[list[Any], str]:

    if V2_RUNNER not in code.members or V2_TABLES not in code.members:
        raise NotRun(f"{V2_RUNNER} is not in this release")
    runner, method = _find_v2_builder(code)
    ns = types.SimpleNamespace
    self_obj = runner.instance(
        **_runner_attributes(code, cfg),
        dcp_size=cfg.dcp,
        dcp_rank=0,
        cp_interleave=1,
        is_encoder_decoder=False,
        speculator=None,
        pcp_manager=None,
        jit_warmup_registry=ns(activate=contextlib.nullcontext),
    )
    kernel_sizes = [g.kernel_block_size(cfg) for g in GROUPS]
    self_obj.kernel_block_sizes = kernel_sizes
    local = {"self": self_obj, "kv_cache_config": kv_cache_config(specs), "kernel_block_sizes": kernel_sizes}
    # The attention backends' kernel block sizes are the configuration here; the rest is the release's code.
    given = ("kernel_block_sizes", "self.kernel_block_sizes")
    run_slice(code, runner, method, "self.block_tables", local, given)
    tables_obj = self_obj.block_tables
    kernel = code.value(V2_TABLES, "_gather_block_tables_kernel")
    idx = torch.arange(num_reqs, dtype=torch.int32)
    params = inspect.signature(tables_obj.gather_block_tables).parameters
    kwargs = {"num_reqs_padded": num_reqs} if "num_reqs_padded" in params else {}
    with _intercepted(kernel) as launches:
        tables = tables_obj.gather_block_tables(idx, **kwargs)
    if not launches:
        raise NotRun(f"{V2_TABLES}: gather_block_tables launched no copy kernel")
    return list(tables), f"GPUModelRunner.{method} -> BlockTables.gather_block_tables (copy kernel intercepted)"


# ---- kernel-block mapping, micro-batches, call sites ---------------------------------------------------------
class _Builder:
    requires_block_table_width = False
    supports_update_block_table = False

    def __init__(self, *args: Any, **kwargs: Any):
        self.kwargs = kwargs


def _backend(kernel_block_size: int) -> Any:
    class Backend:
        @staticmethod
        def get_builder_cls() -> type:
            return _Builder

        @staticmethod
        def get_name() -> str:
            return "DEEPSEEK_V4_STUDY"

        @staticmethod
        def get_supported_kernel_block_sizes(*spec: Any) -> list:
            return [kernel_block_size]

    return Backend


def kernel_tables(
    code: ReleasedCode, cfg: Config, group_def: Group, spec: Any, g: int, table: Any, runner: str = Runner.V1
) -> list[tuple[str, Any]] | None:
    """(label, table) per micro-batch after ``AttentionGroup.map_to_kernel_block_table``; None where the
    release maps kernel blocks inside the runner's own table instead."""

    if WORKER_UTILS not in code.members or code.toplevel(WORKER_UTILS, "AttentionGroup") is None:
        return None
    group_cls = code.value(WORKER_UTILS, "AttentionGroup")
    if not hasattr(group_cls, "map_to_kernel_block_table"):
        return None
    kernel = group_def.kernel_block_size(cfg)
    fields = {"backend": _backend(kernel), "layer_names": [f"model.layers.{g}.attn"], "kv_cache_spec": spec}
    fields["kv_cache_group_id"] = g
    if isinstance(group_cls, ClassRef):
        group = group_cls.instance(
            **fields,
            kernel_block_size=None,
            kernel_block_stride=0,
            kernel_block_table=None,
            kernel_block_offsets=None,
            metadata_builders=[],
        )
    else:
        names = {f.name for f in dataclasses.fields(group_cls)}
        group = group_cls(**{k: v for k, v in fields.items() if k in names})
    create = group.create_metadata_builders
    params = inspect.signature(create).parameters
    kwargs = {"kernel_block_size": kernel} if "kernel_block_size" in params else {}
    if "num_metadata_builders" in params:
        kwargs["num_metadata_builders"] = cfg.ubatches
    try:
        create(vllm_config(code, cfg), torch.device("cpu"), **kwargs)
    except Exception as exc:
        raise NotRun(f"{WORKER_UTILS}:AttentionGroup.create_metadata_builders: {type(exc).__name__}: {exc}") from None
    out = []
    for ub, rows in enumerate(ubatch_rows(code, table, cfg.ubatches, runner)):
        out.append((f"micro-batch {ub}" if cfg.ubatches > 1 else "", group.map_to_kernel_block_table(rows, ub)))
    return out


def ubatch_rows(code: ReleasedCode, table: Any, ubatches: int, runner: str = Runner.V1) -> list[Any]:
    """The table each micro-batch's metadata gets: the release's own slicing expression, the V2 runner's
    (``block_table[ubatch_slice.request_slice]`` in ``gpu/ubatch_utils``) where the release has one, else
    ``ubatch_utils``'s (``attn_metadata.block_table_tensor[request_slice]``)."""
    if ubatches == 1:
        return [table]
    modules = [V2_UBATCH_UTILS, UBATCH_UTILS] if runner == Runner.V2 else [UBATCH_UTILS]
    found = [(m, _slicing_expression(code, m)) for m in modules if m in code.members]
    found = [(m, node) for m, node in found if node is not None]
    if not found:
        raise NotRun(f"no micro-batch slice of a block table in {' or '.join(modules)}")
    member, node = found[0]
    rows = table.shape[0]
    bounds = [(i * rows // ubatches, (i + 1) * rows // ubatches) for i in range(ubatches)]
    return [code.evaluate(member, ast.unparse(node), _slice_names(node, table, slice(lo, hi))) for lo, hi in bounds]


def _slicing_expression(code: ReleasedCode, member: str) -> ast.Subscript | None:
    """The first ``<...block_table...>[<...request_slice...>]`` of ``member``."""
    for node in ast.walk(code.tree(member)):
        if (
            isinstance(node, ast.Subscript)
            and "block_table" in ast.unparse(node.value)
            and "request_slice" in ast.unparse(node.slice)
        ):
            return node
    return None


def _slice_names(node: ast.Subscript, table: Any, request_slice: slice) -> dict[str, Any]:
    """The names the slicing expression reads: the table (``block_table``, or ``attn_metadata`` carrying
    it) and the request slice (``request_slice``, or ``ubatch_slice`` carrying it)."""
    names: dict[str, Any] = {}
    value = node.value
    if isinstance(value, ast.Name):
        names[value.id] = table
    elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        names[value.value.id] = types.SimpleNamespace(**{value.attr: table})
    for n in ast.walk(node.slice):
        if isinstance(n, ast.Name):
            carrier = types.SimpleNamespace(request_slice=request_slice)
            names[n.id] = request_slice if n.id == "request_slice" else carrier
    return names


@dataclass(frozen=True)
class CallSite:
    member: str
    qualname: str  # Class.method
    lineno: int
    table_expr: str  # the block_table= argument
    assignments: tuple[str, ...]  # the method's assignments the argument reads, in order

    @property
    def reads_swa(self) -> bool:
        """The site gathers the sliding-window cache (its table comes from the SWA metadata)."""
        return "swa" in " ".join([self.table_expr, *self.assignments])


def call_sites(code: ReleasedCode) -> list[CallSite]:
    """Every ``dequantize_and_gather_k_cache(..., block_table=...)`` in a class method of the release."""
    sites = []
    for member in sorted(code.members):
        if "/ops/" in member or not member.startswith(("vllm/models/", "vllm/model_executor/layers/")):
            continue
        for cls in (n for n in code.tree(member).body if isinstance(n, ast.ClassDef)):
            for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
                assigns = [
                    n
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Assign)
                    and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Name)
                    and "block_table" in ast.unparse(n.value)
                ]
                for call in ast.walk(fn):
                    if not (
                        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == DISPATCHER
                    ):
                        continue
                    kw = next((k for k in call.keywords if k.arg == "block_table"), None)
                    if kw is None:
                        continue
                    text = ast.unparse(kw.value)
                    reads = {n.id for n in ast.walk(kw.value) if isinstance(n, ast.Name)}
                    chain = [
                        ast.unparse(a) for a in sorted(assigns, key=lambda a: a.lineno) if a.targets[0].id in reads
                    ]
                    sites.append(CallSite(member, f"{cls.name}.{fn.name}", call.lineno, text, tuple(chain)))
    return sites


class _SiteNames(dict):
    """A call site's names: any ``*metadata`` object carries the table under test."""

    def __init__(self, table: Any):
        super().__init__()
        self._table = table

    def __missing__(self, key: str) -> Any:
        if key.endswith("metadata"):
            return types.SimpleNamespace(block_table=self._table)
        raise KeyError(key)


def at_call_site(site: CallSite, table: Any) -> Any:
    """The table the gather receives at ``site`` when the metadata carries ``table`` (one decode request
    first, then prefills in one chunk)."""
    rows = table.shape[0]
    local = _SiteNames(table)
    local.update(num_decodes=1 if rows > 1 else 0, chunk_start=0, chunk_end=max(rows - 1, 1))
    for statement in site.assignments:
        exec(compile(statement, f"{site.member}:{site.lineno}", "exec"), {}, local)
    return eval(compile(site.table_expr, f"{site.member}:{site.lineno}", "eval"), {}, local)


# ---- the sweep ------------------------------------------------------------------------------------------
def study_release(
    release: str, read: Callable[[str], str], members: Iterable[str], sweep: Iterable[Config] = SWEEP
) -> list[dict]:
    members = list(members)
    parsed: dict = {}
    rows: list[dict] = []
    for runner in RUNNERS:
        missing = [m for m in RUNNER_MEMBERS[runner] if m not in members]
        if missing:
            how = f"vLLM {release} ships no {', '.join(missing)}"
            rows.append(_row(release, runner, Config("—"), status=TableStatus.NOT_SHIPPED, how=how))
            continue
        for cfg in sweep:
            code = released_code(read, members, release, parsed)
            rows.extend(study_config(code, release, runner, cfg))
    return rows


def _row(release: str, runner: str, cfg: Config, **kw: Any) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update(release=release, runner=runner, config=cfg.name, **kw)
    return row


def study_config(code: ReleasedCode, release: str, runner: str, cfg: Config) -> list[dict]:
    num_reqs = min(cfg.max_num_seqs, 4)
    rows: list[dict] = []
    try:
        specs = [make_spec(code, g, cfg) for g in GROUPS]
        build = runner_tables_v1 if runner == Runner.V1 else runner_tables_v2
        tables, how = build(code, cfg, specs, num_reqs)
        sites = call_sites(code)
        if not sites:
            raise NotRun(f"no class method of this release calls {DISPATCHER} with block_table=")
        for g, (group, spec, table) in enumerate(zip(GROUPS, specs, tables, strict=False)):
            rows.append(
                _row(
                    release,
                    runner,
                    cfg,
                    group=group.name,
                    stage=TableStage.RUNNER,
                    status=TableStatus.RAN,
                    how=how,
                    **_tensor(table),
                )
            )
            mapped = kernel_tables(code, cfg, group, spec, g, table, runner)
            handed = [("", table)] if mapped is None else mapped
            if mapped is not None:
                for label, t in mapped:
                    site = f"AttentionGroup.map_to_kernel_block_table {label}".strip()
                    rows.append(
                        _row(
                            release,
                            runner,
                            cfg,
                            group=group.name,
                            stage=TableStage.KERNEL,
                            site=site,
                            status=TableStatus.RAN,
                            how=f"{WORKER_UTILS}:AttentionGroup.create_metadata_builders, map_to_kernel_block_table",
                            **_tensor(t),
                        )
                    )
            for label, t in handed:
                for s in (s for s in sites if s.reads_swa == (group.spec_class == "SlidingWindowMLASpec")):
                    at = at_call_site(s, t)
                    where = f"{s.member}:{s.qualname} line {s.lineno}" + (f" ({label})" if label else "")
                    how_site = "; ".join([*s.assignments, f"block_table={s.table_expr}"])
                    rows.append(
                        _row(
                            release,
                            runner,
                            cfg,
                            group=group.name,
                            stage=TableStage.CALL,
                            site=where,
                            status=TableStatus.RAN,
                            how=how_site,
                            **_tensor(at),
                        )
                    )
    except NotRun as exc:
        rows.append(_row(release, runner, cfg, status=TableStatus.NOT_RUN, how=str(exc)))
    except Exception as exc:
        rows.append(_row(release, runner, cfg, status=TableStatus.NOT_RUN, how=f"{type(exc).__name__}: {exc}"))
    return rows


def study(
    versions: Iterable[str], cache_root: Any = None, download: bool = True, sweep: Iterable[Config] = SWEEP
) -> list[dict]:
    """The sweep's rows for every release; a release the cache cannot provide is one row per runner."""
    rows: list[dict] = []
    sweep = list(sweep)
    for version in versions:
        entry = ensure_release(version, cache_root, download=download, sets=(BLOCK_TABLES,))
        if isinstance(entry, CacheMiss):
            for runner in RUNNERS:
                rows.append(
                    _row(
                        version,
                        runner,
                        Config("—"),
                        status=TableStatus.NOT_LOADED,
                        how=f"{entry.status}: {entry.reason}",
                    )
                )
            continue
        rows += study_release(version, entry.read, entry.members_of(BLOCK_TABLES), sweep)
    return rows

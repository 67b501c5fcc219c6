"""The direct launch path of repro_studies.kernels.direct, with a stand-in for Triton's JIT function and compiled
kernel (nothing compiles on the CPU): which call goes where, with which arguments in which order."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import inspect
from types import SimpleNamespace

import pytest
import torch

from repro_studies.kernels import direct, fast, launch_plan
from repro_studies.kernels.direct import DirectLauncher, int_spec, pointer_spec
from repro_studies.kernels.settings import DEFAULT_SETTINGS, with_settings


class FakeLauncher:
    """Triton 3.6's CudaLauncher as far as the direct path uses it (no scratch memory)."""

    def __init__(self, log, scratch=0):
        self.log, self.global_scratch_size, self.profile_scratch_size = log, scratch, 0
        self.launch_cooperative_grid, self.launch_pdl = False, True

    def launch(self, *args):
        self.log.append(("bare", args))

    def __call__(self, *args):
        self.log.append(("launcher", args))


class FakeCompiled:
    def __init__(self, log, scratch=0):
        self.run = FakeLauncher(log, scratch)
        self.function, self.packed_metadata = "fn-handle", "meta"

    def launch_metadata(self, grid, stream, *args):
        return {"grid": grid}


class FakeJit:
    """``kernel[grid](*args, **kwargs)`` records the call and returns one compiled kernel per call."""

    def __init__(self, scratch=0):
        self.log, self.scratch = [], scratch

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.log.append(("triton", grid, args, kwargs))
            return FakeCompiled(self.log, self.scratch)

        return call


def launcher(monkeypatch, device=0, scratch=0):
    monkeypatch.setattr(direct, "triton_version", lambda: (3, 6))
    jit = FakeJit(scratch)
    lau = DirectLauncher(jit)
    lau._stream, lau._device = (lambda dev: 1000 + dev), (lambda: device)
    lau._knobs = SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    return jit, lau


def first(args, consts=None):
    return lambda: (args, consts or {"A": 1, "B": "x"})


def test_first_call_through_triton_then_the_c_launch_with_raw_pointers(monkeypatch):
    jit, lau = launcher(monkeypatch)
    assert lau.launch("k", (4, 2), (1234, 7), first(("out-tensor", 7)), 4) is False
    assert jit.log[-1] == ("triton", (4, 2), ("out-tensor", 7), {"A": 1, "B": "x", "num_warps": 4})
    assert lau.launch("k", (5,), (5678, 8), first(("unused", 8)), 4) is True
    head = (5, 1, 1, 1000, "fn-handle", False, True, None, None, "meta", None, None, None)
    assert jit.log[-1] == ("bare", (*head, 5678, 8, 1, "x"))
    assert lau.launch("other key", (1, 1, 3), (1, 1), first(("o", 1)), 8) is False  # a new specialisation


def test_kernels_needing_scratch_memory_go_through_tritons_launcher_object(monkeypatch):
    jit, lau = launcher(monkeypatch, scratch=256)
    lau.launch("k", (2,), (1,), first(("t",)), 4)
    assert lau.launch("k", (2,), (1,), first(("t",)), 4) is True
    assert jit.log[-1] == ("launcher", (2, 1, 1, 1000, "fn-handle", "meta", None, None, None, 1, 1, "x"))


def test_each_device_keeps_its_own_kernel(monkeypatch):
    _, lau = launcher(monkeypatch)
    lau.launch("k", (1,), (), first(()), 4)
    lau._device = lambda: 1
    assert lau.launch("k", (1,), (), first(()), 4) is False


def test_launch_hooks_receive_metadata(monkeypatch):
    jit, lau = launcher(monkeypatch)
    lau.launch("k", (2,), (9,), first(("a",)), 4)
    lau._knobs = SimpleNamespace(launch_enter_hook="enter", launch_exit_hook="exit")
    lau.launch("k", (2,), (9,), first(("a",)), 4)
    assert jit.log[-1][1][10:13] == ({"grid": (2,)}, "enter", "exit")


def test_empty_hook_chains_are_passed_as_none_without_metadata(monkeypatch):
    """Triton 3.6 keeps its launch hooks as chains that are empty unless a profiler registers one: then no
    metadata is built and no hook is handed to the C launcher; once one is registered, both are again."""
    from triton.knobs import HookChain

    jit, lau = launcher(monkeypatch)
    enter, leave = HookChain(), HookChain(reversed=True)
    lau._knobs = SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=leave)
    built = []
    monkeypatch.setattr(FakeCompiled, "launch_metadata", lambda self, grid, *a: built.append(grid) or {"grid": grid})
    lau.launch("k", (2,), (9,), first(("a",)), 4)
    lau.launch("k", (2,), (9,), first(("a",)), 4)
    assert jit.log[-1][1][10:13] == (None, None, None) and built == []
    leave.add(print)
    lau.launch("k", (3,), (9,), first(("a",)), 4)
    assert jit.log[-1][1][10:13] == ({"grid": (3,)}, enter, leave) and built == [(3,)]


def test_unknown_compiled_objects_and_unchecked_versions_fall_back(monkeypatch):
    jit, lau = launcher(monkeypatch)
    jit.__class__ = type("OldJit", (FakeJit,), {"__getitem__": lambda self, g: lambda *a, **k: object()})
    assert lau.launch("k", (1,), (), first(()), 4) is False
    assert lau.enabled is False and lau.launch("k", (1,), (), first(()), 4) is False
    monkeypatch.setattr(direct, "triton_version", lambda: (9, 9))
    assert DirectLauncher(FakeJit()).enabled is False


def test_interpreted_kernels_never_go_direct():
    assert fast.gather_fast.launcher.enabled is False


def test_specialisation_features_mirror_tritons():
    assert int_spec(1) == (32, True, False) and int_spec(32) == (32, False, True)
    assert int_spec(2**31) == (64, False, True) and int_spec(5, specialize=False) == (32,)
    assert pointer_spec(4096) and not pointer_spec(4098)


def test_gather_fast_constexprs_are_the_kernels_remaining_parameters_in_order():
    names = list(inspect.signature(fast._gather_fast_kernel.fn).parameters)
    plan = fast.FastPlan(grid=(1, 1), block_t=8, tiles_per_program=1, num_warps=4)
    consts = fast._constexprs(False, 64, 64 * 584, plan, DEFAULT_SETTINGS)
    assert names[:10] == [
        "out_ptr",
        "out_stride0",
        "out_stride1",
        "k_cache_ptr",
        "seq_lens_ptr",
        "gather_lens_ptr",
        "block_table_ptr",
        "block_table_row_pitch",
        "block_table_width",
        "offset",
    ]
    assert names[10:] == list(consts)


@pytest.mark.parametrize("version,expected", [("3.6.0", (3, 6)), ("3.10.1+git", (3, 10)), ("4.0rc1", (4, 0))])
def test_triton_version_parsing(monkeypatch, version, expected):
    monkeypatch.setattr(direct.triton, "__version__", version)
    assert direct.triton_version() == expected


def enabled_gather(monkeypatch, settings=DEFAULT_SETTINGS):
    """gather_fast's body with the direct path switched on and its launch recorded (nothing runs)."""
    g = fast.make_gather(settings)
    monkeypatch.setattr(launch_plan, "sm_count", lambda index: 132)
    g.launcher.enabled, g.launcher._device = True, lambda: 0
    calls = []
    g.launcher.lookup = lambda device, key: ("entry", key)
    g.launcher.run = lambda entry, grid, raw, device: calls.append((entry[1], grid, raw, device))
    g.launcher.compile = lambda *a: calls.append(("compile", *a))
    return g, calls


def test_the_inline_checks_report_what_check_gather_args_says(monkeypatch):
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    g, calls = enabled_gather(monkeypatch)
    sc = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4))
    out = sc.fresh_out()
    with pytest.raises(ValueError, match="out must be bf16"):
        g(out.float(), *sc.args(out)[1:])
    with pytest.raises(ValueError, match="block_table must be int32"):
        g(out, sc.k_cache, sc.seq_lens, None, sc.block_table.long(), 64, 0)
    with pytest.raises(ValueError, match="stride"):
        g(out, sc.k_cache, sc.seq_lens, None, sc.block_table, 128, 0)
    with pytest.raises(ValueError, match="gather_lens must be None or int32"):
        g(out, sc.k_cache, sc.seq_lens, sc.seq_lens.long(), sc.block_table, 64, 0)
    with pytest.raises(ValueError, match="must be CUDA tensors"):  # valid arguments, but on the CPU
        g(*sc.args(out))
    assert calls == []


def test_the_direct_path_passes_raw_pointers_and_keys_on_alignment(monkeypatch):
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    g, calls = enabled_gather(monkeypatch)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    sc = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4, window=8, offset=1))
    out, table = sc.fresh_out(), sc.block_table
    g(*sc.args(out))
    key, grid, raw, device = calls[-1]
    pointers = (sc.k_cache.data_ptr(), sc.seq_lens.data_ptr(), sc.gather_lens.data_ptr(), table.data_ptr())
    assert raw == (out.data_ptr(), *out.stride()[:2], *pointers, table.stride(0), table.shape[1], 1)
    assert grid[1] == 2 and device == 0
    g.ready.clear()
    g.launcher.lookup = lambda device, key: None  # not compiled yet: Triton's path, with the tensors
    g(*sc.args(out))
    tag, key2, grid2, args, consts, warps, options = calls[-1]
    plan = fast.plan_launch(2, out.shape[1] - 1, torch.device("cuda", 0), g.settings)
    assert tag == "compile" and key2 == key and grid2 == grid == plan.grid and warps == plan.num_warps
    assert options == DEFAULT_SETTINGS.launch_options() == {"maxnreg": 40}  # the default register limit
    assert args[0] is out and args[3] is sc.k_cache and args[6] is table and consts["HAS_GATHER_LENS"]
    g.launcher.lookup = lambda device, key: ("entry", key)
    g.ready.clear()
    shifted = torch.empty(out.numel() + 8, dtype=torch.bfloat16)[1 : 1 + out.numel()].view(out.shape)
    g(shifted, *sc.args(out)[1:])
    assert calls[-1][0] != key  # a misaligned output is another specialisation


def test_a_repeated_call_is_one_lookup_and_one_launch_and_another_shape_replans(monkeypatch):
    """After its first call a key's grid and compiled kernel are reused: nothing is planned or looked up again
    for the same shape, while a new shape or a misaligned output plans (and keys) its own launch."""
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    g, calls = enabled_gather(monkeypatch)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    planned = []
    plan = fast.plan_launch
    monkeypatch.setattr(fast, "plan_launch", lambda *a, **k: planned.append(a[:2]) or plan(*a, **k))
    sc = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4))
    out = sc.fresh_out()
    for _ in range(3):
        g(*sc.args(out))
    assert planned == [(2, out.shape[1])] and len(calls) == 3 and len(g.ready) == 1
    assert len({c[0] for c in calls}) == 1  # one compiled kernel
    wider = torch.zeros(2, out.shape[1] + 8, out.shape[2], dtype=out.dtype)
    g(wider, *sc.args(out)[1:])
    shifted = torch.empty(out.numel() + 8, dtype=torch.bfloat16)[1 : 1 + out.numel()].view(out.shape)
    g(shifted, *sc.args(out)[1:])
    g(shifted, *sc.args(out)[1:])
    assert planned[1:] == [(2, out.shape[1] + 8), (2, out.shape[1])] and len(g.ready) == 3
    assert calls[-1][0] != calls[0][0]  # the misaligned output has its own specialisation


def test_a_launch_plan_with_other_constexprs_is_another_kernel(monkeypatch):
    """The grid-filling plan changes tiles per program (and tile, warps) with the shape: each plan compiles
    its own kernel, or a kernel built for 4 tiles per program would run on a grid planned for 1."""
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    monkeypatch.setattr(launch_plan, "sm_count", lambda index: 132)
    looped = fast.make_gather(with_settings(tiles_per_program=4))
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    looped.launcher.enabled, looped.launcher._device = True, lambda: 0
    keys = []
    looped.launcher.lookup = lambda device, key: ("entry", key)
    looped.launcher.run = lambda entry, grid, raw, device: keys.append((entry[1], grid))
    for n, L in ((64, 512), (1, 64)):  # 64 x 512: 4 tiles per program; 1 x 64: too few programs, 1
        sc = build_scenario(ScenarioSpec(num_reqs=n, seq_len_max=L, max_reqs=n, seq_lens=(L,) * n))
        looped(*sc.args(sc.fresh_out()))
    (big, big_grid), (small, small_grid) = keys
    assert big_grid[0] * 4 * 8 >= 512 and small_grid[0] * 8 >= 64
    assert big != small


def test_the_host_split_times_the_launch_with_the_gathers_own_arguments_and_the_rest_without_it(monkeypatch):
    """The tuning sweep's split of a direct call's host time: the C launch alone gets exactly what the gather hands
    to it, and the rest is timed with the launch replaced by nothing (no launch happens while it is timed)."""
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario
    from repro_studies.evidence.tuning import host_split

    g, calls = enabled_gather(monkeypatch)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    sc = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4, window=8, offset=1))
    out = sc.fresh_out()

    class Sweep:
        def __init__(self):
            self.rows, self.launches_while_timed = [], {}

        def add(self, table, row):
            self.rows.append(row)

        def sync(self):
            pass

        def host_us(self, fn, calls_per_round):
            before = len(calls)
            fn()
            self.launches_while_timed[len(self.rows)] = calls[before:]
            return 1.0

    sw = Sweep()
    host_split(sw, g, sc.args(out), 2, 20, 3)
    own = calls[0]  # the gather's own direct launch, before the split replaced anything
    assert [r["arm"] for r in sw.rows] == ["gather_fast: its C launch alone", "gather_fast: all but the launch"]
    assert all(r["status"] == "ok" for r in sw.rows)
    assert sw.launches_while_timed[0] == [own]  # the launch alone: the gather's entry, grid, raw arguments, device
    assert sw.launches_while_timed[1] == []  # the rest: the gather ran, nothing was launched
    launched = len(calls)
    g(*sc.args(out))
    assert len(calls) == launched + 1  # the launch is put back


def test_a_register_limit_reaches_the_compiler_and_the_direct_launch(monkeypatch):
    """``FastSettings.maxnreg`` is a compile option of the first call (Triton's ``maxnreg``); the interpreter, which
    compiles nothing, takes the same call and reports no registers."""
    from repro.core.evidence.scenarios import ScenarioSpec, build_scenario

    limited = with_settings(maxnreg=40)
    g, calls = enabled_gather(monkeypatch, limited)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    sc = build_scenario(ScenarioSpec(num_reqs=2, seq_len_max=20, max_reqs=4))
    g.launcher.lookup = lambda device, key: None
    g(*sc.args(sc.fresh_out()))
    assert calls[-1][0] == "compile" and calls[-1][-1] == {"maxnreg": 40}
    jit, lau = launcher(monkeypatch)
    lau.compile("k", (1,), ("t",), {"A": 1}, 2, {"maxnreg": 40})
    assert jit.log[-1] == ("triton", (1,), ("t",), {"A": 1, "num_warps": 2, "maxnreg": 40})

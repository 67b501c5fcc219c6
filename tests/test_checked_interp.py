"""Tests for repro.core.evidence.checked_interp: bounds-checked Triton interpreter launches.

The kernels below are defined after TRITON_INTERPRET=1 is set, so ``@triton.jit`` gives
interpreted functions. Every expected count is derived independently from index arithmetic.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede the @triton.jit definitions below

import inspect
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from triton.runtime import interpreter as interp

from repro.core.evidence.checked_interp import (
    OUT_OF_BOUNDS,
    OUT_OF_VIEW,
    SUPPORTED_TRITON,
    _StridedView,
    checked_interpreter,
    triton_minor,
)

POISON = -1_000_000


@triton.jit
def gather_kernel(
    out_ptr, cache_ptr, bt_ptr, bt_pitch, other_val, NB: tl.constexpr, D: tl.constexpr, BLOCK_J: tl.constexpr
):
    pid = tl.program_id(0)
    j = tl.arange(0, BLOCK_J)
    jm = j < NB
    ids = tl.load(bt_ptr + pid * bt_pitch + j, mask=jm, other=0)  # BT_LOAD
    d = tl.arange(0, D)
    src = cache_ptr + ids.to(tl.int64)[:, None] * D + d[None, :]
    vals = tl.load(src, mask=jm[:, None], other=other_val)  # CACHE_LOAD
    tl.store(out_ptr + (pid * NB + j)[:, None] * D + d[None, :], vals, mask=jm[:, None])


@triton.jit
def load_plain_kernel(out_ptr, src_ptr, idx_ptr, N: tl.constexpr):
    k = tl.arange(0, N)
    idx = tl.load(idx_ptr + k)
    tl.store(out_ptr + k, tl.load(src_ptr + idx))  # no mask, no other


@triton.jit
def scatter_kernel(out_ptr, idx_ptr, val_ptr, N: tl.constexpr):
    k = tl.arange(0, N)
    tl.store(out_ptr + tl.load(idx_ptr + k), tl.load(val_ptr + k))  # SCATTER_STORE


@triton.jit
def atomic_kernel(out_ptr, idx_ptr, N: tl.constexpr):
    k = tl.arange(0, N)
    tl.atomic_add(out_ptr + tl.load(idx_ptr + k), 1.0)


@triton.jit
def atomic_cas_kernel(out_ptr, old_ptr, idx_ptr, N: tl.constexpr):
    k = tl.arange(0, N)
    old = tl.atomic_cas(out_ptr + tl.load(idx_ptr + k), tl.zeros([N], tl.int32), tl.full([N], 5, tl.int32))
    tl.store(old_ptr + k, old)


@triton.jit
def masked_copy_kernel(out_ptr, src_ptr, n, BLOCK: tl.constexpr):
    k = tl.arange(0, BLOCK)
    m = k < n
    far = tl.where(m, k.to(tl.int64), k.to(tl.int64) + (1 << 40))  # masked-off lanes: far away
    tl.store(out_ptr + far, tl.load(src_ptr + far, mask=m, other=0.0), mask=m)


@triton.jit
def _helper_load(ptr, offs):
    return tl.load(ptr + offs)  # HELPER_LOAD


@triton.jit
def device_fn_kernel(out_ptr, src_ptr, idx_ptr, N: tl.constexpr):
    k = tl.arange(0, N)
    tl.store(out_ptr + k, _helper_load(src_ptr, tl.load(idx_ptr + k)))


@triton.jit
def raising_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1.0)


def _marker_line(kernel, marker):
    lines, start = inspect.getsourcelines(kernel.fn)
    (i,) = [i for i, ln in enumerate(lines) if marker in ln]
    return start + i


# ---- gather through a narrowed block table --------------------------------------------------

N_SEQ, W_BACKING, NB, D, N_BLOCKS = 4, 8, 5, 4, 16


def _gather_setup(gap_value):
    g = torch.Generator().manual_seed(0)
    backing = torch.randint(0, N_BLOCKS, (N_SEQ, W_BACKING), dtype=torch.int32, generator=g)
    backing[:, NB:] = gap_value if gap_value is not None else backing[:, NB:]
    bt = backing[:, :NB]  # narrowed view: stride(0) == W_BACKING != shape[-1] == NB
    cache = torch.randn(N_BLOCKS, D, generator=g)
    out = torch.full((N_SEQ, NB, D), 123.0)
    return backing, bt, cache, out


def _expected(backing, cache, pitch, other):
    """Independent model of the kernel: flat index read, class-b lanes, expected output."""
    flat = backing.reshape(-1).numpy()
    out = np.empty((N_SEQ, NB, D), dtype=np.float32)
    oov = 0
    poisoned = 0
    for pid in range(N_SEQ):
        for j in range(NB):
            f = pid * pitch + j
            if f % W_BACKING >= NB:
                oov += 1
            bid = int(flat[f])
            if 0 <= bid < N_BLOCKS:
                out[pid, j] = cache[bid].numpy()
            else:
                poisoned += 1
                out[pid, j] = other
    return out, oov, poisoned


def _launch(bt, cache, out, pitch, other=-7.0):
    gather_kernel[(N_SEQ,)](out, cache, bt, pitch, other, NB=NB, D=D, BLOCK_J=8)


def test_correct_pitch_reports_nothing():
    backing, bt, cache, out = _gather_setup(gap_value=POISON)
    with checked_interpreter() as report:
        _launch(bt, cache, out, bt.stride(0))
    exp, oov, poisoned = _expected(backing, cache, bt.stride(0), -7.0)
    assert (oov, poisoned) == (0, 0)
    assert report.out_of_view_lanes == 0 and report.out_of_bounds_lanes == 0
    assert report.to_dataframe().empty
    # 3 loads+1 store per program: bt (NB lanes), cache (NB*D), store (NB*D)
    assert report.summary()["checked_lanes"] == N_SEQ * (NB + 2 * NB * D)
    np.testing.assert_array_equal(out.numpy(), exp)
    rec = report.launches[0]
    assert rec.kernel == "gather_kernel" and rec.grid == (N_SEQ, 1, 1)
    assert rec.args["bt_ptr"].shape == (N_SEQ, NB) and rec.args["bt_ptr"].strides == (W_BACKING, 1)
    assert rec.args["bt_ptr"].storage_nbytes == N_SEQ * W_BACKING * 4


def test_wrong_pitch_reports_out_of_view_lanes_on_block_table_line():
    backing, bt, cache, out = _gather_setup(gap_value=None)  # gap holds valid ids
    wrong = bt.shape[-1]
    with checked_interpreter() as report:
        _launch(bt, cache, out, wrong)
    exp, oov, poisoned = _expected(backing, cache, wrong, -7.0)
    assert oov == 6 and poisoned == 0  # 3 + 2 + 1 gap reads for rows 1..3
    assert report.out_of_view_lanes == oov
    assert report.out_of_bounds_lanes == 0
    df = report.to_dataframe()
    assert len(df) == 1
    row = df.iloc[0]
    assert row.klass == OUT_OF_VIEW and row.op == "load" and row.argument == "bt_ptr"
    assert row.lanes == oov and row.kernel == row.function == "gather_kernel"
    assert row.line == _marker_line(gather_kernel, "# BT_LOAD")
    assert "bt_ptr + pid * bt_pitch + j" in row.source
    assert row.first_program == (1, 0, 0)  # row 0 reads only columns 0..4
    np.testing.assert_array_equal(out.numpy(), exp)  # (b) lanes proceed normally


def test_poisoned_gap_reports_out_of_bounds_and_does_not_dereference():
    backing, bt, cache, out = _gather_setup(gap_value=POISON)
    wrong = bt.shape[-1]
    # precondition: the poisoned gathers land outside every argument's storage
    bad = cache.data_ptr() + POISON * D * 4
    for t in (out, cache, backing):
        s = t.untyped_storage()
        assert not (s.data_ptr() - 64 <= bad < s.data_ptr() + s.nbytes() + 64)
    with checked_interpreter() as report:
        _launch(bt, cache, out, wrong, other=-7.0)
    exp, oov, poisoned = _expected(backing, cache, wrong, -7.0)
    assert poisoned == oov == 6
    assert report.out_of_view_lanes == oov
    assert report.out_of_bounds_lanes == poisoned * D
    df = report.to_dataframe()
    c = df[df.klass == OUT_OF_BOUNDS]
    assert c.lanes.sum() == poisoned * D and set(c.op) == {"load"}
    assert set(c.line) == {_marker_line(gather_kernel, "# CACHE_LOAD")}
    assert set(c.argument) <= {"out_ptr", "cache_ptr", "bt_ptr"}
    got = out.numpy()
    np.testing.assert_array_equal(got, exp)  # poisoned lanes == other, the rest gathered
    assert (got == -7.0).all(axis=-1).sum() == poisoned


def test_out_of_bounds_load_without_other_yields_zero():
    src = torch.arange(8, dtype=torch.float32) + 1
    idx = torch.tensor([0, 1 << 40, 2, -(1 << 40), 4, 5, 6, 7], dtype=torch.int64)
    out = torch.full((8,), 99.0)
    with checked_interpreter() as report:
        load_plain_kernel[(1,)](out, src, idx, N=8)
    assert report.out_of_bounds_lanes == 2 and report.out_of_view_lanes == 0
    assert out.tolist() == [1, 0, 3, 0, 5, 6, 7, 8]


def test_site_is_the_device_function_line():
    src = torch.arange(8, dtype=torch.float32)
    idx = torch.tensor([0, 1, 2, 3], dtype=torch.int64)
    out = torch.zeros(4)
    bad_idx = torch.tensor([0, 1 << 40, 2, 3], dtype=torch.int64)
    with checked_interpreter() as report:
        device_fn_kernel[(1,)](out, src, idx, N=4)
        device_fn_kernel[(1,)](out, src, bad_idx, N=4)
    df = report.to_dataframe()
    assert list(zip(df.launch, df.kernel, df.function, df.op, df.klass, df.lanes)) == [
        (1, "device_fn_kernel", "_helper_load", "load", OUT_OF_BOUNDS, 1)
    ]
    assert df.line.iloc[0] == _marker_line(_helper_load, "# HELPER_LOAD")
    assert "tl.load(ptr + offs)" in df.source.iloc[0]
    assert out.tolist() == [0.0, 0.0, 2.0, 3.0]


def test_out_of_bounds_store_dropped_and_out_of_view_store_proceeds():
    out = torch.zeros(8)
    guard = torch.zeros(64)  # not a kernel argument: any write into it is out of bounds
    gap = guard.data_ptr() - out.data_ptr()
    assert gap % 4 == 0
    buf = torch.zeros(24)  # out2 = buf[8:16]; buf[16:] is storage but not view
    out2 = buf[8:16]
    vals = torch.arange(1, 9, dtype=torch.float32)
    idx = torch.tensor([0, 1, 2, gap // 4 + 3, gap // 4 + 10, 5, 6, 7], dtype=torch.int64)
    idx2 = torch.tensor([0, 1, 8, 9, 4, 5, 6, 7], dtype=torch.int64)
    with checked_interpreter() as report:
        scatter_kernel[(1,)](out, idx, vals, N=8)
        scatter_kernel[(1,)](out2, idx2, vals, N=8)
    assert torch.count_nonzero(guard) == 0
    assert out.tolist() == [1, 2, 3, 0, 0, 6, 7, 8]
    df = report.to_dataframe()
    line = _marker_line(scatter_kernel, "# SCATTER_STORE")
    c = df[(df.launch == 0)]
    assert list(zip(c.op, c.klass, c.lanes, c.line)) == [("store", OUT_OF_BOUNDS, 2, line)]
    b = df[(df.launch == 1)]
    assert list(zip(b.op, b.klass, b.argument, b.lanes)) == [("store", OUT_OF_VIEW, "out_ptr", 2)]
    assert buf[16:18].tolist() == [3.0, 4.0]  # (b) stores proceed: they hit the gap
    assert buf[8:16].tolist() == [1, 2, 0, 0, 5, 6, 7, 8]


def test_out_of_bounds_atomic_dropped():
    out = torch.zeros(4)
    guard = torch.zeros(64)
    gap = (guard.data_ptr() - out.data_ptr()) // 4
    idx = torch.tensor([0, 1, gap + 2, 3], dtype=torch.int64)
    with checked_interpreter() as report:
        atomic_kernel[(1,)](out, idx, N=4)
    assert torch.count_nonzero(guard) == 0
    assert out.tolist() == [1, 1, 0, 1]
    df = report.to_dataframe()
    assert list(zip(df.op, df.klass, df.lanes)) == [("atomic", OUT_OF_BOUNDS, 1)]


def test_out_of_bounds_atomic_cas_redirected_to_scratch():
    out = torch.zeros(4, dtype=torch.int32)
    old = torch.full((4,), -1, dtype=torch.int32)
    guard = torch.zeros(64, dtype=torch.int32)
    gap = (guard.data_ptr() - out.data_ptr()) // 4
    idx = torch.tensor([0, gap + 1, 2, 3], dtype=torch.int64)
    with checked_interpreter() as report:
        atomic_cas_kernel[(1,)](out, old, idx, N=4)
    assert torch.count_nonzero(guard) == 0
    assert out.tolist() == [5, 0, 5, 5] and old.tolist() == [0, 0, 0, 0]
    assert report.summary()[OUT_OF_BOUNDS] == 1


def test_masked_off_lanes_are_never_counted():
    src = torch.arange(16, dtype=torch.float32)
    out = torch.zeros(16)
    with checked_interpreter() as report:
        masked_copy_kernel[(1,)](out, src, 5, BLOCK=16)
    assert report.summary() == {"launches": 1, "checked_lanes": 10, OUT_OF_VIEW: 0, OUT_OF_BOUNDS: 0}
    assert out[:5].tolist() == [0, 1, 2, 3, 4] and torch.count_nonzero(out[5:]) == 0


# ---- patch lifecycle ------------------------------------------------------------------------

_PATCHED = [
    (interp.InterpreterBuilder, "create_masked_load"),
    (interp.InterpreterBuilder, "create_masked_store"),
    (interp.InterpreterBuilder, "create_atomic_rmw"),
    (interp.InterpreterBuilder, "create_atomic_cas"),
    (interp.GridExecutor, "__call__"),
    (interp.GridExecutor, "_init_args_hst"),
]


def _current():
    return [cls.__dict__[name] for cls, name in _PATCHED]


def test_patches_removed_on_exit_and_on_exception():
    originals = _current()
    with checked_interpreter():
        assert all(a is not b for a, b in zip(_current(), originals))
    assert all(a is b for a, b in zip(_current(), originals))
    x = torch.zeros(1)
    with pytest.raises(ZeroDivisionError):
        with checked_interpreter() as report:
            raising_kernel[(1,)](x)
            raise ZeroDivisionError
    assert all(a is b for a, b in zip(_current(), originals))
    assert x.item() == 1.0 and len(report.launches) == 1
    # a launch after exit is not recorded
    raising_kernel[(1,)](x)
    assert len(report.launches) == 1


def test_nesting_raises_and_keeps_outer_active():
    originals = _current()
    with checked_interpreter() as outer:
        with pytest.raises(RuntimeError, match="already active"):
            with checked_interpreter():
                pass
        raising_kernel[(1,)](torch.zeros(1))
    assert len(outer.launches) == 1
    assert all(a is b for a, b in zip(_current(), originals))


@pytest.mark.parametrize("version", ["3.5.1", "3.10.0", "4.0.0", "nightly"])
def test_refuses_unsupported_triton(monkeypatch, version):
    monkeypatch.setattr(triton, "__version__", version)
    with pytest.raises(RuntimeError) as exc:
        with checked_interpreter():
            pass
    assert version in str(exc.value) and ">=3.6,<3.10" in str(exc.value)


def test_the_supported_range_is_the_declared_one():
    """pyproject.toml allows exactly the triton releases the interpreter patches are tested against."""
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    (lo, hi) = SUPPORTED_TRITON
    assert f"triton>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}" in project["dependencies"]
    assert triton_minor("3.7.0+git1a2b") == (3, 7) and triton_minor("nightly") is None


def test_refuses_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        with checked_interpreter():
            pass


# ---- strided-view membership ----------------------------------------------------------------


def _brute_offsets(view):
    """Element offsets (relative to data_ptr) of a view of an arange storage."""
    return set((view.reshape(-1) - view.storage_offset()).tolist()) if view.numel() else set()


def _check_view(view):
    sv = _StridedView(tuple(view.shape), tuple(view.stride()))
    valid = _brute_offsets(view)
    hi = max(valid, default=0) + 4
    probe = np.arange(-4, hi + 1, dtype=np.int64)
    got = sv.contains(probe)
    want = np.array([int(p) in valid for p in probe])
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    data=st.data(),
)
def test_strided_view_membership_matches_brute_force(shape, data):
    base = torch.arange(int(np.prod(shape)) * 3).reshape([3] + shape)
    view = base[data.draw(st.integers(0, 2))]
    perm = data.draw(st.permutations(range(len(shape))))
    view = view.permute(*perm)
    for dim in range(view.dim()):
        size = view.shape[dim]
        start = data.draw(st.integers(0, size - 1))
        stop = data.draw(st.integers(start, size))
        step = data.draw(st.integers(1, 3))
        view = view.narrow(dim, start, stop - start)[(slice(None),) * dim + (slice(None, None, step),)]
    _check_view(view)


def test_strided_view_membership_special_cases():
    base = torch.arange(64)
    _check_view(base.reshape(8, 8)[:, :5])  # the narrowed block table
    _check_view(base.reshape(8, 8)[1:6:2, 2:7:3])
    _check_view(base[:4].reshape(4, 1).expand(4, 6))  # stride 0
    _check_view(base.as_strided((4, 4), (1, 1)))  # overlapping: table fallback
    _check_view(base.as_strided((3, 4), (3, 2)))  # overlapping, non-nested
    _check_view(base[:0])  # empty
    assert _StridedView((4, 4), (1, 1)).table is not None
    assert _StridedView((8, 5), (8, 1)).table is None

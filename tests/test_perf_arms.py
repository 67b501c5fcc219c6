"""Notebook 03's timed arms in the interpreter with the timers replaced (nothing is timed): each arm is
checked bitwise against its own record's reference before timing, every call of an arm with a scope runs
inside that scope entered once per shape, and each median row says which record and how many bytes."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import contextlib
import dataclasses

import pytest

from repro.core.geometry.records import layout_for
from repro.core.kernels.gather import gather_fixed
from repro_studies.evidence import timing
from repro_studies.evidence.perf import TimedArm, run_perf
from repro_studies.kernels.records_reference import gather_reference
from repro_studies.registry import arm_of_row, bench_arms


@pytest.fixture
def fake_timers(monkeypatch):
    def median_us(fn, **_):
        fn()
        return 10.0

    def graph_median_us(fns, **_):
        for fn in fns:
            fn()
        return 5.0

    monkeypatch.setattr(timing, "median_us", median_us)
    monkeypatch.setattr(timing, "graph_median_us", graph_median_us)
    monkeypatch.setattr(timing, "host_us", lambda fn, calls=0: (fn(), 3.0)[1])
    monkeypatch.setattr(timing, "rotation_count", lambda nbytes: 2)


def test_scope_entered_around_every_call_and_records_kept_apart(fake_timers):
    fixed = next(a for a in bench_arms(["fixed"]))
    depth, seen = [0], []

    @contextlib.contextmanager
    def scope():
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    def scoped(*args):
        seen.append(depth[0])
        gather_fixed(*args)

    mxfp8 = layout_for("mxfp8", interleaved=True)

    def v41(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset):
        seen.append("mxfp8" if k_cache.shape[-1] == mxfp8.token_bytes else k_cache.shape[-1])
        gather_reference(mxfp8, out, k_cache, seq_lens, gather_lens, block_table, block_size, offset)

    other = dataclasses.replace(fixed, implementation="mxfp8")
    arms = [TimedArm(fixed, scoped, scope), TimedArm(other, v41, record="mxfp8", interleaved=True)]
    checks, medians = [], []
    run_perf([2], [24], 16, arms, checks.append, medians.append, rounds=1, device="cpu")
    assert all(c.mismatched_tokens == 0 and c.stray_writes == 0 for c in checks) and len(checks) == 2
    assert seen and all(d == 1 for d in seen if isinstance(d, int))  # inside the scope, entered once
    assert all(s == "mxfp8" for s in seen if not isinstance(s, int))
    rows = {(r["arm"], r["launch"]): r for r in medians}
    assert all(arm_of_row(r) == fixed for r in medians if r["arm"] == fixed.label)  # each row records its arm
    assert rows[(fixed.label, "eager")]["host_us"] == 3.0 and rows[(fixed.label, "graph")]["host_us"] is None
    assert (
        rows[(other.label, "graph")]["record"] == "mxfp8" and rows[(other.label, "graph")]["implementation"] == "mxfp8"
    )
    # 48 tokens in 5 us: the V4 record moves 584 + 1,024 B per token, the MXFP8 record 528 + 1,024 B
    assert rows[(fixed.label, "graph")]["bandwidth_tbps"] == round(48 * 1608 / 5e-6 / 1e12, 4)
    assert rows[(other.label, "graph")]["bandwidth_tbps"] == round(48 * 1552 / 5e-6 / 1e12, 4)

"""Notebook 03's ceiling arms built and checked in the interpreter, with the timers replaced.

No timing is measured here: ``median_us`` and ``graph_median_us`` are stand-ins that run each launch
once (so every arm's launches really execute) and return a fixed number. What is tested is that every
arm is checked bitwise before timing and that each row says what it timed (kernel, table, requests,
bytes moved), in the form the analysis reads.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import pandas as pd
import pytest

from repro_studies.analysis import ceiling as A
from repro_studies.evidence import ceiling as C
from repro_studies.evidence import timing


@pytest.fixture
def fake_timers(monkeypatch):
    calls = {"eager": 0, "graph": 0}

    def median_us(fn, **_):
        fn()
        calls["eager"] += 1
        return 10.0

    def graph_median_us(fns, **_):
        for fn in fns:
            fn()
        calls["graph"] += 1
        return 5.0

    monkeypatch.setattr(timing, "median_us", median_us)
    monkeypatch.setattr(timing, "host_us", lambda fn, calls=0: 7.0)
    monkeypatch.setattr(timing, "graph_median_us", graph_median_us)
    monkeypatch.setattr(timing, "rotation_count", lambda nbytes: 2)
    return calls


def run(**kw):
    checks, medians, decomposition = [], [], []
    C.run_ceiling([1, 2], [24], 16, checks.append, medians.append, decomposition.append, device="cpu", rounds=1, **kw)
    return checks, pd.DataFrame(medians), pd.DataFrame(decomposition)


def test_every_arm_is_checked_and_described(fake_timers):
    checks, med, dec = run(decompose_at=[(2, 24)])
    assert checks and all(c.mismatched == 0 and c.stray == 0 and c.total > 0 for c in checks), checks
    assert {c.unit for c in checks} == {"tokens", "rows", "program sums"}
    streams = {k.arm for k in C.CEILING_STREAMS}
    assert set(med["arm"]) == streams | {"read-only / 584-B records", "write-only / 1,024-B rows"}
    assert len(streams) >= 4  # the ceiling is the fastest of several kernels measured in the run
    assert set(med[med.launch == "eager"]["host_us"]) == {7.0} and med[med.launch == "graph"]["host_us"].isna().all()
    two = med[(med.num_reqs == 2) & (med.launch == "graph")].set_index("arm")
    assert two.loc["read-only / 584-B records", "bytes_read"] == 48 * 584
    assert two.loc["read-only / 584-B records", "bytes_written"] == 0
    assert two.loc["write-only / 1,024-B rows", "bytes_written"] == 48 * 1024
    assert two.loc["stream / 584-B records", "rotation"] == 2
    assert set(dec["num_reqs"]) == {2}  # only the shape asked for
    arms = dec.drop_duplicates("arm").set_index("arm")
    assert arms.loc["fast / one request, contiguous table", "requests"] == "one"
    assert arms.loc["fast / one request, contiguous table", "tokens"] == 48
    assert arms.loc["fast / ragged requests, contiguous table", "tokens"] == 48
    assert arms.loc["fast / narrowed view", "table"] == "narrowed"
    assert "split" in set(dec["layout"])
    # every arm timed eagerly and as a graph, once per round
    assert fake_timers["eager"] == fake_timers["graph"] == (len(streams) + 2) * 2 + len(arms)
    # and the analysis reads the rows as written: every step of the chain has its two arms
    d = A.gap_decomposition(pd.concat([med, dec]), 2, 24)
    assert d["ratio"].notna().all()


def test_no_decomposition_sink_no_decomposition_arms(fake_timers):
    checks, medians = [], []
    C.run_ceiling([2], [16], 16, checks.append, medians.append, device="cpu", rounds=1)
    assert len({c.arm for c in checks}) == len(C.CEILING_STREAMS) + 2


@pytest.mark.parametrize("n,L", [(1, 7), (2, 5), (5, 64), (256, 2048)])
def test_ragged_lengths_keep_the_total(n, L):
    lens = C.ragged_lengths(n, L, seed=3)
    assert len(lens) == n and sum(lens) == n * L and min(lens) >= 1 and max(lens) <= 2 * L - 1
    if n >= 4:
        assert len(set(lens)) > 1

"""Notebook 03's timed arms built and checked in the interpreter, with the timers replaced.

No timing is measured here: ``median_us`` and ``graph_median_us`` are stand-ins that run each launch
once (so every arm's launches really execute) and return a fixed number. What is tested is that every
arm is checked bitwise before timing, and that each row says what it timed (kernel, table, requests,
bytes moved).
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from repro.analysis import performance as P  # noqa: E402
from repro.evidence import perf  # noqa: E402
from repro.evidence import timing as bench  # noqa: E402
from repro.evidence.results import ResultTable  # noqa: E402


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

    monkeypatch.setattr(bench, "median_us", median_us)
    monkeypatch.setattr(bench, "graph_median_us", graph_median_us)
    monkeypatch.setattr(bench, "rotation_count", lambda nbytes: 2)
    return calls


def test_every_arm_is_checked_and_described(fake_timers):
    medians = ResultTable(None, "03-performance-medians", "03")
    checks = ResultTable(None, "03-performance-checks", "03")
    decomposition = ResultTable(None, "03-performance-decomposition", "03")
    med = perf.run_perf([1, 2], [24], 16, ["fixed", "fast"], medians, checks, rounds=1, decomposition=decomposition,
                        device="cpu", decompose_at=[(2, 24)])
    chk = checks.frame()
    assert len(chk) and chk["ok"].all(), chk[~chk["ok"]].to_dict("records")
    arms = set(med["arm"])
    assert {"fixed / narrowed view", "fast / contiguous table", "stream / 584-B records",
            "read-only / 584-B records", "write-only / 1,024-B rows"} <= arms
    one = med[(med.num_reqs == 2) & (med.launch == "graph")].set_index("arm")
    assert one.loc["read-only / 584-B records", "bytes_read"] == 48 * 584
    assert one.loc["read-only / 584-B records", "bytes_written"] == 0
    assert one.loc["write-only / 1,024-B rows", "bytes_written"] == 48 * 1024
    assert one.loc["fast / narrowed view", "table"] == "narrowed" and one.loc["fast / narrowed view", "code"] == "repro"
    assert one.loc["stream / 584-B records", "rotation"] == 2
    dec = decomposition.frame()
    assert set(dec["num_reqs"]) == {2}  # only the shape asked for
    kinds = dec.drop_duplicates("arm").set_index("arm")
    assert kinds.loc["fast / one request, contiguous table", "requests"] == "one"
    assert kinds.loc["fast / one request, contiguous table", "tokens"] == 48
    assert kinds.loc["fast / ragged requests, contiguous table", "tokens"] == 48
    assert {"split"} <= set(dec["layout"])
    # every arm was timed eagerly and as a graph once per round
    assert fake_timers["eager"] == fake_timers["graph"] == len(set(med.arm)) * 2 + len(set(dec.arm))
    # and the analysis reads the rows as written
    d = P.gap_decomposition(pd.concat([med, dec]), 2, 24)
    assert d["ratio"].notna().all()


def test_extra_arms_say_whose_code_they_are(fake_timers):
    from repro.kernels.gather import gather_fixed

    medians = ResultTable(None, "m", "03")
    checks = ResultTable(None, "c", "03")
    extra = {"vendor / narrowed view": (gather_fixed, {"code": "vendor 1.0", "table": "narrowed", "kernel": "vendor"})}
    med = perf.run_perf([2], [16], 16, ["fixed"], medians, checks, rounds=1, extra_arms=extra, ceiling=False,
                        device="cpu")
    r = med[med.arm == "vendor / narrowed view"].iloc[0]
    assert (r["code"], r["table"], r["kernel"]) == ("vendor 1.0", "narrowed", "vendor")
    assert checks.frame()["ok"].all()
    assert "stream / 584-B records" not in set(med["arm"])


def test_a_wrong_arm_fails_its_check_before_timing(fake_timers):
    from repro.kernels.gather import gather_buggy

    medians = ResultTable(None, "m", "03")
    checks = ResultTable(None, "c", "03")
    extra = {"buggy / narrowed view": (gather_buggy, {"table": "narrowed"})}
    perf.run_perf([3], [40], 16, ["fixed"], medians, checks, rounds=1, extra_arms=extra, ceiling=False, device="cpu")
    chk = checks.frame().set_index("variant")
    assert not chk.loc["buggy / narrowed view", "ok"] and chk.loc["fixed / narrowed view", "ok"]


@pytest.mark.parametrize("n,L", [(1, 7), (2, 5), (5, 64), (256, 2048)])
def test_ragged_lengths_keep_the_total(n, L):
    lens = perf.ragged_lengths(n, L, seed=3)
    assert len(lens) == n and sum(lens) == n * L and min(lens) >= 1 and max(lens) <= 2 * L - 1
    if n >= 4:
        assert len(set(lens)) > 1

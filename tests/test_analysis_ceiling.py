"""The streaming-ceiling analysis on hand-made median rows: pandas only, no kernels, no timings."""

import math

import pandas as pd
import pytest

from repro_studies import registry
from repro_studies.analysis import ceiling as P

N, L = 4, 100
TOKENS = N * L


def row(arm, kernel, us, table="none", requests="none", layout="", block_t=8, launch="graph", tokens=TOKENS):
    read = tokens * 584 * (kernel != "write-only")
    written = tokens * 1024 * (kernel != "read-only")
    return {
        "arm": arm,
        "kernel": kernel,
        "code": "repro",
        "table": table,
        "requests": requests,
        "layout": layout,
        "block_t": block_t,
        "launch": launch,
        "num_reqs": N,
        "seq_len": L,
        "tokens": tokens,
        "median_us": us,
        "bytes_read": read,
        "bytes_written": written,
    }


def gathers(f: pd.DataFrame) -> pd.DataFrame:
    return f[~f["kernel"].isin(["stream", "read-only", "write-only"])]


def streams(f: pd.DataFrame) -> pd.DataFrame:
    return f[f["kernel"].isin(["stream", "read-only", "write-only"])]


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        [
            row("stream / 584-B records", "stream", 12.0, layout="records"),
            row("stream / split / 8", "stream", 10.0, layout="split"),
            row("stream / split / 32", "stream", 8.0, layout="split", block_t=32),
            row("read-only / 584-B records", "read-only", 5.0, layout="records"),
            row("write-only / 1,024-B rows", "write-only", 6.0),
            row("fast / one request, contiguous table", "fast", 11.0, table="contiguous", requests="one"),
            row("fast / contiguous table", "fast", 13.2, table="contiguous", requests="equal"),
            row("fast / narrowed view", "fast", 13.2 * 1.01, table="narrowed", requests="equal"),
            row("fast / ragged requests, contiguous table", "fast", 14.0, table="contiguous", requests="ragged"),
            row("fixed / narrowed view", "fixed", 26.4, table="narrowed", requests="equal", block_t=None),
        ]
    )


def test_every_gather_against_the_best_streaming_arm():
    c = P.ceiling_table(gathers(frame()), streams(frame()), copy_tbps=4.0).set_index("arm")
    assert set(c["stream_arm"]) == {"stream / split / 32"}
    assert c.loc["fixed / narrowed view", "of_stream_fraction"] == pytest.approx(8.0 / 26.4, abs=1e-4)
    assert c.loc["fast / contiguous table", "of_stream_fraction"] == pytest.approx(8.0 / 13.2, abs=1e-4)
    assert c.loc["fixed / narrowed view", "vs_fast_ratio"] == pytest.approx(26.4 / (13.2 * 1.01), abs=1e-4)
    tb = TOKENS * (584 + 1024) / 26.4e-6 / 1e12
    assert c.loc["fixed / narrowed view", "of_copy_fraction"] == pytest.approx(tb / 4.0, abs=1e-4)
    assert not any(k in c["kernel"].values for k in ("stream", "read-only", "write-only"))


def test_read_and_write_rates_and_serial_model():
    c = P.ceiling_table(gathers(frame()), streams(frame())).iloc[0]
    read_rate = TOKENS * 584 / 5e-6 / 1e12
    write_rate = TOKENS * 1024 / 6e-6 / 1e12
    assert c["read_only_tbps"] == pytest.approx(read_rate, abs=1e-4)
    assert c["write_only_tbps"] == pytest.approx(write_rate, abs=1e-4)
    assert c["serial_model_us"] == pytest.approx(11.0, abs=1e-3)  # 5 us of reads + 6 us of writes


def test_decomposition_chain_multiplies_to_the_total():
    d = P.gap_decomposition(frame(), N, L).set_index("step")
    chain = d[d["in_chain"]]
    total = d.loc[next(s for s in d.index if s.startswith("total")), "ratio"]
    assert total == pytest.approx(13.2 * 1.01 / 8.0, rel=1e-3)
    assert math.prod(chain["ratio"]) == pytest.approx(total, rel=1e-3)
    assert chain["share_of_gap"].sum() == pytest.approx(1.0, abs=1e-2)
    first = chain.iloc[0]
    assert first["numerator"] == "stream / split / 8" and first["ratio"] == pytest.approx(1.25)
    indirection = chain.iloc[1]
    assert indirection["numerator"] == "fast / one request, contiguous table" and indirection["ratio"] == 1.1
    ragged = d[~d["in_chain"] & d["numerator"].str.contains("ragged", na=False)].iloc[0]
    assert ragged["ratio"] == pytest.approx(14.0 / 13.2, abs=1e-4)


def test_missing_arms_leave_steps_empty_not_wrong():
    f = frame()
    f = f[~f["requests"].isin(["one", "ragged"])]
    d = P.gap_decomposition(f, N, L)
    assert d["ratio"].isna().sum() == 3  # indirection, requests and ragged were not measured
    assert d.iloc[-1]["ratio"] == pytest.approx(13.2 * 1.01 / 8.0, rel=1e-3)  # the total still is


def test_unknown_shape_names_the_parameters():
    with pytest.raises(ValueError, match="no rows for num_reqs=9, seq_len=100"):
        P.gap_decomposition(frame(), 9, L)


def test_gather_rows_take_their_kernel_from_the_arm_they_record():
    arms = (registry.FIXED_VIEW, registry.arm_of("vllm", "contiguous"))  # an outside kernel an older run named
    timed = pd.DataFrame(
        [
            {"arm": a.label, **a.fields(), "launch": "graph", "num_reqs": 2, "seq_len": 8, "tokens": 16}
            | {"median_us": us}
            for a, us in zip(arms, (3.0, 9.0))
        ]
    )
    n = P.normalise(timed)
    assert list(zip(n["kernel"], n["table"])) == [("fixed", "narrowed"), ("vllm", "contiguous")]
    assert list(n["bytes_read"]) == [16 * 584] * 2 and n["is_gather"].all()
    c = P.ceiling_table(timed, timed.iloc[:0])
    assert c["of_stream_fraction"].isna().all()  # no streaming arm in that run
    assert P.gather_arms(c) == dict(zip(timed["arm"], arms))


def test_rows_that_record_neither_kernel_nor_arm_are_refused():
    bare = pd.DataFrame([{"arm": "fixed / narrowed view", "launch": "graph", "num_reqs": 2, "seq_len": 8}])
    with pytest.raises(ValueError, match="neither their kernel nor"):
        P.normalise(bare.assign(tokens=16, median_us=3.0))


def test_stream_rates_list_every_streaming_arm():
    s = P.stream_rates(frame())
    assert set(s["kernel"]) == {"stream", "read-only", "write-only"} and len(s) == 5


def test_ceiling_facts_name_the_ceiling_the_fractions_and_the_largest_shapes_gap():
    c = P.ceiling_table(gathers(frame()), streams(frame()), copy_tbps=4.0)
    gap = P.gap_decomposition(frame(), N, L).assign(num_reqs=N, seq_len=L)
    smaller = gap.assign(num_reqs=1, ratio=9.0)  # a smaller shape's chain: not the one the facts keep
    facts = P.ceiling_facts(c, pd.concat([smaller, gap], ignore_index=True))
    assert facts["stream_arm"] == "stream / split / 32" and facts["shape"] == [N, L] and facts["stream_arms"] == 3
    assert facts["median_us"]["fixed / narrowed view"] == pytest.approx(26.4)
    assert facts["of_stream"]["fixed / narrowed view"] == pytest.approx(0.3, abs=0.005)
    assert facts["copy_equiv_us"] == pytest.approx(c.iloc[0]["copy_equiv_us"])
    assert list(facts["gap_steps"]) == list(gap["step"]) and 9.0 not in facts["gap_steps"].values()
    assert "headline" not in facts and P.ceiling_facts(c[c["launch"] == "none"]) == {"launch": "graph"}


def test_the_ceiling_phrase_renders_the_figures_it_is_given():
    from repro_studies.report import phrases

    facts = {
        "shape": [4, 2048],
        "launch": "graph",
        "stream_us": 10.04,
        "stream_arm": "move / 8",
        "stream_arms": 2,
        "copy_equiv_us": 9.0,
        "read_only_tbps": 3.333,
        "write_only_tbps": 4.4,
        "median_us": {"a": 12.5, "b": 20.0},
        "of_stream": {"a": 0.8, "b": None},
        "of_copy": {"a": 0.72, "b": None},
        "gap_steps": {"tile": 1.0194, "not timed": None},
    }
    text = phrases.ceiling(facts)
    for figure in (
        "4 x 2048",
        "(graph)",
        "2 streaming",
        "move / 8",
        "10.0 us",
        "9.0 us",
        "90%",
        "3.33 TB/s",
        "4.40 TB/s",
        "a: 12.5 us, 80%",
        "72%",
        "tile x1.019",
    ):
        assert figure in text, figure
    assert "b:" not in text and "not timed" not in text  # what was not measured is left out
    assert phrases.ceiling({"launch": "graph"}) == "no graph rows"


def test_check_rows_fail_on_any_difference():
    assert P.ceiling_check_row("stream", 2, 8, 0, 0, 16, "tokens")["ok"]
    assert not P.ceiling_check_row("stream", 2, 8, 1, 0, 16, "tokens")["ok"]
    bad = P.ceiling_check_row("write-only", 2, 8, 0, 3, 16, "rows")
    assert not bad["ok"] and bad["observed"] == "0/16 rows differ, 3 stray"

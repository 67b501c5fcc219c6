"""Host and device time per eager call of every timed arm (repro_studies.analysis.performance.eager_costs)."""

import pandas as pd

from repro_studies.analysis.performance import EAGER_COST_COLUMNS, eager_cost_summary, eager_costs


def medians(arm, code, rows):
    out = []
    for (n, L), (eager, graph, host) in rows.items():
        base = {"arm": arm, "code": code, "num_reqs": n, "seq_len": L}
        out.append({**base, "launch": "eager", "median_us": eager, "host_us": host})
        out.append({**base, "launch": "graph", "median_us": graph, "host_us": None})
    return pd.DataFrame(out)


def test_every_arm_of_every_table_gets_its_host_time_beside_its_device_times():
    ours = medians("fast / narrowed view", "repro", {(1, 256): (12.0, 3.0, 5.0), (256, 2048): (230.0, 220.0, 5.5)})
    cute = medians("CuTe-DSL / narrowed view", "vLLM 0.33.0", {(1, 256): (11.0, 3.5, 8.0)})
    old = pd.DataFrame([{"arm": "old", "launch": "eager", "median_us": 1.0, "num_reqs": 1, "seq_len": 1}])
    costs = eager_costs([ours, None, cute.drop(columns="code"), old])
    assert list(costs.columns) == EAGER_COST_COLUMNS
    assert len(costs) == 3  # the table without host_us adds nothing
    small = costs[(costs.arm == "fast / narrowed view") & (costs.num_reqs == 1)].iloc[0]
    assert (small.host_us, small.eager_us, small.graph_us, bool(small.host_bound)) == (5.0, 12.0, 3.0, True)
    large = costs[costs.num_reqs == 256].iloc[0]
    assert not large.host_bound
    assert costs[costs.arm == "CuTe-DSL / narrowed view"].iloc[0].code == ""


def test_summary_per_arm():
    ours = medians("fast", "repro", {(1, 256): (12.0, 3.0, 5.0), (256, 2048): (230.0, 220.0, 7.0)})
    summary = eager_cost_summary(eager_costs([ours]))
    row = summary.iloc[0]
    assert row["host us (median)"] == 6.0 and row["host us (min-max)"] == "5.0-7.0"
    assert (row["smallest shape"], row["largest shape"]) == ("1 x 256", "256 x 2,048")
    assert (row["eager us at largest"], row["host-bound shapes"]) == (230.0, "1 of 2")

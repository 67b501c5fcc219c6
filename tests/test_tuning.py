"""The tuning sweep's bookkeeping on the CPU: candidate lists, labels, the one-file record and its summary.

Nothing is timed here (timings never sit in unit tests); scripts/gpu-tuning-sweep.sh --smoke runs every
code path of the sweep in the interpreter.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede every import that defines @triton.jit kernels

from pathlib import Path

import pytest

from repro_studies.evidence import tuning as T
from repro_studies.kernels.settings import DEFAULT_SETTINGS


def test_candidates_are_distinct_and_include_the_default():
    streams = [T.stream_label(layout, kw) for layout, kw in T.stream_candidates()]
    assert len(set(streams)) == len(streams)
    gathers = T.gather_candidates()
    assert DEFAULT_SETTINGS in gathers
    assert len({(g.label(), g.min_block_t) for g in gathers}) == len(gathers)
    assert T._stream_kwargs(streams[1]) == T.stream_candidates()[1][1]
    with pytest.raises(ValueError, match="no split-layout streaming candidate"):
        T._stream_kwargs("stream records 8x4 lanes")


def test_one_file_holds_every_table_and_reads_back(tmp_path: Path):
    sw = T.Sweep("cpu", 60.0, tmp_path)
    sw.add("rates", {"kind": "copy", "how": "torch copy_", "launch": "eager", "median_us": 2.0, "tbps": 4.3})
    sw.add("gather", {"num_reqs": 256, "arm": "b", "status": "ok", "graph_us": 210.0})
    sw.add("gather", {"num_reqs": 256, "arm": "a", "status": "ok", "graph_us": 200.0})
    sw.add("gather", {"num_reqs": 16, "arm": "a", "status": "error", "error": "PTXASError: x" * 20})
    sw.add("shapes", {"num_reqs": 16, "seq_len": 2048, "arm": "a", "status": "ok", "graph_us": 15.0})
    sw.write()
    assert [p.name for p in tmp_path.iterdir()] == ["tuning-sweep.csv"]
    tables = T.tables_from_csv(tmp_path / "tuning-sweep.csv")
    assert set(tables) == {"rates", "gather", "shapes"} and "median_us" not in tables["gather"]
    text = T.summary(tables)
    assert text.index("== gather ==") < text.index("== graph medians (us) by shape ==")
    gather = text.split("== gather ==")[1]
    assert gather.index(" a ") < gather.index(" b ")  # the largest shape first, fastest first
    md = T.summary(tables, markdown=True)
    assert "### rates" in md and "| copy " in md


def test_render_refuses_a_missing_file(capsys):
    assert T.main(["--render", "no-such.csv"]) == 2
    assert "--render" in capsys.readouterr().err


@pytest.mark.integration
def test_the_byte_mover_prices_each_mix_of_reads_and_writes_against_a_copy():
    sw = T.Sweep("cpu", 60.0, None)
    rates = T.measure_rates(sw)
    rows = {(r["kind"], r["how"], r["launch"]): r for r in sw.tables["rates"]}
    tokens = (1 << 16) // 1024
    bt, w = T.RATE_MOVE_TILES[0]
    for read_bytes in T.MOVE_READ_BYTES:
        kind = T.mix_kind(read_bytes)
        for launch in ("eager", "graph"):
            row = rows[(kind, f"stream_move {read_bytes} B in, 1024 out, {bt}x{w}", launch)]
            assert row["bytes"] == tokens * (read_bytes + 1024) and "error" not in row
            assert row["mover_read_bytes"] == read_bytes
        assert kind in rates
    assert T.mix_kind(1024) == "copy" and T.mix_kind(584) == "read 584 : write 1,024"

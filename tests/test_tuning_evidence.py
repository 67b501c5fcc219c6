"""The committed H200 tuning runs (data/h200/tuning-gather-fast/, data/h200/tuning-gather-v41/), re-read: every
timed kernel passed its bitwise check before it was timed, the direct launch went direct on every second call, and
each run folder is the one its page describes. The figures on the pages are read from these rows."""

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from repro.studies.evidence import tuning

pytestmark = pytest.mark.audit

H200 = Path(__file__).resolve().parent.parent / "data" / "h200"
FAST_RUNS = sorted((H200 / "tuning-gather-fast").glob("run-*"), key=lambda p: int(p.name.split("-")[1]))
V41_RUNS = sorted((H200 / "tuning-gather-v41").glob("run-*"), key=lambda p: int(p.name.split("-")[1]))
#: Tables whose rows time a kernel (``status`` "ok" only after its bitwise check).
TIMED = ("stream", "gather", "shapes", "host")


@cache
def _sweep_tables(run: Path) -> dict[str, pd.DataFrame]:
    """One run's tables: the one-file record, or the first run's CSV per table."""
    whole = run / "tuning-sweep.csv"
    if whole.exists():
        return tuning.tables_from_csv(whole)
    return {p.stem: pd.read_csv(p) for p in run.glob("*.csv")}


def test_there_are_runs_to_check():
    assert len(FAST_RUNS) >= 11 and len(V41_RUNS) >= 3


@pytest.mark.parametrize("run", FAST_RUNS, ids=lambda p: p.name)
def test_every_timed_gather_was_bitwise_exact_first(run):
    tables = _sweep_tables(run)
    assert set(TIMED) <= set(tables), f"{run.name} lacks {set(TIMED) - set(tables)}"
    for name in TIMED:
        rows = tables[name]
        timed = rows[rows.filter(like="_us").notna().any(axis=1)] if name != "host" else rows
        assert len(timed), f"{run.name}/{name}: nothing timed"
        assert (timed["status"] == "ok").all(), f"{run.name}/{name}: {timed['status'].unique()}"
        for column in ("mismatched", "mismatched_tokens"):
            if column in timed:
                assert (timed[column].fillna(0) == 0).all(), f"{run.name}/{name}: {column}"


@pytest.mark.parametrize("run", FAST_RUNS, ids=lambda p: p.name)
def test_the_direct_launch_went_direct_on_every_second_call_and_was_exact(run):
    direct = _sweep_tables(run)["direct"]
    if "direct_path" in direct:  # the first run's columns: whether the path was on, and the second call "cached"
        direct = direct.rename(columns={"direct_path": "direct"}).replace({"call": {"cached": "second call"}})
        direct["status"] = "ok"
    assert (direct["status"] == "ok").all()
    assert (direct["mismatched"] == 0).all() and (direct["stray"] == 0).all()
    second = direct[direct["call"] == "second call"]
    assert len(second) and second["direct"].astype(bool).all()


@pytest.mark.parametrize("run", V41_RUNS, ids=lambda p: p.name)
def test_every_v41_gather_matched_its_reference_bitwise(run):
    checks = pd.read_csv(run / "v41-checks.csv")
    assert len(checks)
    assert (checks["mismatched"] == 0).all() and (checks["stray"] == 0).all()
    log = run / "v41.log"
    if log.exists():
        assert f"bitwise checks: {len(checks)} of {len(checks)} passed" in log.read_text()


@pytest.mark.parametrize(("page", "runs"), [("tuning-gather-fast.md", FAST_RUNS), ("tuning-gather-v41.md", V41_RUNS)])
def test_each_page_names_its_run_folders(page, runs):
    text = (H200 / page).read_text()
    folder = page.removesuffix(".md")
    for run in runs:
        assert f"{run.name}/" in text, f"{page} does not describe {folder}/{run.name}"


def _records(run: Path, text: str) -> bool:
    """Whether a run's one-file record holds ``text`` (read as text: choosing the runs must not parse every CSV)."""
    whole = run / "tuning-sweep.csv"
    return whole.exists() and text in whole.read_text()


MIX_RUNS = [run for run in FAST_RUNS if _records(run, tuning.mix_kind(584))]


def test_a_run_prices_the_gathers_mix():
    assert MIX_RUNS, "no committed run times the byte mover at the gather's mix (run 14 on)"


@pytest.mark.parametrize("run", MIX_RUNS, ids=lambda p: p.name)
def test_the_byte_mover_copies_at_the_copy_rate_and_slows_as_writes_grow(run):
    """What run 14's section says: as a copy the byte mover matches PyTorch's ``copy_`` within 1 %, and its rate
    falls with every step towards more writes, the gather's mix below the copy."""
    rates = _sweep_tables(run)["rates"]
    movers = rates[(rates["launch"] == "graph") & rates["mover_read_bytes"].notna()]
    best = movers.groupby("mover_read_bytes")["tbps"].max()
    torch_copy = rates[(rates["kind"] == "copy") & (rates["how"] == "torch copy_") & (rates["launch"] == "eager")]
    assert sorted(best.index) == sorted(tuning.MOVE_READ_BYTES)
    assert abs(best[1024] / torch_copy["tbps"].iloc[0] - 1) < 0.01
    assert list(best.sort_index()) == sorted(best), best
    assert best[584] < 0.98 * best[1024]


LAUNCH_RUNS = [run for run in FAST_RUNS if _records(run, tuning.TORCH_LAUNCH)]


def test_a_run_times_pytorchs_own_launch():
    assert LAUNCH_RUNS, "no committed run times PyTorch's own launch beside the gathers (run 16 on)"


@pytest.mark.parametrize("run", LAUNCH_RUNS, ids=lambda p: p.name)
def test_the_direct_launch_costs_a_few_microseconds_more_than_pytorchs_own(run):
    """What run 16's section says: in every stage and shape, gather_fast's direct launch took 3-4.1 us more host
    time than PyTorch's own launch of its smallest kernel."""
    host = _sweep_tables(run)["host"]
    mine = host[host["arm"] == "gather_fast, direct launch"].set_index(["stage", "num_reqs"])["host_us"]
    torch_own = host[host["arm"] == tuning.TORCH_LAUNCH].set_index(["stage", "num_reqs"])["host_us"]
    assert len(mine) == len(torch_own) == 4
    difference = (mine - torch_own).dropna()
    assert len(difference) == 4 and difference.between(3.0, 4.1).all(), difference

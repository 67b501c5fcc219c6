"""The Nsight Compute counters study (repro.studies.evidence.counters) on the CPU: every arm launches in the
interpreter, ncu's CSV is read past the profiled process's own lines, launches map to arms by position with the
kernel's name checked, and bad input is one line and exit 2. The committed H200 counters are re-read."""

import csv
import io
from pathlib import Path

import pytest

from repro.studies.evidence import counters as C

COMMITTED = (
    Path(__file__).resolve().parent.parent / "data" / "h200" / "tuning-gather-fast" / "ncu-1" / "ncu-counters.csv"
)


def _ncu_csv(kernels: list[str]) -> str:
    """ncu's ``--csv`` layout: the profiled process's lines, then one row per launch and metric."""
    out = io.StringIO()
    out.write("==PROF== Connected to process 1 (python3)\nsome line the launcher printed\n")
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"])
    for launch_id, kernel in enumerate(kernels):
        for k, metric in enumerate(C.METRICS):
            writer.writerow([launch_id, kernel, metric.name, "", f"{1000 * (launch_id + 1) + k:,}"])
    return out.getvalue()


def test_every_arm_launches_once_in_the_interpreter():
    done = C.launch_all(2, 16, "cpu")
    assert len(done) == len(C.ARMS) and all(result is not None for result in done)
    assert len({arm.name for arm in C.ARMS}) == len(C.ARMS)
    assert C.DEFAULT_SETTINGS.label() in C.ARMS[0].name  # the table names the settings it measured


def test_launches_map_to_arms_by_position_and_the_kernel_is_checked(tmp_path):
    path = tmp_path / "ncu.csv"
    path.write_text(_ncu_csv([arm.kernel for arm in C.ARMS]))
    rows = C.table(C.read_ncu_csv(path))
    assert list(rows["arm"]) == [arm.name for arm in C.ARMS]
    first = C.METRICS[0]
    assert rows[first.column].iloc[1] == round(2000 / first.scale, 2)  # launch 1, thousands separator read
    assert rows[C.METRICS[4].column].iloc[0] == 1004
    swapped = [arm.kernel for arm in C.ARMS]
    swapped[0], swapped[2] = swapped[2], swapped[0]
    path.write_text(_ncu_csv(swapped))
    with pytest.raises(ValueError, match="launch 0 ran _stream_dequant_kernel, not _gather_fast_kernel"):
        C.table(C.read_ncu_csv(path))
    path.write_text(_ncu_csv([arm.kernel for arm in C.ARMS][:-1]))
    with pytest.raises(ValueError, match=f"ncu profiled {len(C.ARMS) - 1} launches; the arms are {len(C.ARMS)}"):
        C.table(C.read_ncu_csv(path))
    path.write_text("==PROF== nothing profiled\n")
    with pytest.raises(ValueError, match="no ncu CSV header"):
        C.read_ncu_csv(path)


@pytest.mark.parametrize(
    "argv,word",
    [
        (["launch", "--num-reqs", "0"], "--num-reqs"),
        (["launch", "--seq-len", "-1"], "--seq-len"),
        (["render", "nope.csv"], "render"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, word, capsys):
    assert C.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


@pytest.mark.audit
def test_the_committed_h200_counters_name_every_arm_and_metric():
    rows = C.table(C.read_ncu_csv(COMMITTED))
    assert list(rows["arm"]) == [arm.name for arm in C.ARMS]
    assert rows.notna().all().all()

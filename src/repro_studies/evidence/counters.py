"""Nsight Compute's counters of ``gather_fast`` beside the kernels that bound it, at one shape.

The CUDA-graph medians of ``data/h200/tuning-gather-fast.md`` show ``gather_fast`` about 5 % behind the byte mover,
which moves the same bytes with no block table and no dtype work; the counters say where the difference goes
(instructions, registers and the occupancy they allow, stalls on memory, DRAM traffic). ``launch`` runs each
:data:`ARMS` entry exactly once, in order, after building every input (Nsight Compute numbers the profiled launches
in that order); ``scripts/gpu-ncu-counters.sh`` runs it under ``ncu --csv --metrics`` :data:`METRICS`, and
``render`` turns ncu's CSV into one row per arm, matching each launch to its arm by position and checking the
kernel's name.

    python -m repro_studies.evidence.counters launch [--num-reqs 256] [--seq-len 2048]   (needs a GPU, or --device cpu)
    python -m repro_studies.evidence.counters metrics        (the --metrics list)
    python -m repro_studies.evidence.counters render CSV     (one row per arm, Markdown)
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from repro.core.evidence.scenarios import build_scenario
from repro_studies.evidence.tuning import equal_requests
from repro_studies.kernels.settings import DEFAULT_SETTINGS, FastSettings, TileSettings


@dataclass(frozen=True)
class Metric:
    """One ncu metric and how the table shows it (``scale`` divides the value)."""

    name: str
    column: str
    scale: float = 1.0


#: What ``ncu --metrics`` collects, in the table's column order.
METRICS = (
    Metric("gpu__time_duration.sum", "time us (ncu clocks)", 1e3),
    Metric("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM % of peak"),
    Metric("dram__bytes_read.sum", "DRAM read MB", 1e6),
    Metric("dram__bytes_write.sum", "DRAM written MB", 1e6),
    Metric("launch__registers_per_thread", "registers per thread"),
    Metric("sm__maximum_warps_per_active_cycle_pct", "theoretical occupancy %"),
    Metric("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy %"),
    Metric("smsp__inst_executed.sum", "warp instructions (M)", 1e6),
    Metric("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "memory-wait stalls per issue"),
    Metric("smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio", "LSU-queue stalls per issue"),
)


@dataclass(frozen=True)
class CounterArm:
    """One launch to profile: its name in the table, the Triton kernel it launches, and how to launch it."""

    name: str
    kernel: str
    launch: Callable[[dict], object]


def _gather(settings: FastSettings) -> Callable[[dict], object]:
    def launch(inputs: dict) -> object:
        from repro_studies.kernels.fast import gather_fast_with  # lazy: kernels: after the caller picks the profile

        return gather_fast_with(*inputs["scenario"].args(inputs["gather_out"]), settings)

    return launch


def _stream(block_t: int, num_warps: int) -> Callable[[dict], object]:
    def launch(inputs: dict) -> object:
        from repro_studies.kernels import stream as S  # lazy: kernels: after the caller picks the profile

        return S.stream_dequant(inputs["split"], inputs["stream_out"], block_t=block_t, num_warps=num_warps, tile=LANES)

    return launch


def _move(block_t: int, num_warps: int) -> Callable[[dict], object]:
    def launch(inputs: dict) -> object:
        from repro_studies.kernels import stream as S  # lazy: kernels: after the caller picks the profile

        return S.stream_move(inputs["records"], inputs["stream_out"], block_t=block_t, num_warps=num_warps)

    return launch


LANES = TileSettings(tile="lanes", load_evict="")
#: ``gather_fast``'s default before the register limit (data/h200/tuning-gather-fast.md, runs 8-11).
FORMER_DEFAULT = FastSettings(min_block_t=4, early_table=True, tile=LANES)

#: The launches, in the order ``launch`` runs them (and Nsight Compute numbers them).
ARMS = (
    CounterArm(f"gather_fast, default: {DEFAULT_SETTINGS.label()}", "_gather_fast_kernel", _gather(DEFAULT_SETTINGS)),
    CounterArm(
        f"gather_fast, former default: {FORMER_DEFAULT.label()}", "_gather_fast_kernel", _gather(FORMER_DEFAULT)
    ),
    CounterArm("streaming dequant, no table: 4 tok x 2 warps, lanes", "_stream_dequant_kernel", _stream(4, 2)),
    CounterArm("byte mover 8 x 16: no table, no dtype work", "_stream_move_kernel", _move(8, 16)),
    CounterArm("byte mover 4 x 4", "_stream_move_kernel", _move(4, 4)),
)


def build_inputs(num_reqs: int, seq_len: int, device: str) -> dict:
    """Every arm's inputs and outputs, built before the first profiled launch."""
    from repro_studies.kernels import stream as S  # lazy: kernels: after the caller picks the profile

    scenario = build_scenario(equal_requests(num_reqs, seq_len, num_reqs, device))
    tokens = num_reqs * seq_len
    return {
        "scenario": scenario,
        "gather_out": scenario.fresh_out(),
        "split": S.make_stream_input(tokens, "split", device=device),
        "records": S.make_stream_input(tokens, "records", device=device),
        "stream_out": torch.empty(tokens, 512, dtype=torch.bfloat16, device=device),
    }


def launch_all(num_reqs: int, seq_len: int, device: str) -> list[object]:
    """Each arm once, in :data:`ARMS` order (what each launch returned)."""
    inputs = build_inputs(num_reqs, seq_len, device)
    if device == "cuda":
        torch.cuda.synchronize()
    done = [arm.launch(inputs) for arm in ARMS]
    if device == "cuda":
        torch.cuda.synchronize()
    return done


def read_ncu_csv(path: str | Path) -> pd.DataFrame:
    """ncu's ``--csv`` output (one row per launch and metric), past the lines the profiled process printed."""
    lines = Path(path).read_text().splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if header is None:
        raise ValueError(f'{path}: no ncu CSV header (a line starting with "ID")')
    return pd.read_csv(io.StringIO("\n".join(lines[header:])), thousands=",")


def table(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per arm: launch ``ID`` k is ``ARMS[k]`` (its kernel's name is checked), one column per metric."""
    ids = sorted(raw["ID"].unique())
    if len(ids) != len(ARMS):
        raise ValueError(f"ncu profiled {len(ids)} launches; the arms are {len(ARMS)}")
    rows = []
    for launch_id, arm in zip(ids, ARMS):
        got = raw[raw["ID"] == launch_id]
        kernel = got["Kernel Name"].iloc[0]
        if kernel != arm.kernel:
            raise ValueError(f"launch {launch_id} ran {kernel}, not {arm.kernel} ({arm.name})")
        values = dict(zip(got["Metric Name"], got["Metric Value"]))
        row = {"arm": arm.name}
        for metric in METRICS:
            value = values.get(metric.name)
            row[metric.column] = None if value is None else round(float(value) / metric.scale, 2)
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m repro_studies.evidence.counters", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("launch", help="each arm once, in order (run under ncu)")
    run.add_argument("--num-reqs", type=int, default=256)
    run.add_argument("--seq-len", type=int, default=2048)
    run.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    sub.add_parser("metrics", help="print the --metrics list")
    show = sub.add_parser("render", help="one row per arm from ncu's CSV")
    show.add_argument("csv")
    args = parser.parse_args(argv)
    if args.command == "metrics":
        print(",".join(metric.name for metric in METRICS))
        return 0
    if args.command == "render":
        if not Path(args.csv).is_file():
            print(f"error: render: {args.csv} is not a file (accepted: ncu's --csv output)", file=sys.stderr)
            return 2
        print(table(read_ncu_csv(args.csv)).to_markdown(index=False))
        return 0
    for name in ("num_reqs", "seq_len"):
        if getattr(args, name) < 1:
            print(
                f"error: --{name.replace('_', '-')} must be a positive int, got {getattr(args, name)}", file=sys.stderr
            )
            return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "error: --device cuda: no CUDA device (accepted: cuda on a GPU host, cpu with TRITON_INTERPRET=1)",
            file=sys.stderr,
        )
        return 2
    for arm, result in zip(ARMS, launch_all(args.num_reqs, args.seq_len, args.device)):
        print(f"{arm.name}: {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

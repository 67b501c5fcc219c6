"""One-call tuning run of the V4.1 gathers (:mod:`repro_studies.kernels.fast_v41`) against vLLM's own V4.1 kernels.

``python -m repro_studies.evidence.v41_tuning`` (GPU; ``--device cpu`` runs the same steps in Triton's
interpreter at tiny sizes, with a wall clock instead of graph replays, as a smoke test):

1. the device-to-device copy rate (bytes read + written per second), at the start and at the end;
2. vLLM's V4.1 MXFP8 and NVFP4 Triton kernels with PR #55109's row pitch (the repository's patcher),
   loaded from the module cache: 0.33.0 for the interleaved records, 0.31.0 for the page-split ones;
3. bitwise checks on a column-narrowed table (ragged requests, ``gather_lens``, ``offset``) of every
   candidate launch against the PyTorch reference decoders and against vLLM's patched kernel, then on
   pages of arbitrary bytes (every fp8 / e2m1 / scale code, NaN codes included) against vLLM's kernel;
4. CUDA-graph medians (``repro_studies.evidence.timing``, inputs rotated past the L2) at ``request_counts`` x
   ``seq_len`` tokens: every launch variant at the largest count, vLLM's kernel, the default and the
   fastest variant at every count, each checked bitwise against vLLM's output at that shape first.

Tables go to ``$OUT`` (or ``--out``) as CSV; the compact table is printed last. Nothing is downloaded
unless ``--download`` is given.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import triton

from repro_studies.evidence.records_perf import (
    KINDS,
    RELEASE_FOR_LAYOUT,
    Candidate,
    Shape,
    bitwise_rows,
    check_scenario,
    copy_rate_tbps,
    layout_word,
    load_release_gather,
    ours,
    random_pages,
    run_out,
    time_shape,
)
from repro_studies.upstream.cases import reference_for

#: Targets at 256 x 2,048 tokens (CUDA graph), in microseconds.
TARGET_US = {"mxfp8": 210.0, "nvfp4": 178.0}


def _grid(prefix: str, tiles: list[tuple[int, int]], **settings) -> dict[str, dict]:
    """``{"t4w2<prefix>": {"block_t": 4, "num_warps": 2, **settings}, ...}``."""
    return {f"t{t}w{w}{prefix}": {"block_t": t, "num_warps": w, **settings} for t, w in tiles}


#: Launch variants swept at the largest request count (interleaved layout); names are table keys. The first
#: H200 sweep (data/h200/tuning-gather-v41.md) found the small tiles fastest and, for NVFP4, the decode through
#: fp16 far ahead of the others (the kernel is bound by its integer work there), the interleaved store ahead of
#: the packed one at the same tile; the second, the scales loaded where the values are (``-s3``) ahead. Programs of
#: several tiles in one cache block, which load their one table entry once, are the ``-tppN`` keys; a register
#: limit per thread (``maxnreg``), the ``-rN`` keys.
T4W2_S3_EARLY = {"block_t": 4, "num_warps": 2, "scale_3d": True, "early_table": True}
HALF_INTERLEAVE = {"decode": "half", "store": "interleave"}
MXFP8_VARIANTS = {
    **_grid("", [(2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 2), (8, 4), (16, 8)]),
    **_grid("-cs", [(2, 1), (4, 1), (4, 2), (8, 4)], store_cache=".cs"),
    **_grid("-keep", [(4, 1), (4, 2)], evict_first=False),
    **_grid("-s3", [(2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4), (8, 4)], scale_3d=True),
    **_grid("-s3-early", [(4, 1), (4, 2), (8, 4)], scale_3d=True, early_table=True),
    **{f"t4w2-s3-early-tpp{n}": {**T4W2_S3_EARLY, "tiles_per_program": n} for n in (2, 4, 8, 16)},
    **{f"t4w2-s3-early-r{r}": {**T4W2_S3_EARLY, "maxnreg": r} for r in (32, 40, 48)},
}
NVFP4_VARIANTS = {
    **_grid(
        "-half-interleave",
        [(2, 1), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (8, 4), (8, 8), (16, 4), (16, 8)],
        decode="half",
        store="interleave",
    ),
    **_grid("-half-packed", [(4, 2), (8, 2), (8, 4)], decode="half", store="packed"),
    **_grid("-half-interleave-cs", [(4, 2), (8, 4)], decode="half", store="interleave", store_cache=".cs"),
    **_grid("-half-interleave-keep", [(4, 2), (8, 4)], decode="half", store="interleave", evict_first=False),
    **_grid(
        "-half-interleave-s3",
        [(2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 2), (8, 4)],
        decode="half",
        store="interleave",
        scale_3d=True,
    ),
    **_grid("-half-packed-s3", [(8, 4)], decode="half", store="packed", scale_3d=True),
    **_grid(
        "-half-interleave-s3-early",
        [(4, 2), (8, 2), (8, 4)],
        decode="half",
        store="interleave",
        scale_3d=True,
        early_table=True,
    ),
    **{
        f"t4w2-half-interleave-s3-early-tpp{n}": {**T4W2_S3_EARLY, **HALF_INTERLEAVE, "tiles_per_program": n}
        for n in (2, 4, 8, 16)
    },
    **{f"t4w2-half-interleave-s3-early-r{r}": {**T4W2_S3_EARLY, **HALF_INTERLEAVE, "maxnreg": r} for r in (32, 40, 48)},
    **_grid("-bits-interleave", [(8, 4)], decode="bits", store="interleave"),
    **_grid("-arith-interleave", [(8, 4)], decode="arith", store="interleave"),
}
VARIANTS = {"mxfp8": MXFP8_VARIANTS, "nvfp4": NVFP4_VARIANTS}
DEFAULT = "default"


# ---------------------------------------------------------------------------------------------
# The run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m repro_studies.evidence.v41_tuning", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--request-counts", default="256,128,64,32,16", help="comma-separated; the largest first")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rep-ms", type=int, default=50)
    p.add_argument("--variants", default="all", help="'all', 'none' or comma-separated variant keys")
    p.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for the CSVs (default $OUT)")
    p.add_argument("--download", action="store_true", help="let the module cache download missing releases")
    args = p.parse_args(argv)
    try:
        args.counts = sorted({int(v) for v in args.request_counts.split(",")}, reverse=True)
    except ValueError:
        p.error(f"--request-counts: {args.request_counts!r} is not a comma-separated list of integers")
    if not args.counts or min(args.counts) < 1 or args.seq_len < 1 or args.block_size < 1:
        p.error("--request-counts, --seq-len and --block-size must be positive")
    known = {k for v in VARIANTS.values() for k in v}
    if args.variants not in ("all", "none") and not set(args.variants.split(",")) <= known:
        p.error(f"--variants: unknown keys {sorted(set(args.variants.split(',')) - known)}; known: {sorted(known)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu for the interpreter smoke run)")
    return args


def chosen_variants(kind: str, which: str) -> dict[str, dict]:
    if which == "none":
        return {}
    if which == "all":
        return dict(VARIANTS[kind])
    return {k: v for k, v in VARIANTS[kind].items() if k in which.split(",")}


def summary(timings: list[dict], rates: list[float | None], largest: int) -> list[dict]:
    """Per (kind, layout, count): vLLM's time, the default's, the fastest variant's, copy-equivalent time."""
    rate = max((r for r in rates if r), default=None)
    rows = []
    keys = sorted({(t["kind"], t["layout"], t["num_reqs"]) for t in timings}, key=lambda k: (k[0], k[1], -k[2]))
    for kind, layout, n in keys:
        at = [t for t in timings if (t["kind"], t["layout"], t["num_reqs"]) == (kind, layout, n)]
        mine = [t for t in at if not t["upstream"] and t["bitwise_ok"]]
        vllm = next((t for t in at if t["upstream"]), None)
        default = next((t for t in at if t["arm"] == DEFAULT), None)
        best = min(mine, key=lambda t: t["median_us"]) if mine else None
        copy_us = at[0]["bytes_moved"] / (rate * 1e12) * 1e6 if rate else None
        row = {
            "kind": kind,
            "layout": layout,
            "num_reqs": n,
            "vllm_us": vllm["median_us"] if vllm else None,
            "default_us": default["median_us"] if default else None,
            "best": best["arm"] if best else "",
            "best_us": best["median_us"] if best else None,
            "copy_equiv_us": round(copy_us, 1) if copy_us else None,
        }
        if copy_us and best:
            row["best_pct_of_copy"] = round(100 * copy_us / best["median_us"], 1)
        if copy_us and vllm:
            row["vllm_pct_of_copy"] = round(100 * copy_us / vllm["median_us"], 1)
        if best and vllm:
            row["speedup_vs_vllm"] = round(vllm["median_us"] / best["median_us"], 3)
        if n == largest and best:
            row["target_us"] = TARGET_US[kind]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:

    args = parse_args(argv)
    dev, tiny = args.device, args.device == "cpu"
    started = time.perf_counter()
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "CPU (Triton interpreter)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {name}", flush=True)
    rates = [copy_rate_tbps(dev)]
    print(f"copy rate (read + written): {rates[0] and round(rates[0], 3)} TB/s", flush=True)

    vllm: dict[tuple[str, bool], Candidate] = {}
    loads = []
    for interleaved in (True, False):
        for kind in KINDS:
            cand, why = load_release_gather(RELEASE_FOR_LAYOUT[interleaved], kind, dev, args.download, interleaved)
            loads.append({"kind": kind, "layout": layout_word(interleaved), "loaded": cand is not None, "why": why})
            if cand:
                vllm[(kind, interleaved)] = cand
            print(f"vLLM {RELEASE_FOR_LAYOUT[interleaved]} {kind}: {cand.settings['kernel'] if cand else why}")

    def candidates(kind: str, interleaved: bool, variants: dict[str, dict]) -> list[Candidate]:
        out = [vllm[(kind, interleaved)]] if (kind, interleaved) in vllm else []
        out.append(ours(kind, interleaved, DEFAULT, {}))
        out += [ours(kind, interleaved, k, v) for k, v in variants.items()]
        return out

    checks: list[dict] = []
    for interleaved in (True, False):
        for kind in KINDS:
            cands = candidates(kind, interleaved, chosen_variants(kind, args.variants) if interleaved else {})
            if tiny:  # the interpreter is slow: the GPU launch shape once, the default, vLLM
                cands = cands[:2] + [ours(kind, interleaved, "grid-t4w4", {"plan": "grid", "block_t": 4})]
            sc = check_scenario(kind, interleaved, dev, tiny)

            ref = reference_for(sc)
            v = vllm.get((kind, interleaved))
            v_out = run_out(v, sc) if v else None  # vLLM's kernel failing here ends the run: nothing to compare
            checks += bitwise_rows(sc, cands, v_out, ref, "narrowed, ragged, gather_lens, offset")
            if v is not None:
                gen = torch.Generator(device=dev).manual_seed(11)
                if tiny:  # the interpreter decodes fp8 NaN codes as +-480: keep to valid records there
                    random_pages(sc.spec.layout, sc.k_cache, sc.spec.block_size, gen, valid=True)
                else:
                    random_pages(sc.spec.layout, sc.k_cache, sc.spec.block_size, gen, valid=False)
                v_out = run_out(v, sc)
                what = "valid random bytes" if tiny else "arbitrary bytes (every code)"
                checks += bitwise_rows(sc, cands, v_out, None, f"narrowed, {what}")
            print(f"checked {kind} {layout_word(interleaved)}", flush=True)

    timings: list[dict] = []
    counts = [2, 1] if tiny else args.counts
    seq_len = 16 if tiny else args.seq_len
    block = 8 if tiny else args.block_size
    rounds = 1 if tiny else args.rounds
    largest = counts[0]
    best: dict[str, str] = {}
    for n in counts:
        for interleaved in (True, False):
            for kind in KINDS:
                if n == largest:
                    variants = chosen_variants(kind, args.variants) if interleaved else {}
                    if tiny:
                        variants = dict(list(variants.items())[:1])
                    if not interleaved and kind in best and best[kind] != DEFAULT:
                        variants = {best[kind]: VARIANTS[kind][best[kind]]}
                else:
                    variants = {best[kind]: VARIANTS[kind][best[kind]]} if best.get(kind, DEFAULT) != DEFAULT else {}
                shape = Shape(kind, interleaved, n, seq_len)
                time_shape(
                    shape, candidates(kind, interleaved, variants), block, dev, rounds, args.rep_ms, checks, timings
                )
                if n == largest and interleaved:
                    mine = [
                        t
                        for t in timings
                        if (t["kind"], t["num_reqs"], t["upstream"], t["bitwise_ok"]) == (kind, n, False, True)
                    ]
                    best[kind] = min(mine, key=lambda t: t["median_us"])["arm"] if mine else DEFAULT
                print(f"timed {kind} {layout_word(interleaved)} {n}x{seq_len}", flush=True)
    rates.append(copy_rate_tbps(dev))

    checks_df, timings_df = pd.DataFrame(checks), pd.DataFrame(timings)
    table = pd.DataFrame(summary(timings, rates, largest))
    failed = checks_df[(checks_df["mismatched"] != 0) | (checks_df["stray"] != 0)]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        checks_df.to_csv(out / "v41-checks.csv", index=False)
        timings_df.to_csv(out / "v41-timings.csv", index=False)
        table.to_csv(out / "v41-summary.csv", index=False)
        pd.DataFrame(loads).to_csv(out / "v41-vllm-loads.csv", index=False)
        pd.DataFrame({"when": ["start", "end"], "copy_tbps": rates}).to_csv(out / "v41-copy-rate.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 500):
        at_largest = timings_df[timings_df["num_reqs"] == largest][["kind", "layout", "arm", "median_us", "rounds_us"]]
        print("\nevery arm at the largest count:\n" + at_largest.to_string(index=False))
        if len(failed):
            print("\nFAILED bitwise checks:\n" + failed.to_string(index=False))
        print(f"\ncopy rate: start {rates[0]}, end {rates[1]} TB/s; {time.perf_counter() - started:.0f} s")
        print(f"bitwise checks: {len(checks_df) - len(failed)} of {len(checks_df)} passed")
        print(table.to_string(index=False))
    return 1 if len(failed) else 0


if __name__ == "__main__":
    sys.exit(main())

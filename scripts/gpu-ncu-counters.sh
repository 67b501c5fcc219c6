#!/usr/bin/env bash
# Nsight Compute's counters of gather_fast beside the streaming kernels that bound it, at 256 x 2,048 tokens
# (python -m repro_studies.evidence.counters): each kernel launched once under `ncu --csv`, about 20 s on an H200.
# Needs torch, triton, pandas and ncu (CUDA toolkit) on the GPU host; writes OUT_DIR/ncu-counters.csv (ncu's rows)
# without its ==PROF== lines (they name the host's interpreter path) and OUT_DIR/counters.md (one row per kernel).
# Usage: scripts/gpu-ncu-counters.sh OUT_DIR [launch options, e.g. --num-reqs 16]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu-ncu-counters.sh OUT_DIR [launch options]}
shift
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
[ -x "$NCU" ] || { echo "error: ncu not found (set NCU=/path/to/ncu)" >&2; exit 2; }
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The project's entry points (the studies' registrations) for this checkout, run from src/ without pip install
DIST_INFO=$(mktemp -d) && "${PYTHON:-python3}" scripts/write-dist-info.py "$DIST_INFO" && export PYTHONPATH="$DIST_INFO:$PYTHONPATH"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
metrics=$("${PYTHON:-python3}" -m repro_studies.evidence.counters metrics)
"$NCU" --csv --metrics "$metrics" --kernel-name regex:'^(_gather_fast_kernel|_stream_dequant_kernel|_stream_move_kernel)$' \
  "${PYTHON:-python3}" -m repro_studies.evidence.counters launch "$@" | grep -v '^==PROF==' >"$OUT/ncu-counters.csv"
"${PYTHON:-python3}" -m repro_studies.evidence.counters render "$OUT/ncu-counters.csv" | tee "$OUT/counters.md"

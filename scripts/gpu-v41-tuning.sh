#!/usr/bin/env bash
# The V4.1 gathers' tuning run (repro_studies.evidence.v41_tuning) on a CUDA host with torch and triton: bitwise checks
# against vLLM 0.33.0's (interleaved) and 0.31.0's (page-split) V4.1 kernels with PR #55109's row pitch, then
# CUDA-graph medians at 256..16 requests x 2,048 tokens beside the copy rate of the same run; the compact table
# is printed last, CSVs go to $OUT when it is set. Nothing is downloaded: carry the module cache, filled with
# `python -m repro_studies.upstream.fetch 0.31.0 0.33.0` (.vllm-cache/, or $REPRO_VLLM_CACHE).
# Usage: scripts/gpu-v41-tuning.sh [python -m repro_studies.evidence.v41_tuning options, e.g. --variants none]
# CPU smoke run (interpreter, tiny sizes): TRITON_INTERPRET=1 PYTHON=.venv/bin/python scripts/gpu-v41-tuning.sh --device cpu
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The project's entry points (the studies' registrations) for this checkout, run from src/ without pip install
DIST_INFO=$(mktemp -d) && "${PYTHON:-python3}" scripts/write-dist-info.py "$DIST_INFO" && export PYTHONPATH="$DIST_INFO:$PYTHONPATH"
export REPRO_VLLM_CACHE="${REPRO_VLLM_CACHE:-$PWD/.vllm-cache}"
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m repro_studies.evidence.v41_tuning "$@"

#!/usr/bin/env bash
# gather_fast's launch-setting sweep, the streaming ceiling's candidates and vLLM's CuTe-DSL gather on one GPU,
# in one call of about 6 minutes (python -m repro_studies.evidence.tuning; CSVs into $OUT or --out, a table printed last).
# Needs torch, triton and pandas; vLLM's CuTe-DSL gather also needs the carried module cache (.vllm-cache, from
# `python -m repro_studies.upstream.wheelcache 0.33.0`) and the CuTe-DSL wheels of scripts/fetch-cutedsl-wheels.sh, carried
# and installed as scripts/gpu-release-matrix.sh does (scripts/cutedsl-env.sh); without them its rows say why not.
# Usage: scripts/gpu-tuning-sweep.sh [--budget-s S] [--out DIR]     (CPU smoke test: add --smoke)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cutedsl-env.sh
export REPRO_VLLM_CACHE="${REPRO_VLLM_CACHE:-$PWD/.vllm-cache}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The project's entry points (the studies' registrations) for this checkout, run from src/ without pip install
DIST_INFO=$(mktemp -d) && "${PYTHON:-python3}" scripts/write-dist-info.py "$DIST_INFO" && export PYTHONPATH="$DIST_INFO:$PYTHONPATH"
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m repro_studies.evidence.tuning "$@"

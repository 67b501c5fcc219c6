#!/usr/bin/env bash
# Notebook 04 on a GPU host without a registry. Uses the carried vLLM module cache (.vllm-cache), the papermill
# wheelhouse (.whl, see run-gpu-profile.sh) and, when present, the CuTe-DSL wheels of fetch-cutedsl-wheels.sh
# (installed by scripts/cutedsl-env.sh). Without them the CuTe-DSL rows say "not run".
# REPRO_VLLM_CACHE may name a cache copied out of the tree by an earlier call (default: the carried .vllm-cache-gpu,
# else .vllm-cache). Fill the small carry where the registry is reachable (every release from the first with a
# DeepSeek gather, gather modules only, the derived release list; a few MB):
#   .venv/bin/python -m repro_studies.upstream.fetch --export .vllm-cache-gpu
# Usage: scripts/gpu-release-matrix.sh RUN_DIR [python -m repro run options, e.g. -p releases=0.22.0,0.33.0]
# A later --notebooks wins over the default 04: `--notebooks 03 -p vllm_releases=[0.33.0]` times vLLM's CuTe-DSL
# gather beside gather_fast with the same CuTe-DSL install.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:?usage: scripts/gpu-release-matrix.sh RUN_DIR [options]}
shift
. scripts/cutedsl-env.sh
if [ -z "${REPRO_VLLM_CACHE:-}" ] && [ -d .vllm-cache-gpu ]; then
  REPRO_VLLM_CACHE=$PWD/.vllm-cache-gpu
fi
export REPRO_VLLM_CACHE="${REPRO_VLLM_CACHE:-$PWD/.vllm-cache}"
exec scripts/run-gpu-profile.sh "$RUN_DIR" --notebooks 04 -p download=false "$@"

#!/usr/bin/env bash
# Notebook 04 on a GPU host without a registry. Uses the carried vLLM module cache (.vllm-cache), the papermill
# wheelhouse (.whl, see run-gpu-profile.sh) and, when present, the CuTe-DSL wheels of fetch-cutedsl-wheels.sh:
# whatever part of .cutedsl-wheels this call carries is first copied to $CUTEDSL_STASH (default ~/cutedsl), which
# outlives the working-tree copy while the host stays up; once the stash holds every part and SHA256SUMS, the
# wheels are joined, checked and installed into $CUTEDSL_SITE. Without them the CuTe-DSL rows say "not run".
# REPRO_VLLM_CACHE may name a cache copied out of the tree by an earlier call (default: the carried .vllm-cache-gpu,
# else .vllm-cache). Fill the small carry where the registry is reachable (every release from the first with a
# DeepSeek gather, gather modules only, the derived release list; a few MB):
#   .venv/bin/python -m repro.upstream.fetch --export .vllm-cache-gpu
# Usage: scripts/gpu-release-matrix.sh RUN_DIR [python -m repro run options, e.g. -p releases=0.22.0,0.33.0]
# A later --notebooks wins over the default 04: `--notebooks 03 -p vllm_releases=[0.33.0]` times vLLM's CuTe-DSL
# gather beside gather_fast with the same CuTe-DSL install.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:?usage: scripts/gpu-release-matrix.sh RUN_DIR [options]}
shift
STASH=${CUTEDSL_STASH:-$HOME/cutedsl}
CSITE=${CUTEDSL_SITE:-/tmp/cutedsl-site}
if [ -d .cutedsl-wheels ]; then
  mkdir -p "$STASH" && cp -r .cutedsl-wheels/. "$STASH/"
fi
if [ -f "$STASH/SHA256SUMS" ] && [ ! -d "$CSITE" ]; then
  mkdir -p "$STASH/whole"
  cp "$STASH"/small/*.whl "$STASH/whole/"
  for first in "$STASH"/parts/*.part-00; do
    [ -e "$first" ] || continue
    wheel=$(basename "${first%.part-00}")
    cat "$STASH/parts/$wheel".part-* > "$STASH/whole/$wheel"
  done
  if (cd "$STASH/whole" && sha256sum -c ../SHA256SUMS); then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --target "$CSITE" "$STASH"/whole/*.whl \
      || { echo "CuTe-DSL wheels did not install; the CuTe-DSL rows will say not run" >&2; rm -rf "$CSITE"; }
  else
    echo "CuTe-DSL wheels incomplete or corrupt in $STASH; the CuTe-DSL rows will say not run" >&2
  fi
fi
if [ -d "$CSITE" ]; then
  # A --target folder on PYTHONPATH is not a site dir: its .pth files (nvidia-cutlass-dsl puts its `cutlass`
  # package on sys.path through one) are not read. Let site.addsitedir read them and keep what they add.
  dirs=$(python3 -c 'import os, site, sys; d = sys.argv[1]; site.addsitedir(d); print(os.pathsep.join(p for p in sys.path if p.startswith(d)))' "$CSITE")
  export PYTHONPATH="$dirs${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -z "${REPRO_VLLM_CACHE:-}" ] && [ -d .vllm-cache-gpu ]; then
  REPRO_VLLM_CACHE=$PWD/.vllm-cache-gpu
fi
export REPRO_VLLM_CACHE="${REPRO_VLLM_CACHE:-$PWD/.vllm-cache}"
exec scripts/run-gpu-profile.sh "$RUN_DIR" --notebooks 04 -p download=false "$@"

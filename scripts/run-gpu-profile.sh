#!/usr/bin/env bash
# Run the GPU profile on a CUDA host that has torch and triton but no Jupyter stack and no registry.
# Usage: scripts/run-gpu-profile.sh RUN_DIR [python -m repro run options ...]
# Needs the wheels from scripts/build-h200-wheelhouse.sh in $WHEELS (default .whl).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/repro-site}
RUN_DIR=${1:?usage: scripts/run-gpu-profile.sh RUN_DIR [options]}
shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The project's entry points (the studies' registrations) for this checkout, run from src/ without pip install
DIST_INFO=$(mktemp -d) && "python3" scripts/write-dist-info.py "$DIST_INFO" && export PYTHONPATH="$DIST_INFO:$PYTHONPATH"
export JUPYTER_PATH="$SITE/share/jupyter"
export PYTHONUNBUFFERED=1
python3 -c 'import torch, triton, papermill; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.cuda.is_available())'
start=$(date +%s)
set +e
python3 -m repro run --profile gpu --out "$RUN_DIR" "$@"
code=$?
set -e
echo "GPU profile finished with exit code $code in $(( $(date +%s) - start )) s"
exit $code

#!/usr/bin/env bash
# Create .venv and install the project with its dev extra; register the notebook output filter.
# Without a CUDA GPU: torch/triton come from constraints-cpu.txt (CPU torch, no multi-GB CUDA pull).
# With one: the venv sees the system's torch/triton pairing and installs nothing over it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
   && "$PYTHON" -c 'import torch, triton, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "setup: CUDA GPU found; keeping the system's torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q -e '.[dev]'
else
  echo "setup: no CUDA GPU; installing CPU torch/triton pinned by constraints-cpu.txt"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q -c constraints-cpu.txt -e '.[dev]'
fi
"$VENV/bin/pip" check
VENV="$VENV" scripts/setup-nbstripout.sh

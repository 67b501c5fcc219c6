#!/usr/bin/env bash
# Re-render the reports of the committed GPU runs with this checkout's report code.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for run in data/h200/gpu-profile data/h200/vllm-0.22.0-under-test; do
  "$PY" -m repro report "$run"
  rm -rf "$run/notebooks"
done
"$PY" -m repro report data/h200/vllm-0.22.0-under-test --against data/h200/gpu-profile
